/* Winograd F(4x4, 3x3)'s input and output transforms with AVX-512: 16 tiles a vector where the
   Swift kernels (Winograd.swift) take 4. Not the products between them (OpenBLAS) nor the filter
   transform (once per weights). The arithmetic is Winograd.swift's, operation for operation and
   in the same order, with no fused multiply-adds: the two give the same bits, which the tests check. */

#include "vector_kernels.h"

#include <immintrin.h>
#include <stdint.h>
#include "winograd_internal.h"

#pragma STDC FP_CONTRACT OFF

#define AVX512 __attribute__((target("avx512f,avx512vl,avx512dq")))

/* B^T x for the 6 values of a patch row or column (Winograd.swift's inputCombination). */
AVX512 static inline void input_combination(const __m512 x[6], __m512 y[6]) {
    const __m512 four = _mm512_set1_ps(4), five = _mm512_set1_ps(5), two = _mm512_set1_ps(2);
    __m512 a = _mm512_sub_ps(x[4], _mm512_mul_ps(four, x[2]));
    __m512 b = _mm512_sub_ps(x[3], _mm512_mul_ps(four, x[1]));
    __m512 c = _mm512_sub_ps(x[4], x[2]);
    __m512 d = _mm512_mul_ps(two, _mm512_sub_ps(x[3], x[1]));
    y[0] = _mm512_add_ps(_mm512_sub_ps(_mm512_mul_ps(four, x[0]), _mm512_mul_ps(five, x[2])), x[4]);
    y[1] = _mm512_add_ps(a, b);
    y[2] = _mm512_sub_ps(a, b);
    y[3] = _mm512_add_ps(c, d);
    y[4] = _mm512_sub_ps(c, d);
    y[5] = _mm512_add_ps(_mm512_sub_ps(_mm512_mul_ps(four, x[1]), _mm512_mul_ps(five, x[3])), x[5]);
}

/* A^T x: 4 outputs from 6 values (Winograd.swift's outputCombination). */
AVX512 static inline void output_combination(const __m512 x[6], __m512 y[4]) {
    const __m512 two = _mm512_set1_ps(2), four = _mm512_set1_ps(4), eight = _mm512_set1_ps(8);
    __m512 p12 = _mm512_add_ps(x[1], x[2]), m12 = _mm512_sub_ps(x[1], x[2]);
    __m512 p34 = _mm512_add_ps(x[3], x[4]), m34 = _mm512_sub_ps(x[3], x[4]);
    y[0] = _mm512_add_ps(_mm512_add_ps(x[0], p12), p34);
    y[1] = _mm512_add_ps(m12, _mm512_mul_ps(two, m34));
    y[2] = _mm512_add_ps(p12, _mm512_mul_ps(four, p34));
    y[3] = _mm512_add_ps(_mm512_add_ps(m12, _mm512_mul_ps(eight, m34)), x[5]);
}

static inline __mmask16 lanes_below(long count) {
    return count >= 16 ? (__mmask16)0xFFFF : count <= 0 ? (__mmask16)0 : (__mmask16)((1u << count) - 1);
}

/* Lanes [begin, end) of 16 (the others off). */
static inline __mmask16 lanes_between(long begin, long end) {
    return (__mmask16)(lanes_below(end) & ~lanes_below(begin));
}

/* Rows become columns: lane j of result i is lane i of r[j] (16 x 16). */
AVX512 static inline void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
        u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    /* u[4i + j]: 128-bit block k holds column 4k + j of rows 4i ..< 4i + 4. */
    __m512 v[16];
    for (int half = 0; half < 2; half++) {
        for (int j = 0; j < 4; j++) {
            v[8 * half + j] = _mm512_shuffle_f32x4(u[8 * half + j], u[8 * half + 4 + j], 0x88);
            v[8 * half + 4 + j] = _mm512_shuffle_f32x4(u[8 * half + j], u[8 * half + 4 + j], 0xDD);
        }
    }
    /* v[8h + j]: columns j and j + 8 of rows 8h ..< 8h + 8; v[8h + 4 + j]: columns j + 4, j + 12. */
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0x88);
        r[j + 8] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0xDD);
    }
}

/* V of the `columns` tiles of one channel whose 6x6 patches start at `patch_offsets` in `padded`
   (padded_width wide), into target + position * position_stride. */
AVX512 static inline void input_tiles(
    const float *padded, long padded_width, const long *patch_offsets, long columns, float *target,
    long position_stride) {
    for (long first = 0; first < columns; first += 16) {
        __mmask16 mask = lanes_below(columns - first);
        /* d B, one patch row at a time: each tile's 6 values loaded as a vector (the lanes past
           them masked, so nothing beyond the plane is read), turned into 16 tiles a vector. */
        __m512 combined[6][6];
        for (int i = 0; i < 6; i++) {
            __m512 row[16];
            for (long lane = 0; lane < 16; lane++) {
                long tile = first + lane < columns ? first + lane : first;
                row[lane] = _mm512_maskz_loadu_ps(0x3F, padded + patch_offsets[tile] + i * padded_width);
            }
            transpose16(row);
            input_combination(row, combined[i]);
        }
        /* ... then B^T (d B), one column l at a time; position 6k + l. */
        for (int l = 0; l < 6; l++) {
            __m512 column[6] = {combined[0][l], combined[1][l], combined[2][l], combined[3][l], combined[4][l], combined[5][l]};
            __m512 value[6];
            input_combination(column, value);
            for (int k = 0; k < 6; k++) _mm512_mask_storeu_ps(target + first + (6 * k + l) * position_stride, mask, value[k]);
        }
    }
}

void facetrain_winograd_input_avx512(
    const float *image, long height, long width, long padding, long padded_height, long padded_width,
    const long *patch_offsets, long columns, long channel_begin, long channel_end, float *padded,
    float *transformed, long channel_stride, long position_stride) AVX512;

void facetrain_winograd_input_avx512(
    const float *image, long height, long width, long padding, long padded_height, long padded_width,
    const long *patch_offsets, long columns, long channel_begin, long channel_end, float *padded,
    float *transformed, long channel_stride, long position_stride) {
    for (long channel = channel_begin; channel < channel_end; channel++) {
        pad_rows(image + channel * height * width, height, width, padding, 0, padded_height, padded_width, padded);
        input_tiles(padded, padded_width, patch_offsets, columns, transformed + channel * channel_stride, position_stride);
    }
}

/* A^T M A plus the bias of 16 tiles (M's lanes `mask`, from `from`, positions position_stride
   apart), then the normalisation when `scale` is given: pixel 4r + j of each tile's 4 x 4. */
AVX512 static inline void output_pixels(
    const float *from, long position_stride, __mmask16 mask, __m512 b, const float *scale, __m512 s, __m512 t,
    __m512 pixel[16]) {
    /* A^T M one column l at a time (4 rows from 6) ... */
    __m512 column[6][4];
    for (int l = 0; l < 6; l++) {
        __m512 x[6];
        for (int k = 0; k < 6; k++) x[k] = _mm512_maskz_loadu_ps(mask, from + (6 * k + l) * position_stride);
        output_combination(x, column[l]);
    }
    /* ... then (A^T M) A across the columns. */
    for (int r = 0; r < 4; r++) {
        __m512 x[6] = {column[0][r], column[1][r], column[2][r], column[3][r], column[4][r], column[5][r]};
        __m512 o[4];
        output_combination(x, o);
        for (int j = 0; j < 4; j++) {
            __m512 value = _mm512_add_ps(o[j], b);
            if (scale) value = _mm512_add_ps(_mm512_mul_ps(value, s), t);
            pixel[4 * r + j] = value;
        }
    }
}

/* The 2x2 windows' maxima of each tile's 4 x 4 (they lie inside it: output sizes are even), then
   the ReLU: normalizeReLUMaxPool2x2's order. window[2y + x] is the window at (y, x). */
AVX512 static inline void pool_windows(const __m512 pixel[16], __m512 window[4]) {
    for (int q = 0; q < 4; q++) {
        int r = 2 * (q / 2), j = 2 * (q % 2);
        __m512 upper = _mm512_max_ps(pixel[4 * r + j + 1], pixel[4 * r + j]);
        __m512 lower = _mm512_max_ps(pixel[4 * r + 4 + j + 1], pixel[4 * r + 4 + j]);
        window[q] = _mm512_max_ps(_mm512_max_ps(lower, upper), _mm512_setzero_ps());
    }
}

/* normalizeReLU's max(0, y), which is y >= 0 ? y : 0 (keeps -0, maps NaN to 0). */
AVX512 static inline void rectify(__m512 pixel[16]) {
    for (int p = 0; p < 16; p++) {
        pixel[p] = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(pixel[p], _mm512_setzero_ps(), _CMP_GE_OQ), pixel[p]);
    }
}

/* Lanes of a and b alternating: out[0] = a0 b0 a1 b1 ... a7 b7, out[1] the same of lanes 8-15. */
AVX512 static inline void interleave2(__m512 a, __m512 b, __m512 out[2]) {
    const __m512i low = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i high = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    out[0] = _mm512_permutex2var_ps(a, low, b);
    out[1] = _mm512_permutex2var_ps(a, high, b);
}

/* out[k] lane 4s + j = p[j] lane 4k + s: the 4 x 16 values as 16 groups of 4 (a row of 16 tiles'
   4 pixels each, left to right). */
AVX512 static inline void interleave4(const __m512 p[4], __m512 out[4]) {
    __m512 pair01[2], pair23[2];
    interleave2(p[0], p[1], pair01);
    interleave2(p[2], p[3], pair23);
    const __m512i low = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
    const __m512i high = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
    for (int h = 0; h < 2; h++) {
        __m512d a = _mm512_castps_pd(pair01[h]), b = _mm512_castps_pd(pair23[h]);
        out[2 * h] = _mm512_castpd_ps(_mm512_permutex2var_pd(a, low, b));
        out[2 * h + 1] = _mm512_castpd_ps(_mm512_permutex2var_pd(a, high, b));
    }
}

/* Stores the floats [begin, end) of `values` (count vectors of 16, consecutive) at base + their
   index. `base` is where a tile row's column 0 would be if its run started at lane 0, so it may lie
   before the row (even before the plane, for a plane 1 pooled value wide): its address is an
   integer, and the stores' masks keep every float outside [begin, end) unwritten. */
AVX512 static inline void store_segment(uintptr_t base, long begin, long end, const __m512 *values, int count) {
    for (int k = 0; k < count; k++) {
        __mmask16 mask = lanes_between(begin - 16 * k, end - 16 * k);
        if (mask) _mm512_mask_storeu_ps((void *)(base + sizeof(float) * (size_t)(16 * k)), mask, values[k]);
    }
}

/* The address of `pointer` + `offset` floats, as an integer (offset may be negative). */
static inline uintptr_t offset_address(const float *pointer, long offset) {
    return (uintptr_t)pointer + (uintptr_t)(offset * (long)sizeof(float));
}

void facetrain_winograd_output_avx512(
    const float *m, long channel_stride, long position_stride, long tiles, long tile_columns,
    long output_height, long output_width, long output_plane, const float *bias, const float *scale,
    const float *shift, int pool, long channel_begin, long channel_end, float *output) AVX512;

void facetrain_winograd_output_avx512(
    const float *m, long channel_stride, long position_stride, long tiles, long tile_columns,
    long output_height, long output_width, long output_plane, const float *bias, const float *scale,
    const float *shift, int pool, long channel_begin, long channel_end, float *output) {
    const long plane = output_plane;
    const long pooled_width = output_width / 2;
    for (long channel = channel_begin; channel < channel_end; channel++) {
        const __m512 b = _mm512_set1_ps(bias[channel]);
        const __m512 s = _mm512_set1_ps(scale ? scale[channel] : 1), t = _mm512_set1_ps(shift ? shift[channel] : 0);
        float *target = output + channel * plane;
        for (long first = 0; first < tiles; first += 16) {
            __m512 pixel[16];
            output_pixels(
                m + channel * channel_stride + first, position_stride, lanes_below(tiles - first), b, scale, s, t,
                pixel);
            /* Each output row of the 16 tiles, interleaved in lane order: 4 pooled values (2 rows of
               2 a tile) or 4 rows of 4. */
            __m512 rows[4][4];
            if (pool) {
                __m512 window[4];
                pool_windows(pixel, window);
                for (int y = 0; y < 2; y++) interleave2(window[2 * y], window[2 * y + 1], rows[y]);
            } else {
                if (scale) rectify(pixel);
                for (int r = 0; r < 4; r++) interleave4(pixel + 4 * r, rows[r]);
            }
            /* The lanes' tiles row by row: lanes [lane, end) are tiles of tile row `row`, whose tile
               column is first + lane - row * tile_columns, so each output row's values, interleaved
               in lane order, lie at one base address plus their index. */
            for (long lane = 0; lane < 16 && first + lane < tiles;) {
                long row = (first + lane) / tile_columns;
                long end = (row + 1) * tile_columns - first;
                if (end > 16) end = 16;
                if (end > tiles - first) end = tiles - first;
                /* Tile column 0 of this row sits at lane row * tile_columns - first. */
                long origin = row * tile_columns - first;
                if (pool) {
                    long valid_rows = output_height - 4 * row < 4 ? (output_height - 4 * row) / 2 : 2;
                    for (long y = 0; y < valid_rows; y++) {
                        uintptr_t base = offset_address(target, (2 * row + y) * pooled_width - 2 * origin);
                        long limit = 2 * origin + pooled_width;
                        store_segment(base, 2 * lane, 2 * end < limit ? 2 * end : limit, rows[y], 2);
                    }
                } else {
                    long valid_rows = output_height - 4 * row < 4 ? output_height - 4 * row : 4;
                    for (long r = 0; r < valid_rows; r++) {
                        uintptr_t base = offset_address(target, (4 * row + r) * output_width - 4 * origin);
                        long limit = 4 * origin + output_width;
                        store_segment(base, 4 * lane, 4 * end < limit ? 4 * end : limit, rows[r], 4);
                    }
                }
                lane = end;
            }
        }
    }
}

void facetrain_winograd_forward_bands_avx512(
    const float *image, long channels, long height, long width, long padding, long output_height, long output_width,
    long tile_columns, const float *packed, long output_channels, const float *bias, const float *scale,
    const float *shift, int pool, long band_rows, long tile_row_begin, long tile_row_end, float *scratch,
    float *output) AVX512;

void facetrain_winograd_forward_bands_avx512(
    const float *image, long channels, long height, long width, long padding, long output_height, long output_width,
    long tile_columns, const float *packed, long output_channels, const float *bias, const float *scale,
    const float *shift, int pool, long band_rows, long tile_row_begin, long tile_row_end, float *scratch,
    float *output) {
    const struct band_scratch parts = band_scratch(scratch, channels, output_channels, tile_columns, band_rows);
    const long plane_width = parts.plane_width;
    long *offsets = parts.offsets;
    float *v = parts.v, *m = parts.m, *plane = parts.plane;
    const long output_plane = pool ? (output_height / 2) * (output_width / 2) : output_height * output_width;
    for (long first = tile_row_begin; first < tile_row_end; first += band_rows) {
        long rows = tile_row_end - first < band_rows ? tile_row_end - first : band_rows;
        long tiles = rows * tile_columns;
        for (long channel = 0; channel < channels; channel++) {
            pad_rows(image + channel * height * width, height, width, padding, 4 * first, 4 * rows + 2, plane_width, plane);
            input_tiles(plane, plane_width, offsets, tiles, v + channel * tiles, channels * tiles);
        }
        facetrain_winograd_products_avx512(
            packed, output_channels, v, channels * tiles, m, output_channels * tiles, channels, tiles, 0, output_channels);
        long band_height = output_height - 4 * first < 4 * rows ? output_height - 4 * first : 4 * rows;
        float *target = output + (pool ? 2 * first * (output_width / 2) : 4 * first * output_width);
        facetrain_winograd_output_avx512(
            m, tiles, output_channels * tiles, tiles, tile_columns, band_height, output_width, output_plane, bias, scale,
            shift, pool, 0, output_channels, target);
    }
}
