#!/usr/bin/python3
"""Compares voxpipe convert's NIfTI files with dcm2niix's, for scripts/dicom-test.sh.

usage: dicom_compare.py PAIRS   (a file of lines "NAME VOXPIPE_DIR DCM2NIIX_DIR")
For each line, both folders must hold the same number of volumes; they are paired by name (both tools name
them by series number: voxpipe --dicom-name %s, dcm2niix -f %s). Each pair must match voxel
for voxel (scaled values) with affines within 1e-4 mm, after reorienting both to the closest
canonical (RAS) orientation when the two store the axes in different orders.
"""
import os
import sys

import nibabel as nib
import numpy as np

TOL = 1e-4


def volumes(folder):
    return sorted(f for f in os.listdir(folder) if f.endswith((".nii", ".nii.gz")))


def compare(a_path, b_path):
    a, b = nib.load(a_path), nib.load(b_path)
    if a.shape != b.shape or not np.allclose(a.affine, b.affine, atol=TOL, rtol=0):
        a, b = nib.as_closest_canonical(a), nib.as_closest_canonical(b)
    if a.shape != b.shape:
        return f"shape {a.shape} != dcm2niix's {b.shape}"
    if not np.allclose(a.affine, b.affine, atol=TOL, rtol=0):
        return f"affine differs by {np.abs(a.affine - b.affine).max():.3g} mm:\n{a.affine}\ndcm2niix:\n{b.affine}"
    da, db = np.asanyarray(a.dataobj, dtype=np.float64), np.asanyarray(b.dataobj, dtype=np.float64)
    if not np.array_equal(da, db):
        return f"{int((da != db).sum())} of {da.size} voxels differ (max |diff| {np.abs(da - db).max()})"
    return None


def check(vp, d2n):
    a, b = volumes(vp), volumes(d2n)
    if len(a) != len(b) or not a:
        return [f"voxpipe wrote {a}, dcm2niix {b}"]
    out = []
    for x, y in zip(a, b):
        why = compare(os.path.join(vp, x), os.path.join(d2n, y))
        if why:
            out.append(f"{x} vs {y}: {why}")
    return out


def main(pairs):
    bad = n = 0
    with open(pairs) as f:
        for line in f:
            name, vp, d2n = line.split()
            n += 1
            problems = check(vp, d2n)
            for p in problems:
                print(f"FAIL {name}: {p}")
            bad += bool(problems)
    print(f"dicom_compare: {n - bad} of {n} series match dcm2niix")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
