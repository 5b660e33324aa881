#!/usr/bin/env python3
"""Checks, without a GPU, the shared-memory addresses the sm90 epilogue (gemm_sm90.cuh,
store_chunk) writes each accumulator pair to against the TMA's 64-byte swizzle of a 64-row x
64-byte output box (byte address bits 4-5 XOR bits 7-8, period 512 bytes): the 16-bit path
(st.shared.b32), the optional stmatrix path (CVF_SM90_STMATRIX) and the f32 path (two boxes of
16 columns); and that the 16-bit writes of a warp are free of bank conflicts.
Run: python3 src/cuda/check_swizzle.py (exit status 1 on a mismatch)."""
import sys


def swz(a):
    return a ^ (((a >> 7) & 3) << 4)


def check():
    ok = {"sts16": True, "stmatrix": True, "f32": True}
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
    # stmatrix.x4: lane L gives the address of row L%8 of matrix L/8; register q of lane T holds
    # row T/4, columns 2*(T%4), +1 of matrix q, which is the block (jb = 2 jj + q/2, h = q%2).
    for warp in range(4):
        for jj in range(2):
            rowaddr = [(warp * 16 + 8 * ((L >> 3) & 1) + (L & 7)) * 64 + (((2 * jj + (L >> 4)) ^ ((L >> 1) & 3)) << 4)
                       for L in range(32)]
            for lane in range(32):
                for q in range(4):
                    jb, h = 2 * jj + q // 2, q % 2
                    row, col = warp * 16 + lane // 4 + 8 * h, jb * 8 + 2 * (lane % 4)
                    ok["stmatrix"] &= rowaddr[8 * q + lane // 4] + 4 * (lane % 4) == swz(row * 64 + col * 2)
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
