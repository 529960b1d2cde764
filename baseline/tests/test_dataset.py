"""Tests of the dataset folders (dataset.json, cases, loading) and training on one:
python3 -m unittest discover baseline/tests

Needs numpy (skipped without it); the training tests need torch.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError:  # pragma: no cover
    raise unittest.SkipTest("numpy is not installed")

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = os.path.dirname(HERE)
REPO = os.path.dirname(BASELINE)
sys.path.insert(0, BASELINE)
sys.path.insert(0, HERE)

from voxpipe_twin import dataset as D  # noqa: E402
from voxpipe_twin import modelcard, nifti, safetensors_io  # noqa: E402
from geomfixtures import RAS_SPACING, ras_affine, stored_as, write  # noqa: E402
import phantoms  # noqa: E402

needs_torch = unittest.skipIf(torch is None, "torch is not installed")


class DatasetJsonTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.d = self.tmp.name
        os.makedirs(os.path.join(self.d, "imagesTr"))
        os.makedirs(os.path.join(self.d, "labelsTr"))

    def info(self, meta):
        with open(os.path.join(self.d, "dataset.json"), "w") as f:
            json.dump(meta, f)
        return D.dataset_info(self.d)

    def bad(self, meta, msg):
        with self.assertRaisesRegex(D.DatasetError, msg):
            self.info(meta)

    def test_v2_and_v1_labels(self):
        v2 = self.info({"name": "Brains", "channel_names": {"0": "T1"}, "file_ending": ".nii.gz",
                        "labels": {"background": 0, "white matter": 2, "grey matter": 1}})
        self.assertEqual(v2.label_names, ["background", "grey matter", "white matter"])
        self.assertEqual((v2.layout, v2.channel_name, v2.name), ("nnunet", "T1", "Brains"))
        v1 = self.info({"modality": {"0": "MRI"}, "labels": {"0": "background", "1": "tumour"}})
        self.assertEqual((v1.label_names, v1.channel_name, v1.file_ending),
                         (["background", "tumour"], "MRI", ".nii.gz"))

    def test_rejects(self):
        ch = {"0": "T1"}
        self.bad({"channel_names": {"0": "T1", "1": "T2"}, "labels": {"background": 0, "a": 1}},
                 "single-channel")
        self.bad({"channel_names": ch, "labels": {"background": 0, "a": 2}}, "0, 1, ... N-1")
        self.bad({"channel_names": ch, "labels": {"background": 0, "a": [1, 2]}}, "region-based")
        self.bad({"channel_names": ch, "labels": {"background": 0, "a,b": 1}}, "without commas")
        self.bad({"channel_names": ch, "labels": {"background": 0}}, "at least one class")
        self.bad({"channel_names": ch, "labels": {"background": 0, "a": 1}, "file_ending": ".mha"},
                 "NIfTI only")
        self.bad({"labels": {"background": 0, "a": 1}}, "channel_names")
        self.bad({"channel_names": ch}, "no \"labels\"")

    def test_cases_and_missing_files(self):
        meta = {"channel_names": {"0": "T1"}, "labels": {"background": 0, "a": 1}}
        info = self.info(meta)
        with self.assertRaisesRegex(D.DatasetError, "no labelsTr"):
            D.list_cases(info)
        lab = np.zeros((2, 3, 4), np.uint8)
        nifti.write_nifti(os.path.join(self.d, "labelsTr", "b_7.nii.gz"), lab)
        with self.assertRaisesRegex(D.DatasetError, "b_7_0000.nii.gz"):
            D.list_cases(info)
        nifti.write_nifti(os.path.join(self.d, "imagesTr", "b_7_0000.nii.gz"), lab.astype(np.int16))
        self.assertEqual([c[0] for c in D.list_cases(info)], ["b_7"])
        nifti.write_nifti(os.path.join(self.d, "imagesTr", "b_7_0001.nii.gz"), lab.astype(np.int16))
        with self.assertRaisesRegex(D.DatasetError, "second channel"):
            D.list_cases(info)

    def test_neither_layout(self):
        with self.assertRaisesRegex(D.DatasetError, "neither"):
            D.dataset_info(os.path.join(self.d, "imagesTr"))


class LoadCaseTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        img, lab = phantoms.make_phantom(14, 12, 9, seed=2)
        self.img, self.lab = img, lab

    def pair(self, codes, img=None, lab=None, lab_codes=None, slope=1.0, inter=0.0):
        img = self.img if img is None else img
        lab = self.lab if lab is None else lab
        p = os.path.join(self.tmp.name, codes)
        d, aff = stored_as(img, ras_affine(), codes)
        ld, laff = stored_as(lab, ras_affine(), lab_codes or codes)
        write(p + "_img.nii.gz", d, aff, scl_slope=slope, scl_inter=inter)
        write(p + "_lab.nii.gz", ld, laff)
        return p + "_img.nii.gz", p + "_lab.nii.gz"

    def test_every_orientation_gives_the_same_case(self):
        ref = D.load_case("ras", *self.pair("RAS"), classes=4)
        self.assertEqual(ref.spacing, RAS_SPACING)
        for codes in ("LPS", "ASR", "ILP"):
            c = D.load_case(codes, *self.pair(codes), classes=4)
            self.assertEqual(c.source_orientation, codes)
            np.testing.assert_array_equal(c.stored, self.img)
            np.testing.assert_array_equal(c.labels, self.lab)
            self.assertEqual(c.spacing, RAS_SPACING)
        # the label file in another orientation than its image: still the same voxels
        c = D.load_case("mixed", *self.pair("LPS", lab_codes="SRA"), classes=4)
        np.testing.assert_array_equal(c.labels, self.lab)

    def test_rejects_bad_pairs(self):
        with self.assertRaisesRegex(D.DatasetError, "outside 0..0"):
            D.load_case("x", *self.pair("RAS"), classes=1)
        img_p, _ = self.pair("RAS")
        lab_p = os.path.join(self.tmp.name, "shifted.nii.gz")
        write(lab_p, self.lab, ras_affine(origin=(0, 0, 0)))
        with self.assertRaisesRegex(D.DatasetError, "does not match the image"):
            D.load_case("x", img_p, lab_p, classes=4)
        small = os.path.join(self.tmp.name, "small.nii.gz")
        write(small, self.lab[:, :, :-1], ras_affine())
        with self.assertRaisesRegex(D.DatasetError, "do not match the image's"):
            D.load_case("x", img_p, small, classes=4)
        frac = os.path.join(self.tmp.name, "frac.nii.gz")
        write(frac, self.lab.astype(np.float32) + 0.5, ras_affine())
        with self.assertRaisesRegex(D.DatasetError, "integers"):
            D.load_case("x", img_p, frac, classes=4)

    def test_float_labels_and_units(self):
        img_p, _ = self.pair("RAS")
        lab_p = os.path.join(self.tmp.name, "float.nii.gz")
        write(lab_p, self.lab.astype(np.float32), ras_affine())
        np.testing.assert_array_equal(D.load_case("x", img_p, lab_p, 4).labels, self.lab)
        # spacing in metres (xyzt_units 1) comes out in mm
        m_img = os.path.join(self.tmp.name, "m_img.nii")
        m_lab = os.path.join(self.tmp.name, "m_lab.nii")
        write(m_img, self.img, ras_affine((0.001, 0.002, 0.003), (0, 0, 0)), xyzt_units=1)
        write(m_lab, self.lab, ras_affine((0.001, 0.002, 0.003), (0, 0, 0)), xyzt_units=1)
        np.testing.assert_allclose(D.load_case("m", m_img, m_lab, 4).spacing, (1.0, 2.0, 3.0))

    def test_quantiles_of_the_normalised_scaled_values(self):
        c = D.load_case("s", *self.pair("LPS", slope=-0.5, inter=40.0), classes=4)
        v = self.img.astype(np.float64) * -0.5 + 40.0
        want = np.quantile((v - v.mean()) / v.std(), modelcard.QUANTILE_LEVELS)
        np.testing.assert_allclose(D.normalized_quantiles(c, modelcard.QUANTILE_LEVELS), want,
                                   rtol=1e-12, atol=1e-12)
        const = D.load_case("c", *self.pair("ASR", img=np.full_like(self.img, 7)), classes=4)
        # sigma 0 -> 1: the volume is only centred
        np.testing.assert_array_equal(D.normalized_quantiles(const, modelcard.QUANTILE_LEVELS),
                                      np.zeros(len(modelcard.QUANTILE_LEVELS)))

    def test_prepare_resamples_outliers_only(self):
        c = D.load_case("ras", *self.pair("RAS"), classes=4)
        x, lab, resampled = D.prepare(c, (2.6, 2.1, 3.1))  # within 10 %: kept as is
        self.assertFalse(resampled)
        self.assertEqual(x.shape, self.img.shape)
        self.assertAlmostEqual(float(x.astype(np.float64).mean()), 0.0, places=5)
        x, lab, resampled = D.prepare(c, (1.25, 2.0, 3.0))  # x halved: twice the voxels
        self.assertTrue(resampled)
        self.assertEqual(x.shape, (9, 12, 28))
        self.assertEqual(lab.shape, x.shape)
        self.assertEqual(lab.dtype, np.uint8)
        self.assertAlmostEqual(float(x.astype(np.float64).std()), 1.0, places=4)
        np.testing.assert_array_equal(lab[:, :, 0::2], self.lab)  # nearest: each voxel twice


def write_nnunet(directory, specs, labels, dims=(16, 14, 10), seed=1):
    """An nnU-Net-style dataset: cases (name, orientation codes, spacing factor) of tiny
    phantoms; returns the RAS (image, label) of each case by name."""
    os.makedirs(os.path.join(directory, "imagesTr"), exist_ok=True)
    os.makedirs(os.path.join(directory, "labelsTr"), exist_ok=True)
    with open(os.path.join(directory, "dataset.json"), "w") as f:
        json.dump({"name": "TinyHeads", "description": "test", "channel_names": {"0": "T1w"},
                   "labels": labels, "numTraining": len(specs), "file_ending": ".nii.gz"}, f)
    ras = {}
    for i, (name, codes, factor) in enumerate(specs):
        img, lab = phantoms.make_phantom(*dims, seed=seed * 1000 + i)
        aff = ras_affine(tuple(s * factor for s in RAS_SPACING))
        d, a = stored_as(img, aff, codes)
        write(os.path.join(directory, "imagesTr", f"{name}_0000.nii.gz"), d, a)
        d, a = stored_as(lab, aff, codes)
        write(os.path.join(directory, "labelsTr", f"{name}.nii.gz"), d, a)
        ras[name] = (img, lab)
    return ras


@needs_torch
class TrainDatasetTest(unittest.TestCase):
    def test_train_on_an_nnunet_folder_writes_the_card(self):
        labels = {"background": 0, "brain": 1, "csf": 2, "spot": 3}
        specs = [("head_000", "RAS", 1), ("head_001", "LPS", 1), ("head_002", "ASR", 1),
                 ("head_003", "RAS", 1), ("head_004", "LAS", 2)]
        with tempfile.TemporaryDirectory() as d:
            data = os.path.join(d, "Dataset001_Tiny")
            write_nnunet(data, specs, labels)
            out = os.path.join(d, "m.safetensors")
            cmd = [sys.executable, os.path.join(BASELINE, "train.py"), "--train-dir", data,
                   "--out", out, "--steps", "2", "--crop", "12", "--batch", "1", "--device", "cpu",
                   "--val-every", "2", "--log-every", "1", "--val-fraction", "0.4",
                   "--colors", "spot=#ff00ff", "--modality", "T1-weighted MR",
                   "--codes", "spot=SCT:49755003:Morphologically Altered Structure/SCT:52988006:Lesion"]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            self.assertIn("3 train + 2 val volumes (nnunet layout", res.stdout)
            self.assertIn("reoriented to RAS", res.stdout)
            tensors, meta = safetensors_io.read(out)
            self.assertEqual(meta["class_names"], "background,brain,csf,spot")
            card = json.loads(meta["card"])
            self.assertEqual(card["name"], "TinyHeads")
            self.assertEqual(card["modality"], "T1-weighted MR")
            self.assertEqual(card["orientation"], "RAS")
            self.assertEqual([lab["name"] for lab in card["labels"]], list(labels))
            self.assertEqual(card["labels"][3]["color"], "#ff00ff")
            self.assertEqual(card["labels"][3]["type"],
                             {"scheme": "SCT", "value": "52988006", "meaning": "Lesion"})
            self.assertEqual(card["labels"][3]["category"]["meaning"], "Morphologically Altered Structure")
            self.assertNotIn("category", card["labels"][1])
            modelcard.validate(card, 4)
            # The same command (same --split-seed) gives the same card and weights.
            res2 = subprocess.run(cmd[:cmd.index("--out") + 1] + [out + "2"] +
                                  cmd[cmd.index("--out") + 2:], capture_output=True, text=True,
                                  timeout=300)
            self.assertEqual(res2.returncode, 0, res2.stderr)
            t2, m2 = safetensors_io.read(out + "2")
            self.assertEqual(m2["card"], meta["card"])
            for k in tensors:
                np.testing.assert_array_equal(t2[k], tensors[k])
            # Domain: the training cases' spacing range and quantiles, computed independently.
            import train
            tr, va = train.split_cases(list(range(5)), 0.4, 0)
            self.assertEqual((len(tr), len(va)), (3, 2))
            sp = [tuple(s * f for s in RAS_SPACING) for _, _, f in (specs[i] for i in tr)]
            self.assertEqual(card["domain"]["spacing_min_mm"], list(np.min(sp, axis=0)))
            self.assertEqual(card["domain"]["spacing_max_mm"], list(np.max(sp, axis=0)))
            self.assertEqual(card["spacing_mm"], list(np.median(sp, axis=0)))

    def test_resampling_and_val_dir(self):
        labels = {"0": "background", "1": "brain", "2": "csf", "3": "spot"}  # v1
        with tempfile.TemporaryDirectory() as d:
            tr = os.path.join(d, "tr")
            va = os.path.join(d, "va")
            write_nnunet(tr, [("a", "RAS", 1), ("b", "PIR", 1), ("c", "LPS", 2)], labels)
            write_nnunet(va, [("v", "SAL", 2)], labels, seed=2)
            out = os.path.join(d, "m.safetensors")
            cmd = [sys.executable, os.path.join(BASELINE, "train.py"), "--train-dir", tr,
                   "--val-dir", va, "--out", out, "--steps", "1", "--crop", "8", "--batch", "1",
                   "--device", "cpu", "--val-every", "1", "--name", "tiny"]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            # median spacing = RAS_SPACING: case c (twice as coarse) and the val case resampled
            self.assertIn("spacing (x,y,z) 2.5x2x3 mm (median), 1 train + 1 val resampled", res.stdout)
            card = modelcard.read_card(out)
            self.assertEqual(card["spacing_mm"], list(RAS_SPACING))
            self.assertEqual(card["domain"]["spacing_max_mm"], [5.0, 4.0, 6.0])
            self.assertEqual(card["name"], "tiny")
            # a val folder with other labels is refused
            write_nnunet(va, [("v", "RAS", 1)], {"background": 0, "x": 1, "y": 2, "z": 3})
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            self.assertNotEqual(res.returncode, 0)
            self.assertIn("differ from the training folder's", res.stderr)


if __name__ == "__main__":
    unittest.main()

