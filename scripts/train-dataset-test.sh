#!/usr/bin/env bash
# Tests docs/model.md's "Training on your own data" walk-through end to end, on a small dataset
# laid out nnU-Net style (phantoms from voxpipe gen, some stored LPS or with permuted axes, one at
# twice the spacing), then runs the twin's unit tests (baseline/tests). Under ~2 minutes on 2
# cores. Uses Debian's torch (python3-torch, 1.13 CPU) through /usr/bin/python3.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for p in python3-torch python3-numpy python3-nibabel; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
py=/usr/bin/python3

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/voxpipe" ./cmd/voxpipe
vp="$tmp/voxpipe"

# Phantoms: voxpipe gen keeps the field of view, so 24x24x16 volumes have twice the spacing of
# 48x48x32 ones (10x10x12 mm against 5x5x6).
"$vp" gen -o "$tmp/gen" --count 7 --dims 48x48x32 --seed 21 -q
"$vp" gen -o "$tmp/gen" --count 1 --start 7 --dims 24x24x16 --seed 21 -q

# Lay them out nnU-Net style, with custom label names; cases 1 and 4 stored LPS, 2 and 5 with
# permuted axes (ASR, SLP), all with affines that keep every voxel where it was.
ds="$tmp/Dataset901_Phantoms"
"$py" - "$tmp/gen" "$ds" <<'EOF'
import json, os, sys
import nibabel as nib
from nibabel.orientations import axcodes2ornt, ornt_transform
src, ds = sys.argv[1:]
for d in ("imagesTr", "labelsTr"):
    os.makedirs(os.path.join(ds, d))
orient = {1: "LPS", 4: "LPS", 2: "ASR", 5: "SLP"}
for i in range(8):
    for sub, dst, suffix in (("volumes", "imagesTr", "_0000"), ("truth", "labelsTr", "")):
        img = nib.load(os.path.join(src, sub, f"phantom_{i:03d}.nii.gz"))
        codes = orient.get(i, "RAS")
        if codes != "RAS":
            img = img.as_reoriented(ornt_transform(axcodes2ornt("RAS"), axcodes2ornt(codes)))
            assert nib.aff2axcodes(img.affine) == tuple(codes)
        nib.save(img, os.path.join(ds, dst, f"case_{i:03d}{suffix}.nii.gz"))
json.dump({"name": "Dataset901_Phantoms", "description": "voxpipe gen phantoms, nnU-Net layout",
           "channel_names": {"0": "T1-like"},
           "labels": {"background": 0, "parenchyma": 1, "ventricles": 2, "lesions": 3},
           "numTraining": 8, "file_ending": ".nii.gz"}, open(os.path.join(ds, "dataset.json"), "w"))
EOF

# Train (the walk-through's command, with few steps): 2 of the 8 cases validate.
model="$tmp/phantoms.safetensors"
"$py" baseline/train.py --train-dir "$ds" --val-fraction 0.25 --out "$model" \
	--steps 40 --batch 2 --crop 24 --val-every 20 --log-every 20 --device cpu \
	--name phantoms-nnunet --modality "synthetic T1-like MR" \
	--colors "parenchyma=#3cb44b,ventricles=#4363d8,lesions=#e6194b" | tee "$tmp/train.log"
grep -q "6 train + 2 val volumes (nnunet layout" "$tmp/train.log"
grep -Eq "stored as [A-Z/]*LPS" "$tmp/train.log"

# The card, as voxpipe reads it.
"$vp" model info "$model"
"$vp" model info --json "$model" >"$tmp/card.json"
"$py" - "$tmp/card.json" "$tmp/train.log" <<'EOF'
import json, re, sys
card = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
assert card["name"] == "phantoms-nnunet", card["name"]
assert [l["name"] for l in card["labels"]] == ["background", "parenchyma", "ventricles", "lesions"], card["labels"]
assert card["labels"][3]["color"] == "#e6194b"
assert card["orientation"] == "RAS" and card["normalization"] == "zscore-volume"
assert card["spacing_mm"] == [5, 5, 6], card["spacing_mm"]
d = card["domain"]
assert all(lo <= s <= hi for lo, s, hi in zip(d["spacing_min_mm"], card["spacing_mm"], d["spacing_max_mm"])), d
# case_007 (10x10x12 mm) is resampled to 5x5x6 wherever the split put it
m = re.search(r"(\d+) train \+ (\d+) val resampled", log)
assert m and int(m.group(1)) + int(m.group(2)) == 1, m
assert (d["spacing_max_mm"] == [10, 10, 12]) == (m.group(1) == "1"), (d, m.group(0))
print("card ok:", card["name"], card["spacing_mm"], card["orientation"], [l["name"] for l in card["labels"]])
EOF

# Segment with the trained model: an RAS, an LPS and a permuted volume; masks keep the input's
# geometry.
mkdir "$tmp/in"
for c in 000 001 002; do cp "$ds/imagesTr/case_${c}_0000.nii.gz" "$tmp/in/"; done
"$vp" run --quiet --model "$model" "$tmp/in" -o "$tmp/out" --run-id walk
"$py" - "$tmp/in" "$tmp/out" "$ds/labelsTr" <<'EOF'
import glob, os, sys
import nibabel as nib, numpy as np
ins = sorted(glob.glob(os.path.join(sys.argv[1], "*.nii.gz")))
masks = sorted(glob.glob(os.path.join(sys.argv[2], "*_mask.nii.gz")))
assert len(masks) == len(ins) == 3, (ins, masks)
for i, m in zip(ins, masks):
    a, b = nib.load(i), nib.load(m)
    assert a.shape == b.shape and np.allclose(a.affine, b.affine, atol=1e-4), (i, a.shape, b.shape)
    v = np.asarray(b.dataobj)
    assert v.dtype == np.uint8 and v.max() <= 3, (m, v.dtype, v.max())
    # The labels land on the right voxels whatever the storage order: parenchyma against the
    # truth (the model reached ~0.97 on it in validation).
    t = np.asarray(nib.load(os.path.join(sys.argv[3], os.path.basename(i).replace("_0000", ""))).dataobj)
    dice = 2 * ((v == 1) & (t == 1)).sum() / ((v == 1).sum() + (t == 1).sum())
    assert dice > 0.8, (m, dice)
    print(f"{os.path.basename(m)} ({''.join(nib.aff2axcodes(a.affine))}): parenchyma Dice {dice:.3f}")
EOF
# summary.csv: every volume ok and within the card's domain; the LPS and ASR ones reoriented.
"$py" - "$tmp/out/runs/walk/summary.csv" <<'EOF'
import csv, sys
rows = {r["volume"]: r for r in csv.DictReader(open(sys.argv[1]))}
assert len(rows) == 3 and all(r["status"] == "ok" and r["domain"] == "ok" for r in rows.values()), rows
grids = [rows[f"case_00{i}_0000"]["grid"] for i in range(3)]
assert [g.split()[0] for g in grids] == ["RAS", "LPS->RAS", "ASR->RAS"], grids
print("summary ok: domain ok;", "; ".join(grids))
EOF

# The twin's unit tests (model, NIfTI, safetensors, card, dataset folders, reorientation).
"$py" -m unittest discover -s baseline/tests
echo "train-dataset-test: ok"
