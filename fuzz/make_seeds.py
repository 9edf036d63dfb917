"""make_seeds.py — writes small seed corpora for the fuzzers (stdlib only, no binaries in git).

usage: python3 fuzz/make_seeds.py OUTDIR
creates OUTDIR/safetensors/*.safetensors and OUTDIR/npy/*.npy
"""
import json
import os
import struct
import sys


def safetensors(tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, raw bytes)."""
    header, off, blob = {}, 0, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blob += raw
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob


def npy(descr, shape, raw):
    shape_text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    total = (10 + len(d) + 1 + 63) // 64 * 64
    d = d + " " * (total - 10 - len(d) - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode() + raw


def main(out):
    st_dir, npy_dir = os.path.join(out, "safetensors"), os.path.join(out, "npy")
    os.makedirs(st_dir, exist_ok=True)
    os.makedirs(npy_dir, exist_ok=True)
    f32 = struct.pack("<6f", 1.0, -2.0, 0.5, 3.0, -0.25, 8.0)
    seeds = {
        "empty": safetensors([]),
        "meta_only": safetensors([], {"format": "pt"}),
        "f32": safetensors([("w", "F32", [2, 3], f32)], {"format": "pt"}),
        "mixed": safetensors([
            ("a.bf16", "BF16", [3], struct.pack("<3H", 0x3F80, 0xC000, 0x7FC0)),
            ("b.f16", "F16", [2, 2], struct.pack("<4H", 0x3C00, 0x0001, 0x7C00, 0x8400)),
            ("c.f32", "F32", [], struct.pack("<f", 7.0)),
            ("d.i64", "I64", [1], struct.pack("<q", -5)),
            ("e.u8", "U8", [0, 4], b""),
        ]),
        "unpadded": safetensors([("x", "F32", [1], struct.pack("<f", 1.0))], pad=False),
    }
    for name, raw in seeds.items():
        open(os.path.join(st_dir, name + ".safetensors"), "wb").write(raw)
    npys = {
        "f32_2x3": npy("<f4", [2, 3], f32),
        "i32_vec": npy("<i4", [3], struct.pack("<3i", 1, -2, 3)),
        "scalar": npy("<f4", [], struct.pack("<f", 2.5)),
        "empty": npy("<i4", [0, 2], b""),
    }
    for name, raw in npys.items():
        open(os.path.join(npy_dir, name + ".npy"), "wb").write(raw)
    print(f"wrote {len(seeds)} safetensors and {len(npys)} npy seeds under {out}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
