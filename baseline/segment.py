#!/usr/bin/env python3
"""PyTorch latency baseline: segment NIfTI volumes with the twin and write masks plus
timings.csv and summary.csv in voxpipe's schemas (telemetry/timing/schema.go), so that
`voxpipe report --run <voxpipe out> --baseline <this out>` can compare the two.

Per volume, one after another: read (NIfTI decode, gunzip), stats (mu, sigma and x, step 0),
segment (slab-wise inference from host memory to a host mask, the engine call's wall time; pinned
input and a device synchronise on CUDA), write (uint8 NIfTI-1 mask with the input's geometry,
written to a temporary name and renamed).

    python3 baseline/segment.py /tmp/val/volumes -o /tmp/torch-out --model out/model.safetensors \\
        --device cuda --slab 16
"""

import argparse
import csv
import glob
import os
import secrets
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from voxpipe_twin import model as M  # noqa: E402
from voxpipe_twin import nifti  # noqa: E402
from voxpipe_twin.normalize import normalize_nifti  # noqa: E402

TIMING_COLUMNS = ["run_id", "volume", "stage", "slab", "device", "start_ms", "duration_ms",
                  "bytes", "voxels"]
SUMMARY_COLUMNS = ["run_id", "volume", "status", "error", "dims", "voxels", "engine", "read_ms",
                   "stats_ms", "segment_ms", "h2d_ms", "kernels_ms", "d2h_ms", "write_ms",
                   "wall_ms", "mvox_per_s", "output"]
EXTENSIONS = (".nii.gz", ".nii", ".hdr.gz", ".hdr")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def volume_name(path):
    base = os.path.basename(path)
    for ext in EXTENSIONS:
        if base.endswith(ext):
            return base[: -len(ext)]
    return base


def discover(inputs):
    files = []
    for p in inputs:
        if os.path.isdir(p):
            found = sorted(f for f in glob.glob(os.path.join(p, "*"))
                           if f.endswith(EXTENSIONS) and os.path.isfile(f))
            files += found
        else:
            files.append(p)
    return files


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="NIfTI files or folders of them")
    ap.add_argument("-o", "--out", required=True, help="output folder")
    ap.add_argument("--model", required=True, help="weights (.safetensors)")
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1")
    ap.add_argument("--slab", type=int, default=0, help="output z-slices per slab (0: whole)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    ap.add_argument("--mask-name", default="{name}_mask.nii.gz")
    ap.add_argument("--run-id", default="")
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed inferences on the first volume before the run (CUDA init, "
                         "cuDNN algorithm choice)")
    ap.add_argument("--compile", default="",
                    help="torch.compile mode, e.g. max-autotune-no-cudagraphs (slabs then use one "
                         "fixed input shape so it compiles once, during --warmup)")
    return ap.parse_args()


def record_ok(row, timings, device, stored, times, t0):
    """Fills the summary row of a volume segmented ok and adds its timings rows; times are
    the perf_counter readings at read, stats, segment, write and the end, t0 the run's."""
    t_read, t_stats, t_seg, t_write, t_end = times
    nz, ny, nx = stored.shape
    vox = nx * ny * nz
    stages = [("read", "host", t_read, t_stats, stored.nbytes),
              ("stats", "host", t_stats, t_seg, stored.nbytes),
              ("segment", str(device), t_seg, t_write, vox),
              ("write", "host", t_write, t_end, vox)]
    for stage, dev, a, b, nbytes in stages:
        timings.append({"run_id": row["run_id"], "volume": row["volume"], "stage": stage, "slab": -1,
                        "device": dev, "start_ms": f"{(a - t0) * 1e3:.3f}",
                        "duration_ms": f"{(b - a) * 1e3:.3f}", "bytes": nbytes,
                        "voxels": vox})
    wall = (t_end - t_read) * 1e3
    row.update(status="ok", dims=f"{nx}x{ny}x{nz}", voxels=vox,
               read_ms=f"{(t_stats - t_read) * 1e3:.3f}",
               stats_ms=f"{(t_seg - t_stats) * 1e3:.3f}",
               segment_ms=f"{(t_write - t_seg) * 1e3:.3f}",
               write_ms=f"{(t_end - t_write) * 1e3:.3f}", wall_ms=f"{wall:.3f}",
               mvox_per_s=f"{vox / wall / 1e3:.3f}")


def write_csvs(out, timings, summaries):
    for fname, cols, rows in (("timings.csv", TIMING_COLUMNS, timings),
                              ("summary.csv", SUMMARY_COLUMNS, summaries)):
        with open(os.path.join(out, fname), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)


def main():
    args = parse_args()
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    if device.type == "cpu":
        torch.set_num_threads(args.threads or os.cpu_count() or 1)
    dtype = DTYPES[args.dtype]
    model, _ = M.load_safetensors(args.model)
    model.to(device=device, dtype=dtype)
    engine = f"torch-{device}" + ("" if args.dtype == "float32" else f"-{args.dtype}")
    if args.compile:
        model = torch.compile(model, mode=args.compile, dynamic=False)
        engine += "-compiled"
    run_id = args.run_id or time.strftime("%Y%m%dT%H%M%S-") + secrets.token_hex(3)
    os.makedirs(args.out, exist_ok=True)
    files = discover(args.inputs)
    if not files:
        raise SystemExit("no input volumes")

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    if args.warmup:
        h, stored = nifti.read_nifti(files[0])
        x = normalize_nifti(h, stored)
        for _ in range(args.warmup):
            M.segment_volume(model, x, slab=args.slab, dtype=dtype,
                             channels_last=args.channels_last, device=device,
                             fixed_window=bool(args.compile))
        sync()

    timings, summaries = [], []
    t0 = time.perf_counter()
    ms = lambda t: (t - t0) * 1e3  # noqa: E731
    failed = 0
    for path in files:
        name = volume_name(path)
        out_path = os.path.join(args.out, args.mask_name.format(name=name))
        row = dict.fromkeys(SUMMARY_COLUMNS, "")
        row.update(run_id=run_id, volume=name, engine=engine, output=out_path)
        t_read = time.perf_counter()
        try:
            h, stored = nifti.read_nifti(path)
            t_stats = time.perf_counter()
            x = normalize_nifti(h, stored)
            t_seg = time.perf_counter()
            labels = M.segment_volume(model, x, slab=args.slab, dtype=dtype,
                                      channels_last=args.channels_last, device=device,
                                      fixed_window=bool(args.compile))
            sync()
            t_write = time.perf_counter()
            tmp = out_path + f".tmp-{os.getpid()}" + (".gz" if out_path.endswith(".gz") else "")
            nifti.write_mask(tmp, labels, h, model.classes)
            os.replace(tmp, out_path)
            t_end = time.perf_counter()
        except Exception as e:  # one bad volume fails alone, as in voxpipe run
            failed += 1
            row.update(status="failed", error=f"{type(e).__name__}: {e}", wall_ms="0")
            summaries.append(row)
            print(f"{name}: FAILED {e}", file=sys.stderr, flush=True)
            continue
        record_ok(row, timings, device, stored, (t_read, t_stats, t_seg, t_write, t_end), t0)
        summaries.append(row)
        print(f"{name} {row['dims']} read {row['read_ms']} stats {row['stats_ms']} segment "
              f"{row['segment_ms']} write {row['write_ms']} wall {row['wall_ms']} ms", flush=True)

    write_csvs(args.out, timings, summaries)
    seg = [float(r["segment_ms"]) for r in summaries if r["status"] == "ok"]
    if seg:
        print(f"{len(seg)} volumes on {engine}: segment median {np.median(seg):.1f} ms, "
              f"total {ms(time.perf_counter()) / 1e3:.2f} s; CSVs in {args.out}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
