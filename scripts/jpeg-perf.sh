#!/usr/bin/env bash
# JPEG lossless read speed against dcm2niix (issue 34, docs/perf.md). A phantom of
# JPEG_PERF_DIMS (default 512x512x400; voxpipe gen) is written as an MR series by pydicom
# (scripts/dicom_gen.py --from-nifti: one 512x512 16-bit slice a file), compressed by dcmtk's
# dcmcjpeg +e1 (SV1, a fragment per file), and both converters read the same files in turn,
# JPEG_PERF_RUNS times each (default 5): dcm2niix -z n and voxpipe convert --format nii (both
# write an uncompressed .nii). Prints each run's wall and CPU seconds (/usr/bin/time), the
# medians, and checks the two volumes match voxel for voxel (scripts/dicom_compare.py).
#   scripts/jpeg-perf.sh [WORKDIR]   (WORKDIR is kept: a second call reuses its series)
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3 # Debian's, which has pydicom and nibabel
dims=${JPEG_PERF_DIMS:-512x512x400}
runs=${JPEG_PERF_RUNS:-5}
work=${1:-$(mktemp -d)}
mkdir -p "$work"
go build -o "$work/voxpipe" ./cmd/voxpipe
if [ ! -d "$work/jpeg" ]; then
	"$work/voxpipe" gen -o "$work/ph" --dims "$dims" --count 1 --seed 34 --quiet
	"$py" scripts/dicom_gen.py --from-nifti "$work/ph/volumes/phantom_000.nii.gz" "$work/native"
	mkdir -p "$work/jpeg.tmp"
	find "$work/native" -type f -printf '%f\n' | xargs -P "$(nproc)" -I{} dcmcjpeg +e1 "$work/native/{}" "$work/jpeg.tmp/{}"
	mv "$work/jpeg.tmp" "$work/jpeg"
fi
echo "series: $(ls "$work/jpeg" | wc -l) files, $(du -sm "$work/native" | cut -f1) MiB native, $(du -sm "$work/jpeg" | cut -f1) MiB JPEG lossless SV1; $(nproc) cores"
# run NAME CMD...: one timed run into a fresh output folder; prints "NAME wall cpu".
run() {
	local name=$1
	shift
	rm -rf "$work/out-$name" && mkdir -p "$work/out-$name"
	/usr/bin/time -f "$name %e %U %S" -o "$work/time" "$@" >/dev/null 2>"$work/$name.log" || { cat "$work/$name.log"; exit 1; }
	awk '{printf "%s wall %.2f s cpu %.2f s\n", $1, $2, $3 + $4}' "$work/time"
}
for _ in $(seq "$runs"); do
	run dcm2niix dcm2niix -f vol -z n -b n -o "$work/out-dcm2niix" "$work/jpeg"
	run voxpipe "$work/voxpipe" convert -q --dicom-name vol --format nii -o "$work/out-voxpipe" "$work/jpeg"
done | tee "$work/times"
for name in dcm2niix voxpipe; do
	printf '%s median wall %s s\n' "$name" "$(awk -v n="$name" '$1 == n {print $3}' "$work/times" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')"
done
echo "check $work/out-voxpipe $work/out-dcm2niix" >"$work/pair"
"$py" scripts/dicom_compare.py "$work/pair"
