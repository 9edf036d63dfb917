"""test_formats.py — cross-checks tinylm's file formats against Python's own tools.

Run as: python3 test_formats.py PATH/TO/st_tool   (ctest does this; needs numpy, torch)

1. numpy writes .npy, the C reader reads it (st_tool pack); the C writer writes .npy,
   numpy loads it (st_tool dump) and its header is format 1.0 with 64-byte alignment.
2. The C safetensors writer's files are parsed by a pure-Python reader written here
   (json + numpy.frombuffer, following the published format): header length, padding,
   contiguous offsets in the given order, and the values. F32 -> BF16 rounding is compared
   with torch's .to(torch.bfloat16) and F32 -> F16 with numpy's astype(float16), on about
   a million random float32 bit patterns plus every 16-bit value and their midpoints.
3. Safetensors files written here in Python (F32, all 65536 F16 and BF16 bit patterns,
   I32, odd-length BF16 that misaligns the next tensor, metadata, a sharded checkpoint)
   are read by the C reader; F16 -> F32 is compared with numpy's astype(float32), BF16 ->
   F32 with torch's .float().
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

TOOL = sys.argv[1]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def run(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"st_tool {' '.join(args)} failed: {r.stderr}")


# ---- a pure-Python safetensors reader and writer (the spec: 8-byte LE length, JSON, data)
DT_NP = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I32": np.int32, "U8": np.uint8}
DT_SIZE = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "U8": 1}


def py_read(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header_text = raw[8:8 + n]
    header = json.loads(header_text)
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        count = int(np.prod(e["shape"], dtype=np.int64))
        assert end - b == count * DT_SIZE[e["dtype"]], name
        arr = np.frombuffer(data[b:end], dtype=DT_NP[e["dtype"]]).reshape(e["shape"])
        out[name] = (e["dtype"], arr)
    return n, header_text, header, len(data), out


def py_write(path, tensors, metadata=None):
    """tensors: list of (name, dtype, array of the storage type)."""
    header, blobs, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dt, arr in tensors:
        b = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def bits32(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def same_or_both_nan_16(got_bits, want_bits, is_nan):
    """16-bit patterns equal, except that NaN only has to stay NaN (payload rules differ)."""
    return bool(np.all((got_bits == want_bits) | is_nan))


def torch_bf16_bits(x):
    return torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def test_c_writer(tmp):
    rng = np.random.default_rng(1234)
    rand = rng.integers(0, 2**32, size=1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 65504, 65519.99, 65520, 1e-8, 6e-8,
                        5.96e-8, 2.98e-8, 3.4028235e38, 1.1754944e-38, 1e-45], dtype=np.float32)
    all16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    f16_vals = all16.view(np.float16).astype(np.float32)
    bf16_vals = (all16.astype(np.uint32) << 16).view(np.float32)
    # midpoints between neighbouring 16-bit values (ties), and one float32 step either side
    def mids(vals):
        v = vals[np.isfinite(vals)].astype(np.float64)
        v = np.unique(v)
        m = ((v[:-1] + v[1:]) / 2).astype(np.float32)
        return np.concatenate([m, np.nextafter(m, np.float32(np.inf)), np.nextafter(m, np.float32(-np.inf))])
    x = np.concatenate([rand, special, f16_vals, bf16_vals, mids(f16_vals), mids(bf16_vals)]).astype(np.float32)
    np.save(os.path.join(tmp, "x.npy"), x)
    grid = np.arange(60, dtype=np.float32).reshape(3, 4, 5) * 0.25 - 7
    np.save(os.path.join(tmp, "grid.npy"), grid)
    np.save(os.path.join(tmp, "scalar.npy"), np.array(2.5, dtype=np.float32))
    np.save(os.path.join(tmp, "empty.npy"), np.zeros((0, 3), dtype=np.float32))
    ids = rng.integers(-2**31, 2**31, size=(2, 7), dtype=np.int64).astype(np.int32)
    np.save(os.path.join(tmp, "ids.npy"), ids)
    odd = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    np.save(os.path.join(tmp, "odd.npy"), odd)

    out = os.path.join(tmp, "c.safetensors")
    meta = {"format": "pt", "tinylm": "{\"step\": 3}"}
    run("pack", out, "--meta", json.dumps(meta),
        "x.f32:F32:" + os.path.join(tmp, "x.npy"),
        "x.bf16:BF16:" + os.path.join(tmp, "x.npy"),
        "odd:BF16:" + os.path.join(tmp, "odd.npy"),
        "x.f16:F16:" + os.path.join(tmp, "x.npy"),
        "grid:F32:" + os.path.join(tmp, "grid.npy"),
        "scalar:F32:" + os.path.join(tmp, "scalar.npy"),
        "empty:F32:" + os.path.join(tmp, "empty.npy"),
        "ids:I32:" + os.path.join(tmp, "ids.npy"))

    n, text, header, data_len, t = py_read(out)
    check(n % 8 == 0, "header length is a multiple of 8")
    check(text.rstrip(b" ").endswith(b"}") and set(text[len(text.rstrip(b" ")):]) <= {ord(" ")},
          "header padded with spaces only")
    check(header.get("__metadata__") == meta, "metadata round trip")
    names = [k for k in header if k != "__metadata__"]
    check(names == ["x.f32", "x.bf16", "odd", "x.f16", "grid", "scalar", "empty", "ids"], "tensor order")
    off = 0
    for k in names:
        b, e = header[k]["data_offsets"]
        check(b == off, f"{k} starts where the previous tensor ends")
        off = e
    check(off == data_len, "tensors cover the data exactly")

    check(np.array_equal(bits32(t["x.f32"][1]), bits32(x)), "F32 data bit-exact")
    want_bf = torch_bf16_bits(x)
    got_bf = t["x.bf16"][1]
    check(same_or_both_nan_16(got_bf, want_bf, np.isnan(x)), "F32->BF16 equals torch .to(bfloat16)")
    check(bool(np.all(np.isnan((got_bf.astype(np.uint32) << 16).view(np.float32))[np.isnan(x)])), "BF16 NaN stays NaN")
    with np.errstate(over="ignore"):  # large values become inf, as they should
        want_h = x.astype(np.float16).view(np.uint16)
    got_h = t["x.f16"][1].view(np.uint16)
    check(same_or_both_nan_16(got_h, want_h, np.isnan(x)), "F32->F16 equals numpy astype(float16)")
    check(bool(np.all(np.isnan(got_h.view(np.float16)[np.isnan(x)]))), "F16 NaN stays NaN")
    bad = np.nonzero((got_h != want_h) & ~np.isnan(x))[0][:5]
    for i in bad:
        print(f"  f16 mismatch x={x[i]!r} (0x{bits32(x[i:i+1])[0]:08x}) got 0x{got_h[i]:04x} want 0x{want_h[i]:04x}")
    check(np.array_equal(t["grid"][1], grid), "3-D F32 values and shape")
    check(t["scalar"][1].shape == () and t["scalar"][1] == 2.5, "scalar")
    check(t["empty"][1].shape == (0, 3), "empty tensor shape")
    check(np.array_equal(t["ids"][1], ids), "I32 values")
    check(np.array_equal((t["odd"][1].astype(np.uint32) << 16).view(np.float32), odd), "odd-length BF16")
    print(f"C writer: {x.size} float32 inputs checked against torch bf16 and numpy f16")


def test_python_writer(tmp):
    all16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    rng = np.random.default_rng(99)
    f32 = rng.standard_normal((5, 6)).astype(np.float32)
    ids = np.array([[0, -1], [2**31 - 1, -2**31]], dtype=np.int32)
    tensors = [
        ("odd.bf16", "BF16", np.array([0x3f80, 0xc000, 0x7f80], dtype=np.uint16)),  # 6 bytes: misaligns the rest
        ("w.f32", "F32", f32),
        ("all.f16", "F16", all16.view(np.float16)),
        ("all.bf16", "BF16", all16.reshape(256, 256)),
        ("ids", "I32", ids),
        ("mask", "U8", np.array([1, 0, 1], dtype=np.uint8)),
    ]
    path = os.path.join(tmp, "py.safetensors")
    py_write(path, tensors, {"format": "np", "name": "caf\u00e9"})
    dump = os.path.join(tmp, "dump1")
    os.mkdir(dump)
    run("dump", path, dump)
    listing = [line.split("\t") for line in open(os.path.join(dump, "list.txt"), encoding="utf-8").read().splitlines()]
    check([r[0] for r in listing] == [t[0] for t in tensors], "C lists tensors in header order")
    check([r[1] for r in listing] == [t[1] for t in tensors], "C reads dtypes")
    check(listing[3][2] == "256,256" and listing[1][2] == "5,6", "C reads shapes")
    meta = dict(line.split("\t") for line in open(os.path.join(dump, "meta.txt"), encoding="utf-8").read().splitlines())
    check(meta == {"format": "np", "name": "caf\u00e9"}, "C reads metadata")

    def load(i):
        p = os.path.join(dump, f"{i}.npy")
        with open(p, "rb") as f:  # the C writer's npy header: version 1.0, data 64-byte aligned
            check(np.lib.format.read_magic(f) == (1, 0), "npy version 1.0")
            np.lib.format.read_array_header_1_0(f)
            check(f.tell() % 64 == 0, "npy data offset is a multiple of 64")
        return np.load(p)

    check(np.array_equal((np.array([0x3f80, 0xc000, 0x7f80], np.uint32) << 16).view(np.float32), load(0)),
          "odd-length BF16")
    check(np.array_equal(bits32(load(1)), bits32(f32)), "F32 after an unaligned start")
    got = load(2)
    want = all16.view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    check(np.array_equal(bits32(got)[~nan], bits32(want)[~nan]), "all 65536 F16 -> F32 equal numpy (non-NaN bit-exact)")
    check(bool(np.all(np.isnan(got[nan]))) and int(nan.sum()) == 2046, "F16 NaNs stay NaN")
    got = load(3)
    check(got.shape == (256, 256), "BF16 shape")
    want = torch.from_numpy(all16.view(np.int16)).view(torch.bfloat16).float().numpy().reshape(256, 256)
    nan = np.isnan(want)
    check(np.array_equal(bits32(got)[~nan], bits32(want)[~nan]), "all 65536 BF16 -> F32 equal torch (non-NaN)")
    check(bool(np.all(np.isnan(got[nan]))), "BF16 NaNs stay NaN")
    check(np.array_equal(load(4), ids) and load(4).dtype == np.int32, "I32 via npy")
    check(not os.path.exists(os.path.join(dump, "5.npy")), "U8 is listed but not converted")

    # a sharded checkpoint written in Python
    ck = os.path.join(tmp, "ckpt")
    os.mkdir(ck)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(4, dtype=np.float32) * -1
    py_write(os.path.join(ck, "model-00001-of-00002.safetensors"), [("a", "F32", a)])
    py_write(os.path.join(ck, "model-00002-of-00002.safetensors"), [("b", "F16", b.astype(np.float16))])
    json.dump({"metadata": {"total_size": 32},
               "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}},
              open(os.path.join(ck, "model.safetensors.index.json"), "w"))
    dump = os.path.join(tmp, "dump2")
    os.mkdir(dump)
    run("dump", ck, dump)
    check(np.array_equal(np.load(os.path.join(dump, "0.npy")), a), "shard 1 tensor")
    check(np.array_equal(np.load(os.path.join(dump, "1.npy")), b), "shard 2 tensor")


with tempfile.TemporaryDirectory() as tmp:
    test_c_writer(tmp)
    test_python_writer(tmp)

if failures:
    print(f"test_formats.py: {failures} check(s) failed")
    sys.exit(1)
print("test_formats.py: all checks passed")
