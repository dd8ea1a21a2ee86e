#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
# Writes the tensor-reader regression corpus in tests/data/ (.npy, .npz, .safetensors, good and bad).
#
# Plain Python 3 (struct, zipfile, json): NumPy is not needed, so every byte of every file is
# spelled out here and tests/data/README.md says what each file is for. Deterministic: running it
# twice gives identical files (zip timestamps are fixed). Usage: scripts/make_test_corpus.py [outdir]
import io
import json
import os
import struct
import sys
import warnings
import zipfile

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
ZIP_TIME = (2024, 1, 1, 0, 0, 0)


def ramp(n):
    """The values of every small valid tensor: element i (C order) = i * 0.25 - 3 (exact in f16/bf16/f32/f64 for i < 48)."""
    return [i * 0.25 - 3.0 for i in range(n)]


def product(shape):
    p = 1
    for s in shape:
        p *= s
    return p


def fortran_order(values, shape):
    """Reorders C-order values into Fortran (column-major) storage order."""
    n = len(values)
    out = [0.0] * n
    c_strides = [product(shape[k + 1:]) for k in range(len(shape))]
    f_strides = [product(shape[:k]) for k in range(len(shape))]
    for c in range(n):
        idx = [(c // c_strides[k]) % shape[k] for k in range(len(shape))]
        out[sum(i * s for i, s in zip(idx, f_strides))] = values[c]
    return out


def pack(values, code, big_endian=False):
    return struct.pack((">" if big_endian else "<") + str(len(values)) + code, *values)


def bf16_bits(x):
    """float -> bfloat16 bits by truncation; only used on values exactly representable in bfloat16."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    assert bits & 0xFFFF == 0, x
    return bits >> 16


def shape_text(shape):
    if len(shape) == 1:
        return "(%d,)" % shape[0]
    return "(" + ", ".join(str(s) for s in shape) + ")"


def npy_dict(descr, fortran, shape):
    return "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False", shape_text(shape))


def npy_bytes(header_dict, payload, version=(1, 0), header_len=None):
    """A .npy file the way NumPy writes it: magic, version, header length, dict padded with spaces
    and ended by '\\n' so that the payload starts on a multiple of 64 bytes."""
    text = header_dict.encode("utf-8" if version[0] >= 3 else "latin1")
    len_size = 2 if version[0] == 1 else 4
    preamble = 6 + 2 + len_size
    total = preamble + len(text) + 1
    padded = (total + 63) // 64 * 64
    text = text + b" " * (padded - total) + b"\n"
    hl = len(text) if header_len is None else header_len
    return b"\x93NUMPY" + bytes(version) + struct.pack("<H" if len_size == 2 else "<I", hl) + text + payload


def npy(descr, shape, values=None, fortran=False, version=(1, 0)):
    code = {"f2": "e", "f4": "f", "f8": "d"}[descr[1:]]
    values = ramp(product(shape)) if values is None else values
    stored = fortran_order(values, shape) if fortran else values
    return npy_bytes(npy_dict(descr, fortran, shape), pack(stored, code, descr[0] == ">"), version)


def safetensors(entries, metadata=None, header_text=None, extra=b""):
    """entries: list of (name, dtype, shape, payload bytes); offsets follow in list order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    buffer = b""
    for name, dtype, shape, payload in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(buffer), len(buffer) + len(payload)]}
        buffer += payload
    text = (header_text if header_text is not None else json.dumps(header, separators=(",", ":"))).encode()
    text += b" " * (-len(text) % 8)  # the reference writer pads the header to 8 bytes with spaces
    return struct.pack("<Q", len(text)) + text + buffer + extra


def safetensors_raw(header, buffer):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + buffer


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def npz(name, members, compression, force_zip64=False):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as z:
        for member, data in members:
            info = zipfile.ZipInfo(member, date_time=ZIP_TIME)
            info.compress_type = compression
            info.external_attr = 0o600 << 16
            # NumPy's savez opens each member with force_zip64=True, so real .npz files always
            # carry Zip64 extra fields in their local headers.
            with z.open(info, "w", force_zip64=force_zip64) as f:
                f.write(data)
    write(name, buffer.getvalue())


def kv_values(which, n):
    """k, v, q of kv_example: small exact multiples of 1/8, 1/16, 1/4 (see README)."""
    if which == "k":
        return [((i % 97) - 48) * 0.125 for i in range(n)]
    if which == "v":
        return [((i * 7) % 89 - 44) * 0.0625 for i in range(n)]
    return [((i * 5) % 83 - 41) * 0.25 for i in range(n)]


def main():
    os.makedirs(OUT, exist_ok=True)

    # ---- .npy, valid -------------------------------------------------------------------
    write("npy_v1_f4_c.npy", npy("<f4", [3, 4]))
    write("npy_v2_f8_fortran.npy", npy("<f8", [2, 3, 4], fortran=True, version=(2, 0)))
    write("npy_v3_f2.npy", npy("<f2", [2, 5], version=(3, 0)))
    write("npy_bigendian_f4.npy", npy(">f4", [4, 3]))
    write("npy_bigendian_f2.npy", npy(">f2", [6]))
    write("npy_bigendian_f8_fortran.npy", npy(">f8", [3, 2], fortran=True))
    write("npy_scalar_f4.npy", npy("<f4", []))
    write("npy_empty_f4.npy", npy("<f4", [0, 3]))
    # Header length 182: the dict needs more than 118 bytes, so NumPy pads it to 182 and the
    # payload starts at 10 + 182 = 192 = 3 x 64. A reader that assumes a 128-byte preamble fails.
    long_shape = [1] * 22 + [2, 3]
    data = npy("<f4", long_shape)
    assert struct.unpack("<H", data[8:10])[0] == 182 and len(data) == 192 + 6 * 4
    write("npy_header_182.npy", data)

    # ---- .npy, rejected ----------------------------------------------------------------
    write("npy_object_dtype.npy", npy_bytes(npy_dict("|O", False, [2]), b"\x80\x04N." * 4))
    write("npy_int_dtype.npy", npy_bytes(npy_dict("<i4", False, [3]), struct.pack("<3i", 1, 2, 3)))
    write("npy_structured_dtype.npy",
          npy_bytes("{'descr': [('x', '<f4'), ('y', '<f4')], 'fortran_order': False, 'shape': (2,), }",
                    struct.pack("<4f", 1, 2, 3, 4)))
    write("npy_truncated_payload.npy", npy("<f4", [3, 4])[:-8])
    write("npy_trailing_bytes.npy", npy("<f4", [3, 4]) + b"\0\0\0\0")
    valid = npy("<f4", [3, 4])
    write("npy_header_past_end.npy", valid[:8] + struct.pack("<H", 1000) + valid[10:80])
    write("npy_header_over_cap.npy", npy_bytes(npy_dict("<f4", False, [3, 4]), pack(ramp(12), "f"),
                                               version=(2, 0), header_len=1 << 20))
    write("npy_shape_overflow.npy", npy_bytes(npy_dict("<f4", False, [3037000500, 3037000500]), pack(ramp(4), "f")))
    write("npy_bad_magic.npy", b"\x93NUMPX" + valid[6:])
    write("npy_bad_version.npy", valid[:6] + b"\x04\x00" + valid[8:])
    write("npy_unknown_key.npy",
          npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), 'extra': 1, }", pack(ramp(12), "f")))
    write("npy_missing_shape.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, }", pack(ramp(1), "f")))
    write("npy_byteorder_pipe_f4.npy", npy_bytes(npy_dict("|f4", False, [3]), pack(ramp(3), "f")))

    # ---- .npz ---------------------------------------------------------------------------
    a = npy("<f4", [3, 4])
    b = npy("<f8", [2, 3])
    write_members = [("a.npy", a), ("b.npy", b)]
    npz("npz_stored.npz", write_members, zipfile.ZIP_STORED)
    npz("npz_deflated.npz", write_members, zipfile.ZIP_DEFLATED)
    npz("npz_zip64.npz", write_members, zipfile.ZIP_STORED, force_zip64=True)             # np.savez
    npz("npz_zip64_deflated.npz", write_members, zipfile.ZIP_DEFLATED, force_zip64=True)  # np.savez_compressed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate, which is the point
        npz("npz_duplicate_names.npz", [("a.npy", a), ("a.npy", a)], zipfile.ZIP_STORED)
    npz("npz_truncated_member.npz", [("a.npy", a[:-8])], zipfile.ZIP_DEFLATED)
    npz("npz_object_member.npz", [("a.npy", a), ("obj.npy", npy_bytes(npy_dict("|O", False, [2]), b"\x80\x04N." * 4))],
        zipfile.ZIP_STORED)
    write("npz_not_a_zip.npz", b"PK\x03\x04 this is not a zip archive at all" + b"\0" * 40)
    # 64 MiB of float32 that deflates to about 70 KB: zeros but for the last row, which holds
    # c * 0.25 - 3. A slice of one row must be read without inflating the tensor into memory.
    rows, cols = 4096, 4096
    last_row = pack([c * 0.25 - 3.0 for c in range(cols)], "f")
    big = npy_bytes(npy_dict("<f4", False, [rows, cols]), bytes(4 * cols * (rows - 1)) + last_row)
    npz("npz_deflated_64mib.npz", [("z.npy", big)], zipfile.ZIP_DEFLATED)

    # ---- .safetensors, valid ---------------------------------------------------------------
    f16 = pack(ramp(6), "e")
    bf16 = struct.pack("<6H", *[bf16_bits(x) for x in ramp(6)])
    f32 = pack(ramp(4), "f")
    f64 = pack(ramp(4), "d")
    write("st_f16_bf16_f32_f64.safetensors",
          safetensors([("f16", "F16", [2, 3], f16), ("bf16", "BF16", [3, 2], bf16), ("f32", "F32", [2, 2], f32),
                       ("f64", "F64", [4], f64)], metadata={"format": "pt", "source": "make_test_corpus.py"}))
    # Every bfloat16 class: zeros, subnormals, the smallest and largest normals, infinities,
    # quiet and signalling NaNs, and every 257th bit pattern in between.
    patterns = sorted(set([0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F,
                           0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x4049, 0x3DCD] + list(range(0, 0x10000, 257))))
    write("st_bf16_roundtrip.safetensors",
          safetensors([("bits", "BF16", [len(patterns)], struct.pack("<%dH" % len(patterns), *patterns))]))

    # ---- .safetensors, rejected --------------------------------------------------------
    four = pack(ramp(4), "f")
    write("st_offsets_overlap.safetensors", safetensors_raw(
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, four + four[:8]))
    write("st_offsets_hole.safetensors", safetensors_raw(
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "b": {"dtype": "F32", "shape": [4], "data_offsets": [24, 40]}}, four + b"\0" * 8 + four))
    write("st_offsets_past_end.safetensors", safetensors_raw(
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "b": {"dtype": "F32", "shape": [4], "data_offsets": [16, 32]}}, four + four[:8]))
    write("st_uncovered_tail.safetensors", safetensors_raw(
        {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, four + b"\0" * 8))
    write("st_duplicate_names.safetensors", safetensors(
        [], header_text='{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},'
                        '"a":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}}', extra=four + four))
    write("st_header_past_end.safetensors", struct.pack("<Q", 4096) + b'{"a":{"dtype":"F32","shape":[4],'
                                                                        b'"data_offsets":[0,16]}}' + four)
    write("st_header_over_cap.safetensors", struct.pack("<Q", 200_000_000) + b"{}      ")
    write("st_too_short.safetensors", b"\x10\x00\x00")
    write("st_bad_dtype.safetensors", safetensors([("ids", "I64", [2], struct.pack("<2q", 1, 2))]))
    write("st_shape_mismatch.safetensors", safetensors_raw(
        {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}, four))
    write("st_shape_overflow.safetensors", safetensors_raw(
        {"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}}, four))
    write("st_metadata_not_string.safetensors", safetensors([("a", "F32", [4], four)], metadata={"epoch": 3}))
    write("st_not_json.safetensors", safetensors([], header_text="{not json at all}"))
    # An array nested 100 000 deep as the shape, and as the first of the data offsets: printing such
    # a value (nlohmann::json::dump recurses once per level) in an error overflowed the stack, so the
    # reader must refuse the nesting before it parses, and never print a value it refuses.
    deep = "[" * 100_000 + "]" * 100_000
    write("st_deep_shape.safetensors", safetensors(
        [], header_text='{"a":{"dtype":"F32","shape":%s,"data_offsets":[0,16]}}' % deep, extra=four))
    write("st_deep_offsets.safetensors", safetensors(
        [], header_text='{"a":{"dtype":"F32","shape":[4],"data_offsets":[%s,16]}}' % deep, extra=four))

    # ---- Hostile specs (also fuzz seeds of fuzz_spec): each must be refused in one line ----------
    write("spec_deep_nesting.json", ('{"d": %s}' % deep).encode())
    write("spec_deep_value.json", ('{"name": %s}' % ("[" * 60 + "]" * 60)).encode())
    write("spec_duplicate_keys.json", b'{"d": 64, "tokens": 256, "d": 128}')
    write("spec_int_overflow.json", b'{"d": 1e308}')
    write("spec_control_name.json", b'{"name": "run\\u001b[2J\\r"}')

    # ---- Hostile model dumps (layers.{L}.k/v/q, [batch, heads, tokens, head_dim]) ---------------
    # Each one tensor-light: the layer count must come from what the file holds, not from a name.
    def dump_entries(layers, tokens=4, hd=4, dtype="F32", scale=1.0, poison=None):
        entries = []
        for l in layers:
            for kind in "kvq":
                values = [((l * 5 + "kvq".index(kind) * 7 + i) % 9 - 4) * 0.25 * scale for i in range(tokens * hd)]
                if poison and poison[0] == (l, kind):
                    values[poison[1]] = poison[2]
                code = "f" if dtype == "F32" else "e"
                entries.append(("layers.%d.%s" % (l, kind), dtype, [1, 1, tokens, hd], pack(values, code)))
        return entries
    one = dump_entries([0])
    tail = one[0][3]
    write("dump_layer_index_huge.safetensors", safetensors(
        [("layers.20000000.k", "F32", [1, 1, 4, 4], tail)]))
    write("dump_layer_index_int_max.safetensors", safetensors(
        [("layers.2147483647.k", "F32", [1, 1, 4, 4], tail)]))
    write("dump_layer_index_20_digits.safetensors", safetensors(
        [("layers.18446744073709551616.k", "F32", [1, 1, 4, 4], tail)]))
    write("dump_layer_gap.safetensors", safetensors(dump_entries([0, 2])))
    write("dump_1000_layers.safetensors", safetensors(dump_entries(range(1000), tokens=1, hd=4, dtype="F16")))
    # A key entry of 1e18 in an F32 dump: finite, squared norms fit float32, but fp16 norms would
    # store it as Inf and the trial's KL would be NaN (which once span the statistics forever).
    write("dump_fp16_overflow.safetensors", safetensors(dump_entries([0, 1], tokens=8, hd=4, poison=((1, "k"), 5, 1e18))))

    # ---- K/V/Q example: heads x tokens x head_dim = 2 x 64 x 32, float32 ---------------------
    shape = [2, 64, 32]
    n = product(shape)
    tensors = [(t, kv_values(t, n)) for t in ("k", "v", "q")]
    write("kv_example.safetensors",
          safetensors([(t, "F32", shape, pack(v, "f")) for t, v in tensors], metadata={"layout": "heads,tokens,head_dim"}))
    npz("kv_example.npz", [(t + ".npy", npy("<f4", shape, v)) for t, v in tensors], zipfile.ZIP_STORED, force_zip64=True)


if __name__ == "__main__":
    main()
