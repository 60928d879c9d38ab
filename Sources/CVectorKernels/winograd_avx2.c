/* Winograd F(4x4, 3x3)'s input and output transforms, and the band-by-band forward, with AVX2:
   8 tiles a vector, for CPUs without AVX-512 (winograd_avx512.c is the same algorithm 16 tiles a
   vector). The arithmetic is Winograd.swift's, operation for operation and in the same order, with
   no fused multiply-adds: the same bits as the Swift and AVX-512 kernels, which the tests check. */

#include "vector_kernels.h"
#include "winograd_internal.h"

#include <immintrin.h>

#pragma STDC FP_CONTRACT OFF

#define AVX2 __attribute__((target("avx2,fma")))

/* B^T x for the 6 values of a patch row or column (Winograd.swift's inputCombination). */
AVX2 static inline void input_combination(const __m256 x[6], __m256 y[6]) {
    const __m256 four = _mm256_set1_ps(4), five = _mm256_set1_ps(5), two = _mm256_set1_ps(2);
    __m256 a = _mm256_sub_ps(x[4], _mm256_mul_ps(four, x[2]));
    __m256 b = _mm256_sub_ps(x[3], _mm256_mul_ps(four, x[1]));
    __m256 c = _mm256_sub_ps(x[4], x[2]);
    __m256 d = _mm256_mul_ps(two, _mm256_sub_ps(x[3], x[1]));
    y[0] = _mm256_add_ps(_mm256_sub_ps(_mm256_mul_ps(four, x[0]), _mm256_mul_ps(five, x[2])), x[4]);
    y[1] = _mm256_add_ps(a, b);
    y[2] = _mm256_sub_ps(a, b);
    y[3] = _mm256_add_ps(c, d);
    y[4] = _mm256_sub_ps(c, d);
    y[5] = _mm256_add_ps(_mm256_sub_ps(_mm256_mul_ps(four, x[1]), _mm256_mul_ps(five, x[3])), x[5]);
}

/* A^T x: 4 outputs from 6 values (Winograd.swift's outputCombination). */
AVX2 static inline void output_combination(const __m256 x[6], __m256 y[4]) {
    const __m256 two = _mm256_set1_ps(2), four = _mm256_set1_ps(4), eight = _mm256_set1_ps(8);
    __m256 p12 = _mm256_add_ps(x[1], x[2]), m12 = _mm256_sub_ps(x[1], x[2]);
    __m256 p34 = _mm256_add_ps(x[3], x[4]), m34 = _mm256_sub_ps(x[3], x[4]);
    y[0] = _mm256_add_ps(_mm256_add_ps(x[0], p12), p34);
    y[1] = _mm256_add_ps(m12, _mm256_mul_ps(two, m34));
    y[2] = _mm256_add_ps(p12, _mm256_mul_ps(four, p34));
    y[3] = _mm256_add_ps(_mm256_add_ps(m12, _mm256_mul_ps(eight, m34)), x[5]);
}

/* All lanes j < count set (the masked loads and stores of AVX2 read the sign bits). A masked load
   or store costs more than a plain one (much more on AMD), so the kernels take the plain ones
   wherever all 8 lanes are there. */
AVX2 static inline __m256i lanes_below(long count) {
    long clamped = count < 0 ? 0 : count > 8 ? 8 : count;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)clamped), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Rows become columns: lane j of result i is lane i of r[j] (8 x 8). */
AVX2 static inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    /* u[4i + j]: in each 128-bit half h, column 4h + j of rows 4i ..< 4i + 4. */
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
        r[j + 4] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
    }
}

/* V of the `columns` tiles of one channel whose 6x6 patches start at `patch_offsets` in `padded`
   (padded_width wide), into target + position * position_stride. */
AVX2 static inline void input_tiles(
    const float *padded, long padded_width, const long *patch_offsets, long columns, float *target,
    long position_stride) {
    const __m256i six = lanes_below(6);
    for (long first = 0; first < columns; first += 8) {
        __m256i mask = lanes_below(columns - first);
        /* d B, one patch row at a time: each tile's 6 values loaded as a vector (the lanes past
           them masked, so nothing beyond the plane is read), turned into 8 tiles a vector. */
        __m256 combined[6][6];
        for (int i = 0; i < 6; i++) {
            __m256 row[8];
            for (long lane = 0; lane < 8; lane++) {
                long tile = first + lane < columns ? first + lane : first;
                row[lane] = _mm256_maskload_ps(padded + patch_offsets[tile] + i * padded_width, six);
            }
            transpose8(row);
            input_combination(row, combined[i]);
        }
        /* ... then B^T (d B), one column l at a time; position 6k + l. */
        for (int l = 0; l < 6; l++) {
            __m256 column[6] = {combined[0][l], combined[1][l], combined[2][l], combined[3][l], combined[4][l], combined[5][l]};
            __m256 value[6];
            input_combination(column, value);
            for (int k = 0; k < 6; k++) {
                float *to = target + first + (6 * k + l) * position_stride;
                if (first + 8 <= columns) {
                    _mm256_storeu_ps(to, value[k]);
                } else {
                    _mm256_maskstore_ps(to, mask, value[k]);
                }
            }
        }
    }
}

void facetrain_winograd_input_avx2(
    const float *image, long height, long width, long padding, long padded_height, long padded_width,
    const long *patch_offsets, long columns, long channel_begin, long channel_end, float *padded,
    float *transformed, long channel_stride, long position_stride) AVX2;

void facetrain_winograd_input_avx2(
    const float *image, long height, long width, long padding, long padded_height, long padded_width,
    const long *patch_offsets, long columns, long channel_begin, long channel_end, float *padded,
    float *transformed, long channel_stride, long position_stride) {
    for (long channel = channel_begin; channel < channel_end; channel++) {
        pad_rows(image + channel * height * width, height, width, padding, 0, padded_height, padded_width, padded);
        input_tiles(padded, padded_width, patch_offsets, columns, transformed + channel * channel_stride, position_stride);
    }
}

/* Up to 4 columns of one row of a tile: `valid` of them. */
AVX2 static inline void store_row(float *p, __m128 value, long valid) {
    if (valid == 4) {
        _mm_storeu_ps(p, value);
        return;
    }
    __m128i mask = _mm_cmpgt_epi32(_mm_set1_epi32((int)valid), _mm_setr_epi32(0, 1, 2, 3));
    _mm_maskstore_ps(p, mask, value);
}

void facetrain_winograd_output_avx2(
    const float *m, long channel_stride, long position_stride, long tiles, long tile_columns,
    long output_height, long output_width, long output_plane, const float *bias, const float *scale,
    const float *shift, int pool, long channel_begin, long channel_end, float *output) AVX2;

void facetrain_winograd_output_avx2(
    const float *m, long channel_stride, long position_stride, long tiles, long tile_columns,
    long output_height, long output_width, long output_plane, const float *bias, const float *scale,
    const float *shift, int pool, long channel_begin, long channel_end, float *output) {
    const long plane = output_plane;
    const long pooled_width = output_width / 2;
    for (long channel = channel_begin; channel < channel_end; channel++) {
        const __m256 b = _mm256_set1_ps(bias[channel]);
        const __m256 s = _mm256_set1_ps(scale ? scale[channel] : 1), t = _mm256_set1_ps(shift ? shift[channel] : 0);
        float *target = output + channel * plane;
        for (long first = 0; first < tiles; first += 8) {
            __m256i mask = lanes_below(tiles - first);
            const float *from = m + channel * channel_stride + first;
            /* A^T M one column l at a time (4 rows from 6) ... */
            __m256 column[6][4];
            for (int l = 0; l < 6; l++) {
                __m256 x[6];
                for (int k = 0; k < 6; k++) {
                    const float *at = from + (6 * k + l) * position_stride;
                    x[k] = first + 8 <= tiles ? _mm256_loadu_ps(at) : _mm256_maskload_ps(at, mask);
                }
                output_combination(x, column[l]);
            }
            /* ... then (A^T M) A across the columns: pixel 4r + j of each tile's 4 x 4. */
            __m256 pixel[16];
            for (int r = 0; r < 4; r++) {
                __m256 x[6] = {column[0][r], column[1][r], column[2][r], column[3][r], column[4][r], column[5][r]};
                __m256 o[4];
                output_combination(x, o);
                for (int j = 0; j < 4; j++) {
                    __m256 value = _mm256_add_ps(o[j], b);
                    if (scale) value = _mm256_add_ps(_mm256_mul_ps(value, s), t);
                    pixel[4 * r + j] = value;
                }
            }
            if (pool) {
                /* The 2x2 windows of a tile lie inside it (output sizes are even). Max of the
                   affine values, then the ReLU: normalizeReLUMaxPool2x2's order. */
                __m256 window[4];
                for (int q = 0; q < 4; q++) {
                    int r = 2 * (q / 2), j = 2 * (q % 2);
                    __m256 upper = _mm256_max_ps(pixel[4 * r + j + 1], pixel[4 * r + j]);
                    __m256 lower = _mm256_max_ps(pixel[4 * r + 4 + j + 1], pixel[4 * r + 4 + j]);
                    window[q] = _mm256_max_ps(_mm256_max_ps(lower, upper), _mm256_setzero_ps());
                }
                float lanes[4][8];
                for (int q = 0; q < 4; q++) _mm256_storeu_ps(lanes[q], window[q]);
                for (long lane = 0; lane < 8 && first + lane < tiles; lane++) {
                    long tile = first + lane, row = tile / tile_columns, col = tile % tile_columns;
                    long valid_rows = output_height - 4 * row < 4 ? (output_height - 4 * row) / 2 : 2;
                    long valid_columns = output_width - 4 * col < 4 ? (output_width - 4 * col) / 2 : 2;
                    float *p = target + 2 * row * pooled_width + 2 * col;
                    for (long y = 0; y < valid_rows; y++) {
                        for (long x = 0; x < valid_columns; x++) p[y * pooled_width + x] = lanes[2 * y + x][lane];
                    }
                }
                continue;
            }
            if (scale) {
                /* normalizeReLU's max(0, y), which is y >= 0 ? y : 0 (keeps -0, maps NaN to 0). */
                for (int p = 0; p < 16; p++) {
                    pixel[p] = _mm256_and_ps(pixel[p], _mm256_cmp_ps(pixel[p], _mm256_setzero_ps(), _CMP_GE_OQ));
                }
            }
            /* Two 8 x 8 transposes: tile j's pixels 0-7 (its rows 0 and 1) in pixel[j], 8-15 in pixel[8 + j]. */
            transpose8(pixel);
            transpose8(pixel + 8);
            for (long lane = 0; lane < 8 && first + lane < tiles; lane++) {
                long tile = first + lane, row = tile / tile_columns, col = tile % tile_columns;
                long valid_rows = output_height - 4 * row < 4 ? output_height - 4 * row : 4;
                long valid_columns = output_width - 4 * col < 4 ? output_width - 4 * col : 4;
                float *p = target + 4 * row * output_width + 4 * col;
                __m256 upper = pixel[lane], lower = pixel[8 + lane];
                if (valid_rows > 0) store_row(p, _mm256_castps256_ps128(upper), valid_columns);
                if (valid_rows > 1) store_row(p + output_width, _mm256_extractf128_ps(upper, 1), valid_columns);
                if (valid_rows > 2) store_row(p + 2 * output_width, _mm256_castps256_ps128(lower), valid_columns);
                if (valid_rows > 3) store_row(p + 3 * output_width, _mm256_extractf128_ps(lower, 1), valid_columns);
            }
        }
    }
}

void facetrain_winograd_forward_bands_avx2(
    const float *image, long channels, long height, long width, long padding, long output_height, long output_width,
    long tile_columns, const float *packed, long output_channels, const float *bias, const float *scale,
    const float *shift, int pool, long band_rows, long tile_row_begin, long tile_row_end, float *scratch,
    float *output) AVX2;

void facetrain_winograd_forward_bands_avx2(
    const float *image, long channels, long height, long width, long padding, long output_height, long output_width,
    long tile_columns, const float *packed, long output_channels, const float *bias, const float *scale,
    const float *shift, int pool, long band_rows, long tile_row_begin, long tile_row_end, float *scratch,
    float *output) {
    const struct band_scratch parts = band_scratch(scratch, channels, output_channels, tile_columns, band_rows);
    const long plane_width = parts.plane_width;
    const long output_plane = pool ? (output_height / 2) * (output_width / 2) : output_height * output_width;
    for (long first = tile_row_begin; first < tile_row_end; first += band_rows) {
        long rows = tile_row_end - first < band_rows ? tile_row_end - first : band_rows;
        long tiles = rows * tile_columns;
        for (long channel = 0; channel < channels; channel++) {
            pad_rows(
                image + channel * height * width, height, width, padding, 4 * first, 4 * rows + 2, plane_width,
                parts.plane);
            input_tiles(parts.plane, plane_width, parts.offsets, tiles, parts.v + channel * tiles, channels * tiles);
        }
        facetrain_winograd_products_avx2(
            packed, output_channels, parts.v, channels * tiles, parts.m, output_channels * tiles, channels, tiles, 0,
            output_channels);
        long band_height = output_height - 4 * first < 4 * rows ? output_height - 4 * first : 4 * rows;
        float *target = output + (pool ? 2 * first * (output_width / 2) : 4 * first * output_width);
        facetrain_winograd_output_avx2(
            parts.m, tiles, output_channels * tiles, tiles, tile_columns, band_height, output_width, output_plane, bias,
            scale, shift, pool, 0, output_channels, target);
    }
}
