/* Direct convolution of a layer with few input channels (a network's first layer: 3 colour
   channels) with AVX-512, for inference: 16 output pixels of one row a vector, 16 output channels
   at once, one fused multiply-add per tap. im2col + GEMM spends most of its time there writing
   and packing a column matrix only 27 rows deep. The pooled variant goes on through inference's
   batch norm, ReLU and 2x2 max-pool (a first layer followed by a pool: the stems of the base and
   the detector), so the convolution's output, four times the pooled one, never goes to memory.
   Not training (im2col keeps the layer's backward). */

#include "vector_kernels.h"

#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512vl,avx512dq")))

/* Lanes j of a 16-float load at `start` whose element start + j lies in [0, width). */
static inline __mmask16 lanes_inside(long start, long width) {
    long begin = start < 0 ? -start : 0;
    long end = width - start < 16 ? width - start : 16;
    if (end <= begin) return 0;
    unsigned below_end = end >= 16 ? 0xFFFFu : (1u << end) - 1;
    unsigned below_begin = (1u << begin) - 1;
    return (__mmask16)(below_end & ~below_begin);
}

/* The indices that pick elements 0, 2, ..., 30 (even) or 1, 3, ..., 31 (odd) of two vectors. */
AVX512 static inline __m512i even_lanes(void) {
    return _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
}
AVX512 static inline __m512i odd_lanes(void) {
    return _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
}

/* row[x0 + stride * j] for j < 16 (stride 1 or 2), 0 outside [0, width): masked loads never touch
   memory outside the row. */
AVX512 static inline __m512 load_row(const float *row, long x0, long stride, long width) {
    if (stride == 1) return _mm512_maskz_loadu_ps(lanes_inside(x0, width), row + x0);
    __m512 low = _mm512_maskz_loadu_ps(lanes_inside(x0, width), row + x0);
    __m512 high = _mm512_maskz_loadu_ps(lanes_inside(x0 + 16, width), row + x0 + 16);
    return _mm512_permutex2var_ps(low, even_lanes(), high);
}

void facetrain_direct_convolution_avx512(
    const float *image, long channels, long height, long width, long kernel, long stride, long padding,
    const float *weight, const float *bias, long channel_begin, long channel_end, long row_begin, long row_end,
    float *output, long output_height, long output_width) AVX512;

/* A block's weights tap-major, 16 channels a tap (zero past the last channel): one broadcast each,
   adjacent in memory; and its bias (zero past the last channel). Returns the block's channel count. */
static long block_weights(
    const float *weight, const float *bias, long taps, long first, long channel_end, float *block_weight,
    float *block_bias) {
    long count = channel_end - first < 16 ? channel_end - first : 16;
    for (long lane = 0; lane < 16; lane++) {
        block_bias[lane] = lane < count ? bias[first + lane] : 0;
        for (long tap = 0; tap < taps; tap++) {
            block_weight[tap * 16 + lane] = lane < count ? weight[(first + lane) * taps + tap] : 0;
        }
    }
    return count;
}

/* sum[lane] = output channel `lane` of the block at output row y, output columns x..x+15: the bias,
   then one fused multiply-add per tap in weight order. Columns past the row are computed too (from
   whatever pixels their taps reach) and must not be stored. Inlined, so the sums stay in registers. */
AVX512 __attribute__((always_inline)) static inline void strip_sums(
    const float *image, long channels, long height, long width, long kernel, long stride, long padding,
    const float *block_weight, const float *block_bias, long y, long x, __m512 *sum) {
    for (int lane = 0; lane < 16; lane++) sum[lane] = _mm512_set1_ps(block_bias[lane]);
    const long x0 = x * stride - padding;
    /* A 3x3 layer at stride 2 (a network's stem): one row's three taps come from the 33 floats at
       x0, loaded once (two vectors and one float) and split into the even lanes, the odd lanes and
       the even lanes one further. Per tap load_row loads 32 and permutes: three times the loads,
       and their latency held the multiply-adds up. */
    const int stem = stride == 2 && kernel == 3;
    const __mmask16 low_lanes = lanes_inside(x0, width), high_lanes = lanes_inside(x0 + 16, width);
    const __mmask16 next_lane = lanes_inside(x0 + 32, width) & 1;
    for (long channel = 0; channel < channels; channel++) {
        for (long ky = 0; ky < kernel; ky++) {
            long source_y = y * stride + ky - padding;
            if (source_y < 0 || source_y >= height) continue;
            const float *row = image + (channel * height + source_y) * width;
            const float *row_weight = block_weight + (channel * kernel + ky) * kernel * 16;
            if (stem) {
                /* The nine rows a strip reads are too many streams for the hardware prefetchers to
                   follow: ask for the strip four ahead's two cache lines of each. */
                _mm_prefetch((const char *)(row + x0 + 128), _MM_HINT_T0);
                _mm_prefetch((const char *)(row + x0 + 144), _MM_HINT_T0);
                __m512 low = _mm512_maskz_loadu_ps(low_lanes, row + x0);
                __m512 high = _mm512_maskz_loadu_ps(high_lanes, row + x0 + 16);
                __m512 next = _mm512_maskz_loadu_ps(next_lane, row + x0 + 32);
                __m512 pixels[3];
                pixels[0] = _mm512_permutex2var_ps(low, even_lanes(), high);
                pixels[1] = _mm512_permutex2var_ps(low, odd_lanes(), high);
                pixels[2] = _mm512_castsi512_ps(
                    _mm512_alignr_epi32(_mm512_castps_si512(next), _mm512_castps_si512(pixels[0]), 1));
                for (int kx = 0; kx < 3; kx++) {
                    for (int lane = 0; lane < 16; lane++) {
                        sum[lane] = _mm512_fmadd_ps(pixels[kx], _mm512_set1_ps(row_weight[kx * 16 + lane]), sum[lane]);
                    }
                }
                continue;
            }
            for (long kx = 0; kx < kernel; kx++) {
                __m512 pixels = load_row(row, x0 + kx, stride, width);
                const float *tap_weight = row_weight + kx * 16;
                for (int lane = 0; lane < 16; lane++) {
                    sum[lane] = _mm512_fmadd_ps(pixels, _mm512_set1_ps(tap_weight[lane]), sum[lane]);
                }
            }
        }
    }
}

void facetrain_direct_convolution_avx512(
    const float *image, long channels, long height, long width, long kernel, long stride, long padding,
    const float *weight, const float *bias, long channel_begin, long channel_end, long row_begin, long row_end,
    float *output, long output_height, long output_width) {
    const long taps = channels * kernel * kernel;
    const long plane = output_height * output_width;
    float block_weight[FACETRAIN_DIRECT_CONVOLUTION_MAX_TAPS * 16];
    float block_bias[16];
    for (long first = channel_begin; first < channel_end; first += 16) {
        long count = block_weights(weight, bias, taps, first, channel_end, block_weight, block_bias);
        for (long y = row_begin; y < row_end; y++) {
            for (long x = 0; x < output_width; x += 16) {
                __m512 sum[16];
                strip_sums(image, channels, height, width, kernel, stride, padding, block_weight, block_bias, y, x, sum);
                __mmask16 columns = lanes_inside(x, output_width);
                float *target = output + first * plane + y * output_width + x;
                for (int lane = 0; lane < count; lane++) _mm512_mask_storeu_ps(target + lane * plane, columns, sum[lane]);
            }
        }
    }
}

void facetrain_direct_convolution_pooled_avx512(
    const float *image, long channels, long height, long width, long kernel, long stride, long padding,
    const float *weight, const float *bias, const float *scale, const float *shift, long channel_begin,
    long channel_end, long pooled_row_begin, long pooled_row_end, float *output, long output_height,
    long output_width) AVX512;

void facetrain_direct_convolution_pooled_avx512(
    const float *image, long channels, long height, long width, long kernel, long stride, long padding,
    const float *weight, const float *bias, const float *scale, const float *shift, long channel_begin,
    long channel_end, long pooled_row_begin, long pooled_row_end, float *output, long output_height,
    long output_width) {
    const long taps = channels * kernel * kernel;
    const long pooled_width = output_width / 2, pooled_plane = (output_height / 2) * pooled_width;
    float block_weight[FACETRAIN_DIRECT_CONVOLUTION_MAX_TAPS * 16];
    float block_bias[16];
    for (long first = channel_begin; first < channel_end; first += 16) {
        long count = block_weights(weight, bias, taps, first, channel_end, block_weight, block_bias);
        for (long pooled_row = pooled_row_begin; pooled_row < pooled_row_end; pooled_row++) {
            /* Sixteen pooled columns from 32 output columns of two output rows. */
            for (long pooled_column = 0; pooled_column < pooled_width; pooled_column += 16) {
                __m512 normalised[2][2][16]; /* [row of the window][half of the 32 columns][channel] */
                for (int window_row = 0; window_row < 2; window_row++) {
                    for (int half = 0; half < 2; half++) {
                        __m512 sum[16];
                        strip_sums(
                            image, channels, height, width, kernel, stride, padding, block_weight, block_bias,
                            2 * pooled_row + window_row, 2 * pooled_column + 16 * half, sum);
                        for (int lane = 0; lane < count; lane++) {
                            normalised[window_row][half][lane] = _mm512_add_ps(
                                _mm512_mul_ps(sum[lane], _mm512_set1_ps(scale[first + lane])),
                                _mm512_set1_ps(shift[first + lane]));
                        }
                    }
                }
                __mmask16 columns = lanes_inside(pooled_column, pooled_width);
                float *target = output + first * pooled_plane + pooled_row * pooled_width + pooled_column;
                for (int lane = 0; lane < count; lane++) {
                    /* Even columns are each window's left, odd ones its right. */
                    __m512 top_left = _mm512_permutex2var_ps(normalised[0][0][lane], even_lanes(), normalised[0][1][lane]);
                    __m512 top_right = _mm512_permutex2var_ps(normalised[0][0][lane], odd_lanes(), normalised[0][1][lane]);
                    __m512 bottom_left = _mm512_permutex2var_ps(normalised[1][0][lane], even_lanes(), normalised[1][1][lane]);
                    __m512 bottom_right = _mm512_permutex2var_ps(normalised[1][0][lane], odd_lanes(), normalised[1][1][lane]);
                    /* normalizeReLUMaxPool2x2's comparisons in its order (b > a ? b : a, ...): its bits. */
                    __m512 upper = _mm512_max_ps(top_right, top_left), lower = _mm512_max_ps(bottom_right, bottom_left);
                    __m512 best = _mm512_max_ps(_mm512_max_ps(lower, upper), _mm512_setzero_ps());
                    _mm512_mask_storeu_ps(target + lane * pooled_plane, columns, best);
                }
            }
        }
    }
}
