#!/usr/bin/python3
"""Tests of scripts/segcheck.py on SEGs written by scripts/tests/segmake.py (pydicom, from the
standard): right ones in every orientation and mask layout must pass, and each kind of wrong
one must fail with its reason.

Run: /usr/bin/python3 -m unittest discover -s scripts/tests -p 'test_segcheck.py'
"""
import contextlib
import io
import os
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

import nibabel as nib
import numpy as np
import pydicom

sys.dont_write_bytecode = True  # no __pycache__ in the tree
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "segcheck.py")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import segcheck  # noqa: E402
import segmake  # noqa: E402


def labels():
    """(slices, rows, cols) = (6, 10, 12): asymmetric in every axis, so that a flip or a
    transpose shows; slices 0 and 5 empty, segment 3 a single voxel."""
    lab = np.zeros((6, 10, 12), np.uint8)
    lab[1:5, 2:8, 3:10] = 1
    lab[1:5, 2, 3] = 0
    lab[2:4, 3:6, 4:7] = 2
    lab[3, 6, 8] = 3
    return lab


def run_check(*args):
    """segcheck.main in this process: (exit code, stdout)."""
    out = io.StringIO()
    old = sys.argv
    sys.argv = ["segcheck.py"] + [str(a) for a in args]
    try:
        with contextlib.redirect_stdout(out):
            code = segcheck.main()
    finally:
        sys.argv = old
    return code, out.getvalue()


def png_pixels(path):
    """(width, height, RGB rows) of an 8-bit RGB PNG with filter-0 rows, as write_png writes."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        n, tag = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if tag == b"IHDR":
            w, h = struct.unpack(">II", body[:8])
        elif tag == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    rows = np.frombuffer(raw, np.uint8).reshape(h, 1 + 3 * w)
    assert not rows[:, 0].any(), "unexpected PNG row filter"
    return w, h, rows[:, 1:].reshape(h, w, 3)


class Case:
    """A series, its mask and a SEG of it in a temporary folder."""

    def __init__(self, tmp, orient="axial", lab=None, axcodes=None, empty=False, dtype=np.uint8):
        self.tmp = tmp
        self.series = os.path.join(tmp, "series")
        self.lab = labels() if lab is None else lab
        self.slices = segmake.write_series(self.series, orient, shape=self.lab.shape)
        self.mask = os.path.join(tmp, "mask.nii.gz")
        segmake.write_mask(self.mask, self.slices, self.lab, axcodes, dtype)
        self.frames = segmake.frames_of(self.lab, 3, empty)
        self.seg = os.path.join(tmp, "seg.dcm")

    def write(self, frames=None, names=None, edit=None):
        ds = segmake.build_seg(self.slices, self.frames if frames is None else frames, names)
        if edit:
            edit(ds)
        segmake.save_seg(ds, self.seg)
        return self

    def check(self, *extra):
        return run_check(self.seg, self.mask, self.series, *extra)


class SegcheckTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="segcheck-test-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp], check=True)

    def case(self, **kw):
        return Case(tempfile.mkdtemp(dir=self.tmp), **kw)

    def passes(self, c, *extra):
        code, out = c.check(*extra)
        self.assertEqual(code, 0, out)
        self.assertIn("segcheck ok:", out)
        return out

    def fails(self, c, want, *extra):
        code, out = c.check(*extra)
        self.assertEqual(code, 1, out)
        self.assertIn(want, out)
        return out

    def test_orientations_pass(self):
        for orient in ("axial", "sagittal", "coronal", "oblique"):
            for axcodes in (None, ("R", "A", "S"), ("P", "I", "L")):
                with self.subTest(orient=orient, axcodes=axcodes):
                    out = self.passes(self.case(orient=orient, axcodes=axcodes).write(), "--expect-segments", "3")
                    n = int((labels() == 1).sum() + (labels() == 2).sum() + 1)
                    self.assertIn("%d foreground pixels" % n, out)
                    self.assertIn("7 frames (0 empty)", out)

    def test_reoriented_mask_really_differs(self):
        # The RAS mask must not hold the same array as dcm2niix's layout, or the test above
        # would not show that segcheck follows the affine.
        c = self.case(orient="axial")
        plain = np.asanyarray(nib.load(c.mask).dataobj)
        segmake.write_mask(c.mask, c.slices, c.lab, ("R", "A", "S"))
        ras = np.asanyarray(nib.load(c.mask).dataobj)
        self.assertEqual(plain.shape, ras.shape)
        self.assertFalse(np.array_equal(plain, ras))

    def test_empty_frames_carried_pass(self):
        out = self.passes(self.case(empty=True).write())
        self.assertIn("18 frames (11 empty)", out)

    def test_single_frame_and_int16_mask_pass(self):
        lab = np.zeros((3, 10, 12), np.uint8)
        lab[1, 4, 2:5] = 1
        c = self.case(lab=lab, dtype=np.int16)
        c.frames = segmake.frames_of(lab, 1)
        self.assertEqual(len(c.frames), 1)
        self.assertIn("1 frames", self.passes(c.write(names={1: "only"}), "--expect-segments", "1"))

    def test_flipped_bit_fails(self):
        c = self.case()
        s, k, b = c.frames[2]
        b = b.copy()
        b[0, 0] ^= 1
        c.frames[2] = (s, k, b)
        self.fails(c.write(), "frame 3 (segment 1, slice z=3 (instance %s)): 1 pixels differ from the mask (first row 0 col 0: SEG 1, mask label 0)" % c.slices[3].SOPInstanceUID)

    def test_rows_reversed_fails_with_hint(self):
        c = self.case()
        c.frames = [(s, k, b[::-1].copy()) for s, k, b in c.frames]
        self.fails(c.write(), "(it equals the mask with rows reversed)")

    def test_many_mismatches_counted(self):
        lab = np.zeros((25, 10, 12), np.uint8)
        lab[:, 1:4, 2:9] = 1
        c = self.case(lab=lab)
        c.frames = [(s, k, b[::-1].copy()) for s, k, b in c.frames]
        out = self.fails(c.write(), "segcheck: ... and 5 more")
        self.assertEqual(out.count("segcheck FAIL:"), 20)

    def test_columns_reversed_fails(self):
        c = self.case(orient="sagittal")
        c.frames = [(s, k, b[:, ::-1].copy()) for s, k, b in c.frames]
        self.fails(c.write(), "(it equals the mask with columns reversed)")

    def test_wrong_segment_fails(self):
        c = self.case()
        c.frames = [(3 if s == 2 else 2 if s == 3 else s, k, b) for s, k, b in c.frames]
        self.fails(c.write(), "label 2 has")

    def test_dropped_frame_fails(self):
        c = self.case()
        del c.frames[-1]  # segment 3's only frame
        self.fails(c.write(), "slice z=3 (instance %s): label 3 has 1 pixels but the SEG has no frame of segment 3 there" % c.slices[3].SOPInstanceUID)

    def test_empty_frame_with_bits_fails(self):
        c = self.case(empty=True)
        s, k, b = c.frames[0]  # segment 1 on empty slice 0
        self.assertFalse(b.any())
        c.frames[0] = (s, k, np.ones_like(b))
        self.fails(c.write(), "frame 1 (segment 1, slice z=0")

    def test_duplicate_frame_fails(self):
        c = self.case()
        c.frames.append(c.frames[0])
        self.fails(c.write(), "segment 1 has 2 frames")

    def test_position_fails(self):
        def edit(ds):
            pp = ds.PerFrameFunctionalGroupsSequence[1].PlanePositionSequence[0]
            pp.ImagePositionPatient = [float(v) + (0.01 if i == 2 else 0) for i, v in enumerate(pp.ImagePositionPatient)]
        self.fails(self.case().write(edit=edit), "frame 2 (segment 1, slice z=2")

    def test_orientation_fails(self):
        def edit(ds):
            ds.SharedFunctionalGroupsSequence[0].PlaneOrientationSequence[0].ImageOrientationPatient = [0, 1, 0, 1, 0, 0]
        self.fails(self.case().write(edit=edit), "ImageOrientationPatient [0.0, 1.0, 0.0, 1.0, 0.0, 0.0], the source's")

    def test_identity_fails(self):
        for kw, want in (("StudyInstanceUID", "SEG StudyInstanceUID '1.2.3' differs"), ("PatientID", "SEG PatientID '1.2.3' differs"),
                         ("FrameOfReferenceUID", "SEG FrameOfReferenceUID '1.2.3' differs"), ("SOPClassUID", "SEG SOPClassUID is '1.2.3'")):
            with self.subTest(kw=kw):
                self.fails(self.case().write(edit=lambda ds: setattr(ds, kw, "1.2.3")), want)

    def test_seg_in_source_series_fails(self):
        c = self.case()
        self.fails(c.write(edit=lambda ds: setattr(ds, "SeriesInstanceUID", c.slices[0].SeriesInstanceUID)), "is in its source's series")

    def test_header_values_fail(self):
        for kw, v in (("SegmentationType", "FRACTIONAL"), ("Modality", "MR"), ("BitsStored", 8)):
            with self.subTest(kw=kw):
                self.fails(self.case().write(edit=lambda ds: setattr(ds, kw, v)), "SEG %s is %r" % (kw, v))

    def test_label_without_segment_fails(self):
        lab = labels()
        lab[4, 0, 0] = 4
        c = self.case(lab=lab)
        self.fails(c.write(), "label 4 of the mask has no segment in SegmentSequence")

    def test_segment_numbers_not_consecutive_fail(self):
        c = self.case()
        c.frames = [f for f in c.frames if f[0] != 2]
        lab = c.lab.copy()
        lab[lab == 2] = 1  # the mask without label 2, so that only the numbering is wrong
        c.lab = lab
        c.frames = segmake.frames_of(lab, 3)
        segmake.write_mask(c.mask, c.slices, lab)
        self.fails(c.write(names={1: "a", 3: "c"}), "SegmentNumbers [1, 3]: want 1, 2, ... in order")

    def test_references_fail(self):
        def drop(ds):
            del ds.ReferencedSeriesSequence[0].ReferencedInstanceSequence[0]
        self.fails(self.case().write(edit=drop), "ReferencedSeriesSequence lacks 1 of the 4 referenced instances")

    def test_source_missing_fails(self):
        c = self.case().write()
        os.remove(os.path.join(c.series, "IM0003"))  # instance number 3: slice z=3
        self.fails(c, "source instance %s is not in the series folder" % c.slices[3].SOPInstanceUID)

    def test_mask_off_grid_fails(self):
        c = self.case()
        img = nib.load(c.mask)
        a = img.affine.copy()
        a[:3, 3] += a[:3, 0] * 0.5  # half a voxel along i
        nib.save(nib.Nifti1Image(np.asanyarray(img.dataobj), a), c.mask)
        self.fails(c.write(), "pixels fall 0.500 voxel off the mask's grid")

    def test_mask_smaller_or_larger_fails(self):
        c = self.case().write()
        img = nib.load(c.mask)
        data = np.asanyarray(img.dataobj)
        nib.save(nib.Nifti1Image(data[:, :, :5], img.affine), c.mask)
        self.fails(c, "pixels fall outside the mask 12x10x5")
        nib.save(nib.Nifti1Image(np.concatenate([data, data[:, :, :1]], axis=2), img.affine), c.mask)
        self.fails(c, "mask and series grids differ")

    def test_expect_segments_fails(self):
        self.fails(self.case().write(), "SegmentSequence has 3 segments, want 2", "--expect-segments", "2")

    def test_short_pixel_data_fails(self):
        def cut(ds):
            ds.PixelData = ds.PixelData[:-2]
        self.fails(self.case().write(edit=cut), "PixelData has")

    def test_png_and_html(self):
        c = self.case(orient="oblique").write()
        png, page = os.path.join(c.tmp, "o.png"), os.path.join(c.tmp, "o.html")
        out = self.passes(c, "--png", png, "--html", page)
        self.assertIn("slices z=1,2,3,4 of 6; segments 1 tissue, 2 fluid, 3 lesion", out)
        w, h, rgb = png_pixels(png)
        self.assertGreater(w, 4 * 256)
        self.assertGreater(h, 256)
        colours = {tuple(p) for p in rgb.reshape(-1, 3)}
        self.assertGreater(len(colours), 64)
        for colour in segcheck.palette(3).values():  # the legend's swatches
            self.assertIn(colour, colours)
        with open(page) as f:
            self.assertIn('<img src="o.png"', f.read())

    def test_command_line_exit_codes(self):
        c = self.case().write()
        ok = subprocess.run([sys.executable, SCRIPT, c.seg, c.mask, c.series], capture_output=True, text=True, timeout=120)
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        self.assertTrue(ok.stdout.startswith("segcheck ok: 7 frames"), ok.stdout)
        ds = pydicom.dcmread(c.seg)
        ds.StudyInstanceUID = "1.2.3"
        ds.save_as(c.seg)
        bad = subprocess.run([sys.executable, SCRIPT, c.seg, c.mask, c.series], capture_output=True, text=True, timeout=120)
        self.assertEqual(bad.returncode, 1, bad.stdout + bad.stderr)
        usage = subprocess.run([sys.executable, SCRIPT, c.seg], capture_output=True, text=True, timeout=120)
        self.assertEqual(usage.returncode, 2)


if __name__ == "__main__":
    unittest.main()
