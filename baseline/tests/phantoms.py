#!/usr/bin/env python3
"""A tiny numpy phantom maker, ONLY for smoke-testing train.py without the Go generator.

It imitates `voxpipe gen` loosely (head-like ellipsoid of tissue with a darker rim, two dark
ventricles, small bright lesions of radius 2-6, multiplicative bias field, partial-volume edges,
Rician noise, int16) and writes the same layout: DIR/volumes/<name>.nii.gz, DIR/truth/<name>.nii.gz.
Real training data comes from `voxpipe gen`.

    /usr/bin/python3 baseline/tests/phantoms.py /tmp/smoke-train --count 8 --dims 48x48x32 --seed 1
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from voxpipe_twin import nifti  # noqa: E402


def _smoothstep(d):
    """Coverage of a voxel at signed distance d (negative inside), over [-1, 1]."""
    t = np.clip((1 - d) / 2, 0, 1)
    return t * t * (3 - 2 * t)


def _ellipsoid_dist(z, y, x, c, a):
    """Approximate signed distance (voxels) to an axis-aligned ellipsoid."""
    r = np.sqrt(((z - c[0]) / a[0]) ** 2 + ((y - c[1]) / a[1]) ** 2 + ((x - c[2]) / a[2]) ** 2)
    return (r - 1) * min(a)


def make_phantom(nx, ny, nz, seed):
    """(int16 image, uint8 truth), both shaped (nz, ny, nx)."""
    rng = np.random.default_rng(seed)
    z, y, x = np.meshgrid(np.arange(nz, dtype=np.float64), np.arange(ny, dtype=np.float64),
                          np.arange(nx, dtype=np.float64), indexing="ij")
    n = np.array([nz, ny, nx], dtype=np.float64)
    scale = np.cbrt(nx * ny * nz / (96 * 96 * 64))
    base = rng.uniform(900, 1100)
    sigma = base * rng.uniform(0.035, 0.06)
    fluid_level = rng.uniform(0.22, 0.32)

    hc = (n - 1) / 2 + n * rng.uniform(-0.015, 0.015, 3)
    ha = n * rng.uniform(0.37, 0.42, 3)
    dh = _ellipsoid_dist(z, y, x, hc, ha)
    truth = np.where(dh < 0, 1, 0).astype(np.uint8)
    tex = sum(0.04 * np.cos(2 * np.pi * x / rng.uniform(6, 18) + rng.uniform(0, 6)) *
              np.cos(2 * np.pi * y / rng.uniform(6, 18) + rng.uniform(0, 6)) for _ in range(3))
    v = base * (1 + tex)
    rim = rng.uniform(0.05, 0.07) * ha.mean()
    v *= 1 - rng.uniform(0.10, 0.18) * _smoothstep(-dh - rim)

    enlarge = rng.uniform(0.9, 1.35)
    for side in (-1, 1):
        c = hc + ha * np.array([rng.uniform(0.10, 0.18), rng.uniform(-0.02, 0.06), side * 0.12])
        a = ha * np.array([0.19, 0.33, 0.11]) * enlarge
        d = _ellipsoid_dist(z, y, x, c, a)
        cov = _smoothstep(d)
        v += (fluid_level * base * (1 + 0.5 * tex) - v) * cov
        truth[(d < 0) & (truth > 0)] = 2

    n_lesions = max(1, int(round(rng.integers(6, 11) * scale * scale)))
    for _ in range(n_lesions):
        r = np.exp(rng.uniform(np.log(2), np.log(max(2.0, 6 * min(1.0, scale) ** 0.5))))
        for _ in range(60):
            u = rng.normal(size=3)
            u = u / np.linalg.norm(u) * 0.75 * np.cbrt(rng.random())
            c = hc + u * ha
            d = _ellipsoid_dist(z, y, x, c, np.full(3, r))
            core = d < 1.5
            if (truth[core] == 1).all() and (dh[core] < -1.5).all():
                break
        else:
            continue
        cov = _smoothstep(d)
        v += (rng.uniform(1.45, 1.85) * base * (1 + 0.5 * tex) - v) * cov
        truth[(d < 0) & (truth > 0)] = 3

    bias = sum(rng.uniform(-0.3, 0.3) * (g - (m - 1) / 2) / m for g, m in ((z, nz), (y, ny), (x, nx)))
    signal = _smoothstep(dh) * v * np.exp(bias)
    n1, n2 = rng.normal(size=signal.shape), rng.normal(size=signal.shape)
    img = np.sqrt((signal + sigma * n1) ** 2 + (sigma * n2) ** 2)
    return np.clip(np.round(img), 0, 32767).astype(np.int16), truth


def write_set(directory, count, nx, ny, nz, seed):
    os.makedirs(os.path.join(directory, "volumes"), exist_ok=True)
    os.makedirs(os.path.join(directory, "truth"), exist_ok=True)
    for i in range(count):
        s = seed * 100003 + i
        img, truth = make_phantom(nx, ny, nz, s)
        name = f"phantom-{i:04d}.nii.gz"
        hdr = nifti.Header(pixdim=(1.0, 2.5, 2.5, 3.0, 0, 0, 0, 0), qform_code=1, sform_code=1,
                           srow_x=(2.5, 0, 0, 0), srow_y=(0, 2.5, 0, 0), srow_z=(0, 0, 3.0, 0),
                           descrip=f"python smoke phantom seed={s}")
        hdr = nifti.write_nifti(os.path.join(directory, "volumes", name), img, hdr)
        nifti.write_mask(os.path.join(directory, "truth", name), truth, hdr, 4)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--count", type=int, default=4)
    ap.add_argument("--dims", default="48x48x32", help="XxYxZ")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    nx, ny, nz = (int(v) for v in a.dims.lower().split("x"))
    write_set(a.dir, a.count, nx, ny, nz, a.seed)


if __name__ == "__main__":
    main()
