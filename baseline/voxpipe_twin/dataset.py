"""Labelled training data: the folders `voxpipe gen` writes and nnU-Net-style dataset folders.

Layouts (detected by dataset_info):
- voxpipe gen: DIR/volumes/<name>.nii[.gz] images, DIR/truth/<name>.nii[.gz] labels (0
  background, 1 tissue, 2 fluid, 3 lesion).
- nnU-Net (v1 or v2 dataset.json): DIR/dataset.json, DIR/imagesTr/<case>_0000<ending>,
  DIR/labelsTr/<case><ending>, <ending> being dataset.json's "file_ending" (v2; ".nii.gz"
  when absent, as in v1). Single-channel datasets only.

Every case is brought to RAS by permutations and flips only (geometry.to_canonical, from each
file's affine), so a model trains on one axis order whatever order the files were stored in.
"""

import dataclasses
import glob
import json
import os

import numpy as np

from . import geometry, modelcard, nifti
from .normalize import effective_sigma, normalize, volume_stats

GEN_NAMES = ("background", "tissue", "fluid", "lesion")
ENDINGS = (".nii.gz", ".nii")


class DatasetError(ValueError):
    """A training folder or file voxpipe cannot train on; the message says what to fix."""


@dataclasses.dataclass
class DatasetInfo:
    directory: str
    layout: str                 # "gen" or "nnunet"
    label_names: list           # by value, from 0
    channel_name: str = ""      # dataset.json's name of channel 0 (nnU-Net layout)
    name: str = ""              # dataset.json "name"
    description: str = ""       # dataset.json "description" / "reference"
    file_ending: str = ".nii.gz"


def _label_names(labels, path):
    """Names by value from dataset.json "labels": {"background": 0, ...} (v2) or
    {"0": "background", ...} (v1)."""
    if not isinstance(labels, dict) or not labels:
        raise DatasetError(f"{path}: \"labels\" must be a non-empty object")
    by_value = {}
    if all(isinstance(v, int) and not isinstance(v, bool) for v in labels.values()):
        pairs = [(v, k) for k, v in labels.items()]  # v2
    elif all(isinstance(v, str) for v in labels.values()):
        try:
            pairs = [(int(k), v) for k, v in labels.items()]  # v1
        except ValueError as e:
            raise DatasetError(f"{path}: \"labels\" keys must be label values (v1) when its"
                               f" values are names: {e}") from e
    else:
        raise DatasetError(f"{path}: \"labels\" must map names to integer values (nnU-Net v2) or"
                           " values to names (v1); region-based labels (lists) are not supported")
    for v, name in pairs:
        name = str(name).strip()
        if v in by_value:
            raise DatasetError(f"{path}: label value {v} is listed twice")
        if not name or "," in name:
            raise DatasetError(f"{path}: label {v} name {name!r}: want a non-empty name without"
                               " commas (the weights file lists class names comma-separated)")
        by_value[v] = name
    if sorted(by_value) != list(range(len(by_value))):
        raise DatasetError(f"{path}: label values {sorted(by_value)}: want 0, 1, ... N-1"
                           " (0 the background)")
    if len(by_value) < 2:
        raise DatasetError(f"{path}: {len(by_value)} label: want the background and at least one class")
    return [by_value[v] for v in range(len(by_value))]


def dataset_info(directory):
    """The layout and label names of a training folder."""
    dj = os.path.join(directory, "dataset.json")
    if os.path.exists(dj):
        try:
            with open(dj, encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError) as e:
            raise DatasetError(f"{dj}: {e}") from e
        if not isinstance(meta, dict):
            raise DatasetError(f"{dj}: not a JSON object")
        if "labels" not in meta:
            raise DatasetError(f"{dj}: no \"labels\"")
        names = _label_names(meta["labels"], dj)
        channels = meta.get("channel_names", meta.get("modality"))
        if channels is None:
            raise DatasetError(f"{dj}: no \"channel_names\" (v2) or \"modality\" (v1)")
        if not isinstance(channels, dict) or len(channels) != 1 or \
                str(next(iter(channels))) != "0":
            raise DatasetError(f"{dj}: channels {channels!r}: voxpipe's network reads one"
                               " channel; only single-channel datasets ({\"0\": ...}) are supported")
        ending = meta.get("file_ending", ".nii.gz")
        if ending not in ENDINGS:
            raise DatasetError(f"{dj}: file_ending {ending!r}: voxpipe reads NIfTI only"
                               f" ({' or '.join(ENDINGS)})")
        for sub in ("imagesTr", "labelsTr"):
            if not os.path.isdir(os.path.join(directory, sub)):
                raise DatasetError(f"{directory}: dataset.json but no {sub}/ folder")
        desc = meta.get("description") or ""
        if meta.get("reference"):
            desc = f"{desc} ({meta['reference']})" if desc else str(meta["reference"])
        return DatasetInfo(directory, "nnunet", names, str(channels["0"]), str(meta.get("name", "")),
                           str(desc), ending)
    if os.path.isdir(os.path.join(directory, "volumes")) and \
            os.path.isdir(os.path.join(directory, "truth")):
        return DatasetInfo(directory, "gen", list(GEN_NAMES))
    raise DatasetError(f"{directory}: neither an nnU-Net dataset (dataset.json, imagesTr/,"
                       " labelsTr/) nor a voxpipe gen folder (volumes/, truth/)")


def list_cases(info):
    """[(case name, image path, label path)], sorted by name."""
    d = info.directory
    cases = []
    if info.layout == "gen":
        vols = sorted(glob.glob(os.path.join(d, "volumes", "*.nii.gz")) +
                      glob.glob(os.path.join(d, "volumes", "*.nii")))
        for v in vols:
            base = os.path.basename(v)
            t = os.path.join(d, "truth", base)
            if not os.path.exists(t):
                raise DatasetError(f"{v}: no truth file {t}")
            cases.append((base[: -len(".nii.gz")] if base.endswith(".gz") else base[:-4], v, t))
        if not cases:
            raise DatasetError(f"{d}: no volumes/*.nii.gz")
        return cases
    end = info.file_ending
    labels = sorted(glob.glob(os.path.join(d, "labelsTr", "*" + end)))
    for lab in labels:
        case = os.path.basename(lab)[: -len(end)]
        img = os.path.join(d, "imagesTr", f"{case}_0000{end}")
        if not os.path.exists(img):
            raise DatasetError(f"{lab}: no image {img} (nnU-Net names images <case>_0000{end})")
        extra = os.path.join(d, "imagesTr", f"{case}_0001{end}")
        if os.path.exists(extra):
            raise DatasetError(f"{extra}: a second channel; only single-channel datasets are"
                               " supported")
        cases.append((case, img, lab))
    if not cases:
        raise DatasetError(f"{d}: no labelsTr/*{end}")
    return cases


@dataclasses.dataclass
class Case:
    """One labelled volume in RAS voxel order (arrays (nS, nA, nR))."""

    name: str
    header: nifti.Header      # the image's header, as read
    stored: np.ndarray        # stored image values, reoriented
    labels: np.ndarray        # uint8, reoriented
    spacing: tuple            # mm along x (R), y (A), z (S)
    source_orientation: str   # axis codes of the image file, e.g. "LPS"

    def scaled(self):
        """v = stored*scl_slope + scl_inter (float64), with the scl_slope rule."""
        return nifti.scaled_values(self.header, self.stored)


def load_case(name, image_path, label_path, classes):
    """Reads an image/label pair, checks it, and reorients both to RAS."""
    try:
        h, stored = nifti.read_nifti(image_path)
        lh, lab = nifti.read_nifti(label_path)
    except nifti.NiftiError as e:
        raise DatasetError(str(e)) from e
    if lab.dtype.kind == "f":
        if not np.all(np.isfinite(lab)) or np.any(lab != np.round(lab)):
            raise DatasetError(f"{label_path}: label values must be integers")
    lab = lab.astype(np.int64)
    lo, hi = int(lab.min()), int(lab.max())
    if lo < 0 or hi >= classes:
        raise DatasetError(f"{label_path}: label values {lo}..{hi}, outside 0..{classes - 1}"
                           " (the labels of dataset.json)")
    try:
        aff, laff = h.affine(), lh.affine()
        ornt, lornt = geometry.io_orientation(aff), geometry.io_orientation(laff)
    except geometry.GeometryError as e:
        raise DatasetError(f"{image_path} or its label: {e}") from e
    stored_c = geometry.to_canonical(stored, ornt)
    lab_c = geometry.to_canonical(lab.astype(np.uint8), lornt)
    caff = geometry.canonical_affine(aff, ornt, stored.shape)
    claff = geometry.canonical_affine(laff, lornt, lab.shape)
    if lab_c.shape != stored_c.shape:
        raise DatasetError(f"{label_path}: dims (x,y,z) {lab.shape[::-1]} ({geometry.axcodes(lornt)})"
                           f" do not match the image's {stored.shape[::-1]}"
                           f" ({geometry.axcodes(ornt)}, {image_path})")
    sizes = geometry.voxel_sizes(caff)
    if not np.allclose(caff, claff, rtol=1e-4, atol=1e-3 * float(sizes.min())):
        raise DatasetError(f"{label_path}: its geometry (affine {np.round(laff, 4).tolist()})"
                           f" does not match the image's ({np.round(aff, 4).tolist()}, {image_path})")
    spacing = tuple(float(v) * h.mm_per_unit() for v in sizes)
    return Case(name, h, stored_c, lab_c, spacing, geometry.axcodes(ornt))


def load_cases(info, cases, classes):
    return [load_case(n, i, lab, classes) for n, i, lab in cases]


def median_spacing(cases):
    return tuple(float(v) for v in np.median(np.array([c.spacing for c in cases]), axis=0))


def prepare(case, target, tolerance=0.10):
    """(x float32 network input, labels uint8, resampled?) for a case: when its spacing differs
    from target by more than tolerance on any axis, the scaled image is resampled trilinearly
    and the labels by nearest neighbour to target first; then the per-volume z-score (step 0 of
    the network, as voxpipe applies it)."""
    if target is not None and geometry.needs_resampling(case.spacing, target, tolerance):
        v = geometry.resample(case.scaled(), case.spacing, target, "linear")
        lab = geometry.resample(case.labels, case.spacing, target, "nearest")
        return normalize(v), lab, True
    slope, inter = case.header.scaling()
    return normalize(case.stored, slope, inter), case.labels, False


def normalized_quantiles(case, levels):
    """Quantiles at levels of the case's normalised intensity x = (v - mu)/sigma (float64, sigma
    after the floor rule; numpy's default linear method over all voxels), on the volume as
    stored: what voxpipe compares a new volume with."""
    v = case.scaled()
    mu, sigma = volume_stats(v)
    sigma = effective_sigma(mu, sigma)
    return np.quantile((v - mu) / sigma, levels)


def normalized_histogram(case):
    """modelcard.histogram of the case's normalised intensity, as normalized_quantiles: every
    voxel (segment.VolumeIntensity samples about a million of them: every voxel of volumes up to
    that size)."""
    v = case.scaled()
    mu, sigma = volume_stats(v)
    return modelcard.histogram((v - mu) / effective_sigma(mu, sigma))


def field_of_view(case):
    """The case's field of view in mm along x, y, z (RAS): voxels times spacing."""
    nz, ny, nx = case.stored.shape
    return tuple(n * s for n, s in zip((nx, ny, nz), case.spacing))


def card_for(info, cases, spacing, *, name, fallback_name, version, modality, intended_use,
             colors="", training_data="", data_desc="", codes="",
             quantile_tolerance=modelcard.QUANTILE_TOLERANCE):
    """The model card (modelcard.make_card) of a model trained on cases (RAS) at spacing, the
    domain computed from them: spacing, quantiles, field of view and the histogram envelope (the
    model's confidence needs the model: scripts/domaincal card adds it). Empty texts get defaults: the name from dataset.json, else
    fallback_name; the modality from dataset.json's channel (a voxpipe gen folder: its
    phantoms); the training data from the folder, dataset.json and data_desc. codes: the
    labels' coded category and type (modelcard.parse_codes's spec)."""
    quantiles = [normalized_quantiles(c, modelcard.QUANTILE_LEVELS) for c in cases]
    if not modality:
        modality = info.channel_name or (
            "synthetic T1-like MR phantoms (voxpipe gen)" if info.layout == "gen" else "")
    if not modality:
        raise modelcard.CardError("give the modality (--modality): dataset.json names no channel")
    if not training_data:
        training_data = f"{len(cases)} labelled volumes from {os.path.abspath(info.directory)}"
        if info.name or info.description:
            training_data += f" (dataset {info.name}: {info.description})"
        if data_desc:
            training_data += f"; {data_desc}"
    return modelcard.make_card(
        name=name or info.name or fallback_name, version=version, modality=modality,
        spacing_mm=spacing, orientation="RAS", label_names=info.label_names,
        colors=modelcard.parse_colors(colors, info.label_names), training_data=training_data,
        intended_use=intended_use, codes=modelcard.parse_codes(codes, info.label_names),
        domain=modelcard.domain([c.spacing for c in cases], quantiles, quantile_tolerance,
                                fovs=[field_of_view(c) for c in cases],
                                histograms=[normalized_histogram(c) for c in cases]))
