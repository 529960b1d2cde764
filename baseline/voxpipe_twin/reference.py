"""A naive numpy implementation of the network (float64 by default), written straight from the
spec with explicit tap loops and no torch, to check the twin against."""

import numpy as np


def conv3d(x, w, b, dilation=1):
    """x [Cin,D,H,W], w [Cout,Cin,k,k,k], zero padding dilation*(k//2) -> [Cout,D,H,W]."""
    cin, d, h, wd = x.shape
    cout, cin2, k = w.shape[0], w.shape[1], w.shape[2]
    assert cin == cin2, (x.shape, w.shape)
    p = dilation * (k // 2)
    xp = np.zeros((cin, d + 2 * p, h + 2 * p, wd + 2 * p), dtype=x.dtype)
    xp[:, p:p + d, p:p + h, p:p + wd] = x
    out = np.zeros((cout, d, h, wd), dtype=x.dtype)
    for kz in range(k):
        for ky in range(k):
            for kx in range(k):
                oz, oy, ox = kz * dilation, ky * dilation, kx * dilation
                patch = xp[:, oz:oz + d, oy:oy + h, ox:ox + wd]
                out += np.einsum("oc,czyx->ozyx", w[:, :, kz, ky, kx], patch)
    return out + b[:, None, None, None]


def relu(v):
    return np.maximum(v, 0)


def forward(tensors, x, dtype=np.float64):
    """Logits [K,D,H,W] for normalised input x [D,H,W]; tensors maps state_dict names to arrays."""
    t = {n: np.asarray(v, dtype=dtype) for n, v in tensors.items()}
    x = np.asarray(x, dtype=dtype)[None]
    e = relu(conv3d(x, t["c1.weight"], t["c1.bias"]))
    s = relu(conv3d(e, t["c2.weight"], t["c2.bias"]))
    g = relu(conv3d(e, t["cg.weight"], t["cg.bias"], dilation=2))
    q = relu(conv3d(s, t["wx.weight"], t["wx.bias"]) + conv3d(g, t["wg.weight"], t["wg.bias"]))
    a = 1.0 / (1.0 + np.exp(-conv3d(q, t["psi.weight"], t["psi.bias"])))
    f = a * s + g
    return conv3d(f, t["head.weight"], t["head.bias"])


def labels(logits):
    """argmax over axis 0, lowest index on ties, uint8 (np.argmax returns the first maximum)."""
    return np.argmax(logits, axis=0).astype(np.uint8)
