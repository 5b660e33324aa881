#!/usr/bin/env python3
"""Writes the seed corpora of the fuzzers (checked in; rerun after changing the formats):
  corpus/npy/  valid .npy files of each dtype (<f2 <f4 <f8), C and Fortran order, 1-D and 2-D,
               versions 1.0 / 2.0 / 3.0, empty arrays, and malformed ones (bad magic, version,
               header length, descr, shape, trailing and missing data). Named *.bin, not *.npy
               (.gitignore ignores *.npy).
  corpus/api/  inputs decoded by fuzz_api.c: matmul with each activation, bias, aux_in/aux_out,
               bias_grad, each dtype, transposed and padded views, forced blocks, 2 threads, the
               caller's workspace; MLP backward (tanh and erf); and some invalid calls.
Python 3 standard library only; deterministic."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def npy(descr, shape, fortran=False, major=1, data=None, header=None, pad=True, elem=None):
    if header is None:
        shape_text = "(%s)" % ("".join("%d, " % d for d in shape).rstrip(" ") if len(shape) != 1 else "%d," % shape[0])
        header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_text)
    len_bytes = 2 if major == 1 else 4
    text = header
    if pad:
        total = 10 + (len_bytes - 2) + len(text) + 1
        text += " " * ((64 - total % 64) % 64)
    text += "\n"
    raw = text.encode("latin-1")
    out = b"\x93NUMPY" + bytes([major, 0]) + (struct.pack("<H", len(raw)) if major == 1 else struct.pack("<I", len(raw)))
    out += raw
    if data is None:
        n = 1
        for d in shape:
            n *= d
        size = elem if elem is not None else int(descr[2])
        fmt = {2: "e", 4: "f", 8: "d"}.get(size, "f")
        data = b"".join(struct.pack("<" + fmt, (i % 7) - 3 + 0.5) for i in range(n))
    return out + data


def write(directory, name, content):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(content)


def npy_corpus(d):
    for descr in ("<f2", "<f4", "<f8"):
        t = descr[1:]
        write(d, "ok_%s_2d_c.bin" % t, npy(descr, (3, 4)))
        write(d, "ok_%s_2d_f.bin" % t, npy(descr, (4, 3), fortran=True))
        write(d, "ok_%s_1d.bin" % t, npy(descr, (5,)))
        write(d, "ok_%s_empty.bin" % t, npy(descr, (0, 3)))
    write(d, "ok_v2.bin", npy("<f4", (2, 2), major=2))
    write(d, "ok_v3.bin", npy("<f8", (1, 3), major=3))
    write(d, "ok_unpadded_dquote.bin",
          npy("<f4", (2,), header='{"shape": (2L,), "fortran_order": False, "descr": "<f4"}', pad=False, elem=4))
    write(d, "bad_magic.bin", b"\x93NUMPZ\x01\x00" + npy("<f4", (1,))[8:])
    write(d, "bad_version.bin", b"\x93NUMPY\x04\x00" + npy("<f4", (1,))[8:])
    write(d, "bad_header_len.bin", npy("<f4", (1,))[:8] + b"\xff\xff" + npy("<f4", (1,))[10:])
    write(d, "bad_descr_big_endian.bin", npy(">f4", (2,), elem=4))
    write(d, "bad_descr_int.bin", npy("<i4", (2,), elem=4))
    write(d, "bad_shape_3d.bin", npy("<f4", (1, 2, 3)))
    write(d, "bad_shape_negative.bin",
          npy("<f4", (), header="{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2), }", elem=4))
    write(d, "bad_shape_huge.bin",
          npy("<f8", (), header="{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
              data=b""))
    write(d, "bad_trailing.bin", npy("<f4", (2,)) + b"xyz")
    write(d, "bad_truncated.bin", npy("<f4", (8,))[:-5])
    write(d, "bad_dup_key.bin",
          npy("<f4", (), header="{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", elem=4))
    write(d, "bad_structured.bin",
          npy("<f4", (), header="{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", elem=4))
    write(d, "bad_empty.bin", b"")


def api_input(mode, seed, body):
    return bytes([mode, seed]) + bytes(body)


# The byte layout of fuzz_api.c: a matrix is [dtype, shape, (extra bytes), place]; a vector the same.
F32, F16, BF16, F64 = 0, 2, 4, 6
ROW, COL, BCAST = 0, 4, 6


def mat(dtype=F32, layout=ROW, pad=0, place=0):
    return [dtype, layout | (pad << 3), place]


def vec(dtype=F32, place=0):
    return [dtype, 0, place]


def matmul(m, n, k, flags, act, dt=F32, out_dt=None, a_layout=ROW, b_layout=ROW, pad=0):
    out_dt = dt if out_dt is None else out_dt
    return ([m, n, k] + mat(dt, a_layout, pad) + mat(dt, b_layout, pad) + mat(out_dt, ROW, pad) + [flags, act] +
            vec(dt) + mat(dt) + mat(out_dt) + vec(out_dt))


def mlp(s, h, i, gelu, dt=F32):
    # grad_output, hidden_state, fc1_weight, fc2_weight, fc1_output, gelu_output; then the outputs
    # grad_hidden_state, grad_fc1_weight, grad_fc1_bias, grad_fc2_weight, grad_fc2_bias; the GELU.
    return [s, h, i] + mat(dt) * 6 + mat(dt) + mat(dt) + vec(dt) + mat(dt) + vec(dt) + [gelu]


def api_corpus(d):
    n = 0

    def put(name, mode, body, seed=7):
        nonlocal n
        write(d, "%02d_%s.bin" % (n, name), api_input(mode, seed, body))
        n += 1

    put("plain_f32", 0, matmul(5, 7, 3, 0, 0))
    put("relu_f16", 0, matmul(9, 16, 8, 1, 1, dt=F16))
    for act, name in ((2, "gelu_tanh"), (4, "gelu_erf")):
        put(name + "_bias_auxout_bf16", 0, matmul(8, 12, 17, 1 | 2 | 8 | 16, act, dt=BF16))
    for act, name in ((3, "dgelu_tanh"), (5, "dgelu_erf")):
        put(name + "_f32", 0, matmul(6, 10, 4, 1 | 2 | 16, act))
    put("transposed_padded", 0, matmul(13, 11, 9, 1 | 2, 2, a_layout=COL, b_layout=COL, pad=2))
    put("broadcast_b", 0, matmul(4, 4, 4, 0, 0, b_layout=BCAST))
    put("mixed_f16_in_f32_out", 0, matmul(7, 5, 6, 1 | 2 | 16, 1, dt=F16, out_dt=F32))
    put("k0_bias", 0, matmul(3, 5, 0, 1 | 2 | 16, 2))
    put("small_blocks", 1 << 3, matmul(24, 24, 24, 1 | 2 | 8 | 16, 2))
    put("tiny_blocks_2threads", (2 << 3) | 6, matmul(17, 19, 23, 1 | 2 | 16, 4))
    put("queried_workspace", 1 << 5, matmul(20, 20, 20, 1 | 2 | 8 | 16, 2, dt=F16))
    put("small_workspace", (2 << 5), matmul(20, 20, 20, 1 | 2 | 8 | 16, 2) + [1, 0])
    put("f64_reference_only", 0, matmul(4, 4, 4, 0, 0, dt=F64))
    put("aliased_output", 0, matmul(4, 4, 4, 0, 0)[:3] + mat() + mat(place=0) + mat(place=230) + [0, 0] +
        [0] * 12)
    put("wild_dims", 0, [4, 4, 4, 0, 7 << 5, 3, 2, 0, 0, 0, 0, 0, 0, 0, 0])
    put("bad_activation", 0, matmul(3, 3, 3, 1, 250))
    put("null_view", 0, matmul(3, 3, 3, 0xC0, 0) + [1])
    put("mlp_tanh", 1, mlp(6, 8, 12, 0))
    put("mlp_erf_f16", 1, mlp(5, 7, 9, 1, dt=F16))
    put("mlp_bf16_small_blocks", 1 | (1 << 3), mlp(12, 12, 12, 0, dt=BF16))
    put("mlp_2threads", 1 | 6, mlp(10, 3, 11, 1))
    put("mlp_empty", 1, mlp(0, 4, 5, 0))
    put("mlp_bad_gelu", 1, mlp(2, 2, 2, 250))


def main():
    npy_corpus(os.path.join(HERE, "corpus", "npy"))
    api_corpus(os.path.join(HERE, "corpus", "api"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
