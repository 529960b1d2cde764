"""Step 0 of the network: x = (v - mu) / sigma.

v is the stored value after scl_slope/scl_inter; mu and the population standard deviation sigma
are taken over the whole volume in float64; if sigma < 1e-6 * max(1, |mu|), sigma = 1.

The Go engines fold this into one float32 affine map of the stored values,
x = float32(stored) * Scale + Shift (segment.Norm), with Scale = slope/sigma and
Shift = (inter - mu)/sigma. normalize() computes that folded form by default so the twin
matches the engines to the last bit where it can; mode="exact" computes (v - mu)/sigma in
float64 and rounds once.
"""

import math

import numpy as np

SIGMA_REL_FLOOR = 1e-6

# Slabs of this many voxels bound the float64 temporaries for big volumes.
_CHUNK = 1 << 22


def volume_stats(stored, slope=1.0, inter=0.0):
    """(mu, sigma) of v = stored*slope + inter over the whole volume, float64, two-pass,
    sigma the population standard deviation (before the sigma floor rule)."""
    flat = np.asarray(stored).reshape(-1)
    n = flat.size
    if n == 0:
        raise ValueError("volume_stats: empty volume")
    total = 0.0
    for i in range(0, n, _CHUNK):
        total += float(np.sum(flat[i:i + _CHUNK].astype(np.float64) * slope + inter))
    mu = total / n
    sq = 0.0
    for i in range(0, n, _CHUNK):
        d = flat[i:i + _CHUNK].astype(np.float64) * slope + inter - mu
        sq += float(np.dot(d, d))
    return mu, math.sqrt(sq / n)


def effective_sigma(mu, sigma):
    """The sigma rule: a (near-)constant volume is only centred, not scaled."""
    if not sigma >= SIGMA_REL_FLOOR * max(1.0, abs(mu)):  # also catches NaN
        return 1.0
    return sigma


def norm_params(stored, slope=1.0, inter=0.0):
    """(scale, shift, mu, sigma) in float64 with x = stored*scale + shift; sigma after the rule.
    slope/inter must already follow the scl_slope rule (nifti.Header.scaling())."""
    mu, sigma = volume_stats(stored, slope, inter)
    sigma = effective_sigma(mu, sigma)
    return slope / sigma, (inter - mu) / sigma, mu, sigma


def normalize(stored, slope=1.0, inter=0.0, mode="folded"):
    """Network input x (float32, same shape) from stored voxel values.

    mode "folded": x = float32(stored)*float32(scale) + float32(shift), float32 arithmetic
    (no fused multiply-add), the way segment.Norm is applied. mode "exact": (v - mu)/sigma in
    float64, rounded to float32 once."""
    stored = np.asarray(stored)
    scale, shift, mu, sigma = norm_params(stored, slope, inter)
    if mode == "folded":
        x = stored.astype(np.float32) * np.float32(scale)
        x += np.float32(shift)
        return x
    if mode == "exact":
        v = stored.astype(np.float64) * slope + inter
        return ((v - mu) / sigma).astype(np.float32)
    raise ValueError(f"normalize: unknown mode {mode!r}")


def normalize_nifti(header, stored, mode="folded"):
    """normalize() with the header's scl_slope/scl_inter (after the scl_slope rule)."""
    slope, inter = header.scaling()
    return normalize(stored, slope, inter, mode=mode)
