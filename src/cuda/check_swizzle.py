#!/usr/bin/env python3
"""Checks, without a GPU, the shared-memory addresses the sm90 epilogue (gemm_sm90.cuh,
store_chunk) writes each accumulator pair to against the TMA's 64-byte swizzle of a 64-row x
64-byte output box (byte address bits 4-5 XOR bits 7-8, period 512 bytes): the 16-bit path
(st.shared.b32) and the f32 path (two boxes of 16 columns); and that the 16-bit writes of a warp
are free of bank conflicts. (The stmatrix variant measured in docs/PERF.md is no longer in the
kernel.)
Run: python3 src/cuda/check_swizzle.py (exit status 1 on a mismatch)."""
import sys


def swz(a):
    return a ^ (((a >> 7) & 3) << 4)


def check():
    ok = {"sts16": True, "f32": True}
    # Accumulator fragment of wgmma (per warpgroup thread t): rows warp*16 + lane/4 (+8),
    # columns 8*jb + 2*(lane%4) (+1).
    for t in range(128):
        warp, lane = t // 32, t % 32
        r_local = warp * 16 + lane // 4
        sw = (lane >> 3) & 3
        for jb in range(4):
            for h in range(2):
                addr = r_local * 64 + 4 * (lane % 4) + h * 512 + ((jb ^ sw) << 4)
                row, col = r_local + 8 * h, jb * 8 + 2 * (lane % 4)
                ok["sts16"] &= addr == swz(row * 64 + col * 2)
        for half in range(2):
            for jj in range(2):
                for h in range(2):
                    jb = 2 * half + jj
                    addr = r_local * 64 + 8 * (lane & 1) + h * 512 + (((2 * jj + (lane % 4) // 2) ^ sw) << 4)
                    row, col = r_local + 8 * h, jb * 8 + 2 * (lane % 4) - 16 * half
                    ok["f32"] &= addr == swz(row * 64 + col * 4)
    worst = 0
    for jb in range(4):
        for h in range(2):
            words = {}
            for lane in range(32):
                a = (lane // 4) * 64 + 4 * (lane % 4) + h * 512 + ((jb ^ ((lane >> 3) & 3)) << 4)
                words.setdefault((a // 4) % 32, set()).add(a // 4)
            worst = max(worst, max(len(v) for v in words.values()))
    ok["sts16 conflict-free"] = worst == 1
    return ok


if __name__ == "__main__":
    result = check()
    for name, good in result.items():
        print(f"{name}: {'ok' if good else 'MISMATCH'}")
    sys.exit(0 if all(result.values()) else 1)
