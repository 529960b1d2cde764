"""Tests of the geometry train.py relies on (affines, orientation, resampling):
python3 -m unittest discover baseline/tests

Needs numpy (skipped without it); the nibabel cross-checks need nibabel (Debian:
python3-nibabel).
"""

import os
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError:  # pragma: no cover
    raise unittest.SkipTest("numpy is not installed")

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

from voxpipe_twin import geometry as G  # noqa: E402
from voxpipe_twin import nifti  # noqa: E402
from geomfixtures import ras_affine, rot, stored_as, write  # noqa: E402

needs_nibabel = unittest.skipIf(nibabel is None, "nibabel is not installed")


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


if __name__ == "__main__":
    unittest.main()

