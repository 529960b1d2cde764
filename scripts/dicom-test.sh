#!/usr/bin/env bash
# DICOM reader check (issue 21): pydicom writes synthetic series in every combination of
# orientation, slice order, pixel sign, rescale and transfer syntax (scripts/dicom_gen.py);
# Debian's dcm2niix and `voxpipe convert` both convert each one, and the volumes must match
# voxel for voxel with affines within 1e-4 mm (scripts/dicom_compare.py). A series with a
# missing slice must be refused with the reason. Compressed copies of some of them, written by
# dcmtk and gdcm (scripts/dicom-codecs.sh: JPEG lossless, JPEG-LS, split fragments, multi-frame),
# against dcm2niix on the same files or on dcmtk's decoding of them; JPEG 2000 is refused.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for p in dcm2niix python3-pydicom python3-nibabel python3-numpy dcmtk libgdcm-tools; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
py=/usr/bin/python3 # Debian's, which has pydicom and nibabel

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/voxpipe" ./cmd/voxpipe
"$py" scripts/dicom_gen.py "$work/series"
# shellcheck source=scripts/dicom-codecs.sh
. scripts/dicom-codecs.sh
codec_cases "$work/series"

failed=0 cases=0
while read -r name want ref; do
	cases=$((cases + 1))
	out="$work/out/$name"
	mkdir -p "$out/vp" "$out/d2n"
	dcm2niix -f %s -z n -b n -o "$out/d2n" "$work/series/$ref" >"$out/d2n.log" 2>&1 || true
	set +e
	"$work/voxpipe" convert -q --dicom-name %s --format nii -o "$out/vp" "$work/series/$name" 2>"$out/vp.log"
	rc=$?
	set -e
	case $want in
	match)
		if [ $rc -ne 0 ]; then
			echo "FAIL $name: voxpipe convert exited $rc"; cat "$out/vp.log"; failed=$((failed + 1))
		else
			echo "$name $out/vp $out/d2n" >>"$work/pairs"
		fi ;;
	refuse)
		if [ $rc -ne 1 ] || ! grep -q 'slices missing' "$out/vp.log"; then
			echo "FAIL $name: voxpipe convert should refuse the series (exit 1, slices missing); exit $rc:"; cat "$out/vp.log"; failed=$((failed + 1))
		fi ;;
	esac
done <"$work/series/cases.txt"
"$py" scripts/dicom_compare.py "$work/pairs" || failed=$((failed + 1))
mkdir -p "$work/out"
codec_refusals "$work/voxpipe" "$work/series" "$work/out" || failed=$((failed + 1))

# voxpipe run on a DICOM series must give the labels and affine it gives on dcm2niix's NIfTI of
# the series, and print, record and name nothing with patient data (the series' PatientID,
# name, date).
"$work/voxpipe" gen -o "$work/ph" --dims 96x80x40 --count 1 --seed 21 --quiet
"$py" scripts/dicom_gen.py --from-nifti "$work/ph/volumes/phantom_000.nii.gz" "$work/ph-dicom"
mkdir -p "$work/ph-nii"
dcm2niix -f ref -z y -b n -o "$work/ph-nii" "$work/ph-dicom" >"$work/ph-d2n.log" 2>&1
"$work/voxpipe" run "$work/ph-dicom" -o "$work/run-dicom" --dicom-name ref --log-format json 2>"$work/run-dicom.log"
"$work/voxpipe" run --quiet "$work/ph-nii" -o "$work/run-nii"
echo "run $work/run-dicom $work/run-nii" >"$work/run-pair"
if ! "$py" scripts/dicom_compare.py "$work/run-pair"; then
	echo "FAIL voxpipe run on the DICOM series and on dcm2niix's NIfTI of it differ"; failed=$((failed + 1))
fi
if grep -rl -e 'PID-0042' -e 'Doe' -e '20240102' "$work/run-dicom.log" "$work/run-dicom/runs" "$work/run-dicom/volumes.csv"; then
	echo "FAIL patient data in voxpipe run's log or records (files above)"; failed=$((failed + 1))
fi
# With the default --dicom-name no file name holds patient data either: the mask, statistics
# and preview are named series_<number>_<ID>, as the log and records name the series.
"$work/voxpipe" run --quiet --statistics --preview "$work/ph-dicom" -o "$work/run-default"
if find "$work/run-default" | grep -e 'PID-0042' -e 'Doe' -e '20240102'; then
	echo "FAIL patient data in the names of voxpipe run's outputs with the default --dicom-name (above)"; failed=$((failed + 1))
fi
if ! ls "$work/run-default"/series_*_mask.nii.gz >/dev/null; then
	echo "FAIL no series_<number>_<ID>_mask.nii.gz with the default --dicom-name"; failed=$((failed + 1))
fi
echo "dicom-test: $cases cases against dcm2niix $(dcm2niix --version 2>&1 | grep -o 'v1[0-9.]*' | head -1), $failed failures"
[ "$failed" -eq 0 ]
