#!/usr/bin/env bash
# Compressed variants of dicom_gen.py's series for scripts/dicom-test.sh (issue 34), written by
# the real encoders: dcmtk's dcmcjpeg (JPEG lossless SV1 and other predictors, point transform,
# small fragments) and dcmcjpls (JPEG-LS lossless and near-lossless), gdcm's gdcmconv (JPEG
# lossless, JPEG-LS, JPEG 2000). Sourced; codec_cases SERIES appends the cases to
# SERIES/cases.txt: dcm2niix converts the same compressed files where it decodes them right
# (lossless JPEG without a point transform, one fragment per frame, single-frame files), and
# otherwise the copy dcmtk's own decoder (dcmdjpeg, dcmdjpls) decompressed. JPEG 2000 must be
# refused, naming the way out (codec_refusals).

# encode_series ENCODER ARGS... -- SRC DST: every file of SRC through the encoder into DST.
encode_series() {
	local args=()
	while [ "$1" != -- ]; do args+=("$1"); shift; done
	local src=$2 dst=$3
	mkdir -p "$dst"
	for f in "$src"/*; do
		[ "$(basename "$f")" = cases.txt ] && continue
		"${args[@]}" "$f" "$dst/$(basename "$f")" || { echo "encode_series: ${args[*]} failed on $f" >&2; return 1; }
	done
}

# codec_cases SERIES: the compressed cases, with their references, in SERIES/cases.txt.
codec_cases() {
	local dir=$1 src v name ref
	for src in axial-reversed-s-explicit oblique-shuffled-u-rescale-explicit sagittal-reversed-u-explicit enhanced-multiframe; do
		while read -r v ref enc; do
			name="$src-$v"
			case $v-$src in # dcmcjpls writes near-lossless JPEG-LS of unsigned pixels only
			jpegls-near*-*-s-* | jpegls-near*-enhanced-*) continue ;;
			esac
			# shellcheck disable=SC2086 # enc is the encoder's command line
			encode_series $enc -- "$dir/$src" "$dir/$name"
			case $ref in
			self) ref=$name ;;
			dcmdjpeg | dcmdjpls)
				encode_series "$ref" -- "$dir/$name" "$dir/$name.decoded"
				ref=$name.decoded ;;
			esac
			if [ "$src" = enhanced-multiframe ] && [ "$ref" = "$name" ]; then
				# dcm2niix refuses multi-frame files with an offset table: the decoded copy
				encode_series dcmdjpeg -- "$dir/$name" "$dir/$name.decoded"
				ref=$name.decoded
			fi
			echo "$name match $ref" >>"$dir/cases.txt"
		done <<-'VARIANTS'
			jpeg-sv1 self dcmcjpeg +e1
			jpeg-p7 self dcmcjpeg +el +sv 7
			jpeg-p4-pt2 dcmdjpeg dcmcjpeg +el +sv 4 +pt 2
			jpeg-fragments dcmdjpeg dcmcjpeg +e1 +fs 1 -ot
			jpegls dcmdjpls dcmcjpls +el
			jpegls-near3 dcmdjpls dcmcjpls +en +md 3
			gdcm-jpeg dcmdjpeg gdcmconv --jpeg
			gdcm-jpegls dcmdjpls gdcmconv --jpegls
		VARIANTS
	done
}

# codec_refusals VOXPIPE SERIES OUT: a JPEG 2000 series (gdcmconv --j2k) fails with exit 1 and
# a message that names the syntax and the way out. Prints FAIL lines; returns the failures.
codec_refusals() {
	local vp=$1 dir=$2 out=$3 rc=0
	encode_series gdcmconv --j2k -- "$dir/axial-reversed-s-explicit" "$dir/j2k"
	set +e
	"$vp" convert -q --format nii -o "$out/j2k" "$dir/j2k" 2>"$out/j2k.log"
	rc=$?
	set -e
	if [ $rc -ne 1 ] || ! grep -q 'JPEG 2000' "$out/j2k.log" || ! grep -q 'transfer-syntax=1.2.840.10008.1.2.1' "$out/j2k.log"; then
		echo "FAIL j2k: voxpipe convert should refuse JPEG 2000 (exit 1) naming the syntax and the way out; exit $rc:"
		cat "$out/j2k.log"
		return 1
	fi
}
