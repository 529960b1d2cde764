#!/usr/bin/env python3
"""Train the twin (AttnGateNet) on labelled volumes, validate on held-out ones, save the best
weights as a voxpipe safetensors file with a model card.

Data (voxpipe_twin.dataset): a folder `voxpipe gen -o DIR` wrote (DIR/volumes/<name>.nii.gz
int16 images, DIR/truth/<name>.nii.gz labels 0 background, 1 tissue, 2 fluid, 3 lesion), or an
nnU-Net-style dataset folder (dataset.json, imagesTr/<case>_0000.nii.gz, labelsTr/<case>.nii.gz;
one channel; label names from dataset.json). Every case is reoriented to RAS (permutations and
flips from its affine); a case whose spacing differs from the training cases' median by more
than --resample-tolerance on an axis is resampled to the median (image trilinear, labels
nearest). Validation: --val-dir, or --val-fraction of the training folder (fixed --split-seed).

Training: random crops (--crop XxYxZ, clamped to the volume; "full" = whole volumes) with random
flips, loss = class-weighted cross-entropy (weights (class frequency)^-1/2) + soft Dice over
classes 1..K-1, so the small lesions count. Voxels closer than the network's reach (3) to a crop
face that cuts through the volume are left out of the loss: their inputs would be zero padding
that whole-volume inference does not see. Adam, linear warm-up then cosine decay. Seeded torch
and numpy, deterministic algorithms: the same command on the same kind of device gives the same
weights (unless --time-limit cuts it short).

Validation runs whole-volume inference (voxpipe_twin.segment_volume) on every validation volume
and reports per-class Dice (classes 1..K-1, averaged over volumes) and their mean; the weights
with the best mean are saved, with the training description and the model card (name, spacing,
orientation RAS, labels and colours, the training volumes' spacing range and normalised
intensity quantiles) in the metadata.

    python3 baseline/train.py --train-dir /tmp/train --val-dir /tmp/val --out out/model.safetensors
"""

import argparse
import copy
import math
import os
import shlex
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from voxpipe_twin import model as M  # noqa: E402
from voxpipe_twin import dataset as D  # noqa: E402
from voxpipe_twin import modelcard  # noqa: E402

REACH = M.HALO  # voxels of context the network reads on each side, along every axis
CALIBRATE = 30  # steps timed before --time-limit fixes the number of steps


def log(msg):
    print(msg, flush=True)


def parse_dims(s):
    """"XxYxZ" or "N" (a cube) or "full" -> (z, y, x) extents; None for full volumes."""
    if s.lower() in ("full", "0"):
        return None
    parts = [int(p) for p in s.lower().split("x")]
    if len(parts) == 1:
        parts = parts * 3
    if len(parts) != 3 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"crop {s!r}: want XxYxZ, N or full")
    return parts[2], parts[1], parts[0]


def split_cases(cases, fraction, seed):
    """(train, val): a fraction of the cases (at least one) for validation, picked by a numpy
    Generator seeded with seed, so the same folder and seed give the same split."""
    if not 0 < fraction < 1:
        raise SystemExit(f"--val-fraction {fraction}: want a fraction between 0 and 1")
    n_val = max(1, int(round(fraction * len(cases))))
    if n_val >= len(cases):
        raise SystemExit(f"--val-fraction {fraction} of {len(cases)} cases leaves none to train"
                         " on: add cases or give --val-dir")
    pick = set(np.random.default_rng(seed).permutation(len(cases))[:n_val].tolist())
    return ([c for i, c in enumerate(cases) if i not in pick],
            [c for i, c in enumerate(cases) if i in pick])


def load_data(args):
    """Reads, checks, reorients and splits the data. Returns (info, train cases, val cases);
    cases are voxpipe_twin.dataset.Case."""
    try:
        info = D.dataset_info(args.train_dir)
        listed = D.list_cases(info)
        if args.val_dir:
            vinfo = D.dataset_info(args.val_dir)
            if vinfo.label_names != info.label_names:
                raise SystemExit(f"{args.val_dir}: labels {vinfo.label_names} differ from the"
                                 f" training folder's {info.label_names}")
            tr, va = listed, D.list_cases(vinfo)
        else:
            tr, va = split_cases(listed, args.val_fraction, args.split_seed)
        if args.max_train:
            tr = tr[:args.max_train]
        if args.max_val:
            va = va[:args.max_val]
        k = len(info.label_names)
        return info, D.load_cases(info, tr, k), D.load_cases(info, va, k)
    except D.DatasetError as e:
        raise SystemExit(f"train.py: {e}") from e


def prepare_set(cases, target, tolerance):
    """[(name, x float32 (D,H,W), truth uint8 (D,H,W))] and how many were resampled."""
    out, n = [], 0
    for c in cases:
        x, t, resampled = D.prepare(c, target, tolerance)
        out.append((c.name, x, t))
        n += resampled
    return out, n


def build_card(args, info, train_cases, target):
    """The model card of a model trained on train_cases at spacing target (RAS)."""
    try:
        return D.card_for(info, train_cases, target, name=args.name,
                          fallback_name=os.path.splitext(os.path.basename(args.out))[0],
                          version=args.model_version, modality=args.modality,
                          intended_use=args.intended_use, colors=args.colors,
                          training_data=args.training_data, data_desc=args.data_desc,
                          codes=args.codes, quantile_tolerance=args.quantile_tolerance)
    except modelcard.CardError as e:
        raise SystemExit(f"train.py: {e}") from e


def dice_per_class(pred, truth, classes):
    """Dice of each class (1 when absent from both)."""
    d = []
    for k in range(classes):
        p, t = pred == k, truth == k
        s = int(p.sum()) + int(t.sum())
        d.append(1.0 if s == 0 else 2.0 * int((p & t).sum()) / s)
    return d


def validate(model, val, classes, device):
    per = np.array([dice_per_class(M.segment_volume(model, x, device=device), t, classes)
                    for _, x, t in val])
    dice = per.mean(axis=0)
    return dice, float(dice[1:].mean())


def fmt_dice(dice, names):
    return " ".join(f"{names[k]} {dice[k]:.4f}" for k in range(1, len(dice)))


class CropSampler:
    """Random crops with random flips, from a numpy Generator: the same seed, the same crops."""

    def __init__(self, data, crop, batch, seed, device, flip_axes=(1, 2)):
        self.x = [torch.from_numpy(x).to(device) for _, x, _ in data]
        self.t = [torch.from_numpy(t.astype(np.int64)).to(device) for _, _, t in data]
        self.shapes = [x.shape for _, x, _ in data]
        self.crop, self.batch, self.device = crop, batch, device
        self.flip_axes = flip_axes
        self.rng = np.random.default_rng(seed)
        if crop is None and len({s for s in self.shapes}) > 1:
            raise SystemExit("--crop full needs volumes of one size")

    def size(self):
        d, h, w = self.shapes[0]
        if self.crop is None:
            return d, h, w
        # Clamp to the smallest volume so every sample of a batch has one shape.
        return tuple(min(c, min(s[a] for s in self.shapes)) for a, c in enumerate(self.crop))

    def sample(self):
        size = self.size()
        xs, ts, ms = [], [], []
        for _ in range(self.batch):
            i = int(self.rng.integers(len(self.x)))
            shape = self.shapes[i]
            origin = [int(self.rng.integers(shape[a] - size[a] + 1)) for a in range(3)]
            flips = [a for a in self.flip_axes if self.rng.random() < 0.5]
            sl = tuple(slice(o, o + s) for o, s in zip(origin, size))
            x, t = self.x[i][sl], self.t[i][sl]
            # Loss mask: 0 within REACH of a crop face inside the volume.
            axes = []
            for a in range(3):
                m = torch.ones(size[a], device=self.device)
                if origin[a] > 0:
                    m[:REACH] = 0
                if origin[a] + size[a] < shape[a]:
                    m[size[a] - REACH:] = 0
                axes.append(m)
            mask = axes[0][:, None, None] * axes[1][None, :, None] * axes[2][None, None, :]
            if flips:
                x, t, mask = (torch.flip(v, flips) for v in (x, t, mask))
            xs.append(x)
            ts.append(t)
            ms.append(mask)
        return torch.stack(xs)[:, None], torch.stack(ts), torch.stack(ms)


def class_weights(train, classes):
    counts = np.zeros(classes)
    for _, _, t in train:
        counts += np.bincount(t.ravel(), minlength=classes)
    freq = np.maximum(counts / counts.sum(), 1e-6)
    w = freq ** -0.5
    w /= (w * freq).sum()  # the average voxel weighs 1
    return w, counts


def loss_fn(logits, target, mask, weights, dice_weight):
    ce = F.cross_entropy(logits, target, weight=weights, reduction="none")
    wsum = (weights[target] * mask).sum().clamp_min(1.0)
    ce = (ce * mask).sum() / wsum
    if dice_weight == 0:
        return ce, ce.detach(), torch.zeros(())
    prob = torch.softmax(logits, dim=1)
    onehot = F.one_hot(target, logits.shape[1]).permute(0, 4, 1, 2, 3).to(prob.dtype)
    m = mask[:, None]
    dims = (0, 2, 3, 4)  # batch Dice: one value per class over all sampled voxels
    inter = (prob * onehot * m).sum(dims)
    denom = ((prob + onehot) * m).sum(dims)
    soft_dice = (2 * inter + 1.0) / (denom + 1.0)
    dloss = 1 - soft_dice[1:].mean()
    return ce + dice_weight * dloss, ce.detach(), dloss.detach()


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--train-dir", required=True,
                    help="labelled volumes to train on: a voxpipe gen folder or an nnU-Net-style"
                         " dataset folder (dataset.json, imagesTr/, labelsTr/)")
    ap.add_argument("--val-dir", help="held-out labelled volumes to validate on (same layouts);"
                                      " without it, --val-fraction of --train-dir")
    ap.add_argument("--val-fraction", type=float, default=0.2,
                    help="without --val-dir: the fraction of the cases held out for validation")
    ap.add_argument("--split-seed", type=int, default=0, help="seed of the --val-fraction split")
    ap.add_argument("--resample-tolerance", type=float, default=0.10,
                    help="a case whose spacing differs from the training median by more than"
                         " this (relative, on any axis) is resampled to the median")
    ap.add_argument("--out", default="out/model.safetensors", help="weights file to write")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--crop", type=parse_dims, default=parse_dims("64x64x64"),
                    help="crop XxYxZ (or N, or full)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--dice-weight", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", help="auto (cuda if available), cuda, cuda:1, cpu")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    ap.add_argument("--channels", type=int, default=16)
    ap.add_argument("--classes", type=int, default=0,
                    help="number of classes (0: the dataset's labels; 4 for voxpipe gen)")
    ap.add_argument("--val-every", type=int, default=250)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--max-train", type=int, default=0, help="use only the first N train volumes")
    ap.add_argument("--max-val", type=int, default=0, help="use only the first N val volumes")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="wall-clock budget in seconds for the whole script (0: none). After "
                         f"{CALIBRATE} steps and one validation, --steps is lowered to what fits "
                         "(the learning-rate schedule follows) and printed; a hard stop at the "
                         "limit remains as a safety net")
    ap.add_argument("--amp", action="store_true",
                    help="bfloat16 autocast for the forward pass (faster on GPUs; the saved "
                         "weights stay float32)")
    ap.add_argument("--nondeterministic", action="store_true",
                    help="let cuDNN pick the fastest (non-deterministic) algorithms")
    ap.add_argument("--data-desc", default="",
                    help="how the data was made (e.g. the voxpipe gen commands), for the metadata")
    cg = ap.add_argument_group("model card (model/card.go; see docs/model.md)")
    cg.add_argument("--name", default="",
                    help="model name (default: dataset.json's name, else the --out file's)")
    cg.add_argument("--model-version", default="1", help="model version")
    cg.add_argument("--modality", default="",
                    help="imaging modality, e.g. 'T1-weighted MR' (default: dataset.json's"
                         " channel 0 name)")
    cg.add_argument("--intended-use", default="Research use only; not for clinical use.",
                    help="what the model may be used for")
    cg.add_argument("--colors", default="",
                    help="label colours: NAME=#rrggbb or VALUE=#rrggbb, comma-separated, or"
                         " #rrggbb by value (default: black background, then a palette of"
                         " distinct colours)")
    cg.add_argument("--training-data", default="",
                    help="description of the training data (default: the folder, the"
                         " dataset.json name and description, and --data-desc)")
    cg.add_argument("--codes", default="",
                    help="coded category and type of labels, for DICOM SEG segments:"
                         " NAME=SCHEME:VALUE:MEANING/SCHEME:VALUE:MEANING, comma-separated, e.g."
                         " 'lesion=SCT:49755003:Morphologically Altered Structure/SCT:52988006:Lesion',"
                         " or a JSON object (default: none)")
    cg.add_argument("--quantile-tolerance", type=float, default=modelcard.QUANTILE_TOLERANCE,
                    help="domain check slack around the training quantiles, in normalised units")
    return ap.parse_args()


def setup_torch(args):
    """The device to train on (args.device resolved), seeded and (unless --nondeterministic)
    deterministic."""
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads or os.cpu_count() or 1)
    else:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    if not args.nondeterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    else:
        torch.backends.cudnn.benchmark = True

    log(f"torch {torch.__version__} device {device}"
        + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else
           f" ({torch.get_num_threads()} threads)"))
    return device


def main():
    args = parse_args()
    command = "python3 " + " ".join(shlex.quote(a) for a in sys.argv)
    t_start = time.time()
    device = setup_torch(args)
    info, train_cases, val_cases = load_data(args)
    names = info.label_names
    if args.classes and args.classes != len(names):
        raise SystemExit(f"--classes {args.classes}, but {args.train_dir} has {len(names)} labels"
                         f" ({', '.join(names)})")
    args.classes = len(names)
    target = D.median_spacing(train_cases)
    train, n_rs = prepare_set(train_cases, target, args.resample_tolerance)
    val, n_rs_val = prepare_set(val_cases, target, args.resample_tolerance)
    card = build_card(args, info, train_cases, target)
    first = train_cases[0].header
    dims = sorted({tuple(reversed(x.shape)) for _, x, _ in train})
    orients = sorted({c.source_orientation for c in train_cases + val_cases})
    log(f"loaded {len(train)} train + {len(val)} val volumes ({info.layout} layout, labels"
        f" {', '.join(names)}), stored as {'/'.join(orients)}, reoriented to RAS; spacing (x,y,z)"
        f" {'x'.join(f'{v:g}' for v in target)} mm (median), {n_rs} train + {n_rs_val} val"
        f" resampled to it; dims (x,y,z) {dims}, in {time.time() - t_start:.1f}s")
    del train_cases, val_cases  # the prepared arrays are all training needs from here
    weights_np, counts = class_weights(train, args.classes)
    log("class fractions " + " ".join(f"{names[k]} {counts[k] / counts.sum():.4f}"
                                      for k in range(args.classes))
        + " | loss weights " + " ".join(f"{w:.2f}" for w in weights_np))

    model = M.AttnGateNet(args.channels, args.classes).to(device)
    sampler = CropSampler(train, args.crop, args.batch, args.seed, device)
    weights = torch.tensor(weights_np, dtype=torch.float32, device=device)
    requested_steps = args.steps
    crop = sampler.size()
    log(f"training {args.steps} steps, batch {args.batch} crops (x,y,z) {crop[2]}x{crop[1]}x{crop[0]},"
        f" lr {args.lr}, seed {args.seed}")
    t_train = time.time()
    best, step = train_steps(args, model, sampler, weights, val, names, device, t_start)
    train_s = time.time() - t_train

    mean, state, best_step, dice = best
    model.load_state_dict(state)
    model.to("cpu")
    val_from = args.val_dir or f"{args.train_dir} (--val-fraction {args.val_fraction:g}," \
        f" --split-seed {args.split_seed})"
    description = (
        f"{args.data_desc + '; ' if args.data_desc else ''}"
        f"trained on {len(train)} volumes ({info.layout} layout) in {args.train_dir} (dims x,y,z"
        f" {dims} after reorientation to RAS and resampling to"
        f" {'x'.join(f'{v:g}' for v in target)} mm; first volume: '{first.descrip}'), validated on"
        f" {len(val)} held-out volumes in {val_from};"
        f" seed {args.seed}, {step} steps"
        f"{f' (of {requested_steps} requested; --time-limit {args.time_limit:g}s)' if step != requested_steps else ''},"
        f" batch {args.batch}, crop {crop[2]}x{crop[1]}x{crop[0]}, Adam lr {args.lr}, weighted CE +"
        f" {args.dice_weight} soft Dice; best at step {best_step}: val Dice {fmt_dice(dice, names)}"
        f" mean {mean:.4f}; torch {torch.__version__} on {device.type}; command: {command}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    M.save_safetensors(model, args.out, {"description": description, "class_names": ",".join(names),
                                         modelcard.CARD_KEY: modelcard.encode(card)})
    log(f"best val mean Dice {mean:.4f} at step {best_step} ({fmt_dice(dice, names)})")
    log(f"trained {step} steps in {train_s:.1f}s ({step / max(train_s, 1e-9):.2f} steps/s incl."
        f" validation); total {time.time() - t_start:.1f}s; wrote {args.out}")
    log("TARGET mean Dice >= 0.90: " + ("met" if mean >= 0.90 else "NOT met"))


def train_steps(args, model, sampler, weights, val, names, device, t_start):
    """Trains model for args.steps steps (fewer under --time-limit, which lowers args.steps),
    validating every args.val_every; returns the best validation (mean Dice, state_dict, step,
    per-class Dice) and the steps taken."""
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    def lr_at(step):  # step counts from 0
        if step < args.warmup:
            return (step + 1) / args.warmup
        p = (step - args.warmup) / max(1, args.steps - args.warmup)
        return 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(1.0, p)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    best = (-1.0, None, 0, None)  # mean Dice, state_dict, step, per-class Dice
    t_train = time.time()
    t_log, step_log = t_train, 0
    run_loss = run_ce = run_dice = 0.0
    stopped_early = False
    step = 0
    t_step10 = t_train
    val_s = 0.0  # seconds per validation, measured
    while step < args.steps:
        step += 1
        model.train()
        x, t, mask = sampler.sample()
        if args.amp:
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                logits = model(x)
            logits = logits.float()
        else:
            logits = model(x)
        loss, ce, dl = loss_fn(logits, t, mask, weights, args.dice_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % args.log_every == 0 or step == 1:
            run_loss, run_ce, run_dice = float(loss), float(ce), float(dl)
            now = time.time()
            sps = (step - step_log) / max(now - t_log, 1e-9)
            log(f"step {step:5d}/{args.steps} loss {run_loss:.4f} (ce {run_ce:.4f} dice {run_dice:.4f})"
                f" lr {sched.get_last_lr()[0]:.2e} {sps:.2f} steps/s elapsed {now - t_train:.1f}s")
            t_log, step_log = now, step
        if step == 10:
            t_step10 = time.time()
        if args.time_limit and step == CALIBRATE and step < args.steps:
            per_step = (time.time() - t_step10) / (CALIBRATE - 10)
            tv = time.time()
            dice, mean = validate(model, val, args.classes, device)
            val_s = time.time() - tv
            log(f"val step {step}: {fmt_dice(dice, names)} | mean {mean:.4f} ({val_s:.1f}s)")
            # Fit S total steps: (S - step)*per_step + (S/val_every + 1)*val_s + 10% slack.
            left = 0.85 * (args.time_limit - (time.time() - t_start)) - val_s
            fit = int((step + left / per_step) / (1 + val_s / (per_step * args.val_every)))
            if fit < args.steps:
                args.steps = max(step + 1, fit)
                log(f"time limit {args.time_limit}s: {per_step * 1e3:.0f} ms/step,"
                    f" {val_s:.1f}s/validation -> training {args.steps} steps"
                    f" (repeat with --steps {args.steps} and no --time-limit to reproduce)")
        # Stop in time for a last validation and the save.
        limit_hit = args.time_limit and time.time() - t_start > args.time_limit - 1.5 * val_s - 2
        if step >= args.steps:
            limit_hit = False
        if step % args.val_every == 0 or step == args.steps or limit_hit:
            tv = time.time()
            dice, mean = validate(model, val, args.classes, device)
            val_s = time.time() - tv
            log(f"val step {step}: {fmt_dice(dice, names)} | mean {mean:.4f} ({val_s:.1f}s)")
            if mean > best[0]:
                best = (mean, copy.deepcopy({k: v.detach().cpu() for k, v in
                                             model.state_dict().items()}), step, dice)
        if limit_hit:
            log(f"time limit {args.time_limit}s reached after step {step}")
            stopped_early = True
            break
    return best, step


if __name__ == "__main__":
    main()
