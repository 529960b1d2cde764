"""Volumes and affines the geometry, dataset and training tests share (not a test module)."""

import numpy as np

from voxpipe_twin import nifti

RAS_SPACING = (2.5, 2.0, 3.0)


def rot(axis, deg):
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    m = np.eye(3)
    i, j = [a for a in range(3) if a != axis]
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


def ras_affine(spacing=RAS_SPACING, origin=(-30.0, -20.0, -10.0)):
    a = np.diag(list(spacing) + [1.0])
    a[:3, 3] = origin
    return a


def stored_as(ras_zyx, aff_ras, codes):
    """The RAS volume (shape (nS, nA, nR)) as a file stored in the orientation codes (e.g.
    "LPS", "ASR") would hold it, and that file's affine: built from the codes directly, not
    with geometry's functions."""
    ras = ras_zyx.transpose(2, 1, 0)  # [r][a][s]
    n = ras.shape
    world_axis = {"R": (0, 1), "L": (0, -1), "A": (1, 1), "P": (1, -1), "S": (2, 1), "I": (2, -1)}
    axes = [world_axis[c] for c in codes]
    data = ras.transpose([w for w, _ in axes])
    for v, (w, s) in enumerate(axes):
        if s < 0:
            data = np.flip(data, v)
    # voxel index (i, j, k) of the file -> RAS index -> world
    t = np.zeros((4, 4))
    t[3, 3] = 1
    for v, (w, s) in enumerate(axes):
        t[w, v] = s
        if s < 0:
            t[w, 3] = n[w] - 1
    return np.ascontiguousarray(data.transpose(2, 1, 0)), aff_ras @ t


def write(path, data, aff, **fields):
    h = nifti.Header(**fields)
    h.set_affine(aff)
    return nifti.write_nifti(path, data, h)

