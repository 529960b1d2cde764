#!/usr/bin/python3
"""Loads files written by voxpipe's io/nifti with nibabel and checks them; run by
TestNibabelReadsOurFiles (skipped where /usr/bin/python3 has no nibabel). argv[1] is a JSON
manifest: [{"file", "dtype", "big_endian", "version", "dims"}]."""
import json
import sys

import nibabel as nib
import numpy as np


def values(dtype, shape):
    x, y, z = np.indices(shape)
    base = (x * 7 + y * 13 + z * 29) % 97
    return {
        "uint8": base + 100, "int8": base - 48, "int16": (base - 48) * 300,
        "uint16": base * 600, "int32": (base - 48) * 40000000, "uint32": base * 40000000 + 123,
        "float32": (base - 48) * 0.25 + 0.125, "float64": (base - 48) / 3.0,
    }[dtype]


failures = 0
manifest = json.load(open(sys.argv[1]))
for f in manifest:
    try:
        img = nib.load(f["file"])
        hdr = img.header
        want_cls = nib.Nifti2Header if f["version"] == 2 else nib.Nifti1Header
        assert isinstance(hdr, want_cls), type(hdr)
        assert hdr.endianness == (">" if f["big_endian"] else "<"), hdr.endianness
        data = np.asanyarray(img.dataobj)
        assert data.shape == tuple(f["dims"]), data.shape
        assert data.dtype.str[1:] == np.dtype(f["dtype"]).str[1:], data.dtype
        assert np.array_equal(data, values(f["dtype"], tuple(f["dims"])).astype(f["dtype"]))
        assert hdr["qform_code"] == 1 and hdr["sform_code"] == 2
        assert hdr.get_xyzt_units() == ("mm", "sec")
        srow = np.array([[0.859375, -0.265625, 0, -101], [0.265625, 0.859375, 0.125, -87.25],
                         [0, -0.0625, 1.25, -40]])
        assert np.array_equal(hdr.get_sform()[:3], srow)
        assert str(hdr["descrip"].item(), "ascii") == "voxpipe test"
    except Exception as e:  # report every file, not just the first
        failures += 1
        print("FAIL", f["file"], repr(e))
print("checked", len(manifest), "files,", failures, "failures")
sys.exit(1 if failures else 0)
