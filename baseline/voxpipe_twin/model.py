"""AttnGateNet, the PyTorch twin of voxpipe's network (model/model.go), its weights file and
slab-wise inference.

Tensors are [N][C][D][H][W] = [batch][channel][z][y][x].
"""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import safetensors_io

FORMAT = "voxpipe-attn-gate"
FORMAT_VERSION = "1"
CLASS_NAMES = ("background", "tissue", "fluid", "lesion")

# z-slices on each side of an output slab that the network reads: conv c1 (1) then the
# dilated conv cg (2). Same as segment.Halo.
HALO = 3

PARAM_NAMES = ("c1", "c2", "cg", "wx", "wg", "psi", "head")


class AttnGateNet(nn.Module):
    """e = relu(c1(x)); s = relu(c2(e)); g = relu(cg(e)) (dilation 2);
    q = relu(wx(s) + wg(g)); a = sigmoid(psi(q)); f = a*s + g; logits = head(f)."""

    def __init__(self, channels=16, classes=4):
        super().__init__()
        if channels < 2 or channels % 2:
            raise ValueError(f"channels must be even and >= 2, got {channels}")
        if classes < 1 or classes > 256:
            raise ValueError(f"classes must be in 1..256, got {classes}")
        c, k = channels, classes
        self.channels, self.classes = c, k
        self.c1 = nn.Conv3d(1, c, 3, padding=1)
        self.c2 = nn.Conv3d(c, c, 3, padding=1)
        self.cg = nn.Conv3d(c, c, 3, padding=2, dilation=2)
        self.wx = nn.Conv3d(c, c // 2, 1)
        self.wg = nn.Conv3d(c, c // 2, 1)
        self.psi = nn.Conv3d(c // 2, 1, 1)
        self.head = nn.Conv3d(c, k, 1)

    def forward(self, x):
        """x: [N,1,D,H,W] (or [D,H,W]) normalised input -> logits [N,K,D,H,W]."""
        return self.stages(x)["logits"]

    def stages(self, x):
        """Every intermediate of the spec by name: e, s, g, q, a, f, logits."""
        if x.dim() == 3:
            x = x[None, None]
        e = F.relu(self.c1(x))
        s = F.relu(self.c2(e))
        g = F.relu(self.cg(e))
        q = F.relu(self.wx(s) + self.wg(g))
        a = torch.sigmoid(self.psi(q))
        f = a * s + g
        return {"e": e, "s": s, "g": g, "q": q, "a": a, "f": f, "logits": self.head(f)}


def argmax_lowest(logits, dim=1):
    """Index of the largest logit along dim, the lowest index on ties, uint8. The same loop as
    the Go engines (label k replaces the best so far only if its logit is strictly greater), so
    NaN logits never take the label from class 0's value, and a NaN class 0 keeps label 0."""
    best = logits.select(dim, 0)
    idx = torch.zeros_like(best, dtype=torch.uint8)
    for k in range(1, logits.shape[dim]):
        v = logits.select(dim, k)
        better = v > best
        idx = torch.where(better, torch.full_like(idx, k), idx)
        best = torch.where(better, v, best)
    return idx


def default_metadata(model, description=""):
    k = model.classes
    names = list(CLASS_NAMES[:k]) + [f"class{i}" for i in range(len(CLASS_NAMES), k)]
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "channels": str(model.channels),
        "classes": str(k),
        "class_names": ",".join(names),
        "description": description,
    }


def save_safetensors(model, path, metadata=None):
    """Writes the model's state_dict as float32 safetensors. metadata entries override
    default_metadata(model); values must be strings."""
    meta = default_metadata(model)
    meta.update(metadata or {})
    tensors = {name: t.detach().to("cpu", torch.float32).contiguous().numpy()
               for name, t in model.state_dict().items()}
    safetensors_io.write(path, tensors, meta)
    return meta


def expected_shapes(channels, classes):
    c, h, k = channels, channels // 2, classes
    return {
        "c1.weight": (c, 1, 3, 3, 3), "c1.bias": (c,),
        "c2.weight": (c, c, 3, 3, 3), "c2.bias": (c,),
        "cg.weight": (c, c, 3, 3, 3), "cg.bias": (c,),
        "wx.weight": (h, c, 1, 1, 1), "wx.bias": (h,),
        "wg.weight": (h, c, 1, 1, 1), "wg.bias": (h,),
        "psi.weight": (1, h, 1, 1, 1), "psi.bias": (1,),
        "head.weight": (k, c, 1, 1, 1), "head.bias": (k,),
    }


def load_safetensors(path):
    """(AttnGateNet on CPU in eval mode, metadata dict) from a weights file. Checks the format,
    version, tensor names, dtypes and shapes."""
    tensors, meta = safetensors_io.read(path)
    if meta.get("format") != FORMAT or meta.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: not a {FORMAT} v{FORMAT_VERSION} file"
                         f" (format={meta.get('format')!r} version={meta.get('version')!r})")
    try:
        c, k = int(meta["channels"]), int(meta["classes"])
    except (KeyError, ValueError) as e:
        raise ValueError(f"{path}: bad channels/classes metadata") from e
    want = expected_shapes(c, k)
    if set(tensors) != set(want):
        raise ValueError(f"{path}: tensors {sorted(tensors)} != expected {sorted(want)}")
    for name, shape in want.items():
        t = tensors[name]
        if t.dtype != np.float32 or tuple(t.shape) != shape:
            raise ValueError(f"{path}: {name} is {t.dtype}{list(t.shape)}, want float32{list(shape)}")
    names = meta.get("class_names", "").split(",")
    if len(names) != k:
        raise ValueError(f"{path}: {len(names)} class_names for {k} classes")
    model = AttnGateNet(c, k)
    model.load_state_dict({n: torch.from_numpy(t) for n, t in tensors.items()})
    model.eval()
    return model, meta


def slab_windows(d, slab, fixed_window=False):
    """(z0, z1, a, b) per slab of `slab` output z-slices of a volume of d slices: output slices
    z0..z1 read input slices a..b, HALO more on each side clipped to the volume; fixed_window gives
    every window the same size (slab + 2*HALO, shifted inward at the volume's ends) when the
    volume is that deep."""
    for z0 in range(0, d, slab):
        z1 = min(d, z0 + slab)
        a, b = max(0, z0 - HALO), min(d, z1 + HALO)
        if fixed_window and d >= slab + 2 * HALO:
            a = min(max(0, z0 - HALO), d - (slab + 2 * HALO))
            b = a + slab + 2 * HALO
        yield z0, z1, a, b


def segment_volume(model, vol, slab=None, dtype=torch.float32, channels_last=False,
                   device=None, return_logits=False, fixed_window=False):
    """Labels (uint8 numpy, shape (D,H,W)) for a normalised volume vol ((D,H,W) float32 numpy or
    tensor), computed slab by slab: each slab of `slab` output z-slices (the last may be thinner)
    reads HALO extra slices on each side, clipped to the volume, so the result equals
    whole-volume inference. slab None or <= 0 means the whole volume at once. dtype is the
    compute dtype; channels_last uses torch.channels_last_3d. device defaults to the model's.
    With return_logits, returns (labels, float32 logits (K,D,H,W)). fixed_window gives every
    slab the same input shape (slab + 2*HALO slices, shifted inward at the volume ends, where
    the window's edge is the volume's own edge), so a torch.compile'd model compiles once; the
    labels are the same."""
    if device is None:
        device = next(model.parameters()).device
    device = torch.device(device)
    x = torch.as_tensor(np.asarray(vol, dtype=np.float32) if not torch.is_tensor(vol) else vol)
    if x.dim() != 3:
        raise ValueError(f"segment_volume: want (D,H,W), got {tuple(x.shape)}")
    d, h, w = x.shape
    if slab is None or slab <= 0:
        slab = d
    if device.type == "cuda" and not x.is_cuda:
        x = x.pin_memory()
    model = model.to(device=device, dtype=dtype)
    fmt = torch.channels_last_3d if channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    labels = torch.empty((d, h, w), dtype=torch.uint8)
    logits_out = torch.empty((model.classes, d, h, w), dtype=torch.float32) if return_logits else None
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for z0, z1, a, b in slab_windows(d, slab, fixed_window):
                xin = x[a:b].to(device=device, dtype=dtype, non_blocking=True)[None, None]
                xin = xin.contiguous(memory_format=fmt)
                logits = model(xin)[0, :, z0 - a:z1 - a].float()
                labels[z0:z1] = argmax_lowest(logits, dim=0).cpu()
                if return_logits:
                    logits_out[:, z0:z1] = logits.cpu()
    finally:
        model.train(was_training)
    if return_logits:
        return labels.numpy(), logits_out.numpy()
    return labels.numpy()
