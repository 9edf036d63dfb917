"""safetensors_np.py — read and write .safetensors files with json + numpy only.

Format: 8-byte little-endian u64 header length N, N bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, optional "__metadata__": {str: str}},
then the raw little-endian tensor data (offsets are relative to the start of the data).
Supported dtypes: F32, F16 and BF16 (numpy has no bfloat16: BF16 is read as float32 and
written from float32 or float64 with round-to-nearest-even).
"""
import json
import struct

import numpy as np

_ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2}


def float32_to_bf16_bits(a):
    """float32 (or float64) array -> uint16 bfloat16 bit patterns, round to nearest, ties to even."""
    a = np.asarray(a)
    x32 = np.ascontiguousarray(a, dtype=np.float32)
    bits = x32.view(np.uint32).astype(np.uint64)
    # Adding 0x7FFF plus the lowest kept bit rounds to nearest and breaks ties to even.
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    if a.dtype == np.float64:
        # Rounding to float32 first can land exactly on a bfloat16 tie that the float64 value
        # is not on (it cannot cross one): round such values by the float64 side instead.
        fake_tie = ((bits & 0xFFFF) == 0x8000) & (a != x32.astype(np.float64)) & np.isfinite(a)
        up = np.abs(a) > np.abs(x32.astype(np.float64))
        rounded[fake_tie] = ((bits[fake_tie] >> 16) + up[fake_tie]).astype(np.uint16)
    nan = np.isnan(x32)
    # A NaN must stay a NaN (rounding could carry it into an infinity): quiet NaN, same sign.
    rounded[nan] = ((bits[nan] >> 16).astype(np.uint16) & 0x8000) | 0x7FC0
    return rounded


def bf16_bits_to_float32(b):
    """uint16 bfloat16 bit patterns -> float32 (exact)."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _encode(arr, dtype):
    if dtype == "F32":
        return np.ascontiguousarray(arr, dtype="<f4").tobytes()
    if dtype == "F16":
        return np.ascontiguousarray(arr, dtype="<f2").tobytes()
    if dtype == "BF16":
        a = np.asarray(arr)
        a = a if a.dtype == np.float64 else a.astype(np.float32)
        return float32_to_bf16_bits(a).astype("<u2").tobytes()
    raise ValueError("unsupported safetensors dtype %r (F32, F16, BF16)" % (dtype,))


def save_safetensors(path, tensors, dtype="F32", metadata=None):
    """Writes {name: numpy array} to path, every tensor stored as dtype, in dict order."""
    if dtype not in _ITEMSIZE:
        raise ValueError("%s: unsupported dtype %r (F32, F16, BF16)" % (path, dtype))
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name, arr in tensors.items():
        arr = np.asarray(arr)
        blob = _encode(arr, dtype)
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)  # pad so the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def load_safetensors(path, with_metadata=False):
    """Reads path -> {name: numpy array} (F32 and BF16 as float32, F16 as float16).

    Raises ValueError naming the file and the tensor on a malformed file.
    With with_metadata=True returns (tensors, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: file shorter than the 8-byte header length" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError("%s: header length %d runs past the end of the file" % (path, n))
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError("%s: header is not valid JSON (%s)" % (path, e))
    if not isinstance(header, dict):
        raise ValueError("%s: header is not a JSON object" % path)
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        if not isinstance(info, dict):
            raise ValueError("%s: tensor %s: header entry is not an object" % (path, name))
        dtype = info.get("dtype")
        if dtype not in _ITEMSIZE:
            raise ValueError("%s: tensor %s: unsupported dtype %r" % (path, name, dtype))
        shape = [int(s) for s in info.get("shape", [])]
        begin, end = info.get("data_offsets", [0, -1])
        count = int(np.prod(shape)) if shape else 1
        if not (0 <= begin <= end <= len(data)) or end - begin != count * _ITEMSIZE[dtype]:
            raise ValueError("%s: tensor %s: data_offsets [%s, %s] do not fit shape %s of %s"
                             % (path, name, begin, end, shape, dtype))
        chunk = data[begin:end]
        if dtype == "F32":
            arr = np.frombuffer(chunk, dtype="<f4").astype(np.float32)
        elif dtype == "F16":
            arr = np.frombuffer(chunk, dtype="<f2").astype(np.float16)
        else:
            arr = bf16_bits_to_float32(np.frombuffer(chunk, dtype="<u2"))
        out[name] = arr.reshape(shape)
    return (out, metadata) if with_metadata else out
