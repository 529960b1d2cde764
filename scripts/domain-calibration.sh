#!/usr/bin/env bash
# Measures the domain check (model.CheckDomain) end to end, through `voxpipe run` with the
# CPU engine and the embedded model (or MODEL=FILE): the false-alarm rate on phantoms of the
# training distribution (`voxpipe gen`, seeds and sizes the model never saw, resampled to its
# spacing by --resample auto as any input) and the catch rate on a foreign set
# (scripts/domaincal foreign: CT-like Hounsfield volumes, shapes that are not heads, a mouse-
# and a whale-sized head, noise, a T2-like contrast) plus the real brain images that python3-
# nibabel ships (and python3-dipy, when its package can be downloaded). Prints one line per
# foreign volume and per in-domain volume not ok, then the two rates (and how many foreign
# volumes the model's confidence catches on its own, all but the whale segmented); exits 1 unless no
# phantom is out of domain and every foreign volume is. docs/model.md has the figures.
#
#   scripts/domain-calibration.sh [WORKDIR]     # default: a temporary folder, removed after
#
# PHANTOMS=N sets the phantoms per size (default 12; 5 sizes).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-}
if [ -z "$work" ]; then
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
n=${PHANTOMS:-12}
go build -o "$work/voxpipe" ./cmd/voxpipe
go build -o "$work/domaincal" ./scripts/domaincal
model=()
[ -n "${MODEL:-}" ] && model=(--model "$MODEL")

# In-domain: phantoms of the generator at five sizes (the training set was 96x96x64, seed 11).
in=()
for dims in 96x96x64 64x64x48 128x128x80 80x96x64 192x192x128; do
	"$work/voxpipe" gen -q -o "$work/in/$dims" --count "$n" --dims "$dims" --seed 5150
done

# Foreign: generated, and real brains where the packages have them.
real=()
for f in /usr/lib/python3/dist-packages/nibabel/tests/data/anatomical.nii; do
	[ -f "$f" ] && real+=("$f")
done
if [ ! -f "$work/dipy/usr/lib/python3/dist-packages/dipy/data/files/aniso_vox.nii.gz" ]; then
	(cd "$work" && apt-get download python3-dipy >/dev/null 2>&1 && dpkg-deb -x python3-dipy_*.deb dipy) || true
fi
for f in "$work"/dipy/usr/lib/python3/dist-packages/dipy/data/files/{aniso_vox.nii.gz,test_piesno.nii.gz}; do
	[ -f "$f" ] && real+=("$f")
done
"$work/domaincal" foreign -o "$work/foreign" "${real[@]}"

run() { # run NAME INPUT...
	"$work/voxpipe" run -q --engine cpu "${model[@]}" -o "$work/out/$1" --run-id cal "${@:2}" || true
}
for dims in 96x96x64 64x64x48 128x128x80 80x96x64 192x192x128; do
	run "in-$dims" "$work/in/$dims/volumes"
	in+=(-in "$work/out/in-$dims/runs/cal/summary.csv")
done
# Foreign volumes under --strict-domain: one judged out of domain on its input alone fails
# before it is resampled (a whale-sized head would be upsampled eightfold) or segmented.
run foreign --strict-domain "$work/foreign"
# Then all of them but the whale segmented, to see what the model's confidence says on its own.
mkdir -p "$work/foreign-segmented"
for f in "$work"/foreign/*; do
	case "$f" in */whale_head.nii.gz) ;; *) ln -sf "$f" "$work/foreign-segmented/" ;; esac
done
run foreign-segmented "$work/foreign-segmented"
"$work/domaincal" rates "${in[@]}" -foreign "$work/out/foreign/runs/cal/summary.csv" \
	-foreign-segmented "$work/out/foreign-segmented/runs/cal/summary.csv"
