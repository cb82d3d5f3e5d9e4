#!/usr/bin/env python3
"""Write tests/data/corrupt/*.gguf: one small hand-made GGUF per rejection reason.

Each file is a valid GGUF with exactly one thing wrong, so the parser must reject
it for that reason and no other. tests/test_gguf_corrupt.c holds the table of
file name -> expected status and message substring. valid_*.gguf are controls
built with the same helpers that must parse. Python 3 standard library only.

    scripts/make-corrupt-gguf.py [OUT_DIR]   (default tests/data/corrupt)
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
F32_T, F16_T, Q8_0_T = 0, 1, 8


def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def gstr(b, length=None):
    """A GGUF string; `length` overrides the stored length (to lie about it)."""
    if isinstance(b, str):
        b = b.encode()
    return u64(len(b) if length is None else length) + b


def header(n_tensors, n_kv, version=3, magic=b"GGUF"):
    return magic + u32(version) + u64(n_tensors) + u64(n_kv)


def kv(key, vtype, payload):
    return gstr(key) + u32(vtype) + payload


def kv_u32(key, v):
    return kv(key, U32, u32(v))


def kv_str(key, s):
    return kv(key, STR, gstr(s))


def kv_arr(key, etype, n, payload):
    return kv(key, ARR, u32(etype) + u64(n) + payload)


def tinfo(name, ne, ttype, offset, n_dims=None):
    nd = len(ne) if n_dims is None else n_dims
    return gstr(name) + u32(nd) + b"".join(u64(d) for d in ne) + u32(ttype) + u64(offset)


def pad(b, align=32):
    return b + b"\0" * (-len(b) % align)


def gguf(kvs, tinfos, data=b"", align=32, n_kv=None, n_tensors=None, version=3, magic=b"GGUF"):
    meta = header(len(tinfos) if n_tensors is None else n_tensors,
                  len(kvs) if n_kv is None else n_kv, version, magic)
    meta += b"".join(kvs) + b"".join(tinfos)
    return pad(meta, align) + data if tinfos else meta + data


NAME = [kv_str("general.architecture", "llama")]
F32_4 = [tinfo("a", [4], F32_T, 0)]
DATA16 = struct.pack("<4f", 1, 2, 3, 4) + b"\0" * 16


def every_type_kvs():
    return [
        kv("t.u8", U8, bytes([200])),
        kv("t.i8", I8, struct.pack("<b", -5)),
        kv("t.u16", U16, struct.pack("<H", 60000)),
        kv("t.i16", I16, struct.pack("<h", -30000)),
        kv_u32("t.u32", 4000000000),
        kv("t.i32", I32, struct.pack("<i", -2000000000)),
        kv("t.f32", F32, struct.pack("<f", 0.5)),
        kv("t.bool", BOOL, bytes([1])),
        kv_str("t.str", "héllo\n"),
        kv("t.u64", U64, u64(1 << 63)),
        kv("t.i64", I64, struct.pack("<q", -(1 << 63))),
        kv("t.f64", F64, struct.pack("<d", -1.25)),
        kv_arr("t.arr_i32", I32, 3, struct.pack("<3i", 1, -2, 3)),
        kv_arr("t.arr_str", STR, 2, gstr("ab") + gstr("")),
        kv_arr("t.arr_bool", BOOL, 2, bytes([0, 1])),
        kv_arr("t.arr_empty", F32, 0, b""),
    ]


def files():
    f = {}
    # controls
    f["valid_base"] = gguf(NAME + every_type_kvs(),
                           [tinfo("a", [4], F32_T, 0), tinfo("empty", [0, 3], F32_T, 32),
                            tinfo("b", [2, 2], F32_T, 32)],
                           DATA16 + struct.pack("<4f", 5, 6, 7, 8) + b"\0" * 16)
    f["valid_no_tensors"] = gguf(NAME, [])  # vocab-style: ends right after the metadata
    f["valid_align64"] = gguf([kv_u32("general.alignment", 64)], [tinfo("a", [4], F32_T, 0)], DATA16, align=64)

    # header
    f["truncated_header"] = b"GGUF" + u32(3) + u64(0)
    f["bad_magic"] = gguf(NAME, [], magic=b"GGML")
    f["version_1"] = gguf(NAME, [], version=1)
    f["version_4"] = gguf(NAME, [], version=4)
    f["version_byteswapped"] = gguf(NAME, [], version=0x03000000)
    f["absurd_n_kv"] = gguf(NAME, [], n_kv=1 << 62)
    f["absurd_n_tensors"] = gguf(NAME, [], n_tensors=1 << 62)
    # each count fits the remaining bytes alone, not both together
    f["counts_do_not_fit"] = header(1, 2) + kv_str("k", "x" * 20)

    # keys and values
    f["key_past_end"] = header(0, 1) + gstr(b"abc", 100) + b"\0" * 16
    f["key_too_long"] = gguf([kv_u32("k" * 65537, 1)], [])
    f["empty_key"] = gguf([kv_u32("", 1)], [])
    f["key_nul_byte"] = gguf([kv_u32("a\0b", 1)], [])
    f["duplicate_key"] = gguf([kv_u32("dup.key", 1), kv_u32("dup.key", 2)], [])
    f["bad_value_type"] = gguf([kv("k", 13, u32(0))], [])
    f["value_truncated"] = header(0, 1) + gstr("k") + u32(U64) + b"\1"
    f["string_past_end"] = gguf([kv("k", STR, gstr(b"abcdefgh", 1000))], [])
    f["string_too_long"] = gguf([kv("k", STR, gstr(b"abcdefgh", 1 << 31))], [])
    f["bad_bool"] = gguf([kv("k", BOOL, bytes([2]))], [])
    f["bad_bool_in_array"] = gguf([kv_arr("k", BOOL, 3, bytes([1, 5, 0]))], [])
    f["nested_array"] = gguf([kv_arr("k", ARR, 1, u32(U8) + u64(1) + b"\1")], [])
    f["bad_array_type"] = gguf([kv_arr("k", 99, 1, b"\0" * 8)], [])
    f["array_too_long"] = gguf([kv_arr("k", U8, 1 << 31, b"\0" * 8)], [])
    f["array_past_end"] = gguf([kv_arr("k", U32, 1000, b"\0" * 8)], [])
    f["string_array_past_end"] = gguf([kv_arr("k", STR, 1000, b"\0" * 16)], [])
    f["string_array_element_past_end"] = gguf([kv_arr("k", STR, 2, gstr("ok") + gstr(b"xy", 77))], [])

    # general.alignment
    f["alignment_not_power_of_2"] = gguf([kv_u32("general.alignment", 48)], F32_4, DATA16)
    f["alignment_zero"] = gguf([kv_u32("general.alignment", 0)], F32_4, DATA16)
    f["alignment_wrong_type"] = gguf([kv("general.alignment", I32, u32(32))], F32_4, DATA16)

    # tensor infos
    f["tensor_name_empty"] = gguf(NAME, [tinfo("", [4], F32_T, 0)], DATA16)
    f["tensor_name_too_long"] = gguf(NAME, [tinfo("t" * 64, [4], F32_T, 0)], DATA16)
    f["tensor_name_past_end"] = header(1, 0) + gstr(b"abc", 500) + b"\0" * 30
    f["duplicate_tensor_name"] = gguf(NAME, [tinfo("w", [4], F32_T, 0), tinfo("w", [4], F32_T, 32)], DATA16 * 2)
    f["n_dims_0"] = gguf(NAME, [tinfo("a", [], F32_T, 0, n_dims=0)], DATA16)
    f["n_dims_5"] = gguf(NAME, [tinfo("a", [4, 1, 1, 1, 1], F32_T, 0)], DATA16)
    f["negative_dim"] = gguf(NAME, [tinfo("a", [4, -3], F32_T, 0)], DATA16)
    f["shape_overflow"] = gguf(NAME, [tinfo("a", [1 << 32, 1 << 32], F32_T, 0)], DATA16)
    f["byte_size_overflow"] = gguf(NAME, [tinfo("a", [1 << 62], F32_T, 0)], DATA16)
    f["ne0_not_block_multiple"] = gguf(NAME, [tinfo("a", [33, 1], Q8_0_T, 0)], b"\0" * 64)
    f["unknown_tensor_type"] = gguf(NAME, [tinfo("a", [4], 99, 0)], DATA16)
    f["unsupported_tensor_type"] = gguf(NAME, [tinfo("a", [256], 16, 0)], b"\0" * 96)
    # n_dims 4 but the file ends inside ne[2]
    f["tensor_info_truncated"] = header(1, 0) + gstr("abcdefgh") + u32(4) + u64(4) + u64(1) + b"\1\0\0\0"
    f["misaligned_offset"] = gguf(NAME, [tinfo("a", [4], F32_T, 16)], DATA16 * 2)
    f["data_past_end"] = gguf(NAME, [tinfo("big", [1024], F32_T, 0)], DATA16)
    f["offset_past_end"] = gguf(NAME, [tinfo("far", [4], F32_T, 1 << 40)], DATA16)
    f["overlapping_tensors"] = gguf(NAME, [tinfo("a", [8], F32_T, 0), tinfo("b", [4], F32_T, 0)], DATA16)
    # metadata ends unaligned and the file ends there: no room for the padding
    f["data_section_past_end"] = header(1, 1) + NAME[0] + tinfo("e", [0], F32_T, 0)
    return f


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "corrupt")
    os.makedirs(out, exist_ok=True)
    for name, data in sorted(files().items()):
        with open(os.path.join(out, name + ".gguf"), "wb") as fh:
            fh.write(data)
    print(f"wrote {len(files())} files to {os.path.normpath(out)}")


if __name__ == "__main__":
    main()
