#!/usr/bin/env python3
"""GPU time of the PyTorch twin on one volume already in GPU memory: the PyTorch rows of the
same-call comparison in docs/perf.md (voxpipe's own rows come from `voxpipe bench`).

The volume (normalised values, random: convolution time does not depend on them) is cut into
z-slabs with the network's halo as baseline/segment.py does (model.slab_windows). The labels stay
on the GPU, so only the network and the argmax are timed (CUDA events), the median of --runs
after --warmup.
Variants: fp32 (TF32 off, as voxpipe's fp32 reference kernels), fp16 with channels_last_3d,
and that under torch.compile(mode=--compile-mode) with one fixed slab shape (compiles once,
during the warm-up; the first call can take minutes with max-autotune).

    python3 baseline/gpu_time.py --model fixtures/model/voxpipe-default.safetensors \\
        --dims 512x512x1000 --variants fp32,fp16-cl,compiled
"""

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from voxpipe_twin import model as M  # noqa: E402

# FLOP per voxel of the network (multiply-adds count 2; voxpipe's kernels issue more: padding).
def flop_per_voxel(c, k):
    g = c // 2
    return 2 * (27 * c + 2 * 27 * c * c + 2 * c * g + g + c * k)


def run_variant(model, x, slab, dtype, channels_last, fixed, runs, warmup):
    fmt = torch.channels_last_3d if channels_last else torch.contiguous_format
    labels = torch.empty(x.shape, dtype=torch.uint8, device=x.device)

    def once():
        for z0, z1, a, b in M.slab_windows(x.shape[0], slab, fixed):
            xin = x[a:b].to(dtype)[None, None].contiguous(memory_format=fmt)
            logits = model(xin)[0, :, z0 - a:z1 - a]
            labels[z0:z1] = M.argmax_lowest(logits, dim=0).to(torch.uint8)

    with torch.no_grad():
        t0 = time.perf_counter()
        for _ in range(warmup):
            once()
        if x.is_cuda:
            torch.cuda.synchronize()
        first = time.perf_counter() - t0
        ms = []
        for _ in range(runs):
            if x.is_cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                once()
                b.record()
                b.synchronize()
                ms.append(a.elapsed_time(b))
            else:  # smoke tests on a machine without a GPU
                t = time.perf_counter()
                once()
                ms.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ms), min(ms), max(ms), first, labels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dims", default="512x512x1000", help="XxYxZ")
    ap.add_argument("--variants", default="fp32,fp16-cl,compiled")
    ap.add_argument("--slab", type=int, default=64, help="output z-slices per slab (eager)")
    ap.add_argument("--compile-slab", type=int, default=256, help="slab of the compiled variant")
    ap.add_argument("--compile-mode", default="max-autotune-no-cudagraphs")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke test")
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_time: no CUDA device")
    nx, ny, nz = (int(v) for v in args.dims.lower().split("x"))
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    base, _ = M.load_safetensors(args.model)
    base.eval()
    gen = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn((nz, ny, nx), device=dev, dtype=torch.float32, generator=gen)
    vox = nx * ny * nz
    tflop = flop_per_voxel(base.channels, base.classes) * vox / 1e12
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    print(f"gpu_time: {name} torch {torch.__version__} cuDNN {torch.backends.cudnn.version()}; "
          f"{nx}x{ny}x{nz}, {tflop:.2f} TFLOP (the network's multiply-adds x 2)", flush=True)
    ref = None
    for v in args.variants.split(","):
        if v == "fp32":
            dtype, cl, slab, fixed = torch.float32, False, args.slab, False
            model = M.AttnGateNet(base.channels, base.classes).to(dev).eval()
        elif v in ("fp16-cl", "compiled"):
            dtype, cl = torch.float16, True
            slab, fixed = (args.compile_slab, True) if v == "compiled" else (args.slab, False)
            model = M.AttnGateNet(base.channels, base.classes).to(dev).eval()
        else:
            raise SystemExit(f"gpu_time: unknown variant {v!r}")
        model.load_state_dict(base.state_dict())
        model = model.to(dtype=dtype, memory_format=torch.channels_last_3d if cl else torch.contiguous_format)
        if v == "compiled":
            model = torch.compile(model, mode=args.compile_mode, dynamic=False)
        med, lo, hi, first, labels = run_variant(model, x, slab, dtype, cl, fixed, args.runs, args.warmup)
        agree = ""
        if ref is None:
            ref = labels
        else:
            agree = f", labels agree with {args.variants.split(',')[0]} on {100 * (labels == ref).float().mean().item():.4f} %"
        print(f"gpu_time {v}: {med:.1f} ms [{lo:.1f}-{hi:.1f}] per volume (slab {slab}, {args.runs} runs; "
              f"warm-up {first:.1f} s), {tflop / med * 1e3:.0f} TFLOP/s{agree}", flush=True)
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
