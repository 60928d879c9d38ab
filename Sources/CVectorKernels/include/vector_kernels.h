#ifndef FACETRAIN_VECTOR_KERNELS_H
#define FACETRAIN_VECTOR_KERNELS_H

/* Engine kernels compiled for instruction sets the Swift build cannot target (it is compiled for
   baseline x86-64: SSE2). Each is compiled for one set with a per-function target attribute; the
   engine asks `facetrain_vector_level` before calling and keeps its portable Swift kernel
   otherwise. Every kernel here gives the same bits as its Swift twin: the same operations in
   the same order, no fused multiply-adds.

   Not an engine of its own: no allocation, no threads, no knowledge of layers. */

/* The set this CPU runs: 2 when it has AVX-512 F, VL and DQ (the kernels below), 0 otherwise. */
int facetrain_vector_level(void);

/* Winograd F(4x4, 3x3)'s input transform V = B^T d B of one image's channels [channel_begin,
   channel_end) (see Winograd.swift for the layouts): `padded` is one zero-padded plane of
   padded_width columns (the caller's scratch, reused channel after channel), written here from
   `image` [c, height, width]; tile t's 6x6 patch starts at `patch_offsets[t]` in it, tiles are
   `columns` (a multiple of 4) and V's row for channel c starts at transformed + c * channel_stride,
   its positions `position_stride` floats apart. */
void facetrain_winograd_input_avx512(
    const float *image, long height, long width, long padding, long padded_height, long padded_width,
    const long *patch_offsets, long columns, long channel_begin, long channel_end, float *padded,
    float *transformed, long channel_stride, long position_stride);

/* Winograd F(4x4, 3x3)'s output transform A^T M A plus the bias for output channels
   [channel_begin, channel_end) of one image whose M rows start at m + f * channel_stride (positions
   position_stride apart), tiles in rows of tile_columns, into output [f, output_height,
   output_width]. With `scale` and `shift` (inference): y = max(0, x * scale + shift) instead of x,
   and with `pool` the 2x2 max-pool of y into [f, output_height / 2, output_width / 2] (both even). */
void facetrain_winograd_output_avx512(
    const float *m, long channel_stride, long position_stride, long tiles, long tile_columns,
    long output_height, long output_width, const float *bias, const float *scale, const float *shift, int pool,
    long channel_begin, long channel_end, float *output);

#endif
