"""NIfTI-1 / NIfTI-2 reading and writing with numpy only (no nibabel).

Reads .nii, .nii.gz and .hdr/.img pairs, either byte order, the datatypes voxpipe accepts.
Arrays are returned as [z][y][x] (numpy shape (nz, ny, nx)), which is the file's order with x
fastest. Masks are written as uint8 NIfTI-1 that copy the reference header's geometry.
"""

import dataclasses
import gzip
import math
import os
import struct

import numpy as np

# NIfTI datatype code -> numpy dtype (without byte order).
DATATYPES = {
    2: "u1",    # uint8
    4: "i2",    # int16
    8: "i4",    # int32
    16: "f4",   # float32
    64: "f8",   # float64
    256: "i1",  # int8
    512: "u2",  # uint16
    768: "u4",  # uint32
}
DTYPE_CODES = {np.dtype(v).str[1:]: k for k, v in DATATYPES.items()}

INTENT_LABEL = 1002

NIFTI1_SIZE = 348
NIFTI2_SIZE = 540
NIFTI2_MAGIC_TAIL = b"\r\n\x1a\n"


class NiftiError(ValueError):
    """A file that is not a NIfTI volume voxpipe can read."""


@dataclasses.dataclass
class Header:
    """The decoded header, the same for both versions (NIfTI-2 widths)."""

    version: int = 1
    byteorder: str = "<"  # "<" or ">", of the file it was read from
    dim_info: int = 0
    dim: tuple = (3, 1, 1, 1, 1, 1, 1, 1)
    intent_p1: float = 0.0
    intent_p2: float = 0.0
    intent_p3: float = 0.0
    intent_code: int = 0
    datatype: int = 16
    bitpix: int = 32
    slice_start: int = 0
    pixdim: tuple = (1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
    vox_offset: int = 352
    scl_slope: float = 1.0
    scl_inter: float = 0.0
    slice_end: int = 0
    slice_code: int = 0
    xyzt_units: int = 10  # mm, s
    cal_max: float = 0.0
    cal_min: float = 0.0
    slice_duration: float = 0.0
    toffset: float = 0.0
    descrip: str = ""
    aux_file: str = ""
    qform_code: int = 0
    sform_code: int = 0
    quatern_b: float = 0.0
    quatern_c: float = 0.0
    quatern_d: float = 0.0
    qoffset_x: float = 0.0
    qoffset_y: float = 0.0
    qoffset_z: float = 0.0
    srow_x: tuple = (1.0, 0.0, 0.0, 0.0)
    srow_y: tuple = (0.0, 1.0, 0.0, 0.0)
    srow_z: tuple = (0.0, 0.0, 1.0, 0.0)
    intent_name: str = ""
    magic: str = "n+1"

    @property
    def shape_zyx(self):
        """(nz, ny, nx): extents of the first three dimensions, 1 where absent."""
        nd = self.dim[0]

        def ext(i):
            return int(self.dim[i]) if i <= nd and self.dim[i] >= 1 else 1

        return ext(3), ext(2), ext(1)

    def scaling(self):
        """(slope, inter) to apply to stored values: the NIfTI rule is that scl_slope 0 (or not
        finite) means no scaling at all; a non-finite scl_inter counts as 0."""
        slope, inter = float(self.scl_slope), float(self.scl_inter)
        if slope == 0.0 or not math.isfinite(slope):
            return 1.0, 0.0
        if not math.isfinite(inter):
            inter = 0.0
        return slope, inter

    def affine(self):
        """The voxel-to-world transform (4x4 float64, indices (i, j, k, 1) -> RAS+ mm in the
        header's units), chosen as the NIfTI-1 standard and nibabel do: the sform when
        sform_code > 0, else the qform (method 2) when qform_code > 0, else the pixdim scaling
        alone (method 1). Same as io/nifti's Header.Affine."""
        if self.sform_code > 0:
            return np.array([self.srow_x, self.srow_y, self.srow_z, (0, 0, 0, 1)], dtype=np.float64)
        if self.qform_code > 0:
            return self.qform_affine()
        return np.diag([_pixdim_or_1(self.pixdim[1]), _pixdim_or_1(self.pixdim[2]),
                        _pixdim_or_1(self.pixdim[3]), 1.0])

    def qform_affine(self):
        """The transform of the quaternion fields (NIfTI-1 method 2), whatever qform_code says."""
        b, c, d = (float(v) for v in (self.quatern_b, self.quatern_c, self.quatern_d))
        a = 1.0 - (b * b + c * c + d * d)
        if a < 1e-7:  # rounding: the standard's own fix-up (nifti1_io.c)
            n = 1.0 / math.sqrt(b * b + c * c + d * d)
            b, c, d, a = b * n, c * n, d * n, 0.0
        else:
            a = math.sqrt(a)
        qfac = -1.0 if self.pixdim[0] < 0 else 1.0
        dx, dy = _pixdim_or_1(self.pixdim[1]), _pixdim_or_1(self.pixdim[2])
        dz = _pixdim_or_1(self.pixdim[3]) * qfac
        return np.array([
            [(a * a + b * b - c * c - d * d) * dx, 2 * (b * c - a * d) * dy, 2 * (b * d + a * c) * dz, self.qoffset_x],
            [2 * (b * c + a * d) * dx, (a * a + c * c - b * b - d * d) * dy, 2 * (c * d - a * b) * dz, self.qoffset_y],
            [2 * (b * d - a * c) * dx, 2 * (c * d + a * b) * dy, (a * a + d * d - c * c - b * b) * dz, self.qoffset_z],
            [0, 0, 0, 1],
        ], dtype=np.float64)

    def mm_per_unit(self):
        """Millimetres per spatial unit (xyzt_units): 1000 for metres, 0.001 for micrometres, 1
        for mm and for unknown (0), as every common tool reads it."""
        return {1: 1000.0, 3: 0.001}.get(int(self.xyzt_units) & 7, 1.0)

    def set_affine(self, aff, code=1):
        """Sets sform and qform to the 4x4 affine aff (a rotation with zooms, possibly with a
        reflection: qfac), both with the given code. For writing test volumes."""
        aff = np.asarray(aff, dtype=np.float64)
        self.sform_code = self.qform_code = int(code)
        self.srow_x, self.srow_y, self.srow_z = (tuple(float(v) for v in aff[r]) for r in range(3))
        m = aff[:3, :3]
        zooms = np.sqrt((m * m).sum(axis=0))
        r = m / zooms
        qfac = 1.0
        if np.linalg.det(r) < 0:
            qfac = -1.0
            r[:, 2] = -r[:, 2]
        # Quaternion of the rotation r (nifti1_io.c's mat44_to_quatern), a >= 0.
        a = 1.0 + r[0, 0] + r[1, 1] + r[2, 2]
        if a > 0.5:
            a = 0.5 * math.sqrt(a)
            b = 0.25 * (r[2, 1] - r[1, 2]) / a
            c = 0.25 * (r[0, 2] - r[2, 0]) / a
            d = 0.25 * (r[1, 0] - r[0, 1]) / a
        else:
            xd, yd, zd = 1.0 + r[0, 0] - (r[1, 1] + r[2, 2]), 1.0 + r[1, 1] - (r[0, 0] + r[2, 2]), \
                1.0 + r[2, 2] - (r[0, 0] + r[1, 1])
            if xd > 1.0:
                b = 0.5 * math.sqrt(xd)
                c, d, a = 0.25 * (r[0, 1] + r[1, 0]) / b, 0.25 * (r[0, 2] + r[2, 0]) / b, \
                    0.25 * (r[2, 1] - r[1, 2]) / b
            elif yd > 1.0:
                c = 0.5 * math.sqrt(yd)
                b, d, a = 0.25 * (r[0, 1] + r[1, 0]) / c, 0.25 * (r[1, 2] + r[2, 1]) / c, \
                    0.25 * (r[0, 2] - r[2, 0]) / c
            else:
                d = 0.5 * math.sqrt(zd)
                b, c, a = 0.25 * (r[0, 2] + r[2, 0]) / d, 0.25 * (r[1, 2] + r[2, 1]) / d, \
                    0.25 * (r[1, 0] - r[0, 1]) / d
            if a < 0:
                b, c, d = -b, -c, -d
        self.quatern_b, self.quatern_c, self.quatern_d = float(b), float(c), float(d)
        self.qoffset_x, self.qoffset_y, self.qoffset_z = (float(v) for v in aff[:3, 3])
        p = list(self.pixdim)
        p[0], p[1], p[2], p[3] = qfac, float(zooms[0]), float(zooms[1]), float(zooms[2])
        self.pixdim = tuple(p)


def _pixdim_or_1(v):
    """The standard's reading of a voxel size: zero (unset) or NaN counts as 1, the sign is
    dropped."""
    v = float(v)
    return 1.0 if v == 0 or math.isnan(v) else abs(v)


def _cstr(b):
    return b.split(b"\x00", 1)[0].decode("latin-1")


def _open_bytes(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw


def _detect(raw, path):
    if len(raw) < 4:
        raise NiftiError(f"{path}: too short for a NIfTI header")
    for bo in "<>":
        size = struct.unpack(bo + "i", raw[:4])[0]
        if size == NIFTI1_SIZE:
            return 1, bo
        if size == NIFTI2_SIZE:
            return 2, bo
    raise NiftiError(f"{path}: sizeof_hdr is neither 348 nor 540 in either byte order")


# Where each Header field lives: (field, struct format, byte offset), per version.
_QUATERN = ("quatern_b", "quatern_c", "quatern_d", "qoffset_x", "qoffset_y", "qoffset_z")
LAYOUT1 = [
    ("dim_info", "B", 39), ("dim", "8h", 40), ("intent_p1", "f", 56), ("intent_p2", "f", 60),
    ("intent_p3", "f", 64), ("intent_code", "h", 68), ("datatype", "h", 70),
    ("bitpix", "h", 72), ("slice_start", "h", 74), ("pixdim", "8f", 76),
    ("vox_offset", "f", 108), ("scl_slope", "f", 112), ("scl_inter", "f", 116),
    ("slice_end", "h", 120), ("slice_code", "B", 122), ("xyzt_units", "B", 123),
    ("cal_max", "f", 124), ("cal_min", "f", 128), ("slice_duration", "f", 132),
    ("toffset", "f", 136), ("descrip", "80s", 148), ("aux_file", "24s", 228),
    ("qform_code", "h", 252), ("sform_code", "h", 254),
] + [(name, "f", 256 + 4 * i) for i, name in enumerate(_QUATERN)] + [
    ("srow_x", "4f", 280), ("srow_y", "4f", 296), ("srow_z", "4f", 312),
    ("intent_name", "16s", 328), ("magic", "4s", 344),
]
LAYOUT2 = [
    ("magic", "4s", 4), ("datatype", "h", 12), ("bitpix", "h", 14), ("dim", "8q", 16),
    ("intent_p1", "d", 80), ("intent_p2", "d", 88), ("intent_p3", "d", 96),
    ("pixdim", "8d", 104), ("vox_offset", "q", 168), ("scl_slope", "d", 176),
    ("scl_inter", "d", 184), ("cal_max", "d", 192), ("cal_min", "d", 200),
    ("slice_duration", "d", 208), ("toffset", "d", 216), ("slice_start", "q", 224),
    ("slice_end", "q", 232), ("descrip", "80s", 240), ("aux_file", "24s", 320),
    ("qform_code", "i", 344), ("sform_code", "i", 348),
] + [(name, "d", 352 + 8 * i) for i, name in enumerate(_QUATERN)] + [
    ("srow_x", "4d", 400), ("srow_y", "4d", 432), ("srow_z", "4d", 464),
    ("slice_code", "i", 496), ("xyzt_units", "i", 500), ("intent_code", "i", 504),
    ("intent_name", "16s", 508), ("dim_info", "B", 524),
]


def _parse(raw, bo, version, path):
    size, layout = (NIFTI1_SIZE, LAYOUT1) if version == 1 else (NIFTI2_SIZE, LAYOUT2)
    if len(raw) < size:
        raise NiftiError(f"{path}: truncated NIfTI-{version} header")
    h = Header(version=version, byteorder=bo)
    for name, fmt, off in layout:
        vals = struct.unpack_from(bo + fmt, raw, off)
        kind = float if fmt[-1] in "fd" else int
        if fmt[-1] == "s":
            value = _cstr(vals[0])
        elif len(vals) > 1:
            value = tuple(kind(v) for v in vals)
        else:
            value = kind(vals[0])
        setattr(h, name, value)
    if h.vox_offset != int(h.vox_offset):
        raise NiftiError(f"{path}: vox_offset {h.vox_offset} is not an integer")
    h.vox_offset = int(h.vox_offset)
    if version == 1 and h.magic not in ("n+1", "ni1"):
        raise NiftiError(f"{path}: bad NIfTI-1 magic {raw[344:348]!r}")
    if version == 2 and (h.magic not in ("n+2", "ni2") or raw[8:12] != NIFTI2_MAGIC_TAIL):
        raise NiftiError(f"{path}: bad NIfTI-2 magic {raw[4:12]!r}")
    return h


def read_header(path):
    """Decodes the header of a .nii/.nii.gz/.hdr file; returns (Header, raw bytes of the file)."""
    raw = _open_bytes(path)
    version, bo = _detect(raw, path)
    h = _parse(raw, bo, version, path)
    return h, raw


def _img_path(path):
    for hdr_ext, img_ext in ((".hdr.gz", ".img.gz"), (".hdr", ".img")):
        if path.endswith(hdr_ext):
            base = path[: -len(hdr_ext)]
            for cand in (base + img_ext, base + ".img", base + ".img.gz"):
                if os.path.exists(cand):
                    return cand
            raise NiftiError(f"{path}: no matching .img file")
    return None


def read_nifti(path):
    """Reads a volume: returns (Header, stored values as a native-order numpy array of shape
    (nz, ny, nx)). scl_slope/scl_inter are NOT applied (see Header.scaling / scaled_values)."""
    h, raw = read_header(path)
    if h.datatype not in DATATYPES:
        raise NiftiError(f"{path}: unsupported datatype {h.datatype}")
    nd = h.dim[0]
    if not 1 <= nd <= 7:
        raise NiftiError(f"{path}: dim[0]={nd} out of range")
    for i in range(1, nd + 1):
        if h.dim[i] < 1:
            raise NiftiError(f"{path}: dim[{i}]={h.dim[i]}")
    for i in range(4, nd + 1):
        if h.dim[i] != 1:
            raise NiftiError(f"{path}: {nd}-D volumes with dim[{i}]={h.dim[i]} are not supported")
    dt = np.dtype(h.byteorder + DATATYPES[h.datatype])
    nz, ny, nx = h.shape_zyx
    n = nx * ny * nz
    img = _img_path(path)
    if img is not None:
        data_raw, off = _open_bytes(img), h.vox_offset
    else:
        data_raw, off = raw, h.vox_offset
        minimum = NIFTI1_SIZE if h.version == 1 else NIFTI2_SIZE
        if off < minimum:
            raise NiftiError(f"{path}: vox_offset {off} inside the header")
    if off < 0 or off + n * dt.itemsize > len(data_raw):
        raise NiftiError(f"{path}: voxel data truncated (need {n * dt.itemsize} bytes at {off},"
                         f" file has {len(data_raw)})")
    data = np.frombuffer(data_raw, dtype=dt, count=n, offset=off)
    return h, data.astype(dt.newbyteorder("="), copy=True).reshape(nz, ny, nx)


def scaled_values(h, stored):
    """v = stored*scl_slope + scl_inter in float64, with the scl_slope rule."""
    slope, inter = h.scaling()
    v = stored.astype(np.float64)
    if (slope, inter) != (1.0, 0.0):
        v = v * slope + inter
    return v


def _pad(s, n):
    b = s.encode("latin-1")[:n]
    return b + b"\x00" * (n - len(b))


def encode_header(h, vox_offset=None):
    """Encodes h (NIfTI-1 or NIfTI-2 by h.version, byte order h.byteorder) followed by the 4-byte
    extension flag (zero). The result is padded with zeros up to vox_offset."""
    off = h.vox_offset if vox_offset is None else vox_offset
    size, layout = (NIFTI1_SIZE, LAYOUT1) if h.version == 1 else (NIFTI2_SIZE, LAYOUT2)
    buf = bytearray(size)
    struct.pack_into(h.byteorder + "i", buf, 0, size)
    for name, fmt, pos in layout:
        value = off if name == "vox_offset" else getattr(h, name)
        if fmt[-1] == "s":
            buf[pos:pos + int(fmt[:-1])] = _pad(value, int(fmt[:-1]))
        elif fmt[0].isdigit():
            struct.pack_into(h.byteorder + fmt, buf, pos, *value)
        else:
            struct.pack_into(h.byteorder + fmt, buf, pos, float(value) if fmt in "fd" else value)
    if h.version == 1:
        buf[38] = ord("r")  # "regular", as ANALYZE readers expect
    else:
        buf[8:12] = NIFTI2_MAGIC_TAIL
    buf += b"\x00" * 4  # extension flag: no extensions
    if off < len(buf):
        raise NiftiError(f"vox_offset {off} is inside the header")
    buf += b"\x00" * (off - len(buf))
    return bytes(buf)


def write_nifti(path, data, header=None, **fields):
    """Writes data (numpy, shape (nz, ny, nx), one of the supported dtypes) as a single-file
    NIfTI (.nii, or gzip-compressed when path ends in .gz). header supplies geometry and the
    other fields (a copy is made); keyword arguments override Header fields (version,
    byteorder, scl_slope, pixdim, ...). dim, datatype, bitpix and magic follow the data."""
    data = np.asarray(data)
    if data.ndim != 3:
        raise ValueError(f"write_nifti: want a (nz, ny, nx) array, got shape {data.shape}")
    code = DTYPE_CODES.get(data.dtype.str[1:])
    if code is None:
        raise ValueError(f"write_nifti: unsupported dtype {data.dtype}")
    h = dataclasses.replace(header) if header is not None else Header()
    for k, v in fields.items():
        if not hasattr(h, k):
            raise TypeError(f"write_nifti: unknown header field {k}")
        setattr(h, k, v)
    nz, ny, nx = data.shape
    h.dim = (3, nx, ny, nz, 1, 1, 1, 1)
    h.datatype, h.bitpix = code, data.dtype.itemsize * 8
    h.magic = "n+1" if h.version == 1 else "n+2"
    if "vox_offset" not in fields:
        h.vox_offset = 352 if h.version == 1 else 544
    payload = encode_header(h) + data.astype(np.dtype(h.byteorder + DATATYPES[code])).tobytes()
    if path.endswith(".gz"):
        payload = gzip.compress(payload, compresslevel=6, mtime=0)
    with open(path, "wb") as f:
        f.write(payload)
    return h


def mask_header(ref, classes=None):
    """A uint8 NIfTI-1 label-mask header with the geometry of ref (dims, pixdim/qfac, units,
    qform, sform, dim_info) and the byte order of ref."""
    return Header(
        version=1,
        byteorder=ref.byteorder,
        dim_info=ref.dim_info,
        pixdim=tuple(ref.pixdim),
        xyzt_units=ref.xyzt_units,
        qform_code=ref.qform_code,
        sform_code=ref.sform_code,
        quatern_b=ref.quatern_b, quatern_c=ref.quatern_c, quatern_d=ref.quatern_d,
        qoffset_x=ref.qoffset_x, qoffset_y=ref.qoffset_y, qoffset_z=ref.qoffset_z,
        srow_x=tuple(ref.srow_x), srow_y=tuple(ref.srow_y), srow_z=tuple(ref.srow_z),
        scl_slope=1.0, scl_inter=0.0,
        intent_code=INTENT_LABEL,
        cal_min=0.0, cal_max=float(classes - 1) if classes else 0.0,
        descrip="voxpipe label mask",
    )


def write_mask(path, labels, ref, classes=None):
    """Writes a uint8 label mask (shape (nz, ny, nx)) as NIfTI-1 copying ref's geometry."""
    labels = np.asarray(labels)
    if labels.dtype != np.uint8:
        raise ValueError(f"write_mask: labels must be uint8, got {labels.dtype}")
    nz, ny, nx = ref.shape_zyx
    if labels.shape != (nz, ny, nx):
        raise ValueError(f"write_mask: labels {labels.shape} do not match reference {(nz, ny, nx)}")
    return write_nifti(path, labels, mask_header(ref, classes))
