"""Tests of the model card, the dataset folders and the geometry train.py relies on:
python3 -m unittest discover baseline/tests

Needs numpy (skipped without it); the training test needs torch; the nibabel cross-checks
need nibabel (Debian: python3-nibabel).
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

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

try:
    import nibabel
    import nibabel.orientations
except ImportError:  # pragma: no cover
    nibabel = None

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = os.path.dirname(HERE)
REPO = os.path.dirname(BASELINE)
sys.path.insert(0, BASELINE)
sys.path.insert(0, HERE)

from voxpipe_twin import dataset as D  # noqa: E402
from voxpipe_twin import geometry as G  # noqa: E402
from voxpipe_twin import modelcard, nifti, safetensors_io  # noqa: E402
import phantoms  # noqa: E402

needs_torch = unittest.skipIf(torch is None, "torch is not installed")
needs_nibabel = unittest.skipIf(nibabel is None, "nibabel is not installed")

RAS_SPACING = (2.5, 2.0, 3.0)


def rot(axis, deg):
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    m = np.eye(3)
    i, j = [a for a in range(3) if a != axis]
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


def ras_affine(spacing=RAS_SPACING, origin=(-30.0, -20.0, -10.0)):
    a = np.diag(list(spacing) + [1.0])
    a[:3, 3] = origin
    return a


def stored_as(ras_zyx, aff_ras, codes):
    """The RAS volume (shape (nS, nA, nR)) as a file stored in the orientation codes (e.g.
    "LPS", "ASR") would hold it, and that file's affine: built from the codes directly, not
    with geometry's functions."""
    ras = ras_zyx.transpose(2, 1, 0)  # [r][a][s]
    n = ras.shape
    world_axis = {"R": (0, 1), "L": (0, -1), "A": (1, 1), "P": (1, -1), "S": (2, 1), "I": (2, -1)}
    axes = [world_axis[c] for c in codes]
    data = ras.transpose([w for w, _ in axes])
    for v, (w, s) in enumerate(axes):
        if s < 0:
            data = np.flip(data, v)
    # voxel index (i, j, k) of the file -> RAS index -> world
    t = np.zeros((4, 4))
    t[3, 3] = 1
    for v, (w, s) in enumerate(axes):
        t[w, v] = s
        if s < 0:
            t[w, 3] = n[w] - 1
    return np.ascontiguousarray(data.transpose(2, 1, 0)), aff_ras @ t


def write(path, data, aff, **fields):
    h = nifti.Header(**fields)
    h.set_affine(aff)
    return nifti.write_nifti(path, data, h)


class AffineTest(unittest.TestCase):
    def test_sform_then_qform_then_pixdim(self):
        h = nifti.Header(pixdim=(1, 2, 3, 4, 0, 0, 0, 0))
        np.testing.assert_array_equal(h.affine(), np.diag([2.0, 3.0, 4.0, 1.0]))
        want = np.array([[0, -2, 0, 5], [0, 0, 3, 6], [-4, 0, 0, 7], [0, 0, 0, 1]], float)
        h.set_affine(want)
        np.testing.assert_allclose(h.qform_affine(), want, atol=1e-12)
        np.testing.assert_array_equal(h.affine(), want)  # the sform, exactly
        h.srow_x = (9, 9, 9, 9)
        h.sform_code = 0
        np.testing.assert_allclose(h.affine(), want, atol=1e-12)  # now the qform
        h.qform_code = 0
        np.testing.assert_array_equal(h.affine(), np.diag([4.0, 2.0, 3.0, 1.0]))  # |pixdim|

    def test_qform_reflection_and_rotation(self):
        rng = np.random.default_rng(3)
        for trial in range(20):
            m = rot(0, rng.uniform(-40, 40)) @ rot(1, rng.uniform(-40, 40)) @ rot(2, rng.uniform(-180, 180))
            m = m @ np.diag(rng.uniform(0.5, 3, 3) * rng.choice([-1, 1], 3))
            a = np.eye(4)
            a[:3, :3], a[:3, 3] = m, rng.uniform(-100, 100, 3)
            h = nifti.Header()
            h.set_affine(a)
            np.testing.assert_allclose(h.qform_affine(), a, atol=1e-9, err_msg=str(trial))

    def test_mm_per_unit(self):
        self.assertEqual(nifti.Header(xyzt_units=10).mm_per_unit(), 1.0)
        self.assertEqual(nifti.Header(xyzt_units=0).mm_per_unit(), 1.0)
        self.assertEqual(nifti.Header(xyzt_units=1).mm_per_unit(), 1000.0)
        self.assertEqual(nifti.Header(xyzt_units=3 | 8).mm_per_unit(), 0.001)

    @needs_nibabel
    def test_affine_matches_nibabel(self):
        rng = np.random.default_rng(4)
        with tempfile.TemporaryDirectory() as d:
            for trial in range(6):
                m = rot(2, rng.uniform(-90, 90)) @ np.diag(rng.uniform(0.5, 3, 3) * rng.choice([-1, 1], 3))
                a = np.eye(4)
                a[:3, :3], a[:3, 3] = m, rng.uniform(-50, 50, 3)
                p = os.path.join(d, f"v{trial}.nii")
                h = write(p, np.zeros((2, 3, 4), np.int16), a)
                if trial % 2:  # qform only
                    h.sform_code = 0
                    nifti.write_nifti(p, np.zeros((2, 3, 4), np.int16), h)
                got = nifti.read_nifti(p)[0].affine()
                np.testing.assert_allclose(got, nibabel.load(p).affine, atol=1e-4)


class OrientationTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(5)
        self.ras = rng.integers(0, 1000, size=(5, 6, 7)).astype(np.int16)  # (nS, nA, nR)
        self.aff = ras_affine()

    def test_codes(self):
        for codes in ("RAS", "LPS", "LAS", "ASR", "SPL", "IRA", "PIR"):
            _, aff = stored_as(self.ras, self.aff, codes)
            self.assertEqual(G.axcodes(G.io_orientation(aff)), codes)

    def test_to_canonical_recovers_ras_exactly(self):
        for codes in ("RAS", "LPS", "LAI", "ASR", "SPL", "IRA", "PIR"):
            data, aff = stored_as(self.ras, self.aff, codes)
            ornt = G.io_orientation(aff)
            got = G.to_canonical(data, ornt)
            np.testing.assert_array_equal(got, self.ras, err_msg=codes)
            np.testing.assert_allclose(G.canonical_affine(aff, ornt, data.shape), self.aff,
                                       atol=1e-12, err_msg=codes)
            np.testing.assert_array_equal(G.from_canonical(got, ornt), data, err_msg=codes)

    def test_oblique_goes_to_the_nearest_axis(self):
        _, aff = stored_as(self.ras, self.aff, "PSL")
        tilted = aff.copy()
        tilted[:3, :3] = rot(0, 20) @ rot(2, -25) @ aff[:3, :3]
        self.assertEqual(G.axcodes(G.io_orientation(tilted)), "PSL")

    def test_degenerate_affine(self):
        a = np.diag([1.0, 0.0, 1.0, 1.0])
        with self.assertRaises(G.GeometryError):
            G.io_orientation(a)
        a = np.eye(4)
        a[:3, 1] = a[:3, 0]
        with self.assertRaises(G.GeometryError):
            G.io_orientation(a)

    @needs_nibabel
    def test_matches_nibabel_as_closest_canonical(self):
        rng = np.random.default_rng(6)
        with tempfile.TemporaryDirectory() as d:
            for trial, codes in enumerate(("LPS", "ASR", "SPL", "IRA", "RAS", "PIL")):
                data, aff = stored_as(self.ras, self.aff, codes)
                aff = aff.copy()
                aff[:3, :3] = rot(trial % 3, rng.uniform(-30, 30)) @ aff[:3, :3]  # oblique
                p = os.path.join(d, f"{codes}.nii")
                write(p, data, aff)
                ornt = G.io_orientation(aff)
                want = nibabel.orientations.io_orientation(aff)
                self.assertEqual([(w, s) for w, s in ornt], [(int(w), int(s)) for w, s in want])
                canon = nibabel.as_closest_canonical(nibabel.load(p))
                h, stored = nifti.read_nifti(p)
                got = G.to_canonical(stored, G.io_orientation(h.affine()))
                np.testing.assert_array_equal(got, np.asarray(canon.dataobj).transpose(2, 1, 0))
                np.testing.assert_allclose(G.canonical_affine(h.affine(), ornt, stored.shape),
                                           canon.affine, atol=1e-4)


class ResampleTest(unittest.TestCase):
    def test_linear_is_exact_on_a_linear_field_in_world_coordinates(self):
        spacing, target = (1.0, 1.5, 2.0), (2.0, 1.0, 3.0)
        aff = ras_affine(spacing)
        nz, ny, nx = 8, 10, 12
        k, j, i = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
        world = lambda a, i, j, k: [a[r, 0] * i + a[r, 1] * j + a[r, 2] * k + a[r, 3] for r in range(3)]  # noqa: E731
        field = lambda x, y, z: 3 * x - 2 * y + 0.5 * z + 7  # noqa: E731
        v = field(*world(aff, i, j, k))
        out = G.resample(v, spacing, target, "linear")
        self.assertEqual(out.shape, G.resampled_shape(v.shape, spacing, target))
        self.assertEqual(out.shape, (round(nz * 2 / 3), round(ny * 1.5), round(nx / 2)))
        naff = G.resampled_affine(aff, spacing, target)
        np.testing.assert_allclose(G.voxel_sizes(naff), target)
        k2, j2, i2 = np.meshgrid(*(np.arange(n) for n in out.shape), indexing="ij")
        want = field(*world(naff, i2, j2, k2))
        # exact wherever the sample lies between input voxel centres (the border clamps)
        x, y, z = world(naff, i2, j2, k2)
        inside = (x >= aff[0, 3]) & (x <= aff[0, 3] + (nx - 1) * spacing[0]) & \
                 (y >= aff[1, 3]) & (y <= aff[1, 3] + (ny - 1) * spacing[1]) & \
                 (z >= aff[2, 3]) & (z <= aff[2, 3] + (nz - 1) * spacing[2])
        self.assertGreater(inside.mean(), 0.5)
        np.testing.assert_allclose(out[inside], want[inside], atol=1e-9)

    def test_nearest_keeps_labels_and_identity(self):
        rng = np.random.default_rng(1)
        lab = rng.integers(0, 4, size=(4, 5, 6)).astype(np.uint8)
        same = G.resample(lab, (1, 1, 1), (1, 1, 1), "nearest")
        np.testing.assert_array_equal(same, lab)
        up = G.resample(lab, (2, 2, 2), (1, 1, 1), "nearest")
        self.assertEqual(up.dtype, np.uint8)
        np.testing.assert_array_equal(up[::2, ::2, ::2], lab)  # each voxel becomes a 2x2x2 block
        np.testing.assert_array_equal(up[1::2, 1::2, 1::2], lab)

    def test_needs_resampling(self):
        self.assertFalse(G.needs_resampling((2.5, 2.5, 3.0), (2.5, 2.5, 3.0)))
        self.assertFalse(G.needs_resampling((2.7, 2.5, 3.0), (2.5, 2.5, 3.0)))  # 8 %
        self.assertTrue(G.needs_resampling((2.5, 2.5, 3.4), (2.5, 2.5, 3.0)))  # 13 %


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
                   "--colors", "spot=#ff00ff", "--modality", "T1-weighted MR"]
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
