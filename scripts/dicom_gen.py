#!/usr/bin/python3
"""Writes synthetic DICOM series with pydicom for scripts/dicom-test.sh.

One folder per case under OUT: every combination of orientation (axial, sagittal, coronal,
oblique), slice order (instance numbers reversed along the normal; instance numbers and file
names shuffled), signed or unsigned pixels, with or without rescale, and transfer syntax
(implicit VR LE, explicit VR LE, explicit VR BE, deflated, RLE); plus an enhanced multi-frame
MR file, a series with a missing slice, and two series mixed in one folder. OUT/cases.txt lists
the folders with what voxpipe must do with them (match or refuse) and the folder dcm2niix
converts as the reference (the same one, or for deflated files, which dcm2niix does not read,
the same series written explicit VR little endian).

dicom_gen.py --bench N OUT writes the read-speed series of docs/perf.md instead;
dicom_gen.py --from-nifti VOLUME OUT writes a volume as a DICOM series (the run test).
"""
import copy
import itertools
import math
import os
import sys

import numpy as np
import pydicom
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.sequence import Sequence
from pydicom.uid import (ExplicitVRBigEndian, ExplicitVRLittleEndian, ImplicitVRLittleEndian,
                         DeflatedExplicitVRLittleEndian, RLELossless, generate_uid)

ROWS, COLS, NSLICES = 20, 24, 12
SPACING = (0.9, 0.8)  # between rows, between columns
STEP = 2.5


def rot(ax, ay, az):
    cx, sx, cy, sy, cz, sz = math.cos(ax), math.sin(ax), math.cos(ay), math.sin(ay), math.cos(az), math.sin(az)
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rz @ ry @ rx


R = rot(0.26, -0.35, 0.17)
ORIENT = {
    "axial": ([1, 0, 0], [0, 1, 0]),
    "sagittal": ([0, 1, 0], [0, 0, -1]),
    "coronal": ([1, 0, 0], [0, 0, -1]),
    "oblique": (list(R @ [1, 0, 0]), list(R @ [0, 1, 0])),
}
SYNTAX = {
    "implicit": ImplicitVRLittleEndian,
    "explicit": ExplicitVRLittleEndian,
    "bigendian": ExplicitVRBigEndian,
    "deflated": DeflatedExplicitVRLittleEndian,
    "rle": RLELossless,
}


def fmt(v):
    return float("%.6f" % v)


def base(series_uid, study_uid, number, desc):
    ds = Dataset()
    ds.SOPClassUID = "1.2.840.10008.5.1.4.1.1.4"  # MR Image Storage
    ds.Modality = "MR"
    ds.PatientName = "Doe^Jane"
    ds.PatientID = "PID-0042"
    ds.StudyDate = "20240102"
    ds.StudyTime = "101500"
    ds.StudyInstanceUID = study_uid
    ds.SeriesInstanceUID = series_uid
    ds.SeriesNumber = number
    ds.SeriesDescription = desc
    ds.ProtocolName = desc
    ds.Manufacturer = "voxpipe-test"
    ds.EchoTime = 10
    ds.RepetitionTime = 500
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.Rows, ds.Columns = ROWS, COLS
    ds.PixelSpacing = [SPACING[0], SPACING[1]]
    ds.SliceThickness = STEP
    ds.BitsAllocated = 16
    ds.BitsStored = 16
    ds.HighBit = 15
    return ds


def save(ds, path, syntax, pixels):
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = ds.SOPClassUID
    meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
    meta.TransferSyntaxUID = syntax
    ds.file_meta = meta
    ds.is_little_endian = syntax != ExplicitVRBigEndian
    ds.is_implicit_VR = syntax == ImplicitVRLittleEndian
    if syntax == RLELossless:
        ds.PixelData = pixels.astype(pixels.dtype.newbyteorder("<")).tobytes()
        ds.compress(RLELossless, pixels)
    else:
        order = ">" if syntax == ExplicitVRBigEndian else "<"
        ds.PixelData = pixels.astype(pixels.dtype.newbyteorder(order)).tobytes()
        ds["PixelData"].VR = "OW"
    ds.save_as(path, write_like_original=False)


def series(folder, orient, order, signed, rescale, syntax, rng, number=3, desc="t1 test", drop=None, uid=None, ref=None, acq3d=False):
    """Writes a series; ref, when given, is a folder that gets the same files in explicit VR
    little endian (dcm2niix's reference for syntaxes it does not read)."""
    os.makedirs(folder, exist_ok=True)
    if ref:
        os.makedirs(ref, exist_ok=True)
    row, col = (np.array(v, float) for v in ORIENT[orient])
    normal = np.cross(row, col)
    origin = np.array([-100.3, 80.7, -40.2])
    series_uid, study_uid = uid or generate_uid(), "1.2.826.0.1.3680043.8.498.1"
    if signed:
        vol = rng.integers(-2000, 2000, size=(NSLICES, ROWS, COLS), dtype=np.int16)
    else:
        vol = rng.integers(0, 40000, size=(NSLICES, ROWS, COLS), dtype=np.uint16)
    positions = list(range(NSLICES))
    if order == "reversed":
        instances = [NSLICES - k for k in positions]
    else:  # shuffled instance numbers
        instances = list(rng.permutation(NSLICES) + 1)
    names = [f"IM{i:04d}" for i in rng.permutation(NSLICES)] if order == "shuffled" else [f"IM{instances[k]:04d}" for k in positions]
    for k in positions:
        if drop is not None and k == drop:
            continue
        ds = base(series_uid, study_uid, number, desc)
        ds.SOPInstanceUID = generate_uid()
        ds.InstanceNumber = int(instances[k])
        ds.PixelRepresentation = 1 if signed else 0
        if acq3d:  # dcm2niix reorients 3D acquisitions to the nearest orthogonal orientation
            ds.MRAcquisitionType = "3D"
        ds.ImageOrientationPatient = [fmt(v) for v in list(row) + list(col)]
        ds.ImagePositionPatient = [fmt(v) for v in origin + k * STEP * normal]
        if rescale:
            ds.RescaleSlope = 2.5
            ds.RescaleIntercept = -100
        if ref:
            save(copy.deepcopy(ds), os.path.join(ref, names[k]), ExplicitVRLittleEndian, vol[k])
        save(ds, os.path.join(folder, names[k]), syntax, vol[k])


def enhanced(folder, rng):
    """One enhanced MR file: per-frame positions, shared orientation and spacing."""
    os.makedirs(folder, exist_ok=True)
    row, col = (np.array(v, float) for v in ORIENT["oblique"])
    normal = np.cross(row, col)
    origin = np.array([10.5, -20.25, 30.0])
    vol = rng.integers(-1000, 1000, size=(NSLICES, ROWS, COLS), dtype=np.int16)
    ds = base(generate_uid(), "1.2.826.0.1.3680043.8.498.1", 9, "enhanced")
    ds.SOPClassUID = "1.2.840.10008.5.1.4.1.1.4.1"  # Enhanced MR Image Storage
    ds.SOPInstanceUID = generate_uid()
    ds.InstanceNumber = 1
    ds.PixelRepresentation = 1
    ds.NumberOfFrames = NSLICES
    del ds.PixelSpacing, ds.SliceThickness
    shared = Dataset()
    pm = Dataset()
    pm.PixelSpacing = [SPACING[0], SPACING[1]]
    pm.SliceThickness = STEP
    shared.PixelMeasuresSequence = Sequence([pm])
    po = Dataset()
    po.ImageOrientationPatient = [fmt(v) for v in list(row) + list(col)]
    shared.PlaneOrientationSequence = Sequence([po])
    pvt = Dataset()
    pvt.RescaleSlope, pvt.RescaleIntercept, pvt.RescaleType = 1, 0, "US"
    shared.PixelValueTransformationSequence = Sequence([pvt])
    ds.SharedFunctionalGroupsSequence = Sequence([shared])
    frames = []
    for k in range(NSLICES):
        fr = Dataset()
        pp = Dataset()
        pp.ImagePositionPatient = [fmt(v) for v in origin + k * STEP * normal]
        fr.PlanePositionSequence = Sequence([pp])
        fc = Dataset()
        fc.DimensionIndexValues = [1, k + 1]
        fc.InStackPositionNumber = k + 1
        fc.StackID = "1"
        fr.FrameContentSequence = Sequence([fc])
        frames.append(fr)
    ds.PerFrameFunctionalGroupsSequence = Sequence(frames)
    save(ds, os.path.join(folder, "enhanced.dcm"), ExplicitVRLittleEndian, vol)


def main(out):
    rng = np.random.default_rng(21)
    cases = []
    for orient, order, signed, rescale, syn in itertools.product(ORIENT, ["reversed", "shuffled"], [True, False], [False, True], SYNTAX):
        name = f"{orient}-{order}-{'s' if signed else 'u'}{'-rescale' if rescale else ''}-{syn}"
        # dcm2niix does not read deflated files: its reference is the same series inflated.
        ref = name + ".inflated" if syn == "deflated" else None
        series(os.path.join(out, name), orient, order, signed, rescale, SYNTAX[syn], rng,
               ref=ref and os.path.join(out, ref))
        cases.append((name, "match", ref or name))
    series(os.path.join(out, "sagittal-3d-acquisition"), "sagittal", "reversed", True, False, ExplicitVRLittleEndian, rng, acq3d=True)
    cases.append(("sagittal-3d-acquisition", "match", "sagittal-3d-acquisition"))
    enhanced(os.path.join(out, "enhanced-multiframe"), rng)
    cases.append(("enhanced-multiframe", "match", "enhanced-multiframe"))
    series(os.path.join(out, "missing-slice"), "axial", "reversed", True, False, ExplicitVRLittleEndian, rng, drop=5)
    cases.append(("missing-slice", "refuse", "missing-slice"))
    mixed = os.path.join(out, "two-series")
    series(mixed, "sagittal", "shuffled", True, True, ExplicitVRLittleEndian, rng, number=4, desc="first")
    tmp = os.path.join(out, ".second")
    series(tmp, "coronal", "reversed", False, False, ImplicitVRLittleEndian, rng, number=5, desc="second")
    for f in os.listdir(tmp):
        os.rename(os.path.join(tmp, f), os.path.join(mixed, "B" + f))
    os.rmdir(tmp)
    cases.append(("two-series", "match", "two-series"))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        for c in cases:
            f.write(" ".join(c) + "\n")


def bench(out, n):
    """The read-speed series of docs/perf.md: n axial 512x512 int16 slices, explicit VR LE."""
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1)
    su, st = generate_uid(), generate_uid()
    plane = rng.integers(-1000, 3000, size=(512, 512), dtype=np.int16)
    for k in range(n):
        ds = base(su, st, 1, "bench")
        ds.Rows = ds.Columns = 512
        ds.PixelSpacing, ds.SliceThickness = [0.5, 0.5], 0.5
        ds.SOPInstanceUID = generate_uid()
        ds.InstanceNumber = k + 1
        ds.PixelRepresentation = 1
        ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
        ds.ImagePositionPatient = [-128, -128, -250 + 0.5 * k]
        save(ds, os.path.join(out, "IM%04d" % (k + 1)), ExplicitVRLittleEndian, np.roll(plane, k, axis=0))


def from_nifti(path, out):
    """A volume (voxpipe gen's phantom) as a sagittal DICOM series with rescale, instance
    numbers reversed: what voxpipe run must segment as it segments dcm2niix's NIfTI of it."""
    import nibabel as nib
    os.makedirs(out, exist_ok=True)
    img = nib.load(path)
    data = np.asanyarray(img.dataobj).astype(np.int16)
    nx, ny, nz = data.shape
    dx, dy, dz = (float(v) for v in img.header.get_zooms()[:3])
    su, st = generate_uid(), "1.2.826.0.1.3680043.8.498.2"
    row, col = np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, -1.0])
    normal = np.cross(row, col)
    for k in range(nz):
        ds = base(su, st, 11, "phantom sagittal")
        ds.Rows, ds.Columns = ny, nx
        ds.PixelSpacing, ds.SliceThickness = [dy, dx], dz
        ds.SOPInstanceUID = generate_uid()
        ds.InstanceNumber = nz - k
        ds.PixelRepresentation = 1
        ds.RescaleSlope, ds.RescaleIntercept = 1.5, -20
        ds.ImageOrientationPatient = [float(v) for v in list(row) + list(col)]
        ds.ImagePositionPatient = [float(v) for v in np.array([-60.0, -90.0, 70.0]) + k * dz * normal]
        save(ds, os.path.join(out, "IM%04d" % k), ExplicitVRLittleEndian, np.ascontiguousarray(data[:, :, k].T))


if __name__ == "__main__":
    if sys.argv[1] == "--bench":  # dicom_gen.py --bench N OUT
        bench(sys.argv[3], int(sys.argv[2]))
    elif sys.argv[1] == "--from-nifti":  # dicom_gen.py --from-nifti VOLUME OUT
        from_nifti(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1])
