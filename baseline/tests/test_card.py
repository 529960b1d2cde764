"""Tests of the model card (fields, domain, validation, stamping into a weights file):
python3 -m unittest discover baseline/tests

Needs numpy (skipped without it). The geometry tests are in test_geometry.py, the dataset
folders and training on them in test_dataset.py.
"""

import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError:  # pragma: no cover
    raise unittest.SkipTest("numpy is not installed")

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = os.path.dirname(HERE)
REPO = os.path.dirname(BASELINE)
sys.path.insert(0, BASELINE)
sys.path.insert(0, HERE)

from voxpipe_twin import modelcard, safetensors_io  # noqa: E402
import phantoms  # noqa: E402

LESION = {"category": {"scheme": "SCT", "value": "49755003", "meaning": "Morphologically Altered Structure"},
          "type": {"scheme": "SCT", "value": "52988006", "meaning": "Lesion"}}
LESION_SPEC = "lesion=SCT:49755003:Morphologically Altered Structure/SCT:52988006:Lesion"
TISSUE_SPEC = "tissue=SCT:91723000:Anatomical Structure/SCT:85756007:Tissue"


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



class CodesTest(unittest.TestCase):
    """The labels' coded category and type (model/codes.go), in the card and through card.py."""
    NAMES = CardTest.NAMES

    def card(self, **over):
        return CardTest.card(self, **over)

    def test_parse_codes(self):
        self.assertEqual(modelcard.parse_codes("", self.NAMES), {})
        tissue = {"category": {"scheme": "SCT", "value": "91723000", "meaning": "Anatomical Structure"},
                  "type": {"scheme": "SCT", "value": "85756007", "meaning": "Tissue"}}
        want = {3: LESION, 1: tissue}
        spec = LESION_SPEC + ", 1=SCT:91723000:Anatomical Structure/SCT:85756007:Tissue"
        self.assertEqual(modelcard.parse_codes(spec, self.NAMES), want)
        self.assertEqual(modelcard.parse_codes(json.dumps({"lesion": LESION}), self.NAMES), {3: LESION})
        # A meaning may hold colons.
        got = modelcard.parse_codes("fluid=X:1:a:b/X:2:c", self.NAMES)
        self.assertEqual(got[2]["category"]["meaning"], "a:b")
        for bad, msg in (("bone=SCT:1:a/SCT:2:b", "no label 'bone'"), ("7=SCT:1:a/SCT:2:b", "outside"),
                         ("lesion=SCT:1:a", "LABEL=SCHEME"), ("lesion=SCT:1/SCT:2:b", "category 'SCT:1'"),
                         ("lesion", "LABEL=SCHEME"), ('{"lesion": 1}', "category and/or type"),
                         ('{"lesion": {"kind": {}}}', "category and/or type"), ("{oops", "not JSON")):
            with self.assertRaisesRegex(modelcard.CardError, msg):
                modelcard.parse_codes(bad, self.NAMES)

    def test_card_with_codes(self):
        c = self.card(codes={3: LESION})
        self.assertEqual({k: c["labels"][3][k] for k in ("category", "type")}, LESION)
        self.assertEqual(set(c["labels"][2]), {"value", "name", "color"})
        # A card without codes (as before they existed) still validates.
        modelcard.validate(self.card(), 4)

    def test_code_validation(self):
        # The cases of model/codes_test.go's TestCardCodeRejects, with the same messages.
        def edit(field, key, v):
            code = json.loads(json.dumps(LESION))
            code[field][key] = v
            return {3: code}
        for codes, msg in ((edit("category", "scheme", ""), r"label 3 \(lesion\): category: scheme is empty"),
                           (edit("type", "value", "  "), r"label 3 \(lesion\): type: value is empty"),
                           (edit("type", "meaning", ""), "type: meaning is empty"),
                           (edit("category", "scheme", "S" * 17), "has 17 characters, DICOM allows 16"),
                           (edit("type", "value", "1" * 17), "type: value"),
                           (edit("type", "meaning", "m" * 65), "65 characters, DICOM allows 64"),
                           (edit("category", "meaning", "Altered\\Structure"), "no backslash"),
                           (edit("type", "meaning", "Lesion\n"), "no backslash or control"),
                           (edit("type", "value", "5298\t8006"), "no backslash or control"),
                           (edit("category", "scheme", "S\x1bCT"), "no backslash or control"),
                           (edit("type", "value", 52988006), "want a string"),
                           ({3: {"type": {"scheme": "SCT"}}}, "type: value is empty"),
                           ({3: {"type": dict(LESION["type"], designator="x")}}, "want an object")):
            with self.assertRaisesRegex(modelcard.CardError, msg):
                self.card(codes=codes)
        # The limits themselves are allowed, counted in characters.
        self.card(codes={3: {"type": {"scheme": "S" * 16, "value": "1" * 16, "meaning": "\u00e9" * 64}}})
        c = self.card()
        c["labels"][1]["extra"] = 1
        with self.assertRaisesRegex(modelcard.CardError, "label 1: fields"):
            modelcard.validate(c, 4)

    def test_keep_codes(self):
        old = self.card(codes={3: LESION, 2: {"type": LESION["type"]}})
        new = self.card(label_names=["background", "tissue", "csf", "lesion"])
        modelcard.keep_codes(new, old)
        self.assertEqual({k: new["labels"][3][k] for k in ("category", "type")}, LESION)
        self.assertNotIn("type", new["labels"][2])  # another name at value 2: not kept
        self.assertNotIn("category", new["labels"][1])
        modelcard.keep_codes(new, None)

    def weights(self, d, card):
        rng = np.random.default_rng(0)
        tensors = {"w": rng.normal(size=(4, 3)).astype(np.float32)}
        meta = {"format": "voxpipe-attn-gate", "classes": "4", "class_names": ",".join(self.NAMES),
                "description": "d"}
        path = os.path.join(d, "m.safetensors")
        with open(path, "wb") as f:
            f.write(modelcard.stamp(safetensors_io.encode(tensors, meta), card))
        return path

    def card_py(self, *args):
        res = subprocess.run([sys.executable, os.path.join(BASELINE, "card.py"), *args],
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        return res.stdout

    @staticmethod
    def payload(path):
        with open(path, "rb") as f:
            raw = f.read()
        return raw[8 + struct.unpack("<Q", raw[:8])[0]:]

    def test_card_py_sets_codes_only(self):
        with tempfile.TemporaryDirectory() as d:
            path = self.weights(d, self.card())
            before, data = modelcard.read_card(path), self.payload(path)
            out = self.card_py(path, "--codes", LESION_SPEC + "," + TISSUE_SPEC)
            self.assertIn("codes on labels 1 tissue, 3 lesion", out)
            after = modelcard.read_card(path)
            self.assertEqual(self.payload(path), data)
            self.assertEqual(after["labels"][3]["type"], LESION["type"])
            self.assertEqual(after["labels"][1]["type"]["meaning"], "Tissue")
            for lab in after["labels"]:
                for f in modelcard.CODE_FIELDS:
                    lab.pop(f, None)
            self.assertEqual(after, before)  # nothing else changed
            res = subprocess.run([sys.executable, os.path.join(BASELINE, "card.py"), path, "--codes",
                                  "lesion=SCT:1:a\\b/SCT:2:c"], capture_output=True, text=True, timeout=300)
            self.assertNotEqual(res.returncode, 0)
            self.assertIn("no backslash", res.stderr)

    def test_card_py_rewrite_keeps_codes(self):
        with tempfile.TemporaryDirectory() as d:
            data = os.path.join(d, "train")
            phantoms.write_set(data, 2, 16, 14, 10, 1)
            path = self.weights(d, self.card(codes={3: LESION}))
            self.card_py(path, "--data", data, "--name", "again")
            card = modelcard.read_card(path)
            self.assertEqual(card["name"], "again")
            self.assertEqual({k: card["labels"][3][k] for k in ("category", "type")}, LESION)
            self.assertEqual(set(card["labels"][1]), {"value", "name", "color"})
            # --codes with --data replaces the named labels' codes, keeps the others'.
            self.card_py(path, "--data", data, "--codes", TISSUE_SPEC)
            card = modelcard.read_card(path)
            self.assertEqual(card["labels"][3]["type"], LESION["type"])
            self.assertEqual(card["labels"][1]["type"]["value"], "85756007")


if __name__ == "__main__":
    unittest.main()

