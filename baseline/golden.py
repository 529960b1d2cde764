#!/usr/bin/env python3
"""Golden cases for voxpipe's Go engines: engine/cpu/testdata/golden/<case>/{input.nii,
model.safetensors, mask.nii} plus manifest.json describing each case.

Each case is a small, awkwardly sized volume and a random-weight model (He-like init, searched
over seeds until the output mask is diverse and no voxel's top-two logits are closer than
--min-margin). The mask is the twin's fp32 CPU result with deterministic algorithms; it is
cross-checked against the naive float64 numpy implementation (voxpipe_twin.reference) and
against three ways of normalising (folded float32 as model.Norm does, folded with a fused
multiply-add, exact float64), which must all give the same labels.

    /usr/bin/python3 baseline/golden.py            # (re)write the cases
    /usr/bin/python3 baseline/golden.py --check    # regenerate in memory, compare with files
"""

import argparse
import dataclasses
import hashlib
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from voxpipe_twin import model as M  # noqa: E402
from voxpipe_twin import nifti, reference  # noqa: E402
from voxpipe_twin import normalize as N  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, "engine", "cpu", "testdata", "golden")
SIZE_LIMIT = 1 << 20  # all cases together


@dataclasses.dataclass
class Case:
    name: str
    nx: int
    ny: int
    nz: int
    kind: str  # volume generator, see make_volume
    seed: int
    channels: int = 16
    classes: int = 4
    dtype: str = "float32"
    scl_slope: float = 1.0
    scl_inter: float = 0.0
    tie: tuple = ()  # head rows made identical: (winner, loser), winner < loser
    min_classes: int = 0  # 0: all classes must appear
    note: str = ""


CASES = [
    Case("rand-11x7x5", 11, 7, 5, "random", 101, note="i.i.d. random float32 voxels"),
    Case("smooth-16x16x9", 16, 16, 9, "smooth", 202, note="smooth field plus ellipsoid"),
    Case("thin-9x8x1", 9, 8, 1, "random", 303, note="one z-slice: every slab is the whole volume"),
    Case("xline-1x6x10", 1, 6, 10, "random", 404, min_classes=3, note="nx = 1"),
    Case("int16-negslope-13x10x7", 13, 10, 7, "smooth", 505, dtype="int16",
         scl_slope=-0.5, scl_inter=40.0,
         note="int16 stored values, negative scl_slope flips the sign of x: ignoring "
              "scl_slope changes the mask"),
    Case("nearconst-8x6x5", 8, 6, 5, "nearconst", 606, min_classes=2,
         note="1000 + noise with sigma < 1e-6*|mu|: sigma is taken as 1 (x = v - mu); "
              "dividing by the raw sigma changes the mask"),
    Case("const-7x5x3", 7, 5, 3, "const", 707, min_classes=2,
         note="constant volume: sigma = 0 -> 1, x = 0 everywhere; labels come from biases "
              "and zero padding"),
    Case("slabs-24x20x13", 24, 20, 13, "smooth", 808,
         note="13 slices for multi-slab runs (slab 1, 2, 4, 5, 13)"),
    Case("c8k3-10x9x6", 10, 9, 6, "smooth", 909, channels=8, classes=3,
         note="channels 8, classes 3 (not the production 16/4)"),
    Case("tie-12x9x7", 12, 9, 7, "random", 1010, tie=(1, 3), min_classes=3,
         note="head rows 1 and 3 identical (weights and bias): logits 1 and 3 tie exactly, "
              "lowest index wins, so label 3 never appears"),
]


def make_volume(case):
    """Stored voxel values, shape (nz, ny, nx), dtype per case."""
    rng = np.random.default_rng(case.seed)
    shape = (case.nz, case.ny, case.nx)
    if case.kind == "random":
        v = rng.normal(5.0, 37.0, shape)
    elif case.kind == "smooth":
        v = rng.normal(0.0, 1.0, shape)
        for axis in range(3):  # a few box-blur passes: correlated, MRI-ish texture
            for _ in range(2):
                v = (np.roll(v, 1, axis) + v + np.roll(v, -1, axis)) / 3.0
        z, y, x = np.meshgrid(*(np.linspace(-1, 1, n) if n > 1 else np.zeros(1) for n in shape),
                              indexing="ij")
        inside = (x / 0.8) ** 2 + (y / 0.7) ** 2 + (z / 0.9) ** 2 < 1
        v = 300.0 + 120.0 * v / (v.std() + 1e-12) + 400.0 * inside
        v += rng.normal(0.0, 15.0, shape)
    elif case.kind == "nearconst":
        v = 1000.0 + rng.normal(0.0, 3e-4, shape)
    elif case.kind == "const":
        v = np.full(shape, 42.5)
    else:
        raise ValueError(case.kind)
    if case.dtype == "int16":
        # stored values so that v = stored*slope + inter spans a typical range
        stored = np.clip(np.round((v - case.scl_inter) / case.scl_slope), -32768, 32767)
        return stored.astype(np.int16)
    return v.astype(np.float32)


def input_header(case):
    """Non-trivial geometry, so that mask geometry copying is visible."""
    return nifti.Header(
        pixdim=(-1.0, 0.9, 1.1, 1.7, 1.0, 1.0, 1.0, 1.0),  # qfac -1
        xyzt_units=10,
        qform_code=1, sform_code=2,
        quatern_b=0.0, quatern_c=0.0, quatern_d=0.25881904,  # 30 degrees about z
        qoffset_x=-12.5, qoffset_y=30.25, qoffset_z=-7.0,
        srow_x=(0.9, 0.0, 0.0, -12.5), srow_y=(0.0, 1.1, 0.0, 30.25),
        srow_z=(0.0, 0.0, -1.7, -7.0),
        scl_slope=case.scl_slope, scl_inter=case.scl_inter,
        descrip=f"voxpipe golden {case.name}",
    )


def random_model(channels, classes, seed, tie=(), x=None):
    """He-like init: conv weights N(0, 2/fan_in) so relu activations keep their scale; the
    gate and head slightly wider so the sigmoid and the argmax see spread-out values. With x
    (a normalised volume), the head biases are shifted so each class's mean logit over x is
    its random bias: every class gets a share of the voxels."""
    g = torch.Generator().manual_seed(seed)
    m = M.AttnGateNet(channels, classes)

    def normal(t, std):
        with torch.no_grad():
            t.copy_(torch.randn(t.shape, generator=g) * std)

    def uniform(t, r):
        with torch.no_grad():
            t.copy_((torch.rand(t.shape, generator=g) * 2 - 1) * r)

    c = channels
    normal(m.c1.weight, (2.0 / 27) ** 0.5)
    uniform(m.c1.bias, 0.2)
    for conv in (m.c2, m.cg):
        normal(conv.weight, (2.0 / (27 * c)) ** 0.5)
        uniform(conv.bias, 0.2)
    for conv in (m.wx, m.wg):
        normal(conv.weight, (2.0 / c) ** 0.5)
        uniform(conv.bias, 0.2)
    normal(m.psi.weight, 2.0 * (2.0 / c) ** 0.5)
    uniform(m.psi.bias, 0.5)
    normal(m.head.weight, 1.5 * (2.0 / c) ** 0.5)
    uniform(m.head.bias, 0.5)
    m.eval()
    if x is not None:
        # Centre each class's logit over this volume so that all classes get voxels.
        with torch.no_grad():
            f = features(m, x)
            mean = torch.einsum("kc,cv->k", m.head.weight[:, :, 0, 0, 0],
                                f.reshape(c, -1)) / f[0].numel()
            m.head.bias.sub_(mean)
    if tie:
        win, lose = tie
        with torch.no_grad():
            m.head.weight[lose] = m.head.weight[win]
            m.head.bias[lose] = m.head.bias[win]
    return m


def features(model, x):
    """f = a*s + g for normalised input x (D,H,W): the head's input, [C,D,H,W]."""
    with torch.no_grad():
        return model.stages(torch.from_numpy(x))["f"][0]


def margin(logits, skip=()):
    """Smallest gap between the best and second-best logit over all voxels (classes in skip
    left out: exact ties built into the model)."""
    keep = [k for k in range(logits.shape[0]) if k not in skip]
    top2 = np.sort(logits[keep], axis=0)[-2:]
    return float((top2[1] - top2[0]).min())


def activity(model, x):
    """Fractions of live ReLUs in e, s, g and the spread of the gate a, for the manifest."""
    with torch.no_grad():
        st = model.stages(torch.from_numpy(x))
    a = st["a"]
    out = {f"live_{k}": float((st[k] > 0).float().mean()) for k in ("e", "s", "g")}
    out.update(gate_mean=float(a.mean()), gate_std=float(a.std()) if a.numel() > 1 else 0.0)
    return out


def evaluate(case, model, stored, min_margin):
    """(labels, info) or (None, reason) if this model is not a good golden case."""
    slope, inter = input_header(case).scaling()
    x = N.normalize(stored, slope, inter, mode="folded")
    labels, logits = M.segment_volume(model, x, return_logits=True)
    tensors = {n: t.numpy() for n, t in model.state_dict().items()}
    skip = (case.tie[1],) if case.tie else ()

    counts = np.bincount(labels.ravel(), minlength=case.classes)
    need = case.min_classes or case.classes
    present = int((counts >= max(1, 0.03 * labels.size)).sum())
    if present < need:
        return None, f"{present} classes with >= 3% of voxels, need {need}"
    if case.kind != "const" and counts.max() > 0.7 * labels.size:
        return None, "one class has over 70% of the voxels"
    if case.tie:
        if not np.array_equal(logits[case.tie[0]], logits[case.tie[1]]):
            return None, "tied head rows gave different fp32 logits"
        if counts[case.tie[1]]:
            return None, "tied loser class appears"
    m32 = margin(logits, skip)
    if m32 < min_margin:
        return None, f"fp32 margin {m32:.2e} < {min_margin:.0e}"

    # The same labels whichever way x is rounded, and from the float64 reference.
    scale, shift, mu, sigma = N.norm_params(stored, slope, inter)
    x_fma = (stored.astype(np.float64) * np.float64(np.float32(scale))
             + np.float64(np.float32(shift))).astype(np.float32)
    variants = {"exact": N.normalize(stored, slope, inter, mode="exact"), "fma": x_fma}
    for vname, xv in variants.items():
        lv = M.segment_volume(model, xv)
        if not np.array_equal(lv, labels):
            return None, f"labels change with {vname} normalisation"
    ref64 = reference.forward(tensors, x.astype(np.float64))
    if not np.array_equal(_reference_labels(ref64, skip), labels):
        return None, "float64 reference disagrees"
    m64 = margin(ref64, skip)
    if m64 < min_margin:
        return None, f"float64 margin {m64:.2e} < {min_margin:.0e}"
    err = float(np.abs(ref64 - logits).max())

    info = {"class_counts": counts.tolist(), "min_margin": round(min(m32, m64), 6),
            "max_abs_logit_err_fp32_vs_fp64": err,
            "max_abs_logit": float(np.abs(logits).max()),
            "norm": {"mu": mu, "sigma": sigma, "scale": scale, "shift": shift,
                     "scale_f32": float(np.float32(scale)), "shift_f32": float(np.float32(shift))}}
    info.update(activity(model, x))

    # The case must actually test what it claims.
    if case.scl_slope < 0:
        lx = M.segment_volume(model, N.normalize(stored, 1.0, 0.0))
        if np.array_equal(lx, labels):
            return None, "ignoring scl_slope gives the same mask"
    if case.kind == "nearconst":
        raw_mu, raw_sigma = N.volume_stats(stored, slope, inter)
        if raw_sigma == 0 or N.effective_sigma(raw_mu, raw_sigma) != 1.0:
            return None, "near-constant volume does not trigger the sigma rule"
        lx = M.segment_volume(model, ((stored.astype(np.float64) - raw_mu) / raw_sigma)
                              .astype(np.float32))
        if np.array_equal(lx, labels):
            return None, "dividing by the raw sigma gives the same mask"
        info["raw_sigma"] = raw_sigma
    return labels, info


def _reference_labels(logits, skip):
    """Reference labels with the classes in skip (losers of built-in exact ties, which have a
    lower-index twin) left out, so float64 rounding cannot break the tie either way."""
    keep = np.array([k for k in range(logits.shape[0]) if k not in skip])
    return keep[reference.labels(logits[keep])].astype(np.uint8)


def build(case, min_margin, max_tries):
    stored = make_volume(case)
    slope, inter = input_header(case).scaling()
    x = N.normalize(stored, slope, inter)
    reasons = {}
    for t in range(max_tries):
        seed = case.seed * 1000 + t
        model = random_model(case.channels, case.classes, seed, case.tie, x)
        labels, info = evaluate(case, model, stored, min_margin)
        if labels is not None:
            info["model_seed"] = seed
            info["tries"] = t + 1
            return stored, model, labels, info
        reasons[info] = reasons.get(info, 0) + 1
    raise RuntimeError(f"{case.name}: no acceptable model in {max_tries} seeds: {reasons}")


def write_case(case, outdir, min_margin, max_tries):
    stored, model, labels, info = build(case, min_margin, max_tries)
    d = os.path.join(outdir, case.name)
    os.makedirs(d, exist_ok=True)
    hdr = nifti.write_nifti(os.path.join(d, "input.nii"), stored, input_header(case))
    desc = (f"golden case {case.name}: random He-like weights, torch.Generator seed "
            f"{info['model_seed']}, from baseline/golden.py (torch {torch.__version__}, fp32 CPU,"
            f" deterministic); not trained")
    M.save_safetensors(model, os.path.join(d, "model.safetensors"), {"description": desc})
    nifti.write_mask(os.path.join(d, "mask.nii"), labels, hdr, case.classes)
    entry = {"name": case.name, "dims_xyz": [case.nx, case.ny, case.nz],
             "input_datatype": case.dtype, "scl_slope": case.scl_slope,
             "scl_inter": case.scl_inter, "channels": case.channels, "classes": case.classes,
             "volume_seed": case.seed, "note": case.note}
    entry.update(info)
    return entry


def digest(directory):
    out = {}
    for root, _, files in os.walk(directory):
        for f in sorted(files):
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, directory)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def generate(outdir, min_margin, max_tries):
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    os.makedirs(outdir, exist_ok=True)
    entries = []
    for case in CASES:
        e = write_case(case, outdir, min_margin, max_tries)
        print(f"{case.name:26s} classes {e['class_counts']} margin {e['min_margin']:.2e} "
              f"fp32-fp64 {e['max_abs_logit_err_fp32_vs_fp64']:.1e} seed {e['model_seed']}"
              f" (try {e['tries']})", flush=True)
        entries.append(e)
    manifest = {
        "generator": "baseline/golden.py",
        "command": "/usr/bin/python3 baseline/golden.py",
        "torch": torch.__version__,
        "min_margin": min_margin,
        "conventions": "arrays [z][y][x]; input.nii stored values (scl_slope/scl_inter in the "
                       "header); mask.nii uint8 NIfTI-1 with input geometry; labels = argmax, "
                       "lowest index on ties; x = float32(stored)*float32(scale)+float32(shift) "
                       "(no FMA) gives the mask, and so do the FMA and exact float64 variants",
        "cases": entries,
    }
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(outdir) for f in fs)
    print(f"{len(entries)} cases, {total} bytes in {outdir}")
    if total > SIZE_LIMIT:
        raise SystemExit(f"golden cases are {total} bytes, over the {SIZE_LIMIT} limit")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="output folder (default %(default)s)")
    ap.add_argument("--min-margin", type=float, default=1e-3,
                    help="smallest allowed gap between the top two logits of any voxel")
    ap.add_argument("--max-tries", type=int, default=300, help="model seeds to try per case")
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary folder and compare bytes with --out")
    args = ap.parse_args()
    if not args.check:
        generate(args.out, args.min_margin, args.max_tries)
        return
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp, args.min_margin, args.max_tries)
        have, want = digest(args.out), digest(tmp)
    # the manifest records float details (errors) that may differ between builds; compare data
    have.pop("manifest.json", None)
    want.pop("manifest.json", None)
    diff = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
    if diff:
        raise SystemExit(f"golden files differ from a fresh generation: {diff}")
    print("golden files match a fresh generation")


if __name__ == "__main__":
    main()
