/*
 * How accurate would an f32 product be if it ran on bf16 tiles (AMX) with each operand split into
 * bf16 parts? (issue 15: the f32 backward at 16 threads is ~1.0-1.1x PyTorch, its target 0.85x,
 * and the host's AMX tiles run ~5x the fp32 FMA rate per core.) x = hi + lo (+ lo2), each part
 * x's remainder rounded to bf16; "bf16x3" sums hi*hi + hi*lo + lo*hi, "bf16x6" adds lo*lo +
 * hi*lo2 + lo2*hi. Each product of two bf16 values is exact in fp32; the sums accumulate in fp32,
 * one k at a time (the tiles add pairs of k, which this does not model). Prints the relative
 * Frobenius error against float64 (the contract's measure: f32 must stay within 1e-5) of fp32
 * FMA-free accumulation, bf16x3 and bf16x6, for M = N = 64 and the given K, inputs uniform in
 * [-1, 1] scaled by 2^e with e uniform in [-range, range] (range 0: plain uniform).
 * Not part of the build:
 *
 *   gcc -O1 -std=c11 bench/cpu_f32_split_accuracy.c -lm -o build/f32_split_accuracy
 *   build/f32_split_accuracy [K] [range]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* x rounded to the nearest bf16 (ties to even), as a float. */
static float to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float r;
    memcpy(&r, &u, sizeof r);
    return r;
}

/* A value uniform in [-1, 1] times 2^e, e uniform in [-range, range]. */
static float sample(int range)
{
    double v = 2.0 * rand() / RAND_MAX - 1.0;
    int e = range > 0 ? rand() % (2 * range + 1) - range : 0;
    return (float)ldexp(v, e);
}

int main(int argc, char **argv)
{
    const int M = 64, N = 64, K = argc > 1 ? atoi(argv[1]) : 2048, range = argc > 2 ? atoi(argv[2]) : 0;
    if (K < 1 || range < 0 || range > 60) {
        fprintf(stderr, "usage: %s [K >= 1] [range 0..60]\n", argv[0]);
        return 2;
    }
    float *a = malloc(sizeof(float) * (size_t)M * (size_t)K), *b = malloc(sizeof(float) * (size_t)K * (size_t)N);
    if (!a || !b)
        return 1;
    srand(1);
    for (int i = 0; i < M * K; i++)
        a[i] = sample(range);
    for (int i = 0; i < K * N; i++)
        b[i] = sample(range);
    double err32 = 0, err3 = 0, err6 = 0, norm = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double ref = 0;
            float acc32 = 0, acc3 = 0, acc6 = 0;
            for (int k = 0; k < K; k++) {
                const float x = a[(size_t)i * K + k], y = b[(size_t)k * N + j];
                const float xh = to_bf16(x), xl = to_bf16(x - xh), xl2 = to_bf16(x - xh - xl);
                const float yh = to_bf16(y), yl = to_bf16(y - yh), yl2 = to_bf16(y - yh - yl);
                ref += (double)x * y;
                acc32 += x * y;
                acc3 += xh * yh;
                acc3 += xh * yl;
                acc3 += xl * yh;
                acc6 += xh * yh;
                acc6 += xh * yl;
                acc6 += xl * yh;
                acc6 += xl * yl;
                acc6 += xh * yl2;
                acc6 += xl2 * yh;
            }
            err32 += (acc32 - ref) * (acc32 - ref);
            err3 += (acc3 - ref) * (acc3 - ref);
            err6 += (acc6 - ref) * (acc6 - ref);
            norm += ref * ref;
        }
    printf("K %5d range %2d  relative Frobenius error: fp32 %.2e  bf16x3 %.2e  bf16x6 %.2e\n", K, range,
           sqrt(err32 / norm), sqrt(err3 / norm), sqrt(err6 / norm));
    free(a);
    free(b);
    return 0;
}
