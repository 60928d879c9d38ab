/* Winograd F(4x4, 3x3)'s 36 products with AVX2, for inference on CPUs without AVX-512: the
   packed U of winograd_products_avx512.c (blocks of 12 rows), 8 columns a vector. Each entry is the
   same sum in the same order as there (one fused multiply-add per channel, from zero), so the two
   give the same bits. Not the transforms (winograd_avx2.c), not training's products (OpenBLAS). */

#include "vector_kernels.h"

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define ALWAYS_INLINE __attribute__((always_inline)) inline

#define BLOCK FACETRAIN_WINOGRAD_ROW_BLOCK

/* rows x 8 * vectors columns of M (vectors 1 or 2, the last vector masked by `low` or `high`):
   M[r][n] = sum over c of U[r][c] V[c][n], U's rows r of one packed block starting at `u` (its
   entries BLOCK apart from one channel to the next). rows x vectors <= 12 accumulators, with V's
   two vectors and the broadcast: 15 of the 16 registers. */
AVX2 static ALWAYS_INLINE void block(
    int rows, int vectors, int full, const float *u, long channels, const float *v, long columns, float *m,
    __m256i low, __m256i high) {
    __m256 left[12], right[12];
#pragma clang loop unroll(full)
    for (int r = 0; r < rows; r++) left[r] = right[r] = _mm256_setzero_ps();
    for (long c = 0; c < channels; c++) {
        /* Masked loads only at the columns' end: on AMD a masked load costs more than a plain one. */
        __m256 v0 = full ? _mm256_loadu_ps(v + c * columns) : _mm256_maskload_ps(v + c * columns, low);
        __m256 v1 = vectors == 2
                        ? (full ? _mm256_loadu_ps(v + c * columns + 8) : _mm256_maskload_ps(v + c * columns + 8, high))
                        : v0;
#pragma clang loop unroll(full)
        for (int r = 0; r < rows; r++) {
            __m256 a = _mm256_broadcast_ss(u + c * BLOCK + r);
            left[r] = _mm256_fmadd_ps(a, v0, left[r]);
            if (vectors == 2) right[r] = _mm256_fmadd_ps(a, v1, right[r]);
        }
    }
#pragma clang loop unroll(full)
    for (int r = 0; r < rows; r++) {
        if (full) {
            _mm256_storeu_ps(m + r * columns, left[r]);
            if (vectors == 2) _mm256_storeu_ps(m + r * columns + 8, right[r]);
        } else {
            _mm256_maskstore_ps(m + r * columns, low, left[r]);
            if (vectors == 2) _mm256_maskstore_ps(m + r * columns + 8, high, right[r]);
        }
    }
}

/* `block` with constant counts, so its loops unroll into registers: 6 rows of 16 columns, or 12
   rows of 8 where at most 8 columns are left; `full` when every column of the vectors is there. */
AVX2 static void block_rows(
    int rows, int vectors, int full, const float *u, long channels, const float *v, long columns, float *m,
    __m256i low, __m256i high) {
#define ROWS(n, w, f) \
    case n: block(n, w, f, u, channels, v, columns, m, low, high); break;
#define TWO(f) \
    switch (rows) { \
        ROWS(1, 2, f) ROWS(2, 2, f) ROWS(3, 2, f) ROWS(4, 2, f) ROWS(5, 2, f) ROWS(6, 2, f) \
    default: break; \
    }
#define ONE(f) \
    switch (rows) { \
        ROWS(1, 1, f) ROWS(2, 1, f) ROWS(3, 1, f) ROWS(4, 1, f) ROWS(5, 1, f) ROWS(6, 1, f) ROWS(7, 1, f) \
        ROWS(8, 1, f) ROWS(9, 1, f) ROWS(10, 1, f) ROWS(11, 1, f) ROWS(12, 1, f) \
    default: break; \
    }
    if (vectors == 2) {
        if (full) TWO(1) else TWO(0)
    } else {
        if (full) ONE(1) else ONE(0)
    }
#undef ONE
#undef TWO
#undef ROWS
}

AVX2 static inline __m256i lanes(long count) {
    long clamped = count < 0 ? 0 : count > 8 ? 8 : count;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)clamped), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

void facetrain_winograd_products_avx2(
    const float *packed, long output_channels, const float *v, long v_position_stride, float *m,
    long m_position_stride, long channels, long columns, long channel_begin, long channel_end) AVX2;

void facetrain_winograd_products_avx2(
    const float *packed, long output_channels, const float *v, long v_position_stride, float *m,
    long m_position_stride, long channels, long columns, long channel_begin, long channel_end) {
    long u_position_stride = (output_channels + BLOCK - 1) / BLOCK * BLOCK * channels;
    for (int position = 0; position < 36; position++) {
        const float *up = packed + position * u_position_stride;
        const float *vp = v + position * v_position_stride;
        float *mp = m + position * m_position_stride;
        /* V's 16 (or 8) columns stay in L1 while every row block of U passes over them. */
        for (long first = 0; first < columns;) {
            int vectors = columns - first > 8 ? 2 : 1, most = vectors == 2 ? BLOCK / 2 : BLOCK;
            __m256i low = lanes(columns - first), high = lanes(columns - first - 8);
            int full = columns - first >= 8 * vectors;
            for (long row = channel_begin; row < channel_end; row += most) {
                int rows = channel_end - row < most ? (int)(channel_end - row) : most;
                /* Row `row` of U is entry row % BLOCK of block row / BLOCK. */
                const float *u = up + row / BLOCK * BLOCK * channels + row % BLOCK;
                block_rows(
                    rows, vectors, full, u, channels, vp + first, columns, mp + row * columns + first, low, high);
            }
            first += 8 * vectors;
        }
    }
}
