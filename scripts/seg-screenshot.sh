#!/usr/bin/env bash
# A screenshot of voxpipe's DICOM SEG as an independent reader shows it (issue 33): the fixture
# phantom (fixtures/volumes/phantom_000.nii.gz) written as a DICOM series with pydicom
# (scripts/dicom_gen.py --from-nifti), segmented by `voxpipe run --engine cpu`, which writes the
# SEG beside the mask; scripts/segcheck.py checks the SEG against the mask and draws it as pydicom
# reads it back (source slices grey, each segment a colour, the SEG's segment labels as the
# caption) into a small HTML page, which headless Chromium (Debian's, installed with apt-get when
# missing) saves as the screenshot; scripts/pngcheck fails it if it looks blank.
# The rendering is the independent-reader one: pydicom's pixel_array of the SEG, none of
# voxpipe's code, over the source slices' own pixels.
# Usage: scripts/seg-screenshot.sh [OUT.png]   (default $TMPDIR/voxpipe-seg-screenshot.png)
#   VOXPIPE=/path/to/voxpipe uses that binary instead of building ./cmd/voxpipe;
#   SEG_WRITER=segmake makes the SEG with scripts/tests/segmake.py (pydicom) instead of voxpipe:
#   only to test this script where voxpipe cannot write SEGs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
shot=${1:-${TMPDIR:-/tmp}/voxpipe-seg-screenshot.png}
case "$shot" in /*) ;; *) shot="$root/$shot" ;; esac
py=/usr/bin/python3 # Debian's, which has pydicom and nibabel

fail() {
	echo "seg-screenshot: $*" >&2
	exit 1
}

# shellcheck source=lib/debian.sh
. scripts/lib/debian.sh
apt_need python3-pydicom python3-nibabel python3-numpy
find_chromium || fail "no chromium"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bin=${VOXPIPE:-}
if [[ -z "$bin" ]]; then
	echo "== build voxpipe"
	timeout 600 go build -o "$work/voxpipe" ./cmd/voxpipe
	bin="$work/voxpipe"
fi

echo "== series, mask and SEG"
timeout 120 "$py" scripts/dicom_gen.py --from-nifti fixtures/volumes/phantom_000.nii.gz "$work/series"
timeout 300 "$bin" run --engine cpu --quiet "$work/series" -o "$work/out"
mask=$(ls "$work/out"/*_mask.nii.gz)
seg=${mask%.nii.gz}.seg.dcm
if [[ "${SEG_WRITER:-voxpipe}" == segmake ]]; then
	timeout 120 "$py" scripts/tests/segmake.py --from-mask "$mask" "$work/series" "$seg"
fi
[[ -s "$seg" ]] || fail "voxpipe run wrote no $seg beside the mask"

echo "== segcheck and overlay"
mkdir -p "$work/page"
timeout 300 "$py" scripts/segcheck.py "$seg" "$mask" "$work/series" --expect-segments 3 \
	--png "$work/page/overlay.png" --html "$work/page/index.html" || fail "segcheck: the SEG does not match its mask"

echo "== screenshot"
timeout 60 "$chromium" --version 2>/dev/null || true
mkdir -p "$(dirname "$shot")"
rm -f "$shot"
# Chromium may exit non-zero over D-Bus noise in containers; the file decides.
timeout 180 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--user-data-dir="$work/profile" --screenshot="$shot" --window-size=1240,600 \
	"file://$work/page/index.html" >"$work/chromium.log" 2>&1 || true
if [[ ! -s "$shot" ]]; then
	tail -20 "$work/chromium.log" >&2
	fail "no screenshot at $shot"
fi
timeout 300 go run ./scripts/pngcheck "$shot"
echo "screenshot: $shot"
