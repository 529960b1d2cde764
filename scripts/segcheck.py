#!/usr/bin/python3
"""Independent check of a DICOM SEG against the NIfTI label mask it was made from and the
DICOM series it refers to, written from the standard (PS3.3 A.51, C.8.20, C.7.6.2.1.1;
PS3.5 8.1.1) with pydicom, nibabel and numpy alone: no voxpipe code.

Usage: /usr/bin/python3 scripts/segcheck.py SEG.dcm MASK.nii[.gz] SERIES_DIR
           [--png OUT.png] [--html OUT.html] [--expect-segments N]

For every frame of the SEG (pydicom's pixel_array of the BINARY SEG): its segment
(SegmentIdentificationSequence), its source instance (DerivationImageSequence >
SourceImageSequence, looked up among the files of SERIES_DIR by SOPInstanceUID), its plane
position and orientation (equal to the source's); then every pixel (r, c) is placed in the
patient (LPS) frame from the source's ImagePositionPatient, ImageOrientationPatient and
PixelSpacing, turned to RAS, and taken through the inverse of the mask's affine to a voxel,
which must lie within 0.01 voxel of an integer index inside the volume; the frame's bit must
equal (mask == segment number) there. Then: every (segment, slice) with foreground has a
frame, frames left out are only those without foreground (a frame carried anyway must be
empty), the series' slices cover the mask voxel for voxel, every label of the mask has its
segment (segment N is label N; numbers 1, 2, ... as PS3.3 C.8.20.2.4 wants), the header
(SOP class, BINARY, 1-bit pixels, patient, study and frame of reference of the source, the
ReferencedSeriesSequence naming every source instance).

Exit 0 with one line "segcheck ok: ..." when all holds; 1 with the mismatches (first 20)
otherwise; 2 for bad usage. --png draws the SEG as read back over its source slices (the
slices with the most foreground, each segment a colour, a caption naming the segments);
--html writes a page showing that PNG and its caption.
"""
import argparse
import html
import os
import struct
import sys
import zlib
from collections import defaultdict

import nibabel as nib
import numpy as np
import pydicom
from pydicom.dataset import Dataset

SEG_CLASS = "1.2.840.10008.5.1.4.1.1.66.4"
POS_TOL = 1e-3  # mm between a frame's ImagePositionPatient and its source's
DIR_TOL = 1e-4  # direction cosines, pixel spacing
VOX_TOL = 0.01  # voxel index off an integer
SHOWN = 20
LPS_TO_RAS = np.array([-1.0, -1.0, 1.0])
SEGMENT_NUMBER_TAG = 0x0062000B


class Failed(Exception):
    """A mismatch after which nothing more can be checked."""


class Report:
    def __init__(self):
        self.fails = []

    def fail(self, msg):
        self.fails.append(msg)


def group(fg, shared, name):
    """The item of functional group name, per-frame before shared (PS3.3 C.7.6.16)."""
    for g in (fg, shared):
        if g is not None and name in g and len(g[name].value):
            return g[name].value[0]
    raise Failed("functional group %s missing" % name)


def plane(ds, frame):
    """(ImagePositionPatient, ImageOrientationPatient, PixelSpacing) of frame (1-based) of a
    source: a single-frame image, or an enhanced multi-frame one's functional groups."""
    try:
        if "PerFrameFunctionalGroupsSequence" in ds:
            fg = ds.PerFrameFunctionalGroupsSequence[frame - 1]
            sh = ds.SharedFunctionalGroupsSequence[0] if "SharedFunctionalGroupsSequence" in ds else None
            ipp = group(fg, sh, "PlanePositionSequence").ImagePositionPatient
            iop = group(fg, sh, "PlaneOrientationSequence").ImageOrientationPatient
            ps = group(fg, sh, "PixelMeasuresSequence").PixelSpacing
        else:
            ipp, iop, ps = ds.ImagePositionPatient, ds.ImageOrientationPatient, ds.PixelSpacing
        return np.array(ipp, float), np.array(iop, float), np.array(ps, float)
    except (AttributeError, IndexError, Failed) as e:
        raise Failed("source %s frame %d: no plane geometry (%s)" % (ds.SOPInstanceUID, frame, e))


def read_sources(folder):
    """{SOPInstanceUID: (dataset without pixels, path)} of the DICOM files under folder."""
    out = {}
    for root, _, files in os.walk(folder):
        for f in sorted(files):
            p = os.path.join(root, f)
            try:
                ds = pydicom.dcmread(p, stop_before_pixels=True)
            except Exception:  # not DICOM: ignored, as a missing source is reported later
                continue
            if "SOPInstanceUID" in ds and ds.get("SOPClassUID") != SEG_CLASS:
                out[str(ds.SOPInstanceUID)] = (ds, p)
    if not out:
        raise Failed("no DICOM image in %s" % folder)
    return out


def read_mask(path):
    img = nib.load(path)
    data = np.asanyarray(img.dataobj)
    while data.ndim > 3 and data.shape[-1] == 1:
        data = data[..., 0]
    if data.ndim != 3:
        raise Failed("mask %s: %d dimensions, want 3" % (path, data.ndim))
    if data.dtype.kind not in "iu":
        if not np.all(np.equal(np.mod(data, 1), 0)):
            raise Failed("mask %s: values not integers" % path)
        data = data.astype(np.int32)
    if data.size and data.min() < 0:
        raise Failed("mask %s: negative values" % path)
    return np.ascontiguousarray(data), np.linalg.inv(img.affine)  # C order: reshape(-1) is a view


def voxels(inv, ipp, iop, ps, rows, cols):
    """The mask voxel of every pixel (r, c) of a plane: (rows, cols, 3) floats. PS3.3
    C.7.6.2.1.1: P = S + c * dc * X + r * dr * Y, with X, Y the row and column direction
    cosines, dr = PixelSpacing[0] (between rows), dc = PixelSpacing[1] (between columns)."""
    x, y = iop[:3], iop[3:]
    m = inv[:3, :3] * LPS_TO_RAS  # voxel = inv @ RAS(P), RAS(P) = P * LPS_TO_RAS; linear in r and c
    v0, vc, vr = m @ ipp + inv[:3, 3], m @ (ps[1] * x), m @ (ps[0] * y)
    r = np.arange(rows, dtype=float)[:, None, None]
    c = np.arange(cols, dtype=float)[None, :, None]
    return (v0 + r * vr) + c * vc


def gather(mask, inv, geom, rows, cols, what):
    """The mask's labels at the pixels of a plane, and their flat voxel indices."""
    v = voxels(inv, *geom, rows, cols)
    idx = np.rint(v)
    off = float(np.abs(np.subtract(v, idx, out=v), out=v).max())
    if off > VOX_TOL:
        raise Failed("%s: pixels fall %.3f voxel off the mask's grid (over %g): the mask does not lie on the series' grid" % (what, off, VOX_TOL))
    idx = idx.astype(np.int64)
    if idx.min() < 0 or (idx.reshape(-1, 3).max(axis=0) >= mask.shape).any():
        bad = ((idx < 0) | (idx >= np.array(mask.shape))).any(axis=-1)
        r, c = np.argwhere(bad)[0]
        raise Failed("%s: %d pixels fall outside the mask %s (first: row %d col %d at voxel %s)" % (what, int(bad.sum()), "x".join(map(str, mask.shape)), r, c, tuple(idx[r, c])))
    flat = np.ravel_multi_index((idx[..., 0], idx[..., 1], idx[..., 2]), mask.shape)
    return mask.reshape(-1)[flat], flat


def close(a, b, tol):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= tol))


def check_header(seg, rep):
    want = {"SOPClassUID": SEG_CLASS, "Modality": "SEG", "SegmentationType": "BINARY", "BitsAllocated": 1,
            "BitsStored": 1, "HighBit": 0, "SamplesPerPixel": 1, "PixelRepresentation": 0, "PhotometricInterpretation": "MONOCHROME2"}
    for kw, v in want.items():
        got = seg.get(kw)
        if got != v:
            rep.fail("SEG %s is %r, want %r" % (kw, got, v))
    meta = getattr(seg, "file_meta", Dataset())
    if meta.get("MediaStorageSOPClassUID") != SEG_CLASS:
        rep.fail("file meta MediaStorageSOPClassUID is %r, want %s" % (meta.get("MediaStorageSOPClassUID"), SEG_CLASS))
    if "PixelData" in seg and not meta.get("TransferSyntaxUID", pydicom.uid.ImplicitVRLittleEndian).is_compressed:
        bits = int(seg.get("NumberOfFrames", 1)) * seg.Rows * seg.Columns
        n = (bits + 7) // 8
        if len(seg.PixelData) != n + n % 2:
            rep.fail("PixelData has %d bytes, want %d (%d bits packed contiguously, PS3.5 8.1.1, padded to even)" % (len(seg.PixelData), n + n % 2, bits))


def check_segments(seg, labels, rep, expect):
    """Segment numbers 1..K in order; every label of the mask has its segment. Returns
    {number: label}."""
    items = list(seg.get("SegmentSequence", []))
    nums = [int(it.get("SegmentNumber", 0)) for it in items]
    if nums != list(range(1, len(nums) + 1)):
        rep.fail("SegmentNumbers %s: want 1, 2, ... in order (PS3.3 C.8.20.2.4)" % nums)
    for it in items:
        for kw in ("SegmentLabel", "SegmentAlgorithmType", "SegmentedPropertyCategoryCodeSequence", "SegmentedPropertyTypeCodeSequence"):
            if not it.get(kw):
                rep.fail("segment %s lacks %s" % (it.get("SegmentNumber"), kw))
    for v in labels:
        if v not in nums:
            rep.fail("label %d of the mask has no segment in SegmentSequence (segment N is label N)" % v)
    if expect is not None and len(items) != expect:
        rep.fail("SegmentSequence has %d segments, want %d" % (len(items), expect))
    return {n: str(it.get("SegmentLabel", "")) for n, it in zip(nums, items)}


def frame_refs(seg, rep):
    """Per frame: (segment number, source UID, source frame, ImagePositionPatient,
    ImageOrientationPatient or None, PixelSpacing or None)."""
    shared = seg.SharedFunctionalGroupsSequence[0] if seg.get("SharedFunctionalGroupsSequence") else None
    dims = [int(it.DimensionIndexPointer) for it in seg.get("DimensionIndexSequence", [])]
    out = []
    for i, fg in enumerate(seg.get("PerFrameFunctionalGroupsSequence", [])):
        try:
            s = int(group(fg, None, "SegmentIdentificationSequence").ReferencedSegmentNumber)
            src = group(fg, None, "DerivationImageSequence").SourceImageSequence[0]
            rf = src.get("ReferencedFrameNumber", 1)
            rf = int(rf[0] if isinstance(rf, (list, pydicom.multival.MultiValue)) else rf or 1)
            ipp = np.array(group(fg, None, "PlanePositionSequence").ImagePositionPatient, float)
            iop = np.array(group(fg, shared, "PlaneOrientationSequence").ImageOrientationPatient, float)
            ps = np.array(group(fg, shared, "PixelMeasuresSequence").PixelSpacing, float)
        except (AttributeError, IndexError, Failed) as e:
            raise Failed("frame %d: %s" % (i + 1, e))
        if SEGMENT_NUMBER_TAG in dims:
            div = list(group(fg, None, "FrameContentSequence").get("DimensionIndexValues", []))
            p = dims.index(SEGMENT_NUMBER_TAG)
            if len(div) != len(dims) or int(div[p]) != s:
                rep.fail("frame %d: DimensionIndexValues %s do not give its segment %d at index %d" % (i + 1, div, s, p))
        out.append((s, str(src.ReferencedSOPInstanceUID), rf, str(src.get("ReferencedSOPClassUID", "")), ipp, iop, ps))
    return out


def check_identity(seg, src, rep):
    """Patient, study and frame of reference of the source; a series and instance of its own."""
    for kw in ("PatientID", "PatientName", "StudyInstanceUID", "FrameOfReferenceUID"):
        a, b = str(seg.get(kw, "")), str(src.get(kw, ""))
        if kw == "FrameOfReferenceUID" and b == "":
            if a == "":
                rep.fail("SEG has no FrameOfReferenceUID (Type 1)")
        elif a != b:
            rep.fail("SEG %s %r differs from the source's %r" % (kw, a, b))
    if seg.get("SeriesInstanceUID") == src.get("SeriesInstanceUID"):
        rep.fail("SEG is in its source's series %s (a SEG is a series of its own)" % src.SeriesInstanceUID)


def check_references(seg, used, sources, rep):
    """ReferencedSeriesSequence names every source instance that a frame uses, under its series."""
    listed = defaultdict(dict)
    for s in seg.get("ReferencedSeriesSequence", []):
        for r in s.get("ReferencedInstanceSequence", []):
            listed[str(s.get("SeriesInstanceUID"))][str(r.ReferencedSOPInstanceUID)] = str(r.get("ReferencedSOPClassUID"))
    missing = []
    for uid in sorted(used):
        ds = sources[uid][0]
        cls = listed[str(ds.SeriesInstanceUID)].get(uid)
        if cls is None:
            missing.append(uid)
        elif cls != ds.SOPClassUID:
            rep.fail("ReferencedSeriesSequence gives instance %s class %s, the file has %s" % (uid, cls, ds.SOPClassUID))
    if missing:
        rep.fail("ReferencedSeriesSequence lacks %d of the %d referenced instances (first %s)" % (len(missing), len(used), missing[0]))


def series_slices(sources, uids):
    """Every (uid, frame) of the series uids, sorted along the slice normal: [(key, geometry,
    rows, cols)]."""
    out = []
    for uid, (ds, _) in sources.items():
        if str(ds.get("SeriesInstanceUID")) in uids:
            for f in range(1, int(ds.get("NumberOfFrames", 1) or 1) + 1):
                out.append(((uid, f), plane(ds, f), int(ds.Rows), int(ds.Columns)))
    normal = np.cross(out[0][1][1][:3], out[0][1][1][3:])
    out.sort(key=lambda s: float(np.dot(normal, s[1][0])))
    return out


def hint(bits, want):
    for name, t in (("rows reversed", want[::-1]), ("columns reversed", want[:, ::-1]), ("both reversed", want[::-1, ::-1])):
        if np.array_equal(bits, t):
            return " (it equals the mask with %s)" % name
    return ""


def check_frames(seg, arr, refs, sources, mask, inv, rep):
    """The per-frame and per-slice checks; returns (slices, frames by key, foreground pixels)."""
    by_key = defaultdict(list)
    for i, (s, uid, rf, cls, ipp, iop, ps) in enumerate(refs):
        if uid not in sources:
            rep.fail("frame %d: source instance %s is not in the series folder" % (i + 1, uid))
            continue
        ds = sources[uid][0]
        if cls != ds.SOPClassUID:
            rep.fail("frame %d: ReferencedSOPClassUID %s, the source's is %s" % (i + 1, cls, ds.SOPClassUID))
        by_key[(uid, rf)].append(i)
    if not by_key and not refs:
        uids = {str(s.SeriesInstanceUID) for s in seg.get("ReferencedSeriesSequence", [])}
        uids = uids or {str(ds.SeriesInstanceUID) for ds, _ in sources.values()}
    else:
        uids = {str(sources[k[0]][0].SeriesInstanceUID) for k in by_key}
    if len(uids) != 1:
        raise Failed("the SEG refers to %d series (%s), want 1" % (len(uids), ", ".join(sorted(uids))))
    slices = series_slices(sources, uids)
    keys = {k for k, _, _, _ in slices}
    for k in by_key:
        if k not in keys:
            rep.fail("frames %s refer to frame %d of %s, which that instance lacks" % ([i + 1 for i in by_key[k]], k[1], k[0]))
    check_identity(seg, sources[slices[0][0][0]][0], rep)
    check_references(seg, {k[0] for k in by_key}, sources, rep)
    covered = np.zeros(mask.size, bool)
    pixels = foreground = 0
    for z, (key, geom, rows, cols) in enumerate(slices):
        what = "slice z=%d (instance %s%s)" % (z, key[0], "" if key[1] == 1 else " frame %d" % key[1])
        if (rows, cols) != (seg.Rows, seg.Columns):
            rep.fail("%s is %dx%d, the SEG's frames %dx%d" % (what, rows, cols, seg.Rows, seg.Columns))
            continue
        labels, idx = gather(mask, inv, geom, rows, cols, what)
        covered[idx] = True
        pixels += rows * cols
        seen = defaultdict(list)
        for i in by_key.get(key, []):
            s, _, _, _, ipp, iop, ps = refs[i]
            seen[s].append(i)
            where = "frame %d (segment %d, %s)" % (i + 1, s, what)
            if not close(ipp, geom[0], POS_TOL):
                rep.fail("%s: ImagePositionPatient %s, the source's %s" % (where, list(ipp), list(geom[0])))
            if not close(iop, geom[1], DIR_TOL):
                rep.fail("%s: ImageOrientationPatient %s, the source's %s" % (where, list(iop), list(geom[1])))
            if not close(ps, geom[2], DIR_TOL):
                rep.fail("%s: PixelSpacing %s, the source's %s" % (where, list(ps), list(geom[2])))
            bits, want = arr[i] != 0, labels == s
            diff = bits != want
            if diff.any():
                r, c = np.argwhere(diff)[0]
                rep.fail("%s: %d pixels differ from the mask (first row %d col %d: SEG %d, mask label %d)%s"
                         % (where, int(diff.sum()), r, c, int(bits[r, c]), int(labels[r, c]), hint(bits, want)))
            foreground += int(bits.sum())
        for s, frames in seen.items():
            if len(frames) > 1:
                rep.fail("%s: segment %d has %d frames %s" % (what, s, len(frames), [i + 1 for i in frames]))
        for v in np.flatnonzero(np.bincount(labels.reshape(-1))):
            if v != 0 and v not in seen:
                rep.fail("%s: label %d has %d pixels but the SEG has no frame of segment %d there" % (what, v, int((labels == v).sum()), v))
    if pixels != mask.size or not covered.all():
        fg = int(np.count_nonzero(mask.reshape(-1)[~covered]))
        rep.fail("the series' %d slices give %d pixels for the mask's %d voxels, %d voxels (%d foreground) on no slice: mask and series grids differ"
                 % (len(slices), pixels, mask.size, int((~covered).sum()), fg))
    return slices, by_key, foreground


def palette(n):
    base = [(230, 25, 75), (60, 180, 75), (0, 130, 200), (255, 225, 25), (245, 130, 48), (145, 30, 180), (70, 240, 240), (240, 50, 230)]
    out = {}
    for s in range(1, n + 1):
        if s <= len(base):
            out[s] = base[s - 1]
        else:
            h = (s * 0.618034) % 1.0
            out[s] = tuple(int(255 * (0.5 + 0.5 * np.cos(2 * np.pi * (h + t)))) for t in (0, 1 / 3, 2 / 3))
    return out


def write_png(path, rgb):
    """An 8-bit RGB PNG by hand (zlib): no imaging library needed."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\0" + rgb[y].tobytes() for y in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def tile(ds, frame, geom, bits_by_seg, colours):
    """One source slice in grey with the SEG's segments over it, scaled for the pixel spacing."""
    px = ds.pixel_array
    img = (px[frame - 1] if px.ndim == 3 else px).astype(float)
    lo, hi = np.percentile(img, [1, 99])
    grey = np.clip((img - lo) / max(hi - lo, 1e-9), 0, 1) * 200 + 20
    rgb = np.repeat(grey[..., None], 3, axis=2)
    for s, bits in bits_by_seg:
        rgb[bits] = 0.35 * rgb[bits] + 0.65 * np.array(colours[s], float)
    dr, dc = geom[2]
    f = max(1, int(round(256 / (img.shape[0] * dr / min(dr, dc)))))
    fr, fc = max(1, int(round(f * dr / min(dr, dc)))), max(1, int(round(f * dc / min(dr, dc))))
    return np.repeat(np.repeat(rgb, fr, axis=0), fc, axis=1).astype(np.uint8)


def text(canvas, xy, s, colour):
    """Draws s with PIL's default font when PIL is there (the colours alone otherwise)."""
    try:
        from PIL import Image, ImageDraw
    except ImportError:
        return canvas
    im = Image.fromarray(canvas)
    ImageDraw.Draw(im).text(xy, s, fill=colour)
    return np.asarray(im).copy()


def render(path, seg, arr, refs, slices, by_key, sources, names, count=4):
    """The PNG of the slices with the most SEG foreground; returns its caption."""
    colours = palette(max(names) if names else 1)
    fg = {k: sum(int(np.count_nonzero(arr[i])) for i in by_key.get(k, [])) for k, _, _, _ in slices}
    zs = [z for z in range(len(slices)) if fg[slices[z][0]]]  # the middle one of each of count runs of them
    order = [int(part[len(part) // 2]) for part in np.array_split(zs, min(count, len(zs)))] if zs else [len(slices) // 2]
    tiles = []
    for z in order:
        key, geom = slices[z][0], slices[z][1]
        ds = pydicom.dcmread(sources[key[0]][1])
        bits = [(refs[i][0], arr[i] != 0) for i in by_key.get(key, [])]
        tiles.append((z, tile(ds, key[1], geom, bits, colours)))
    gap, top, bottom = 8, 22, 30
    h = max(t.shape[0] for _, t in tiles)
    w = sum(t.shape[1] for _, t in tiles) + gap * (len(tiles) + 1)
    canvas = np.full((h + top + bottom, w, 3), 24, np.uint8)
    x = gap
    for z, t in tiles:
        canvas[top:top + t.shape[0], x:x + t.shape[1]] = t
        canvas = text(canvas, (x, 5), "slice z=%d, %d px" % (z, fg[slices[z][0]]), (230, 230, 230))
        x += t.shape[1] + gap
    x = gap
    for n, label in sorted(names.items()):
        canvas[h + top + 8:h + top + 20, x:x + 12] = colours[n]
        canvas = text(canvas, (x + 16, h + top + 8), "%d %s" % (n, label), (230, 230, 230))
        x += 24 + 7 * len("%d %s" % (n, label))
    write_png(path, canvas[:, :max(w, x)])
    return "SEG %s (%s): slices z=%s of %d; segments %s" % (
        seg.get("SeriesDescription", ""), seg.SOPInstanceUID, ",".join(map(str, order)), len(slices),
        ", ".join("%d %s" % kv for kv in sorted(names.items())))


def write_html(path, png, caption, names):
    colours = palette(max(names) if names else 1)
    items = "".join('<li><span style="background:rgb%s">&nbsp;&nbsp;&nbsp;</span> %d %s</li>'
                    % (colours[n], n, html.escape(label)) for n, label in sorted(names.items()))
    with open(path, "w") as f:
        f.write('<!doctype html><html><head><meta charset="utf-8"><title>DICOM SEG overlay</title></head>'
                '<body style="background:#111;color:#eee;font-family:sans-serif;margin:16px">'
                "<h2>DICOM SEG read back by pydicom over its source slices</h2>"
                '<img src="%s" style="image-rendering:pixelated;max-width:100%%"><p>%s</p><ul>%s</ul></body></html>'
                % (html.escape(os.path.relpath(png, os.path.dirname(os.path.abspath(path)))), html.escape(caption), items))


def run(a, rep):
    seg = pydicom.dcmread(a.seg)
    check_header(seg, rep)
    if rep.fails and seg.get("SOPClassUID") != SEG_CLASS:
        return None
    try:
        arr = seg.pixel_array if "PixelData" in seg and int(seg.get("NumberOfFrames", 0) or 0) > 0 else np.zeros((0, seg.Rows, seg.Columns), np.uint8)
    except Exception as e:  # pydicom's errors for short or undecodable pixel data vary
        raise Failed("pydicom cannot read the SEG's pixels: %s: %s" % (type(e).__name__, e))
    if arr.ndim == 2:
        arr = arr[None]
    refs = frame_refs(seg, rep)
    if len(refs) != arr.shape[0] or int(seg.get("NumberOfFrames", 0) or 0) != arr.shape[0]:
        raise Failed("NumberOfFrames %s, %d per-frame groups, %d frames of pixels" % (seg.get("NumberOfFrames"), len(refs), arr.shape[0]))
    mask, inv = read_mask(a.mask)
    labels = [int(v) for v in np.unique(mask) if v != 0]
    names = check_segments(seg, labels, rep, a.expect_segments)
    for i, r in enumerate(refs):
        if r[0] not in names:
            rep.fail("frame %d: segment %d is not in SegmentSequence" % (i + 1, r[0]))
    sources = read_sources(a.series)
    slices, by_key, fg = check_frames(seg, arr, refs, sources, mask, inv, rep)
    empty = sum(1 for i in range(arr.shape[0]) if not arr[i].any())
    summary = ("segcheck ok: %d frames (%d empty), %d segments (%s), %d slices of %dx%d, %d foreground pixels equal to mask %s (labels %s)"
               % (arr.shape[0], empty, len(names), ", ".join("%d %s" % kv for kv in sorted(names.items())), len(slices),
                  seg.Rows, seg.Columns, fg, "x".join(map(str, mask.shape)), labels))
    if a.png:
        caption = render(a.png, seg, arr, refs, slices, by_key, sources, names)
        print("png: %s: %s" % (a.png, caption))
        if a.html:
            write_html(a.html, a.png, caption, names)
    return summary


def main():
    p = argparse.ArgumentParser(description="check a DICOM SEG against its NIfTI label mask and source series")
    p.add_argument("seg")
    p.add_argument("mask")
    p.add_argument("series")
    p.add_argument("--png", help="write an overlay of the SEG as read back over its source slices")
    p.add_argument("--html", help="with --png: a page showing the PNG and its caption")
    p.add_argument("--expect-segments", type=int)
    a = p.parse_args()
    if a.html and not a.png:
        p.error("--html needs --png")
    rep = Report()
    try:
        summary = run(a, rep)
    except Failed as e:
        rep.fail(str(e))
    except (OSError, pydicom.errors.InvalidDicomError, nib.filebasedimages.ImageFileError) as e:
        rep.fail("cannot read: %s" % e)
    if rep.fails:
        for m in rep.fails[:SHOWN]:
            print("segcheck FAIL: %s" % m)
        if len(rep.fails) > SHOWN:
            print("segcheck: ... and %d more" % (len(rep.fails) - SHOWN))
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
