/* Direct convolution of a layer with few input channels with AVX2, for inference on CPUs without
   AVX-512: direct_convolution_avx512.c's algorithm 8 output pixels and 8 output channels at once,
   the same fused multiply-adds in the same order (the same bits). */

#include "vector_kernels.h"

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))

/* Lanes j of an 8-float load at `start` whose element start + j lies in [0, width). */
AVX2 static inline __m256i lanes_inside(long start, long width) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    long begin = start < 0 ? -start : 0, end = width - start;
    begin = begin > 8 ? 8 : begin;
    end = end < 0 ? 0 : end > 8 ? 8 : end;
    /* begin <= j < end */
    __m256i below_end = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)end), lane);
    __m256i below_begin = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)begin), lane);
    return _mm256_andnot_si256(below_begin, below_end);
}

/* row[x0 + stride * j] for j < 8 (stride 1 or 2), 0 outside [0, width): masked loads never touch
   memory outside the row. */
AVX2 static inline __m256 load_eight(const float *row, long start, long width) {
    /* Plain where all 8 lie inside (a masked load costs more, much more on AMD). */
    if (start >= 0 && start + 8 <= width) return _mm256_loadu_ps(row + start);
    return _mm256_maskload_ps(row + start, lanes_inside(start, width));
}

AVX2 static inline __m256 load_row(const float *row, long x0, long stride, long width) {
    if (stride == 1) return load_eight(row, x0, width);
    __m256 low = load_eight(row, x0, width);
    __m256 high = load_eight(row, x0 + 8, width);
    /* [l0 l2 h0 h2 | l4 l6 h4 h6], then the 64-bit pairs reordered to l0 l2 l4 l6 h0 h2 h4 h6. */
    __m256 even = _mm256_shuffle_ps(low, high, 0x88);
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8));
}

void facetrain_direct_convolution_avx2(
    const float *image, long channels, long height, long width, long kernel, long stride, long padding,
    const float *weight, const float *bias, long channel_begin, long channel_end, long row_begin, long row_end,
    float *output, long output_height, long output_width) AVX2;

void facetrain_direct_convolution_avx2(
    const float *image, long channels, long height, long width, long kernel, long stride, long padding,
    const float *weight, const float *bias, long channel_begin, long channel_end, long row_begin, long row_end,
    float *output, long output_height, long output_width) {
    const long taps = channels * kernel * kernel;
    const long plane = output_height * output_width;
    /* A block's weights tap-major, 8 channels a tap (zero past the last channel). */
    float block_weight[FACETRAIN_DIRECT_CONVOLUTION_MAX_TAPS * 8];
    float block_bias[8];
    for (long first = channel_begin; first < channel_end; first += 8) {
        long count = channel_end - first < 8 ? channel_end - first : 8;
        for (long lane = 0; lane < 8; lane++) {
            block_bias[lane] = lane < count ? bias[first + lane] : 0;
            for (long tap = 0; tap < taps; tap++) {
                block_weight[tap * 8 + lane] = lane < count ? weight[(first + lane) * taps + tap] : 0;
            }
        }
        for (long y = row_begin; y < row_end; y++) {
            for (long x = 0; x < output_width; x += 8) {
                __m256 sum[8];
                for (int lane = 0; lane < 8; lane++) sum[lane] = _mm256_set1_ps(block_bias[lane]);
                for (long channel = 0; channel < channels; channel++) {
                    for (long ky = 0; ky < kernel; ky++) {
                        long source_y = y * stride + ky - padding;
                        if (source_y < 0 || source_y >= height) continue;
                        const float *row = image + (channel * height + source_y) * width;
                        for (long kx = 0; kx < kernel; kx++) {
                            __m256 pixels = load_row(row, x * stride + kx - padding, stride, width);
                            const float *tap_weight = block_weight + ((channel * kernel + ky) * kernel + kx) * 8;
                            for (int lane = 0; lane < 8; lane++) {
                                sum[lane] = _mm256_fmadd_ps(pixels, _mm256_set1_ps(tap_weight[lane]), sum[lane]);
                            }
                        }
                    }
                }
                __m256i columns = lanes_inside(x, output_width);
                float *target = output + first * plane + y * output_width + x;
                for (int lane = 0; lane < count; lane++) {
                    if (x + 8 <= output_width) {
                        _mm256_storeu_ps(target + lane * plane, sum[lane]);
                    } else {
                        _mm256_maskstore_ps(target + lane * plane, columns, sum[lane]);
                    }
                }
            }
        }
    }
}
