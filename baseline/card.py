#!/usr/bin/env python3
"""Write a model card into an existing voxpipe weights file, without touching its tensors.

The card (model/card.go) records name, version, modality, training spacing and orientation
(RAS), normalisation, label names and colours, the training data, the intended use, and the
input domain seen in training: the spacing range and the normalised intensity quantiles of the
training volumes, computed here from --data (a voxpipe gen folder or an nnU-Net-style dataset
folder, read the way train.py reads it). train.py writes the same card for the models it
trains; this is for weights trained before cards existed, or to change the card's text.

    python3 baseline/card.py WEIGHTS --data /tmp/tr/train --name voxpipe-default \\
        --intended-use "..." [--out NEW]      # default: rewrite WEIGHTS in place
    python3 baseline/card.py WEIGHTS \\
        --codes 'lesion=SCT:49755003:Morphologically Altered Structure/SCT:52988006:Lesion'
                                              # only set labels' codes in the existing card
    python3 baseline/card.py WEIGHTS --show   # print the card JSON

A card rewritten from --data keeps the codes (category, type) of its labels of the same value
and name; --codes replaces those of the labels it names.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from voxpipe_twin import dataset as D  # noqa: E402
from voxpipe_twin import modelcard, safetensors_io  # noqa: E402


def parse_spacing(s):
    parts = [float(p) for p in s.lower().split("x")]
    if len(parts) != 3 or min(parts) <= 0:
        raise argparse.ArgumentTypeError(f"spacing {s!r}: want XxYxZ in mm")
    return parts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("weights", help="voxpipe .safetensors weights file")
    ap.add_argument("--show", action="store_true", help="print the file's card and exit")
    ap.add_argument("--data", help="the training folder: domain statistics and label names")
    ap.add_argument("--out", default="", help="file to write (default: WEIGHTS itself)")
    ap.add_argument("--name", default="",
                    help="model name (default: dataset.json's name, else the weights file's)")
    ap.add_argument("--model-version", default="1")
    ap.add_argument("--modality", default="", help="default: dataset.json's channel 0 name, or"
                    " synthetic T1-like MR phantoms for a voxpipe gen folder")
    ap.add_argument("--intended-use", default="Research use only; not for clinical use.")
    ap.add_argument("--colors", default="", help="as train.py --colors")
    ap.add_argument("--training-data", default="", help="description of the training data"
                    " (default: the folder and its dataset.json name and description)")
    ap.add_argument("--spacing", type=parse_spacing,
                    help="training spacing XxYxZ mm along R, A, S (default: the data's median)")
    ap.add_argument("--quantile-tolerance", type=float, default=modelcard.QUANTILE_TOLERANCE)
    ap.add_argument("--codes", default="", help="labels' coded category and type (DICOM SEG):"
                    " NAME=SCHEME:VALUE:MEANING/SCHEME:VALUE:MEANING, comma-separated, or a JSON"
                    " object; without --data, only these change in the file's card")
    args = ap.parse_args()

    with open(args.weights, "rb") as f:
        raw = f.read()
    if args.show:
        card = safetensors_io.decode(raw, args.weights)[1].get(modelcard.CARD_KEY)
        if card is None:
            raise SystemExit(f"{args.weights}: no model card")
        print(json.dumps(json.loads(card), indent=2))
        return
    try:
        old = json.loads(safetensors_io.decode(raw, args.weights)[1].get(modelcard.CARD_KEY, "null"))
    except safetensors_io.SafetensorsError as e:
        raise SystemExit(f"card.py: {e}") from e
    if not args.data:
        if not args.codes:
            ap.error("--data is required to write a card (or --codes to set codes in one)")
        set_codes_only(args, raw, old)
        return
    try:
        info = D.dataset_info(args.data)
        cases = D.load_cases(info, D.list_cases(info), len(info.label_names))
    except D.DatasetError as e:
        raise SystemExit(f"card.py: {e}") from e
    try:
        card = D.card_for(info, cases, args.spacing or D.median_spacing(cases), name=args.name,
                          fallback_name=os.path.splitext(os.path.basename(args.weights))[0],
                          version=args.model_version, modality=args.modality,
                          intended_use=args.intended_use, colors=args.colors,
                          training_data=args.training_data,
                          quantile_tolerance=args.quantile_tolerance)
        modelcard.keep_codes(card, old)
        modelcard.set_codes(card, modelcard.parse_codes(args.codes, info.label_names))
        out = modelcard.stamp(raw, card)
    except (modelcard.CardError, safetensors_io.SafetensorsError) as e:
        raise SystemExit(f"card.py: {args.weights}: {e}") from e
    path = write(args, out)
    print(f"wrote {path}: card of {len(cases)} volumes, spacing {card['spacing_mm']} mm RAS,"
          f" labels {', '.join(info.label_names)}")


def set_codes_only(args, raw, card):
    """--codes without --data: the file's card with the named labels' codes replaced, the rest
    of it (and the tensors) as it was."""
    if card is None:
        raise SystemExit(f"card.py: {args.weights}: no model card to set codes in (give --data)")
    try:
        names = [lab["name"] for lab in card["labels"]]
        modelcard.set_codes(card, modelcard.parse_codes(args.codes, names))
        out = modelcard.stamp(raw, card)
    except (modelcard.CardError, safetensors_io.SafetensorsError) as e:
        raise SystemExit(f"card.py: {args.weights}: {e}") from e
    path = write(args, out)
    coded = [f"{lab['value']} {lab['name']}" for lab in card["labels"]
             if any(f in lab for f in modelcard.CODE_FIELDS)]
    print(f"wrote {path}: codes on labels {', '.join(coded)}; the rest of the card unchanged")


def write(args, data):
    """Writes data to --out or the weights file itself (through a temporary file); its path."""
    path = args.out or args.weights
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return path


if __name__ == "__main__":
    main()
