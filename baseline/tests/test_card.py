"""Tests of the model card (fields, domain, validation, stamping into a weights file):
python3 -m unittest discover baseline/tests

Needs numpy (skipped without it). The geometry tests are in test_geometry.py, the dataset
folders and training on them in test_dataset.py.
"""

import json
import os
import struct
import sys
import unittest

try:
    import numpy as np
except ImportError:  # pragma: no cover
    raise unittest.SkipTest("numpy is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = os.path.dirname(HERE)
REPO = os.path.dirname(BASELINE)
sys.path.insert(0, BASELINE)

from voxpipe_twin import modelcard, safetensors_io  # noqa: E402


class CardTest(unittest.TestCase):
    NAMES = ["background", "tissue", "fluid", "lesion"]

    def card(self, **over):
        dom = modelcard.domain([(2.5, 2.5, 3.0), (2.0, 2.6, 3.5)],
                               [np.linspace(-1, 2, 7), np.linspace(-0.8, 2.4, 7)])
        kw = dict(name="m", version="1", modality="MR", spacing_mm=(2.5, 2.5, 3.0),
                  orientation="RAS", label_names=self.NAMES,
                  colors=modelcard.parse_colors("", self.NAMES), training_data="t",
                  intended_use="u", domain=dom)
        kw.update(over)
        return modelcard.make_card(**kw)

    def test_domain_and_fields(self):
        c = self.card()
        self.assertEqual(set(c), {"name", "version", "modality", "spacing_mm", "orientation",
                                  "normalization", "labels", "training_data", "intended_use",
                                  "domain"})
        d = c["domain"]
        self.assertEqual(d["spacing_min_mm"], [2.0, 2.5, 3.0])
        self.assertEqual(d["spacing_max_mm"], [2.5, 2.6, 3.5])
        self.assertEqual(d["quantile_levels"], [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99])
        self.assertEqual(d["quantile_min"][0], -1.0)
        self.assertEqual(d["quantile_max"][-1], 2.4)
        self.assertEqual(d["quantile_tolerance"], 0.5)
        self.assertEqual(c["normalization"], "zscore-volume")
        self.assertEqual([lab["value"] for lab in c["labels"]], [0, 1, 2, 3])

    def test_later_domain_fields(self):
        # The histogram bins of segment.VolumeIntensity (its TestHistogram's case).
        np.testing.assert_array_equal(
            modelcard.histogram([0, 0.1, -100, 100, np.nan])[[16, 0, 47]], [0.5, 0.25, 0.25])
        h = np.zeros((3, modelcard.HISTOGRAM_BINS))
        h[:, 12] = [0.75, 0.7, 0.8]
        h[:, 20] = [0.25, 0.3, 0.2]
        d = modelcard.domain([(2.5, 2.5, 3)] * 3, [np.linspace(-1, 2, 7)] * 3,
                             fovs=[(240, 240, 192), (200, 240, 192), (240, 240, 216)], histograms=h)
        self.assertEqual(d["fov_min_mm"], [200, 240, 192])
        self.assertEqual(d["fov_max_mm"], [240, 240, 216])
        self.assertEqual(d["fov_tolerance"], 1.5)
        self.assertEqual(d["histogram_max"][12], 0.8)
        self.assertEqual(d["histogram_max"][20], 0.3)
        # Leave one out: the third volume is 0.05 above the others' 0.75 at bin 12, the second
        # 0.05 above 0.25 at bin 20; widened by 1: 0.1.
        self.assertEqual(d["histogram_max_excess"], 0.1)
        conf = {"mean_margin_min": 8, "mean_margin_max": 11, "low_margin_max": 0.02,
                "label_fraction_min": [0.5, 0.1, 0, 0], "label_fraction_max": [0.9, 0.4, 0.1, 0.1]}
        c = self.card(domain=dict(d, confidence=conf))
        self.assertEqual(c["domain"]["confidence"], conf)
        for edit, msg in ((lambda d: d.pop("fov_tolerance"), "fov_min_mm"),
                          (lambda d: d["histogram_max"].pop(), "48 bins"),
                          (lambda d: d.update(histogram_max=[0.0] * 48), "sums to"),
                          (lambda d: d.update(histogram_max_excess=0), "histogram_max_excess"),
                          (lambda d: d["confidence"]["label_fraction_max"].pop(), "one a label"),
                          (lambda d: d["confidence"].update(mean_margin_max=1), "mean margin"),
                          (lambda d: d.update(extra=1), "domain fields")):
            bad = json.loads(json.dumps(dict(d, confidence=conf)))
            edit(bad)
            with self.assertRaisesRegex(modelcard.CardError, msg):
                self.card(domain=bad)

    def test_embedded_model_card_validates(self):
        # The default model's card, its later fields written by scripts/domaincal (Go): what
        # segment.Card.Validate accepts, this validate accepts.
        card = modelcard.read_card(os.path.join(REPO, "fixtures", "model", "voxpipe-default.safetensors"))
        modelcard.validate(card, 4)
        self.assertEqual(len(card["domain"]["histogram_max"]), modelcard.HISTOGRAM_BINS)
        self.assertIn("confidence", card["domain"])

    def test_validation(self):
        for over, msg in (({"orientation": "RAR"}, "orientation"), ({"name": ""}, "name"),
                          ({"spacing_mm": (0, 1, 1)}, "spacing_mm"),
                          ({"colors": ["#000", "#fff", "#111111", "#222222"]}, "colour"),
                          ({"domain": modelcard.domain([(1, 1, 1)], [np.linspace(2, -1, 7)])},
                           "decrease")):
            with self.assertRaisesRegex(modelcard.CardError, msg):
                self.card(**over)

    def test_colors(self):
        c = modelcard.parse_colors("lesion=#FF0000, 1=#00ff00", self.NAMES)
        self.assertEqual(c, ["#000000", "#00ff00", modelcard.PALETTE[2], "#ff0000"])
        self.assertEqual(modelcard.parse_colors("#010101,#020202", self.NAMES)[:2],
                         ["#010101", "#020202"])
        many = [modelcard.default_color(v) for v in range(40)]
        self.assertEqual(len(set(many)), 40)
        with self.assertRaisesRegex(modelcard.CardError, "no label 'bone'"):
            modelcard.parse_colors("bone=#ffffff", self.NAMES)
        with self.assertRaisesRegex(modelcard.CardError, "#rrggbb"):
            modelcard.parse_colors("tissue=red", self.NAMES)

    def test_stamp_keeps_the_tensor_bytes(self):
        rng = np.random.default_rng(0)
        tensors = {"b": rng.normal(size=(3,)).astype(np.float32),
                   "a": rng.normal(size=(2, 5)).astype(np.float32)}
        meta = {"format": "voxpipe-attn-gate", "classes": "4", "class_names": ",".join(self.NAMES),
                "description": "d"}
        raw = safetensors_io.encode(tensors, meta)
        out = modelcard.stamp(raw, self.card())
        n0, n1 = struct.unpack("<Q", raw[:8])[0], struct.unpack("<Q", out[:8])[0]
        self.assertEqual(out[8 + n1:], raw[8 + n0:])
        t2, m2 = safetensors_io.decode(out)
        for k in tensors:
            np.testing.assert_array_equal(t2[k], tensors[k])
        self.assertEqual({k: v for k, v in m2.items() if k != "card"}, meta)
        self.assertEqual(json.loads(m2["card"]), self.card())
        # restamping replaces the card
        again = modelcard.stamp(out, self.card(name="other"))
        self.assertEqual(json.loads(safetensors_io.decode(again)[1]["card"])["name"], "other")
        with self.assertRaisesRegex(modelcard.CardError, "class_names"):
            modelcard.stamp(raw, self.card(label_names=["bg", "b", "c", "d"]))


if __name__ == "__main__":
    unittest.main()

