#!/usr/bin/env bash
# DICOM reader check (issue 21): pydicom writes synthetic series in every combination of
# orientation, slice order, pixel sign, rescale and transfer syntax (scripts/dicom_gen.py);
# Debian's dcm2niix and `voxpipe convert` both convert each one, and the volumes must match
# voxel for voxel with affines within 1e-4 mm (scripts/dicom_compare.py). A series with a
# missing slice must be refused with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for p in dcm2niix python3-pydicom python3-nibabel python3-numpy; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
py=/usr/bin/python3 # Debian's, which has pydicom and nibabel

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/voxpipe" ./cmd/voxpipe
"$py" scripts/dicom_gen.py "$work/series"

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
echo "dicom-test: $cases cases against dcm2niix $(dcm2niix --version 2>&1 | grep -o 'v1[0-9.]*' | head -1), $failed failures"
[ "$failed" -eq 0 ]
