"""Tests of the PyTorch twin's NIfTI, normalisation and safetensors code:
python3 -m unittest discover baseline/tests

Needs numpy (everything is skipped without it). The model, train.py and segment.py are tested
in test_model.py.
"""

import gzip
import json
import math
import os
import struct
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

from voxpipe_twin import nifti, normalize, safetensors_io  # noqa: E402


def nifti1_bytes(bo, dims, datatype, bitpix, data_bytes, slope=0.0, inter=0.0, vox_offset=352,
                 pixdim=(1, 1, 1, 1, 0, 0, 0, 0), magic=b"n+1\x00", extra=b""):
    """A NIfTI-1 file built field by field from the standard's offsets, independent of the
    module's encoder."""
    h = bytearray(348)
    struct.pack_into(bo + "i", h, 0, 348)
    dim = [len(dims)] + list(dims) + [1] * (7 - len(dims))
    struct.pack_into(bo + "8h", h, 40, *dim)
    struct.pack_into(bo + "h", h, 70, datatype)
    struct.pack_into(bo + "h", h, 72, bitpix)
    struct.pack_into(bo + "8f", h, 76, *pixdim)
    struct.pack_into(bo + "f", h, 108, float(vox_offset))
    struct.pack_into(bo + "f", h, 112, slope)
    struct.pack_into(bo + "f", h, 116, inter)
    h[123] = 10
    h[148:148 + 5] = b"hello"
    struct.pack_into(bo + "2h", h, 252, 1, 2)
    struct.pack_into(bo + "4f", h, 280, 2.0, 0.0, 0.0, -10.0)
    struct.pack_into(bo + "4f", h, 296, 0.0, 3.0, 0.0, -20.0)
    struct.pack_into(bo + "4f", h, 312, 0.0, 0.0, 4.0, -30.0)
    h[344:348] = magic
    body = bytes(h) + b"\x00" * 4 + extra
    body += b"\x00" * (vox_offset - len(body))
    return body + data_bytes


def nifti2_bytes(bo, dims, datatype, bitpix, data_bytes, slope=0.0, inter=0.0, vox_offset=544):
    h = bytearray(540)
    struct.pack_into(bo + "i", h, 0, 540)
    h[4:12] = b"n+2\x00\r\n\x1a\n"
    struct.pack_into(bo + "2h", h, 12, datatype, bitpix)
    dim = [len(dims)] + list(dims) + [1] * (7 - len(dims))
    struct.pack_into(bo + "8q", h, 16, *dim)
    struct.pack_into(bo + "8d", h, 104, 1, 0.5, 0.25, 2.0, 0, 0, 0, 0)
    struct.pack_into(bo + "q", h, 168, vox_offset)
    struct.pack_into(bo + "2d", h, 176, slope, inter)
    struct.pack_into(bo + "2i", h, 344, 0, 3)
    struct.pack_into(bo + "4d", h, 400, 0.5, 0, 0, 1.5)
    struct.pack_into(bo + "3i", h, 496, 0, 10, 0)
    body = bytes(h) + b"\x00" * 4
    body += b"\x00" * (vox_offset - len(body))
    return body + data_bytes


class NiftiTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def put(self, name, data):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(gzip.compress(data) if name.endswith(".gz") else data)
        return p

    def test_read_hand_made_files(self):
        nx, ny, nz = 5, 4, 3
        ref = (np.arange(nx * ny * nz) * 7 - 100).reshape(nz, ny, nx)  # x fastest
        cases = [
            # name, version, byte order, datatype, bitpix, numpy dtype
            ("le-int16.nii", 1, "<", 4, 16, "i2"),
            ("be-int16.nii.gz", 1, ">", 4, 16, "i2"),
            ("le-uint8.nii", 1, "<", 2, 8, "u1"),
            ("be-int8.nii", 1, ">", 256, 8, "i1"),
            ("le-uint16.nii.gz", 1, "<", 512, 16, "u2"),
            ("be-int32.nii", 1, ">", 8, 32, "i4"),
            ("le-uint32.nii", 1, "<", 768, 32, "u4"),
            ("be-float32.nii", 1, ">", 16, 32, "f4"),
            ("le-float64.nii.gz", 1, "<", 64, 64, "f8"),
            ("v2-le-float32.nii", 2, "<", 16, 32, "f4"),
            ("v2-be-int16.nii.gz", 2, ">", 4, 16, "i2"),
            ("v2-be-float64.nii", 2, ">", 64, 64, "f8"),
        ]
        for name, version, bo, code, bitpix, npdt in cases:
            with self.subTest(name=name):
                vals = ref % 256 if npdt in ("u1",) else ref
                vals = vals % 128 if npdt == "i1" else vals
                vals = np.abs(vals) if npdt.startswith("u") else vals
                raw = vals.astype(bo + npdt).tobytes()
                make = nifti1_bytes if version == 1 else nifti2_bytes
                p = self.put(name, make(bo, (nx, ny, nz), code, bitpix, raw, slope=2.0, inter=-1.0))
                h, data = nifti.read_nifti(p)
                self.assertEqual(h.version, version)
                self.assertEqual(h.byteorder, bo)
                self.assertEqual(h.datatype, code)
                self.assertEqual(data.shape, (nz, ny, nx))
                self.assertTrue(data.dtype.isnative)
                np.testing.assert_array_equal(data, vals.astype(npdt))
                self.assertEqual(h.scaling(), (2.0, -1.0))
                np.testing.assert_array_equal(nifti.scaled_values(h, data), vals * 2.0 - 1.0)
                if version == 1:
                    self.assertEqual(h.descrip, "hello")
                    self.assertEqual(h.srow_y, (0.0, 3.0, 0.0, -20.0))
                    self.assertEqual((h.qform_code, h.sform_code), (1, 2))
                else:
                    self.assertEqual(h.pixdim[1:4], (0.5, 0.25, 2.0))
                    self.assertEqual(h.sform_code, 3)
                    self.assertEqual(h.xyzt_units, 10)

    def test_vox_offset_with_extension(self):
        vals = np.arange(24, dtype="<f4").reshape(2, 3, 4)
        p = self.put("ext.nii", nifti1_bytes("<", (4, 3, 2), 16, 32, vals.tobytes(),
                                             vox_offset=400, extra=b"\x20\x00\x00\x00xyz"))
        h, data = nifti.read_nifti(p)
        self.assertEqual(h.vox_offset, 400)
        np.testing.assert_array_equal(data, vals)

    def test_hdr_img_pair(self):
        vals = np.arange(6, dtype="<i2").reshape(1, 2, 3)
        hdr = nifti1_bytes("<", (3, 2, 1), 4, 16, b"", vox_offset=0, magic=b"ni1\x00")
        self.put("pair.hdr", hdr[:348])
        self.put("pair.img", vals.tobytes())
        h, data = nifti.read_nifti(self.path("pair.hdr"))
        self.assertEqual(h.magic, "ni1")
        np.testing.assert_array_equal(data, vals)

    def test_rejects(self):
        good = np.zeros(8, dtype="<f4").tobytes()
        cases = {
            "rgb.nii": nifti1_bytes("<", (2, 2, 2), 128, 24, b"\x00" * 24),
            "4d.nii": nifti1_bytes("<", (2, 2, 1, 2), 16, 32, good),
            "short.nii": nifti1_bytes("<", (2, 2, 2), 16, 32, good[:-1]),
            "magic.nii": nifti1_bytes("<", (2, 2, 2), 16, 32, good, magic=b"xx1\x00"),
            "size.nii": b"\x00" * 400,
        }
        for name, data in cases.items():
            with self.subTest(name=name):
                with self.assertRaises(nifti.NiftiError):
                    nifti.read_nifti(self.put(name, data))

    def test_scl_slope_rule(self):
        cases = [((0.0, 5.0), (1.0, 0.0)), ((float("nan"), 5.0), (1.0, 0.0)),
                 ((float("inf"), 1.0), (1.0, 0.0)), ((2.0, float("nan")), (2.0, 0.0)),
                 ((-0.5, 3.0), (-0.5, 3.0))]
        for (slope, inter), want in cases:
            with self.subTest(slope=slope, inter=inter):
                self.assertEqual(nifti.Header(scl_slope=slope, scl_inter=inter).scaling(), want)

    def test_write_read_round_trip(self):
        rng = np.random.default_rng(3)
        for version in (1, 2):
            for bo in "<>":
                for dt in ("u1", "i1", "i2", "u2", "i4", "u4", "f4", "f8"):
                    for ext in (".nii", ".nii.gz"):
                        with self.subTest(version=version, bo=bo, dt=dt, ext=ext):
                            info = np.iinfo(dt) if dt[0] in "iu" else None
                            vals = (rng.integers(info.min, info.max, (3, 4, 5), endpoint=True)
                                    if info else rng.normal(0, 1e3, (3, 4, 5))).astype(dt)
                            p = self.path(f"rt-{version}{bo == '<'}{dt}{ext}")
                            nifti.write_nifti(p, vals, version=version, byteorder=bo,
                                              scl_slope=0.5, scl_inter=3.0,
                                              pixdim=(1, 0.5, 0.75, 2.5, 0, 0, 0, 0))
                            h, back = nifti.read_nifti(p)
                            self.assertEqual((h.version, h.byteorder), (version, bo))
                            self.assertEqual(back.dtype, np.dtype(dt))
                            np.testing.assert_array_equal(back, vals)
                            self.assertEqual(h.scaling(), (0.5, 3.0))
                            self.assertEqual(h.pixdim[1:4], (0.5, 0.75, 2.5))

    def test_header_round_trip_exact(self):
        """Every field survives encode/parse (NIfTI-1 values chosen float32-exact)."""
        h = nifti.Header(version=1, byteorder=">", dim_info=57, dim=(3, 7, 6, 5, 1, 1, 1, 1),
                         intent_p1=1.5, intent_code=1002, datatype=4, bitpix=16, slice_start=1,
                         pixdim=(-1, 0.5, 0.25, 3, 1, 1, 1, 1), vox_offset=352, scl_slope=2,
                         scl_inter=-3, slice_end=4, slice_code=1, xyzt_units=10, cal_max=9,
                         cal_min=1, slice_duration=0.5, toffset=2, descrip="d" * 80,
                         aux_file="aux", qform_code=1, sform_code=4, quatern_b=0.5,
                         quatern_c=-0.25, quatern_d=0.125, qoffset_x=1, qoffset_y=2,
                         qoffset_z=3, srow_x=(1, 2, 3, 4), srow_y=(5, 6, 7, 8),
                         srow_z=(9, 10, 11, 12), intent_name="labels", magic="n+1")
        for version in (1, 2):
            with self.subTest(version=version):
                h.version, h.magic = version, f"n+{version}"
                h.vox_offset = 352 if version == 1 else 544
                raw = nifti.encode_header(h) + b"\x00" * (7 * 6 * 5 * 2)
                p = self.put(f"hdr{version}.nii", raw)
                back, _ = nifti.read_header(p)
                self.assertEqual(back, h)

    def test_write_mask_copies_geometry(self):
        # float32-exact values: the mask is NIfTI-1 (float32 fields), the reference NIfTI-2
        src = nifti.Header(version=2, byteorder="<", pixdim=(-1, 0.75, 1.25, 1.5, 0, 0, 0, 0),
                           qform_code=1, sform_code=2, quatern_d=0.25, qoffset_x=-12.5,
                           srow_x=(0.75, 0, 0, -12.5), srow_y=(0, 1.25, 0, 3),
                           srow_z=(0, 0, 1.5, 4), xyzt_units=10, dim_info=57)
        vol = np.zeros((3, 4, 5), dtype=np.float32)
        ref = nifti.write_nifti(self.path("ref.nii.gz"), vol, src, scl_slope=3.0)
        labels = np.arange(60, dtype=np.uint8).reshape(3, 4, 5) % 4
        nifti.write_mask(self.path("mask.nii"), labels, ref, classes=4)
        h, back = nifti.read_nifti(self.path("mask.nii"))
        np.testing.assert_array_equal(back, labels)
        self.assertEqual((h.version, h.datatype, h.bitpix, h.magic), (1, 2, 8, "n+1"))
        self.assertEqual(h.dim[:4], (3, 5, 4, 3))
        self.assertEqual(h.intent_code, nifti.INTENT_LABEL)
        self.assertEqual(h.scaling(), (1.0, 0.0))
        for f in ("pixdim", "qform_code", "sform_code", "quatern_d", "qoffset_x", "srow_x",
                  "srow_y", "srow_z", "xyzt_units", "dim_info"):
            self.assertEqual(getattr(h, f), getattr(ref, f), f)
        with self.assertRaises(ValueError):
            nifti.write_mask(self.path("bad.nii"), labels[:2], ref)


class NormalizeTest(unittest.TestCase):
    def test_population_std_float64(self):
        v = np.array([1, 2, 3, 4, 100], dtype=np.int16)
        mu, sigma = normalize.volume_stats(v)
        self.assertAlmostEqual(mu, 22.0)
        self.assertAlmostEqual(sigma, math.sqrt(np.mean((v - 22.0) ** 2)))
        x = normalize.normalize(v, mode="exact")
        np.testing.assert_allclose(x, (v - mu) / sigma, rtol=1e-6)
        self.assertAlmostEqual(float(np.mean(x)), 0.0, places=6)
        self.assertAlmostEqual(float(np.std(x.astype(np.float64))), 1.0, places=6)

    def test_scaling_applied_before_stats(self):
        stored = np.array([[[0, 10, 20, 30]]], dtype=np.int16)
        scale, shift, mu, sigma = normalize.norm_params(stored, -2.0, 5.0)
        v = stored * -2.0 + 5.0
        self.assertAlmostEqual(mu, v.mean())
        self.assertAlmostEqual(sigma, v.std())
        np.testing.assert_allclose(stored * scale + shift, (v - v.mean()) / v.std())
        x = normalize.normalize(stored, -2.0, 5.0)
        # the negative slope flips the order: the smallest stored value is the largest x
        self.assertGreater(x[0, 0, 0], 1.0)
        self.assertLess(x[0, 0, 3], -1.0)

    def test_sigma_rule(self):
        cases = [
            # name, values, sigma replaced by 1?
            ("constant", np.full(50, 42.5), True),
            ("zeros", np.zeros(7), True),
            ("tiny around 0", np.array([0, 1e-7, -1e-7, 0]), True),  # threshold 1e-6
            ("small around 0", np.array([0, 1e-5, -1e-5, 0]), False),
            ("tiny vs mu 1000", 1000 + np.array([0, 4e-4, -4e-4, 0]), True),  # 1e-3 floor
            ("enough vs mu 1000", 1000 + np.array([0, 4e-3, -4e-3, 0]), False),
        ]
        for name, vals, floored in cases:
            with self.subTest(name):
                _, _, mu, sigma = normalize.norm_params(vals)
                raw_mu, raw_sigma = normalize.volume_stats(vals)
                self.assertEqual(sigma == 1.0, floored, (raw_sigma, sigma))
                if not floored:
                    self.assertEqual(sigma, raw_sigma)
                x = normalize.normalize(vals, mode="exact")
                want = (vals - mu) / (1.0 if floored else raw_sigma)
                np.testing.assert_allclose(x, want, atol=1e-6)
        self.assertTrue(np.all(normalize.normalize(np.full((2, 3, 4), 7.0, np.float32)) == 0))

    def test_folded_matches_go_norm(self):
        """folded: float32(float32(v)*Scale) + Shift with Scale, Shift rounded to float32."""
        rng = np.random.default_rng(1)
        v = rng.normal(300, 50, 1000).astype(np.float32)
        scale, shift, _, _ = normalize.norm_params(v)
        s32, t32 = np.float32(scale), np.float32(shift)
        want = np.array([np.float32(np.float32(a * s32) + t32) for a in v])
        np.testing.assert_array_equal(normalize.normalize(v), want)
        np.testing.assert_allclose(normalize.normalize(v), normalize.normalize(v, mode="exact"),
                                   atol=1e-6)


class SafetensorsTest(unittest.TestCase):
    def test_hand_made_file(self):
        a = np.array([[1.5, -2.0, 3.25]], dtype="<f4")
        b = np.array([7], dtype="<f4")
        header = {"__metadata__": {"k": "v"},
                  "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                  "a": {"dtype": "F32", "shape": [1, 3], "data_offsets": [4, 16]}}
        hj = json.dumps(header).encode()
        buf = struct.pack("<Q", len(hj)) + hj + b.tobytes() + a.tobytes()
        tensors, meta = safetensors_io.decode(buf)
        self.assertEqual(meta, {"k": "v"})
        np.testing.assert_array_equal(tensors["a"], a)
        np.testing.assert_array_equal(tensors["b"], b)

    def test_layout(self):
        tensors = {"zz": np.ones((2, 3), np.float32), "aa": np.arange(5, dtype=np.float32),
                   "mm": np.zeros(1, np.float32)}
        buf = safetensors_io.encode(tensors, {"format": "x"})
        n = struct.unpack("<Q", buf[:8])[0]
        self.assertEqual(n % 8, 0)
        text = buf[8:8 + n].decode()
        self.assertEqual(text, text.rstrip() + " " * (len(text) - len(text.rstrip())))
        header = json.loads(text)
        offsets = [header[k]["data_offsets"] for k in ("aa", "mm", "zz")]  # sorted names
        self.assertEqual(offsets, [[0, 20], [20, 24], [24, 48]])
        self.assertEqual(len(buf), 8 + n + 48)
        self.assertEqual(buf[8 + n:8 + n + 20], np.arange(5, dtype="<f4").tobytes())

    def test_malformed(self):
        good = safetensors_io.encode({"a": np.ones(4, np.float32)})
        n = struct.unpack("<Q", good[:8])[0]
        cases = {
            "truncated data": good[:-1],
            "trailing data": good + b"\x00" * 4,
            "header too long": struct.pack("<Q", 1 << 40) + good[8:],
            "not json": good[:8] + b"{" * n + good[8 + n:],
            "short": b"\x01\x02",
        }
        for name, buf in cases.items():
            with self.subTest(name):
                with self.assertRaises(safetensors_io.SafetensorsError):
                    safetensors_io.decode(buf)


if __name__ == "__main__":
    unittest.main()
