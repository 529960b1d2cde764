#!/usr/bin/python3
"""Regenerates the interop fixtures in this folder with nibabel, an implementation independent
of voxpipe's (Debian: apt-get install python3-nibabel; run with /usr/bin/python3 from this
folder). The voxel values follow the formula in interop_test.go (fixtureValue); fixtures.json
lists every file with what the Go test expects of it."""
import gzip
import json
import os

import nibabel as nib
import numpy as np

NX, NY, NZ = 5, 4, 3
DTYPES = ["uint8", "int8", "int16", "uint16", "int32", "uint32", "float32", "float64"]


def values(dtype, shape):
    x, y, z, t = np.indices(shape + (1,) * (4 - len(shape)))
    base = ((x * 7 + y * 13 + z * 29 + t * 31) % 97).astype(np.int64)
    base = base.reshape(shape)
    if dtype == "uint8":
        return base + 100
    if dtype == "int8":
        return base - 48
    if dtype == "int16":
        return (base - 48) * 300
    if dtype == "uint16":
        return base * 600
    if dtype == "int32":
        return (base - 48) * 40000000
    if dtype == "uint32":
        return base * 40000000 + 123
    if dtype == "float32":
        return (base - 48) * 0.25 + 0.125
    return (base - 48) / 3.0


# An oblique, anisotropic scanner-space affine, to exercise the quaternion fields.
c, s = np.cos(0.3), np.sin(0.3)
AFFINE = np.array([[0.9 * c, -0.9 * s, 0.0, -101.5],
                   [0.9 * s, 0.9 * c, 0.1, -87.25],
                   [0.0, -0.05, 1.2, -40.0],
                   [0, 0, 0, 1]])

fixtures = []


def save(name, dtype, version=1, order="<", shape=(NX, NY, NZ), slope=None, inter=None,
         extension=None, stored=None, note=""):
    cls = nib.Nifti2Image if version == 2 else nib.Nifti1Image
    hdr_cls = nib.Nifti2Header if version == 2 else nib.Nifti1Header
    if name.endswith(".hdr") or name.endswith(".hdr.gz"):
        cls = nib.Nifti2Pair if version == 2 else nib.Nifti1Pair
        hdr_cls = nib.nifti2.Nifti2PairHeader if version == 2 else nib.nifti1.Nifti1PairHeader
    hdr = hdr_cls(endianness=order)
    data = values(dtype, shape) if stored is None else stored
    data = np.asarray(data).astype(np.dtype(dtype).newbyteorder(order))
    img = cls(data, AFFINE, header=hdr)
    img.set_data_dtype(np.dtype(dtype).newbyteorder(order))
    img.header.set_xyzt_units("mm", "sec")
    img.header["descrip"] = b"nibabel fixture " + name.encode()
    img.set_qform(AFFINE, code=1)
    img.set_sform(AFFINE, code=2)
    if extension is not None:
        img.header.extensions.append(nib.nifti1.Nifti1Extension("comment", extension))
    nib.save(img, name)
    if slope is not None:
        # Set slope/inter in the saved header bytes: given to nibabel before saving, they would
        # make it rescale the stored values.
        rewrite_scaling(name, version, order, slope, inter)
    fixtures.append({"file": name, "dtype": dtype, "version": version,
                     "big_endian": order == ">", "dims": list(shape), "note": note,
                     "slope": None if slope is None else repr(slope),
                     "inter": None if inter is None else repr(inter)})


def rewrite_scaling(name, version, order, slope, inter):
    opener = gzip.open if name.endswith(".gz") else open
    with opener(name, "rb") as f:
        raw = bytearray(f.read())
    if version == 1:
        fmt, off = order + "f4", 112
    else:
        fmt, off = order + "f8", 176
    size = np.dtype(fmt).itemsize
    raw[off:off + size] = np.array(slope, fmt).tobytes()
    raw[off + size:off + 2 * size] = np.array(inter, fmt).tobytes()
    with opener(name, "wb") as f:
        f.write(bytes(raw))


for dt in DTYPES:
    for version in (1, 2):
        for order, tag in (("<", "le"), (">", "be")):
            save(f"{dt}_n{version}_{tag}.nii", dt, version, order)

for version in (1, 2):
    for order, tag in (("<", "le"), (">", "be")):
        save(f"int16_n{version}_{tag}.nii.gz", "int16", version, order)
        save(f"float32_n{version}_{tag}.nii.gz", "float32", version, order)

save("int16_n1_le_pair.hdr", "int16", 1, "<")
save("int16_n2_be_pair.hdr", "int16", 2, ">")
save("float32_n1_be_pair.hdr.gz", "float32", 1, ">")
save("uint16_n2_le_pair.hdr.gz", "uint16", 2, "<")
save("int16_n1_le_ext.nii", "int16", 1, "<", extension=b"voxpipe test extension " * 5,
     note="comment extension, vox_offset > 352")
save("int16_n2_be_ext.nii.gz", "int16", 2, ">", extension=b"another extension",
     note="comment extension, NIfTI-2")
save("int16_n1_le_scaled.nii", "int16", 1, "<", slope=2.5, inter=-10.0, note="scl 2.5/-10")
save("uint8_n2_be_scaled.nii.gz", "uint8", 2, ">", slope=0.5, inter=3.0, note="scl 0.5/3")
save("int16_n1_le_nanslope.nii", "int16", 1, "<", slope=float("nan"), inter=float("nan"),
     note="NaN slope means no scaling")
save("int16_n1_le_4d.nii.gz", "int16", 1, "<", shape=(NX, NY, NZ, 3), note="3 volumes")
save("int16_n2_be_4d.nii", "int16", 2, ">", shape=(NX, NY, NZ, 3), note="3 volumes")
save("int16_n1_le_4d1.nii", "int16", 1, "<", shape=(NX, NY, NZ, 1), note="4D, one volume")

# Unsupported datatypes.
for dt in ("complex64", "int64"):
    save(f"{dt}_n1_le.nii", dt, 1, "<", stored=np.zeros((NX, NY, NZ)), note="unsupported")
rgb = np.zeros((NX, NY, NZ), dtype=[("R", "u1"), ("G", "u1"), ("B", "u1")])
img = nib.Nifti1Image(rgb, AFFINE)
nib.save(img, "rgb24_n1_le.nii")
fixtures.append({"file": "rgb24_n1_le.nii", "dtype": "rgb24", "version": 1,
                 "big_endian": False, "dims": [NX, NY, NZ], "note": "unsupported"})

with open("fixtures.json", "w") as f:
    json.dump(fixtures, f, indent=1)
    f.write("\n")

# Real-looking reference images for the mask golden tests: geometry as the FSL MNI152 1 mm
# template has it (NIfTI-1, little-endian), and an oblique scanner acquisition (NIfTI-2,
# big-endian, 4D with one volume, TR in pixdim[4]). The data is zeros: only headers matter.
mni = nib.Nifti1Image(np.zeros((182, 218, 182), np.int16),
                      np.array([[-1, 0, 0, 90], [0, 1, 0, -126], [0, 0, 1, -72], [0, 0, 0, 1.0]]))
mni.header.set_xyzt_units("mm", "sec")
mni.set_qform(mni.affine, code=4)
mni.set_sform(mni.affine, code=4)
mni.header["descrip"] = b"FSL5.0"
mni.header["cal_max"] = 8000
nib.save(mni, "ref_mni152_n1_le.nii.gz")

obl = nib.Nifti2Image(np.zeros((96, 96, 60, 1), np.dtype(">f4")), AFFINE,
                      header=nib.Nifti2Header(endianness=">"))
obl.set_data_dtype(np.dtype(">f4"))
obl.header.set_xyzt_units("mm", "sec")
obl.header.set_dim_info(freq=0, phase=1, slice=2)
obl.header["pixdim"][4] = 2.5
obl.set_qform(AFFINE, code=1)
obl.set_sform(AFFINE @ np.diag([1, 1, 1, 1.0]) + np.array([[0, 0, 0, 0.5], [0] * 4, [0] * 4, [0] * 4]), code=2)
obl.header["descrip"] = b"oblique EPI, scanner space"
obl.header["slice_code"] = 1
obl.header["slice_end"] = 59
obl.header["slice_duration"] = 0.04
nib.save(obl, "ref_oblique_n2_be.nii.gz")
