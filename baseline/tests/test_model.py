"""Tests of the PyTorch twin's model (against the numpy reference and the golden cases),
train.py and segment.py: python3 -m unittest discover baseline/tests

Needs numpy (everything is skipped without it) and torch (the tests are skipped without it).
On Debian: apt-get install -y python3-torch python3-numpy, then use /usr/bin/python3.
"""

import csv
import json
import os
import re
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

from voxpipe_twin import nifti, normalize, reference, safetensors_io  # noqa: E402

needs_torch = unittest.skipIf(torch is None, "torch is not installed")
if torch is not None:
    from voxpipe_twin import model as M  # noqa: E402


def tiny_model(seed, channels=16, classes=4):
    torch.manual_seed(seed)
    m = M.AttnGateNet(channels, classes)
    with torch.no_grad():  # He-like scale so that deep activations are not all dead
        for p in m.parameters():
            if p.dim() > 1:
                fan_in = p[0].numel()
                p.normal_(0, (2.0 / fan_in) ** 0.5)
            else:
                p.uniform_(-0.2, 0.2)
    return m.eval()


@needs_torch
class ModelTest(unittest.TestCase):
    def setUp(self):
        torch.use_deterministic_algorithms(True)

    def test_state_dict_names_and_shapes(self):
        m = M.AttnGateNet(16, 4)
        got = {k: tuple(v.shape) for k, v in m.state_dict().items()}
        self.assertEqual(got, M.expected_shapes(16, 4))

    def test_safetensors_round_trip(self):
        m = tiny_model(1)
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "m.safetensors")
            M.save_safetensors(m, p, {"description": "round trip"})
            m2, meta = M.load_safetensors(p)
            tensors, _ = safetensors_io.read(p)
        self.assertEqual(meta, {"format": "voxpipe-attn-gate", "version": "1", "channels": "16",
                                "classes": "4", "class_names": "background,tissue,fluid,lesion",
                                "description": "round trip"})
        self.assertEqual(sorted(tensors), sorted(M.expected_shapes(16, 4)))
        for k, v in m.state_dict().items():
            self.assertTrue(torch.equal(v, m2.state_dict()[k]), k)

    def test_load_rejects_wrong_files(self):
        m = tiny_model(1)
        sd = {k: v.numpy() for k, v in m.state_dict().items()}
        meta = M.default_metadata(m)
        bad = {
            "format": (sd, dict(meta, format="other")),
            "channels": (sd, dict(meta, channels="8")),
            "names": (sd, dict(meta, class_names="a,b")),
            "missing tensor": ({k: v for k, v in sd.items() if k != "psi.bias"}, meta),
            "float64": (dict(sd, **{"psi.bias": sd["psi.bias"].astype(np.float64)}), meta),
        }
        with tempfile.TemporaryDirectory() as d:
            for name, (tensors, md) in bad.items():
                with self.subTest(name):
                    p = os.path.join(d, "bad.safetensors")
                    safetensors_io.write(p, tensors, md)
                    with self.assertRaises(ValueError):
                        M.load_safetensors(p)

    def test_matches_numpy_reference(self):
        for channels, classes, shape in ((16, 4, (5, 6, 7)), (4, 3, (1, 4, 9)), (2, 2, (6, 1, 1))):
            with self.subTest(channels=channels, classes=classes, shape=shape):
                m = tiny_model(channels * 10 + classes, channels, classes)
                rng = np.random.default_rng(0)
                x = rng.normal(size=shape).astype(np.float32)
                labels, logits = M.segment_volume(m, x, return_logits=True)
                sd = {k: v.numpy() for k, v in m.state_dict().items()}
                ref = reference.forward(sd, x)
                np.testing.assert_allclose(logits, ref, rtol=1e-4, atol=1e-4)
                top2 = np.sort(ref, axis=0)[-2:]
                clear = (top2[1] - top2[0]) > 1e-4
                np.testing.assert_array_equal(labels[clear], reference.labels(ref)[clear])

    def test_slab_inference_equals_whole_volume(self):
        m = tiny_model(7)
        x = np.random.default_rng(2).normal(size=(11, 6, 5)).astype(np.float32)
        whole, whole_logits = M.segment_volume(m, x, return_logits=True)
        for slab in (1, 2, 3, 4, 5, 7, 10, 11, 50):
            with self.subTest(slab=slab):
                labels, logits = M.segment_volume(m, x, slab=slab, return_logits=True)
                np.testing.assert_allclose(logits, whole_logits, rtol=1e-5, atol=1e-5)
                np.testing.assert_array_equal(labels, whole)
                # one input shape for every slab (what --compile uses): same logits
                _, fixed = M.segment_volume(m, x, slab=slab, return_logits=True, fixed_window=True)
                np.testing.assert_allclose(fixed, whole_logits, rtol=1e-5, atol=1e-5)
        # without the halo, slabs would differ: the test can tell
        cut = np.concatenate([M.segment_volume(m, x[z:z + 2], return_logits=True)[1]
                              for z in range(0, 11, 2)], axis=1)
        self.assertGreater(np.abs(cut - whole_logits).max(), 1e-3)

    def test_channels_last_and_float64(self):
        m = tiny_model(3)
        x = np.random.default_rng(4).normal(size=(6, 5, 4)).astype(np.float32)
        _, want = M.segment_volume(m, x, return_logits=True)
        _, got = M.segment_volume(m, x, slab=2, channels_last=True, return_logits=True)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        _, got64 = M.segment_volume(tiny_model(3), x, dtype=torch.float64, return_logits=True)
        np.testing.assert_allclose(got64, want, rtol=1e-4, atol=1e-4)

    def test_argmax_lowest_index_on_ties(self):
        logits = torch.tensor([[1.0, 2.0, 2.0, 0.0],
                               [3.0, 3.0, 3.0, 3.0],
                               [0.0, float("nan"), 5.0, 5.0],
                               [float("nan"), 1.0, 0.0, 1.0]])
        # NaN never beats a number, but a NaN class 0 is never beaten either: the same
        # "k == 0 || l > best" loop as the Go engines
        self.assertEqual(M.argmax_lowest(logits, dim=1).tolist(), [1, 0, 2, 0])

    def test_golden_cases_match_the_twin(self):
        """The committed golden masks are what the twin computes from the committed inputs."""
        root = os.path.join(REPO, "engine", "cpu", "testdata", "golden")
        # the cases are committed: a missing folder is a moved path, not a reason to skip
        self.assertTrue(os.path.isdir(root), root)
        with open(os.path.join(root, "manifest.json")) as f:
            manifest = json.load(f)
        self.assertGreaterEqual(len(manifest["cases"]), 8)
        total = 0
        for case in manifest["cases"]:
            with self.subTest(case=case["name"]):
                d = os.path.join(root, case["name"])
                total += sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
                h, stored = nifti.read_nifti(os.path.join(d, "input.nii"))
                m, meta = M.load_safetensors(os.path.join(d, "model.safetensors"))
                mh, mask = nifti.read_nifti(os.path.join(d, "mask.nii"))
                self.assertEqual(list(reversed(stored.shape)), case["dims_xyz"])
                self.assertEqual((mh.version, mh.datatype), (1, 2))
                self.assertEqual(mh.srow_z, h.srow_z)
                x = normalize.normalize_nifti(h, stored)
                for slab in (1, 2, 0):
                    np.testing.assert_array_equal(M.segment_volume(m, x, slab=slab), mask)
                counts = np.bincount(mask.ravel(), minlength=int(meta["classes"]))
                self.assertGreaterEqual(int((counts > 0).sum()), 2)
        self.assertLess(total, 1 << 20)


@needs_torch
class TrainSmokeTest(unittest.TestCase):
    def test_train_runs_and_writes_weights(self):
        sys.path.insert(0, HERE)
        import phantoms
        with tempfile.TemporaryDirectory() as d:
            phantoms.write_set(os.path.join(d, "train"), 2, 20, 18, 12, seed=1)
            phantoms.write_set(os.path.join(d, "val"), 1, 20, 18, 12, seed=2)
            out = os.path.join(d, "m.safetensors")
            cmd = [sys.executable, os.path.join(BASELINE, "train.py"),
                   "--train-dir", os.path.join(d, "train"), "--val-dir", os.path.join(d, "val"),
                   "--out", out, "--steps", "3", "--crop", "16x16x12", "--batch", "2",
                   "--device", "cpu", "--val-every", "2", "--log-every", "1", "--seed", "5"]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            self.assertIn("val step 2:", res.stdout)
            self.assertIn("best val mean Dice", res.stdout)
            m, meta = M.load_safetensors(out)
            self.assertIn("--steps 3", meta["description"])
            self.assertIn("python smoke phantom seed=", meta["description"])
            # same seed, same weights
            out2 = os.path.join(d, "m2.safetensors")
            res = subprocess.run(cmd[:cmd.index("--out") + 1] + [out2] + cmd[cmd.index("--out") + 2:],
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(res.returncode, 0, res.stderr)
            with open(out, "rb") as f1, open(out2, "rb") as f2:
                a, b = f1.read(), f2.read()
            self.assertEqual(safetensors_io.decode(a)[0].keys(), safetensors_io.decode(b)[0].keys())
            for k, v in safetensors_io.decode(a)[0].items():
                np.testing.assert_array_equal(v, safetensors_io.decode(b)[0][k], k)


@needs_torch
class SegmentScriptTest(unittest.TestCase):
    def test_masks_and_timing_csvs(self):
        sys.path.insert(0, HERE)
        import phantoms
        with tempfile.TemporaryDirectory() as d:
            phantoms.write_set(os.path.join(d, "in"), 2, 9, 8, 7, seed=3)
            mpath = os.path.join(d, "m.safetensors")
            M.save_safetensors(tiny_model(5), mpath)
            out = os.path.join(d, "out")
            cmd = [sys.executable, os.path.join(BASELINE, "segment.py"),
                   os.path.join(d, "in", "volumes"), "-o", out, "--model", mpath,
                   "--device", "cpu", "--slab", "3", "--run-id", "r1"]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            with open(os.path.join(out, "summary.csv")) as f:
                summary = list(csv.DictReader(f))
            with open(os.path.join(out, "timings.csv")) as f:
                timings = list(csv.DictReader(f))
            # the column names of telemetry/timing/schema.go, in order; summary.csv may stop
            # before its OptionalColumns (added later; voxpipe reads them as empty when absent)
            with open(os.path.join(REPO, "telemetry", "timing", "schema.go")) as f:
                src = f.read()
            schema = re.findall(r'csv:"([a-z_0-9]+)"', src)
            optional = re.findall(r'"([a-z_0-9]+)"', re.search(
                r"OptionalColumns = \[\]string\{([^}]*)\}", src).group(1))
            self.assertIn("queue_ms", optional)
            cols = list(timings[0]) + list(summary[0])
            self.assertEqual(cols, schema[:len(cols)])
            self.assertEqual(schema[len(cols):], optional)
            self.assertEqual([r["volume"] for r in summary], ["phantom-0000", "phantom-0001"])
            self.assertEqual({r["status"] for r in summary}, {"ok"})
            self.assertEqual([r["stage"] for r in timings[:4]], ["read", "stats", "segment", "write"])
            m, _ = M.load_safetensors(mpath)
            for r in summary:
                self.assertEqual(r["dims"], "9x8x7")
                h, stored = nifti.read_nifti(os.path.join(d, "in", "volumes", r["volume"] + ".nii.gz"))
                _, mask = nifti.read_nifti(r["output"])
                want = M.segment_volume(m, normalize.normalize_nifti(h, stored))
                np.testing.assert_array_equal(mask, want)


if __name__ == "__main__":
    unittest.main()
