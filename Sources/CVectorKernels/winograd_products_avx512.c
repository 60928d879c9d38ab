/* Winograd F(4x4, 3x3)'s 36 products with AVX-512, for inference: one call for all positions where
   OpenBLAS took 36, no packing of either operand (U is read in place, a few rows at a time, and V's
   rows are already 16 columns a vector). Not the transforms (winograd_avx512.c), not training's
   products (OpenBLAS: the backward ones transpose their operands). */

#include "vector_kernels.h"

#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512vl,avx512dq")))
#define ALWAYS_INLINE __attribute__((always_inline)) inline

#define BLOCK FACETRAIN_WINOGRAD_ROW_BLOCK

long facetrain_winograd_packed_size(long output_channels, long channels) {
    return 36 * ((output_channels + BLOCK - 1) / BLOCK) * BLOCK * channels;
}

void facetrain_winograd_pack(
    const float *u, long u_position_stride, long output_channels, long channels, float *packed) {
    long blocks = (output_channels + BLOCK - 1) / BLOCK;
    for (int position = 0; position < 36; position++) {
        const float *from = u + position * u_position_stride;
        float *to = packed + position * blocks * BLOCK * channels;
        for (long block = 0; block < blocks; block++) {
            for (long c = 0; c < channels; c++) {
                for (long r = 0; r < BLOCK; r++) {
                    long row = block * BLOCK + r;
                    to[(block * channels + c) * BLOCK + r] = row < output_channels ? from[row * channels + c] : 0;
                }
            }
        }
    }
}

/* rows x 16 * vectors columns of M (vectors 1 or 2; the last vector masked at the columns' end by
   `low` or `high`): M[r][n] = sum over c of U[r][c] V[c][n], U's rows from one packed block (two
   for more than 12 rows). Accumulators stay in registers (rows x vectors <= 24 of the 32), U's
   entries are broadcast from adjacent addresses, V's row is loaded once for all rows. */
AVX512 static ALWAYS_INLINE void block(
    int rows, int vectors, const float *u, long channels, const float *v, long columns, float *m, __mmask16 low,
    __mmask16 high) {
    __m512 left[24], right[24];
    const float *second = u + channels * BLOCK;
#pragma clang loop unroll(full)
    for (int r = 0; r < rows; r++) left[r] = right[r] = _mm512_setzero_ps();
    for (long c = 0; c < channels; c++) {
        __m512 v0 = _mm512_maskz_loadu_ps(low, v + c * columns);
        __m512 v1 = vectors == 2 ? _mm512_maskz_loadu_ps(high, v + c * columns + 16) : v0;
#pragma clang loop unroll(full)
        for (int r = 0; r < rows; r++) {
            __m512 a = _mm512_set1_ps(r < BLOCK ? u[c * BLOCK + r] : second[c * BLOCK + r - BLOCK]);
            left[r] = _mm512_fmadd_ps(a, v0, left[r]);
            if (vectors == 2) right[r] = _mm512_fmadd_ps(a, v1, right[r]);
        }
    }
#pragma clang loop unroll(full)
    for (int r = 0; r < rows; r++) {
        _mm512_mask_storeu_ps(m + r * columns, low, left[r]);
        if (vectors == 2) _mm512_mask_storeu_ps(m + r * columns + 16, high, right[r]);
    }
}

/* `block` with its row and vector counts constants, so the loops over rows unroll into registers:
   12 rows of 32 columns, or 24 rows of 16 where at most 16 columns are left (a 10 x 10 plane of
   one image has 12), so that few lanes compute nothing. */
AVX512 static void block_rows(
    int rows, int vectors, const float *u, long channels, const float *v, long columns, float *m, __mmask16 low,
    __mmask16 high) {
#define ROWS(n, w) \
    case n: block(n, w, u, channels, v, columns, m, low, high); break;
    if (vectors == 2) {
        switch (rows) {
            ROWS(1, 2) ROWS(2, 2) ROWS(3, 2) ROWS(4, 2) ROWS(5, 2) ROWS(6, 2) ROWS(7, 2) ROWS(8, 2) ROWS(9, 2)
            ROWS(10, 2) ROWS(11, 2) ROWS(12, 2)
        default: break;
        }
    } else {
        switch (rows) {
            ROWS(1, 1) ROWS(2, 1) ROWS(3, 1) ROWS(4, 1) ROWS(5, 1) ROWS(6, 1) ROWS(7, 1) ROWS(8, 1) ROWS(9, 1)
            ROWS(10, 1) ROWS(11, 1) ROWS(12, 1) ROWS(13, 1) ROWS(14, 1) ROWS(15, 1) ROWS(16, 1) ROWS(17, 1)
            ROWS(18, 1) ROWS(19, 1) ROWS(20, 1) ROWS(21, 1) ROWS(22, 1) ROWS(23, 1) ROWS(24, 1)
        default: break;
        }
    }
#undef ROWS
}

static __mmask16 lanes(long count) {
    return count >= 16 ? (__mmask16)0xFFFF : count <= 0 ? (__mmask16)0 : (__mmask16)((1u << count) - 1);
}

void facetrain_winograd_products_avx512(
    const float *packed, long output_channels, const float *v, long v_position_stride, float *m,
    long m_position_stride, long channels, long columns, long channel_begin, long channel_end) AVX512;

void facetrain_winograd_products_avx512(
    const float *packed, long output_channels, const float *v, long v_position_stride, float *m,
    long m_position_stride, long channels, long columns, long channel_begin, long channel_end) {
    long u_position_stride = (output_channels + BLOCK - 1) / BLOCK * BLOCK * channels;
    for (int position = 0; position < 36; position++) {
        const float *up = packed + position * u_position_stride;
        const float *vp = v + position * v_position_stride;
        float *mp = m + position * m_position_stride;
        /* V's 32 (or 16) columns stay in L1 while every row block of U passes over them. */
        for (long first = 0; first < columns;) {
            int vectors = columns - first > 16 ? 2 : 1, most = vectors == 2 ? BLOCK : 2 * BLOCK;
            __mmask16 low = lanes(columns - first), high = lanes(columns - first - 16);
            for (long row = channel_begin; row < channel_end; row += most) {
                int rows = channel_end - row < most ? (int)(channel_end - row) : most;
                block_rows(
                    rows, vectors, up + row * channels, channels, vp + first, columns, mp + row * columns + first,
                    low, high);
            }
            first += 16 * vectors;
        }
    }
}
