#ifndef FACETRAIN_VECTOR_KERNELS_H
#define FACETRAIN_VECTOR_KERNELS_H

/* Engine kernels compiled for instruction sets the Swift build cannot target (it is compiled for
   baseline x86-64: SSE2). Each is compiled for one set with a per-function target attribute, in
   two versions: `_avx512` (16 floats a vector) and `_avx2` (8 floats, with FMA), declared together
   below with the same arguments; the engine asks `facetrain_vector_level` before calling and keeps
   its portable Swift kernel on CPUs with neither. The two versions give the same bits. The transforms give the same bits as their Swift twins (the same operations in the
   same order, no fused multiply-adds); the products do not (see below).

   Not an engine of its own: no allocation, no threads, no knowledge of layers. */

/* The best set this CPU runs: 2 when it has AVX-512 F, VL and DQ (and AVX2 and FMA), 1 when it has
   AVX2 and FMA, 0 otherwise. */
int facetrain_vector_level(void);

/* The CPU's hint that the caller is polling a flag (x86's `pause`): the engine's waiting helper
   threads call it between two looks, which spares the core's other hardware thread. */
void facetrain_spin_pause(void);

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
void facetrain_winograd_input_avx2(
    const float *image, long height, long width, long padding, long padded_height, long padded_width,
    const long *patch_offsets, long columns, long channel_begin, long channel_end, float *padded,
    float *transformed, long channel_stride, long position_stride);

/* Winograd F(4x4, 3x3)'s output transform A^T M A plus the bias for output channels
   [channel_begin, channel_end) of one image whose M rows start at m + f * channel_stride (positions
   position_stride apart), tiles in rows of tile_columns, into output [f, output_height,
   output_width], channels output_plane floats apart. With `scale` and `shift` (inference):
   y = max(0, x * scale + shift) instead of x, and with `pool` the 2x2 max-pool of y into
   [f, output_height / 2, output_width / 2] (both even). */
void facetrain_winograd_output_avx512(
    const float *m, long channel_stride, long position_stride, long tiles, long tile_columns,
    long output_height, long output_width, long output_plane, const float *bias, const float *scale,
    const float *shift, int pool, long channel_begin, long channel_end, float *output);
void facetrain_winograd_output_avx2(
    const float *m, long channel_stride, long position_stride, long tiles, long tile_columns,
    long output_height, long output_width, long output_plane, const float *bias, const float *scale,
    const float *shift, int pool, long channel_begin, long channel_end, float *output);

/* Rows of U in the products' blocks: U[p] is packed as ceil(F / 12) blocks of [channels, 12]
   (rows past F zero), so that a block's 12 entries of one channel are adjacent. */
#define FACETRAIN_WINOGRAD_ROW_BLOCK 12

/* Floats of U packed for `facetrain_winograd_products_avx512`, and the packing itself from U's
   layout (36 positions of [F, channels], `u_position_stride` floats apart). Plain C: packing is
   done once per weights. */
long facetrain_winograd_packed_size(long output_channels, long channels);
void facetrain_winograd_pack(
    const float *u, long u_position_stride, long output_channels, long channels, float *packed);

/* Winograd's 36 products M[p] = U[p] V[p] for output channels [channel_begin, channel_end)
   (channel_begin a multiple of FACETRAIN_WINOGRAD_ROW_BLOCK): U packed as above, V[p]
   [channels, columns] and M[p] [F, columns] (rows `columns` apart), position p's V and M
   `*_position_stride` floats after p - 1's. Each entry is a sum over the channels in order, one
   fused multiply-add at a time: its bits do not depend on how rows or columns are split. Unlike
   the transforms, not OpenBLAS's bits. */
void facetrain_winograd_products_avx512(
    const float *packed, long output_channels, const float *v, long v_position_stride, float *m,
    long m_position_stride, long channels, long columns, long channel_begin, long channel_end);
void facetrain_winograd_products_avx2(
    const float *packed, long output_channels, const float *v, long v_position_stride, float *m,
    long m_position_stride, long channels, long columns, long channel_begin, long channel_end);

/* The most taps (channels x kernel x kernel) `facetrain_direct_convolution_avx512` takes. */
#define FACETRAIN_DIRECT_CONVOLUTION_MAX_TAPS 64

/* Direct convolution output[f] = bias[f] + weight[f] * image for output channels [channel_begin,
   channel_end) and output rows [row_begin, row_end) of one image [channels, height, width] into
   output [F, output_height, output_width]: weight [F, channels, kernel, kernel] with at most
   FACETRAIN_DIRECT_CONVOLUTION_MAX_TAPS taps, stride 1 or 2, zero padding `padding`. Each entry
   starts from the bias and adds one fused multiply-add per tap in weight order: not OpenBLAS's
   bits, the same bits however the channels or rows are split. */
void facetrain_direct_convolution_avx512(
    const float *image, long channels, long height, long width, long kernel, long stride, long padding,
    const float *weight, const float *bias, long channel_begin, long channel_end, long row_begin, long row_end,
    float *output, long output_height, long output_width);
void facetrain_direct_convolution_avx2(
    const float *image, long channels, long height, long width, long kernel, long stride, long padding,
    const float *weight, const float *bias, long channel_begin, long channel_end, long row_begin, long row_end,
    float *output, long output_height, long output_width);

/* facetrain_direct_convolution_avx512 followed by inference's batch norm, ReLU and 2x2 max-pool
   (normalizeReLUMaxPool2x2: value * scale[f] + shift[f], the window's maximum, then ReLU, the same
   operations in the same order, so the same bits) without writing the convolution's output: pooled
   rows [pooled_row_begin, pooled_row_end) of output [F, output_height / 2, output_width / 2]. */
void facetrain_direct_convolution_pooled_avx512(
    const float *image, long channels, long height, long width, long kernel, long stride, long padding,
    const float *weight, const float *bias, const float *scale, const float *shift, long channel_begin,
    long channel_end, long pooled_row_begin, long pooled_row_end, float *output, long output_height,
    long output_width);

/* A whole Winograd F(4x4, 3x3) convolution of one image at inference, band by band: the tile rows
   [tile_row_begin, tile_row_end), band_rows at a time, each band's input transform, products (U
   packed as above) and output transform (with the bias, and `scale`, `shift`, `pool` as in
   facetrain_winograd_output_avx512) done while its V and M stay in cache, where the whole image's
   V and M of a large plane go to memory and back. The same bits as the three steps over the whole
   image (every value is computed by the same operations). `scratch` holds
   facetrain_winograd_band_scratch_size floats. */
long facetrain_winograd_band_scratch_size(long channels, long output_channels, long tile_columns, long band_rows);
void facetrain_winograd_forward_bands_avx512(
    const float *image, long channels, long height, long width, long padding, long output_height, long output_width,
    long tile_columns, const float *packed, long output_channels, const float *bias, const float *scale,
    const float *shift, int pool, long band_rows, long tile_row_begin, long tile_row_end, float *scratch,
    float *output);
void facetrain_winograd_forward_bands_avx2(
    const float *image, long channels, long height, long width, long padding, long output_height, long output_width,
    long tile_columns, const float *packed, long output_channels, const float *bias, const float *scale,
    const float *shift, int pool, long band_rows, long tile_row_begin, long tile_row_end, float *scratch,
    float *output);

#endif
