"""The model card: what a model is, what it was trained on and where it may be trusted.

It is stored as JSON under the weights file's metadata key "card"; model/card.go (Card,
ParseCard, Validate) is the specification, and voxpipe rejects unknown fields. numpy only.
"""

import json
import re
import struct
import unicodedata

import numpy as np

from . import safetensors_io

CARD_KEY = "card"
NORMALIZATION = "zscore-volume"
QUANTILE_LEVELS = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)
QUANTILE_TOLERANCE = 0.5
# The intensity histogram of the domain check (segment.HistogramLow, HistogramWidth,
# HistogramBins): 48 bins of 0.25 standard deviations from -4, the ends open.
HISTOGRAM_LOW = -4.0
HISTOGRAM_WIDTH = 0.25
HISTOGRAM_BINS = 48
FOV_TOLERANCE = 1.5
# Training ranges are widened by this times their own width (scripts/domaincal card --widen).
WIDEN = 1.0
# The domain fields added after the first card: optional, each group absent or complete.
DOMAIN_LATER = ("fov_min_mm", "fov_max_mm", "fov_tolerance", "histogram_max",
                "histogram_max_excess", "confidence")

# Label colours by value when none are given: black background, then colours that stay distinct
# from each other and from grey MR intensities (Sasha Trubetskoy's list).
PALETTE = ("#000000", "#e6194b", "#3cb44b", "#4363d8", "#ffe119", "#f58231", "#911eb4",
           "#42d4f4", "#f032e6", "#bfef45", "#469990", "#dcbeff", "#9a6324", "#800000",
           "#aaffc3", "#808000", "#000075", "#fabed4", "#ffd8b1", "#fffac8")

_COLOR = re.compile(r"^#[0-9a-fA-F]{6}$")
_ORIENTATION = re.compile(r"^(?=.*[LR])(?=.*[AP])(?=.*[IS])[LRAPIS]{3}$")


class CardError(ValueError):
    """A card voxpipe would reject; the message says which field."""


def default_color(value):
    """PALETTE by value, then colours spread around the hue circle (golden angle)."""
    if value < len(PALETTE):
        return PALETTE[value]
    h = (value * 0.618033988749895) % 1.0
    r, g, b = (int(255 * min(1.0, max(0.0, abs((h * 6 + o) % 6 - 3) - 1))) for o in (0, 4, 2))
    return f"#{r:02x}{g:02x}{b:02x}"


def parse_colors(spec, names):
    """Colours by value from "--colors": comma-separated KEY=#rrggbb where KEY is a label value
    or name, or a plain list of #rrggbb by value; labels not named get default_color."""
    colors = [default_color(v) for v in range(len(names))]
    if not spec:
        return colors
    items = [s.strip() for s in spec.split(",") if s.strip()]
    for pos, item in enumerate(items):
        if "=" in item:
            key, color = (p.strip() for p in item.split("=", 1))
            if key.isdigit():
                v = int(key)
            elif key in names:
                v = names.index(key)
            else:
                raise CardError(f"--colors {item!r}: no label {key!r} (labels: {', '.join(names)})")
        else:
            v, color = pos, item
        if not 0 <= v < len(names):
            raise CardError(f"--colors {item!r}: label value {v} outside 0..{len(names) - 1}")
        if not _COLOR.match(color):
            raise CardError(f"--colors {item!r}: colour {color!r}, want #rrggbb")
        colors[v] = color.lower()
    return colors


# A label's keys: value, name and colour, and the optional codes of what it segments (DICOM SEG's
# Segmented Property Category and Type; model.Code).
LABEL_KEYS = ("value", "name", "color")
CODE_FIELDS = ("category", "type")
CODE_KEYS = ("scheme", "value", "meaning")
# The DICOM value representations a code's strings go to: SH (16 characters) for the scheme and
# the value, LO (64) for the meaning.
CODE_MAX = {"scheme": 16, "value": 16, "meaning": 64}


def _label_value(key, item, names, flag):
    if key.isdigit():
        v = int(key)
    elif key in names:
        v = names.index(key)
    else:
        raise CardError(f"{flag} {item!r}: no label {key!r} (labels: {', '.join(names)})")
    if not 0 <= v < len(names):
        raise CardError(f"{flag} {item!r}: label value {v} outside 0..{len(names) - 1}")
    return v


def parse_codes(spec, names):
    """Codes by label value from "--codes": {value: {"category": code, "type": code}}, a code
    being {"scheme", "value", "meaning"} (model.Code). spec is comma-separated
    KEY=SCHEME:VALUE:MEANING/SCHEME:VALUE:MEANING (category, then type; KEY a label value or
    name; a meaning may hold colons but no comma or slash), or a JSON object
    {KEY: {"category": {...}, "type": {...}}} for any meaning (either code may be left out).
    Labels not named get none."""
    codes = {}
    spec = (spec or "").strip()
    if not spec:
        return codes
    if spec.startswith("{"):
        try:
            obj = json.loads(spec)
        except ValueError as e:
            raise CardError(f"--codes: not JSON: {e}") from e
        for key, entry in obj.items():
            v = _label_value(str(key), key, names, "--codes")
            if not isinstance(entry, dict) or not entry or not set(entry) <= set(CODE_FIELDS):
                raise CardError(f"--codes {key!r}: want an object with category and/or type")
            codes[v] = {f: entry[f] for f in CODE_FIELDS if f in entry}
        return codes
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        key, sep, rest = (p.strip() for p in item.partition("="))
        parts = rest.split("/")
        if not sep or len(parts) != 2:
            raise CardError(f"--codes {item!r}: want LABEL=SCHEME:VALUE:MEANING/SCHEME:VALUE:MEANING")
        entry = {}
        for field, part in zip(CODE_FIELDS, parts):
            c = [p.strip() for p in part.split(":", 2)]
            if len(c) != 3:
                raise CardError(f"--codes {item!r}: {field} {part!r}, want SCHEME:VALUE:MEANING")
            entry[field] = dict(zip(CODE_KEYS, c))
        codes[_label_value(key, item, names, "--codes")] = entry
    return codes


def set_codes(card, codes):
    """Puts codes (parse_codes) on the card's labels, replacing theirs; returns the card."""
    for lab in card["labels"]:
        lab.update(codes.get(lab["value"], {}))
    return card


def keep_codes(card, old):
    """Copies the codes of old's labels (a card dict, or None) onto card's labels of the same
    value and name that have none: a card rewritten keeps the codes it had."""
    was = {(lab.get("value"), lab.get("name")): lab for lab in (old or {}).get("labels", [])}
    for lab in card["labels"]:
        prev = was.get((lab["value"], lab["name"]), {})
        for f in CODE_FIELDS:
            if f not in lab and f in prev:
                lab[f] = dict(prev[f])
    return card


def histogram(x):
    """The domain check's histogram of normalised intensities x (segment.VolumeIntensity's):
    the fraction of the finite values in each of HISTOGRAM_BINS bins, values beyond the ends in
    the first and last."""
    x = np.asarray(x, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    b = np.clip(np.floor((x - HISTOGRAM_LOW) / HISTOGRAM_WIDTH), 0, HISTOGRAM_BINS - 1).astype(np.int64)
    return np.bincount(b, minlength=HISTOGRAM_BINS) / max(len(x), 1)


def histogram_excess(h, envelope):
    """segment.HistogramExcess: the share of histogram h above envelope."""
    return float(np.maximum(0.0, np.asarray(h) - np.asarray(envelope)).sum())


def _round(v, unit):
    return float(f"{round(v / unit) * unit:.{max(0, int(np.ceil(-np.log10(unit))))}f}")


def domain(spacings, quantiles, tolerance=QUANTILE_TOLERANCE, fovs=None, histograms=None,
           fov_tolerance=FOV_TOLERANCE, widen=WIDEN, confidence=None):
    """The card's domain from per-volume spacings (mm, x y z) and per-volume quantiles of the
    normalised intensity at QUANTILE_LEVELS: per-axis spacing range, per-level min and max.
    With fovs (per-volume field of view, mm, x y z): their range and fov_tolerance. With
    histograms (per-volume histogram()) of two volumes or more: their envelope (per-bin max) and
    the largest excess of a volume over the envelope of the others, times 1 + widen
    (scripts/domaincal card's rule).
    confidence (a dict of segment.ConfidenceDomain's fields, from a run of the model) is copied
    in as it is."""
    s = np.asarray(spacings, dtype=np.float64).reshape(-1, 3)
    q = np.asarray(quantiles, dtype=np.float64).reshape(-1, len(QUANTILE_LEVELS))
    if len(s) == 0 or len(q) == 0:
        raise CardError("domain: no training volumes")
    d = {
        "spacing_min_mm": [float(v) for v in s.min(axis=0)],
        "spacing_max_mm": [float(v) for v in s.max(axis=0)],
        "quantile_levels": list(QUANTILE_LEVELS),
        "quantile_min": [float(v) for v in q.min(axis=0)],
        "quantile_max": [float(v) for v in q.max(axis=0)],
        "quantile_tolerance": float(tolerance),
    }
    if fovs is not None:
        f = np.asarray(fovs, dtype=np.float64).reshape(-1, 3)
        d["fov_min_mm"] = [float(v) for v in f.min(axis=0)]
        d["fov_max_mm"] = [float(v) for v in f.max(axis=0)]
        d["fov_tolerance"] = float(fov_tolerance)
    h = None if histograms is None else np.asarray(histograms, dtype=np.float64).reshape(-1, HISTOGRAM_BINS)
    if h is not None and len(h) > 1:  # one training volume has no others to calibrate against
        loo = max(histogram_excess(h[i], np.delete(h, i, axis=0).max(axis=0)) for i in range(len(h)))
        d["histogram_max"] = [_round(float(v), 1e-6) for v in h.max(axis=0)]
        d["histogram_max_excess"] = max(_round(loo * (1 + widen), 1e-3), 1e-3)
    if confidence is not None:
        d["confidence"] = dict(confidence)
    return d


def make_card(*, name, version, modality, spacing_mm, orientation, label_names, colors,
              training_data, intended_use, domain, codes=None):
    """A card dict with exactly segment.Card's fields, checked with validate. codes: by label
    value, as parse_codes returns them."""
    card = {
        "name": name,
        "version": version,
        "modality": modality,
        "spacing_mm": [float(v) for v in spacing_mm],
        "orientation": orientation,
        "normalization": NORMALIZATION,
        "labels": [{"value": v, "name": n, "color": c}
                   for v, (n, c) in enumerate(zip(label_names, colors))],
        "training_data": training_data,
        "intended_use": intended_use,
        "domain": domain,
    }
    set_codes(card, codes or {})
    validate(card, len(label_names))
    return card


def validate(card, classes):
    """The checks of segment.Card.Validate, so a bad card fails when it is written, not when
    voxpipe loads it."""
    def bad(msg):
        raise CardError(f"card: {msg}")

    want = {"name", "version", "modality", "spacing_mm", "orientation", "normalization", "labels",
            "training_data", "intended_use", "domain"}
    if set(card) != want:
        bad(f"fields {sorted(card)}, want {sorted(want)}")
    if not card["name"] or not card["version"]:
        bad("name and version are required")
    for i, s in enumerate(card["spacing_mm"]):
        if not (np.isfinite(s) and s > 0):
            bad(f"spacing_mm[{i}] = {s}: want a positive number of mm")
    if len(card["spacing_mm"]) != 3 or not _ORIENTATION.match(card["orientation"]):
        bad(f"orientation {card['orientation']!r}: want three axis codes such as RAS")
    if card["normalization"] != NORMALIZATION:
        bad(f"normalization {card['normalization']!r}, want {NORMALIZATION!r}")
    labels = card["labels"]
    if len(labels) != classes:
        bad(f"{len(labels)} labels for a model of {classes} classes")
    for i, lab in enumerate(labels):
        if not set(LABEL_KEYS) <= set(lab) <= set(LABEL_KEYS + CODE_FIELDS):
            bad(f"label {i}: fields {sorted(lab)}, want {list(LABEL_KEYS)} and any of {list(CODE_FIELDS)}")
        if lab["value"] != i or not lab["name"].strip() or not _COLOR.match(lab["color"]):
            bad(f"label {i}: {lab}: want value {i}, a name and a #rrggbb colour")
        for f in CODE_FIELDS:
            if f in lab:
                err = _code_error(lab[f])
                if err:
                    bad(f"label {i} ({lab['name']}): {f}: {err}")
    d = card["domain"]
    dkeys = {"spacing_min_mm", "spacing_max_mm", "quantile_levels", "quantile_min",
             "quantile_max", "quantile_tolerance"}
    if not dkeys <= set(d) <= dkeys | set(DOMAIN_LATER):
        bad(f"domain fields {sorted(d)}, want {sorted(dkeys)} and any of {list(DOMAIN_LATER)}")
    for i in range(3):
        lo, hi = d["spacing_min_mm"][i], d["spacing_max_mm"][i]
        if not (lo > 0 and np.isfinite(hi) and hi >= lo):
            bad(f"domain spacing range on axis {i} is [{lo}, {hi}]")
    if list(d["quantile_levels"]) != list(QUANTILE_LEVELS):
        bad(f"domain quantile_levels {d['quantile_levels']}, want {list(QUANTILE_LEVELS)}")
    qmin, qmax = d["quantile_min"], d["quantile_max"]
    if len(qmin) != len(QUANTILE_LEVELS) or len(qmax) != len(QUANTILE_LEVELS):
        bad(f"domain quantile_min/max need {len(QUANTILE_LEVELS)} values each")
    for i, (lo, hi) in enumerate(zip(qmin, qmax)):
        if not (np.isfinite(lo) and np.isfinite(hi) and hi >= lo):
            bad(f"domain quantile range at level {QUANTILE_LEVELS[i]} is [{lo}, {hi}]")
        if i and (lo < qmin[i - 1] or hi < qmax[i - 1]):
            bad(f"domain quantiles decrease at level {QUANTILE_LEVELS[i]}")
    tol = d["quantile_tolerance"]
    if not (np.isfinite(tol) and tol >= 0):
        bad(f"domain quantile_tolerance {tol}: want >= 0")
    _validate_later(d, classes, bad)


def _code_error(code):
    """model.Code.validate: what is wrong with a label's code, or None."""
    if not isinstance(code, dict) or set(code) - set(CODE_KEYS):
        return f"{code!r}: want an object of {', '.join(CODE_KEYS)}"
    for k in CODE_KEYS:
        v = code.get(k, "")
        if not isinstance(v, str):
            return f"{k} {v!r}: want a string"
        if not v.strip():
            return f"{k} is empty"
        if len(v) > CODE_MAX[k]:
            return f"{k} {v!r} has {len(v)} characters, DICOM allows {CODE_MAX[k]}"
        bad_ch = [c for c in v if c == "\\" or unicodedata.category(c) == "Cc"]
        if bad_ch:
            return f"{k} {v!r} holds {bad_ch[0]!r}: no backslash or control characters"
    return None


def _validate_later(d, classes, bad):
    """segment.Domain.validateLater: the later fields, each group absent or complete."""
    fov = [k for k in ("fov_min_mm", "fov_max_mm", "fov_tolerance") if k in d]
    if fov:
        if len(fov) != 3 or len(d["fov_min_mm"]) != 3 or len(d["fov_max_mm"]) != 3:
            bad("domain fov_min_mm and fov_max_mm need 3 values each, and fov_tolerance")
        for i in range(3):
            lo, hi = d["fov_min_mm"][i], d["fov_max_mm"][i]
            if not (lo > 0 and np.isfinite(hi) and hi >= lo):
                bad(f"domain field of view on axis {i} is [{lo}, {hi}]")
        if not (np.isfinite(d["fov_tolerance"]) and d["fov_tolerance"] >= 1):
            bad(f"domain fov_tolerance {d['fov_tolerance']}: want a factor >= 1")
    hist = [k for k in ("histogram_max", "histogram_max_excess") if k in d]
    if hist:
        if len(hist) != 2 or len(d["histogram_max"]) != HISTOGRAM_BINS:
            bad(f"domain histogram_max needs {HISTOGRAM_BINS} bins, and histogram_max_excess")
        h = np.asarray(d["histogram_max"], dtype=np.float64)
        if not np.all((h >= 0) & (h <= 1)):
            bad("domain histogram_max holds values outside [0, 1]: want fractions")
        if h.sum() < 1 - 1e-4:  # an envelope's bins, rounded, may lose a little
            bad(f"domain histogram_max sums to {h.sum()}: an envelope of histograms sums to 1 or more")
        if not 0 < d["histogram_max_excess"] <= 1:
            bad(f"domain histogram_max_excess {d['histogram_max_excess']}: want a fraction > 0")
    k = d.get("confidence")
    if k is not None:
        want = {"mean_margin_min", "mean_margin_max", "low_margin_max", "label_fraction_min",
                "label_fraction_max"}
        if set(k) != want:
            bad(f"domain confidence fields {sorted(k)}, want {sorted(want)}")
        if not (0 <= k["mean_margin_min"] <= k["mean_margin_max"] and np.isfinite(k["mean_margin_max"])):
            bad(f"domain confidence mean margin range [{k['mean_margin_min']}, {k['mean_margin_max']}]")
        if not 0 <= k["low_margin_max"] <= 1:
            bad(f"domain confidence low_margin_max {k['low_margin_max']}: want a fraction")
        lo, hi = k["label_fraction_min"], k["label_fraction_max"]
        if len(lo) != classes or len(hi) != classes:
            bad(f"domain confidence label_fraction_min/max need {classes} values each (one a label)")
        for i, (a, b) in enumerate(zip(lo, hi)):
            if not 0 <= a <= b <= 1:
                bad(f"domain confidence label {i} fraction range [{a}, {b}]")


def encode(card):
    """The metadata value: compact JSON."""
    return json.dumps(card, separators=(",", ":"), ensure_ascii=False)


def stamp(weights, card):
    """The bytes of the safetensors file `weights` (bytes) with the card in its metadata. The
    tensor data bytes are copied verbatim: only the JSON header changes, and its tensor entries
    (dtypes, shapes, data_offsets) are kept as they are."""
    _, meta = safetensors_io.decode(weights)  # validates the layout
    n = struct.unpack("<Q", weights[:8])[0]
    header = json.loads(weights[8:8 + n].decode("utf-8"))
    names = [s.strip() for s in meta.get("class_names", "").split(",")]
    validate(card, int(meta.get("classes", len(names))))
    if [lab["name"] for lab in card["labels"]] != names:
        raise CardError(f"card label names {[lab['name'] for lab in card['labels']]} differ from"
                        f" the weights file's class_names {names}")
    header["__metadata__"] = dict(meta, **{CARD_KEY: encode(card)})
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)
    return struct.pack("<Q", len(hjson)) + hjson + weights[8 + n:]


def read_card(path):
    """The card dict of a weights file, or None when it has none."""
    _, meta = safetensors_io.read(path)
    raw = meta.get(CARD_KEY)
    return None if raw is None else json.loads(raw)
