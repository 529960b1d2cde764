"""Minimal safetensors reader/writer with numpy only (no `safetensors` package).

Layout: 8-byte little-endian header length N, N bytes of JSON (padded with spaces to a multiple
of 8), then the raw little-endian tensor bytes. Tensors are laid out in sorted name order;
__metadata__ is a str -> str map.
"""

import json
import struct

import numpy as np

_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1",
}
_NAMES = {np.dtype(v).str: k for k, v in _DTYPES.items()}

# Refuse absurd headers before reading them (the reference implementation uses 100 MB).
MAX_HEADER = 100 << 20


class SafetensorsError(ValueError):
    """A malformed or unsupported safetensors file."""


def encode(tensors, metadata=None):
    """The bytes of a safetensors file holding tensors (name -> numpy array)."""
    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"safetensors metadata must map str to str, got {k!r}: {v!r}")
        header["__metadata__"] = dict(metadata)
    blobs, offset = [], 0
    for name in sorted(tensors):
        if name == "__metadata__":
            raise ValueError("tensor name __metadata__ is reserved")
        arr = np.asarray(tensors[name])
        le = arr.dtype.newbyteorder("<") if arr.dtype.itemsize > 1 else arr.dtype
        dname = _NAMES.get(le.str)
        if dname is None:
            raise TypeError(f"{name}: unsupported dtype {arr.dtype}")
        raw = np.ascontiguousarray(arr, dtype=le).tobytes()
        header[name] = {"dtype": dname, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)
    return struct.pack("<Q", len(hjson)) + hjson + b"".join(blobs)


def write(path, tensors, metadata=None):
    with open(path, "wb") as f:
        f.write(encode(tensors, metadata))


def decode(buf, name="<buffer>"):
    """(tensors: name -> numpy array in native byte order, metadata: dict) from file bytes."""
    if len(buf) < 8:
        raise SafetensorsError(f"{name}: too short")
    n = struct.unpack("<Q", buf[:8])[0]
    if n > MAX_HEADER or 8 + n > len(buf):
        raise SafetensorsError(f"{name}: header length {n} exceeds file size {len(buf)}")
    try:
        header = json.loads(buf[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise SafetensorsError(f"{name}: bad JSON header: {e}") from e
    if not isinstance(header, dict):
        raise SafetensorsError(f"{name}: header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    data = memoryview(buf)[8 + n:]
    tensors, spans = {}, []
    for tname, info in header.items():
        try:
            dt = np.dtype(_DTYPES[info["dtype"]])
            shape = tuple(int(d) for d in info["shape"])
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError) as e:
            raise SafetensorsError(f"{name}: tensor {tname}: bad entry {info!r}") from e
        count = int(np.prod(shape, dtype=np.int64))
        if any(d < 0 for d in shape) or not 0 <= begin <= end <= len(data) \
                or end - begin != count * dt.itemsize:
            raise SafetensorsError(f"{name}: tensor {tname}: offsets {begin}..{end} do not fit"
                                   f" shape {shape} {info['dtype']} in {len(data)} data bytes")
        arr = np.frombuffer(data, dtype=dt, count=count, offset=begin)
        tensors[tname] = arr.astype(dt.newbyteorder("="), copy=True).reshape(shape)
        spans.append((begin, end))
    spans.sort()
    pos = 0
    for begin, end in spans:
        if begin != pos:
            raise SafetensorsError(f"{name}: tensor data has a gap or overlap at byte {begin}")
        pos = end
    if pos != len(data):
        raise SafetensorsError(f"{name}: {len(data) - pos} trailing bytes after the tensors")
    return tensors, metadata


def read(path):
    with open(path, "rb") as f:
        return decode(f.read(), path)
