#!/usr/bin/python3
"""Test data for scripts/segcheck.py, written with pydicom from the DICOM standard alone (no
voxpipe code): a small single-frame series, its label mask as a NIfTI file in dcm2niix's layout
(or reoriented), and a BINARY DICOM SEG of the labels (PS3.3 A.51, C.8.20), which tests can
tamper with frame by frame.

The labels are given in the series' own terms, labels[k, r, c]: slice k (ascending along the
slice normal), row r, column c of the stored image. The SEG's frames are those slices as they
are (no geometry involved); the NIfTI gets them through dcm2niix's convention (voxel i = c,
j = Rows-1-r, k; LPS to RAS). segcheck.py goes the other way, pixel by pixel through the
affine, so the two meet only if both follow the standard.

As a command (a stand-in for voxpipe export-seg while testing the scripts that use it):
  segmake.py --from-mask MASK.nii[.gz] SERIES_DIR OUT.dcm   the SEG of a mask on a series' grid
"""
import os
import sys

import nibabel as nib
import numpy as np
import pydicom
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.sequence import Sequence
from pydicom.uid import ExplicitVRLittleEndian, generate_uid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dicom_gen  # noqa: E402  (scripts/dicom_gen.py: the repo's pydicom series writer)

SEG_CLASS = "1.2.840.10008.5.1.4.1.1.66.4"
STUDY = "1.2.826.0.1.3680043.8.498.33"
NAMES = {1: "tissue", 2: "fluid", 3: "lesion"}


def code(scheme, value, meaning):
    c = Dataset()
    c.CodingSchemeDesignator, c.CodeValue, c.CodeMeaning = scheme, value, meaning
    return c


def write_series(folder, orient="axial", shape=(6, 10, 12), spacing=(0.9, 0.8), step=2.5, seed=0):
    """Writes shape = (slices, rows, cols) MR slices to folder, instance numbers reversed along
    the normal; returns their datasets (no pixels) in ascending order along the normal."""
    os.makedirs(folder, exist_ok=True)
    n, rows, cols = shape
    row, col = (np.array(v, float) for v in dicom_gen.ORIENT[orient])
    normal = np.cross(row, col)
    origin = np.array([-40.5, 30.25, -12.0])
    su, fr = generate_uid(), generate_uid()
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        ds = dicom_gen.base(su, STUDY, 7, "segcheck " + orient)
        ds.FrameOfReferenceUID = fr
        ds.Rows, ds.Columns = rows, cols
        ds.PixelSpacing = [spacing[0], spacing[1]]
        ds.SliceThickness = step
        ds.SOPInstanceUID = generate_uid()
        ds.InstanceNumber = n - k
        ds.PixelRepresentation = 1
        ds.ImageOrientationPatient = [dicom_gen.fmt(v) for v in list(row) + list(col)]
        ds.ImagePositionPatient = [dicom_gen.fmt(v) for v in origin + k * step * normal]
        pixels = rng.integers(0, 1000, size=(rows, cols), dtype=np.int16)
        dicom_gen.save(ds, os.path.join(folder, "IM%04d" % (n - k)), ExplicitVRLittleEndian, pixels)
        del ds.PixelData
        out.append(ds)
    return out


def nifti_affine(slices):
    """dcm2niix's affine of a single-frame series (RAS): voxel (i, j, k) is column i, row
    Rows-1-j of slice k."""
    first = slices[0]
    x, y = np.array(first.ImageOrientationPatient[:3], float), np.array(first.ImageOrientationPatient[3:], float)
    dr, dc = (float(v) for v in first.PixelSpacing)
    p0 = np.array(first.ImagePositionPatient, float)
    step = (np.array(slices[-1].ImagePositionPatient, float) - p0) / max(len(slices) - 1, 1)
    if len(slices) == 1:
        step = np.cross(x, y) * float(first.SliceThickness)
    lps = np.eye(4)
    lps[:3, 0], lps[:3, 1], lps[:3, 2] = x * dc, -y * dr, step
    lps[:3, 3] = p0 + (first.Rows - 1) * dr * y
    return np.diag([-1.0, -1.0, 1.0, 1.0]) @ lps


def write_mask(path, slices, labels, axcodes=None, dtype=np.uint8):
    """Writes labels[k, r, c] as a NIfTI mask in dcm2niix's layout, or reoriented to axcodes
    (such as ("R", "A", "S")) with nibabel."""
    data = np.ascontiguousarray(labels[:, ::-1, :].transpose(2, 1, 0)).astype(dtype)
    img = nib.Nifti1Image(data, nifti_affine(slices))
    img.set_qform(img.affine, code=1)
    img.set_sform(img.affine, code=1)
    if axcodes:
        now = nib.orientations.io_orientation(img.affine)
        img = img.as_reoriented(nib.orientations.ornt_transform(now, nib.orientations.axcodes2ornt(axcodes)))
    nib.save(img, path)
    return img


def frames_of(labels, nseg, empty=False):
    """The frames of a SEG of labels: (segment, slice, bitmap), by segment then slice; frames
    with no foreground left out unless empty."""
    out = []
    for s in range(1, nseg + 1):
        for k in range(labels.shape[0]):
            bits = (labels[k] == s).astype(np.uint8)
            if empty or bits.any():
                out.append((s, k, bits))
    return out


def segment_item(n, label):
    it = Dataset()
    it.SegmentNumber = n
    it.SegmentLabel = label
    it.SegmentAlgorithmType = "MANUAL"
    it.SegmentedPropertyCategoryCodeSequence = Sequence([code("SCT", "85756007", "Tissue")])
    it.SegmentedPropertyTypeCodeSequence = Sequence([code("SCT", "85756007", "Tissue")])
    return it


def frame_item(src, s, k):
    fg = Dataset()
    der = Dataset()
    der.DerivationCodeSequence = Sequence([code("DCM", "113076", "Segmentation")])
    ref = Dataset()
    ref.ReferencedSOPClassUID = src.SOPClassUID
    ref.ReferencedSOPInstanceUID = src.SOPInstanceUID
    ref.PurposeOfReferenceCodeSequence = Sequence([code("DCM", "121322", "Source image for image processing operation")])
    der.SourceImageSequence = Sequence([ref])
    fg.DerivationImageSequence = Sequence([der])
    fc = Dataset()
    fc.DimensionIndexValues = [s, k + 1]
    fg.FrameContentSequence = Sequence([fc])
    pp = Dataset()
    pp.ImagePositionPatient = list(src.ImagePositionPatient)
    fg.PlanePositionSequence = Sequence([pp])
    si = Dataset()
    si.ReferencedSegmentNumber = s
    fg.SegmentIdentificationSequence = Sequence([si])
    return fg


def dimension_index(org):
    out = []
    for ptr, group in (((0x0062, 0x000B), (0x0062, 0x000A)), ((0x0020, 0x0032), (0x0020, 0x9113))):
        it = Dataset()
        it.DimensionOrganizationUID = org
        it.DimensionIndexPointer = pydicom.tag.Tag(*ptr)
        it.FunctionalGroupPointer = pydicom.tag.Tag(*group)
        out.append(it)
    return Sequence(out)


def build_seg(slices, frames, names=None):
    """A BINARY SEG dataset of frames (segment, slice index, bitmap) on slices (their
    datasets, ascending), segments 1..max(names)."""
    names = names or NAMES
    src = slices[0]
    ds = Dataset()
    ds.SpecificCharacterSet = "ISO_IR 100"
    ds.SOPClassUID, ds.SOPInstanceUID = SEG_CLASS, generate_uid()
    for kw in ("PatientName", "PatientID", "StudyInstanceUID", "StudyDate", "StudyTime"):
        setattr(ds, kw, getattr(src, kw, ""))
    ds.FrameOfReferenceUID = src.get("FrameOfReferenceUID") or generate_uid()  # Type 1 here
    ds.PatientBirthDate = ds.PatientSex = ds.ReferringPhysicianName = ds.StudyID = ds.AccessionNumber = ""
    ds.PositionReferenceIndicator = ""
    ds.Modality, ds.SeriesInstanceUID, ds.SeriesNumber, ds.InstanceNumber = "SEG", generate_uid(), 1007, 1
    ds.SeriesDescription = "segmake"
    ds.Manufacturer, ds.ManufacturerModelName = "voxpipe-test", "segmake"
    ds.DeviceSerialNumber, ds.SoftwareVersions = "0", "1"
    ds.ContentDate, ds.ContentTime = "20260101", "120000"
    ds.ImageType = ["DERIVED", "PRIMARY"]
    ds.ContentLabel, ds.ContentDescription, ds.ContentCreatorName = "SEGMAKE", "", ""
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.Rows, ds.Columns = src.Rows, src.Columns
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 1, 1, 0, 0
    ds.LossyImageCompression = "00"
    ds.SegmentationType = "BINARY"
    ds.SegmentSequence = Sequence([segment_item(n, names[n]) for n in sorted(names)])
    org = generate_uid()
    do = Dataset()
    do.DimensionOrganizationUID = org
    ds.DimensionOrganizationSequence = Sequence([do])
    ds.DimensionIndexSequence = dimension_index(org)
    shared = Dataset()
    po = Dataset()
    po.ImageOrientationPatient = list(src.ImageOrientationPatient)
    shared.PlaneOrientationSequence = Sequence([po])
    pm = Dataset()
    pm.PixelSpacing = list(src.PixelSpacing)
    pm.SliceThickness = src.SliceThickness
    shared.PixelMeasuresSequence = Sequence([pm])
    ds.SharedFunctionalGroupsSequence = Sequence([shared])
    ds.PerFrameFunctionalGroupsSequence = Sequence([frame_item(slices[k], s, k) for s, k, _ in frames])
    ds.NumberOfFrames = len(frames)
    series = Dataset()
    series.SeriesInstanceUID = src.SeriesInstanceUID
    refs = []
    for k in sorted({k for _, k, _ in frames}):
        r = Dataset()
        r.ReferencedSOPClassUID, r.ReferencedSOPInstanceUID = slices[k].SOPClassUID, slices[k].SOPInstanceUID
        refs.append(r)
    series.ReferencedInstanceSequence = Sequence(refs)
    ds.ReferencedSeriesSequence = Sequence([series])
    bits = np.concatenate([b.reshape(-1) for _, _, b in frames]) if frames else np.zeros(0, np.uint8)
    packed = np.packbits(bits, bitorder="little").tobytes()  # PS3.5 8.1.1: LSB first, no padding between frames
    ds.PixelData = packed + b"\0" * (len(packed) % 2)
    ds["PixelData"].VR = "OB"
    return ds


def save_seg(ds, path):
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID = ds.SOPClassUID, ds.SOPInstanceUID
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.file_meta = meta
    ds.is_little_endian, ds.is_implicit_VR = True, False
    ds.save_as(path, write_like_original=False)


def labels_from_mask(mask_path, slices):
    """labels[k, r, c] of a NIfTI mask on the grid of slices, through its affine."""
    img = nib.load(mask_path)
    data = np.asanyarray(img.dataobj)
    inv = np.linalg.inv(img.affine)
    out = np.zeros((len(slices), slices[0].Rows, slices[0].Columns), np.uint8)
    for k, s in enumerate(slices):
        x, y = np.array(s.ImageOrientationPatient[:3], float), np.array(s.ImageOrientationPatient[3:], float)
        dr, dc = (float(v) for v in s.PixelSpacing)
        r, c = np.meshgrid(np.arange(s.Rows), np.arange(s.Columns), indexing="ij")
        lps = np.array(s.ImagePositionPatient, float) + c[..., None] * dc * x + r[..., None] * dr * y
        ras = lps * [-1, -1, 1]
        ijk = np.rint(ras @ inv[:3, :3].T + inv[:3, 3]).astype(int)
        out[k] = data[ijk[..., 0], ijk[..., 1], ijk[..., 2]]
    return out


def read_series(folder):
    """The single-frame slices of folder, ascending along their normal."""
    dss = [pydicom.dcmread(os.path.join(folder, f), stop_before_pixels=True) for f in sorted(os.listdir(folder))]
    n = np.cross(*(np.array(v, float) for v in (dss[0].ImageOrientationPatient[:3], dss[0].ImageOrientationPatient[3:])))
    return sorted(dss, key=lambda d: float(np.dot(n, np.array(d.ImagePositionPatient, float))))


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "--from-mask":
        sys.exit("usage: segmake.py --from-mask MASK.nii[.gz] SERIES_DIR OUT.dcm")
    sl = read_series(sys.argv[3])
    lab = labels_from_mask(sys.argv[2], sl)
    top = max(3, int(lab.max()))
    save_seg(build_seg(sl, frames_of(lab, top), {n: NAMES.get(n, "label %d" % n) for n in range(1, top + 1)}), sys.argv[4])
