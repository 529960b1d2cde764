"""Voxel geometry for training on outside data: the closest canonical orientation of an affine,
reorientation to RAS by permutations and flips only, and resampling to a target spacing.

Arrays are [z][y][x] = [k][j][i] (numpy shape (nk, nj, ni)), as nifti.read_nifti returns them;
affines map (i, j, k, 1) to world (x, y, z, 1). After to_canonical, i points right, j anterior
and k superior (RAS), so spacings are listed along x, y, z.
"""

import numpy as np

# Axis codes of the world axes x, y, z: (negative direction, positive direction).
_CODES = (("L", "R"), ("P", "A"), ("I", "S"))


class GeometryError(ValueError):
    """An affine voxpipe cannot orient (a zero or degenerate column)."""


def io_orientation(affine):
    """For each voxel axis i, j, k: (world axis 0..2, +1 or -1), the closest canonical
    orientation, computed as nibabel.orientations.io_orientation does: normalise the columns,
    take the nearest orthogonal matrix (SVD), then give each voxel axis, in order, the world axis
    it is most parallel to among those not yet taken."""
    a = np.asarray(affine, dtype=np.float64)
    rzs = a[:3, :3]
    zooms = np.sqrt((rzs * rzs).sum(axis=0))
    if not np.all(np.isfinite(rzs)) or np.any(zooms == 0):
        raise GeometryError(f"affine {rzs.tolist()} has a zero or non-finite column")
    rs = rzs / zooms
    p, s, qs = np.linalg.svd(rs)
    if s.min() <= s.max() * 3 * np.finfo(np.float64).eps:
        raise GeometryError(f"affine {rzs.tolist()} is singular: its voxel axes are not independent")
    r = p @ qs
    ornt = []
    for col in range(3):
        c = r[:, col]
        w = int(np.argmax(np.abs(c)))
        ornt.append((w, 1 if c[w] > 0 else -1))
        r[w, :] = 0
    return tuple(ornt)


def axcodes(ornt):
    """"RAS", "LPS", "ASR"...: the world direction each voxel axis i, j, k points to."""
    return "".join(_CODES[w][1 if s > 0 else 0] for w, s in ornt)


def voxel_sizes(affine):
    """Lengths of the affine's first three columns: the voxel's extent along i, j, k."""
    a = np.asarray(affine, dtype=np.float64)[:3, :3]
    return np.sqrt((a * a).sum(axis=0))


def to_canonical(arr, ornt):
    """The array (shape (nk, nj, ni)) reoriented to RAS: axis i of the result points right, j
    anterior, k superior. Permutes and flips only, so every voxel value is kept exactly."""
    a = np.asarray(arr).transpose(2, 1, 0)  # (ni, nj, nk)
    perm = [0, 0, 0]  # perm[world axis] = voxel axis
    for axis, (w, _) in enumerate(ornt):
        perm[w] = axis
    a = a.transpose(perm)
    flips = tuple(w for w, s in ornt if s < 0)
    if flips:
        a = np.flip(a, flips)
    return np.ascontiguousarray(a.transpose(2, 1, 0))


def from_canonical(arr, ornt):
    """The inverse of to_canonical: a RAS array back in the voxel order of ornt's file."""
    a = np.asarray(arr).transpose(2, 1, 0)  # (nR, nA, nS)
    flips = tuple(w for w, s in ornt if s < 0)
    if flips:
        a = np.flip(a, flips)
    a = a.transpose([w for w, _ in ornt])
    return np.ascontiguousarray(a.transpose(2, 1, 0))


def canonical_affine(affine, ornt, shape_zyx):
    """The affine of to_canonical's result, for an input of shape (nk, nj, ni)."""
    a = np.asarray(affine, dtype=np.float64)
    n = (shape_zyx[2], shape_zyx[1], shape_zyx[0])
    t = np.zeros((4, 4))  # new index (RAS axes) -> old index (i, j, k)
    t[3, 3] = 1
    for axis, (w, s) in enumerate(ornt):
        if s > 0:
            t[axis, w] = 1
        else:
            t[axis, w] = -1
            t[axis, 3] = n[axis] - 1
    return a @ t


def needs_resampling(spacing, target, tolerance=0.10):
    """True when any axis of spacing differs from target by more than tolerance (relative)."""
    s, t = np.asarray(spacing, np.float64), np.asarray(target, np.float64)
    return bool(np.any(np.abs(s / t - 1) > tolerance))


def resampled_shape(shape_zyx, spacing, target):
    """(nk, nj, ni) of a volume of spacing (x, y, z) resampled to target: the same field of view,
    round(n * spacing / target) voxels (at least 1) per axis."""
    return tuple(max(1, int(round(shape_zyx[a] * spacing[2 - a] / target[2 - a]))) for a in range(3))


def _positions(n_out, n_in, ratio):
    """Source coordinates of the output voxel centres: the field of view is kept (voxel edges
    at 0 and n line up), so output voxel c sits at (c + 0.5) * ratio - 0.5, clamped to the
    input's centres (edge voxels repeat at the borders)."""
    p = (np.arange(n_out, dtype=np.float64) + 0.5) * ratio - 0.5
    return np.clip(p, 0, n_in - 1)


def resample(arr, spacing, target, order):
    """arr (shape (nk, nj, ni), spacing (x, y, z) mm) resampled to spacing target over the same
    field of view (see _positions). order "linear": trilinear interpolation (separable, float64;
    for images); "nearest": nearest neighbour (for labels; halves round up)."""
    a = np.asarray(arr)
    shape = resampled_shape(a.shape, spacing, target)
    if order == "linear":
        a = a.astype(np.float64)
    elif order != "nearest":
        raise ValueError(f"resample: order {order!r}, want linear or nearest")
    for axis in range(3):
        n_in, n_out = a.shape[axis], shape[axis]
        ratio = target[2 - axis] / spacing[2 - axis]
        if n_out == n_in and ratio == 1:
            continue
        p = _positions(n_out, n_in, ratio)
        if order == "nearest":
            a = np.take(a, np.minimum(np.floor(p + 0.5).astype(np.int64), n_in - 1), axis=axis)
            continue
        i0 = np.minimum(np.floor(p).astype(np.int64), max(n_in - 2, 0))
        i1 = np.minimum(i0 + 1, n_in - 1)
        w = p - i0
        bshape = [1, 1, 1]
        bshape[axis] = n_out
        w = w.reshape(bshape)
        a = np.take(a, i0, axis=axis) * (1 - w) + np.take(a, i1, axis=axis) * w
    return a


def resampled_affine(affine, spacing, target):
    """The affine of resample's result (spacing along the affine's own voxel axes i, j, k)."""
    a = np.asarray(affine, dtype=np.float64).copy()
    for col in range(3):
        r = target[col] / spacing[col]
        a[:3, 3] += a[:3, col] * (0.5 * r - 0.5)
        a[:3, col] *= r
    return a
