/* What the Winograd kernels of every instruction set share: plain C, no vector type. Private to
   CVectorKernels (not in include/). */
#ifndef FACETRAIN_WINOGRAD_INTERNAL_H
#define FACETRAIN_WINOGRAD_INTERNAL_H

#include <stddef.h>
#include <string.h>

/* Rows [first_row, first_row + plane_height) of one channel's zero-padded plane (input at offset
   (padding, padding), zeros around it) into `plane`, plane_width wide. */
static inline void pad_rows(
    const float *channel, long height, long width, long padding, long first_row, long plane_height, long plane_width,
    float *plane) {
    memset(plane, 0, sizeof(float) * (size_t)(plane_height * plane_width));
    long copied = width < plane_width - padding ? width : plane_width - padding;
    for (long y = 0; y < plane_height; y++) {
        long source = first_row + y - padding;
        if (source < 0 || source >= height) continue;
        memcpy(plane + y * plane_width + padding, channel + source * width, sizeof(float) * (size_t)copied);
    }
}

/* A band's scratch (facetrain_winograd_band_scratch_size floats) cut into the patch offsets of its
   tiles (longs first, at the scratch's alignment, filled here), V, M and the band's padded plane. */
struct band_scratch {
    long *offsets;
    float *v, *m, *plane;
    long plane_width;
};

static inline struct band_scratch band_scratch(
    float *scratch, long channels, long output_channels, long tile_columns, long band_rows) {
    struct band_scratch parts;
    const long most = band_rows * tile_columns;
    parts.plane_width = 4 * tile_columns + 2;
    parts.offsets = (long *)scratch;
    parts.v = scratch + most * (long)(sizeof(long) / sizeof(float));
    parts.m = parts.v + 36 * channels * most;
    parts.plane = parts.m + 36 * output_channels * most;
    for (long tile = 0; tile < most; tile++) {
        parts.offsets[tile] = 4 * (tile / tile_columns) * parts.plane_width + 4 * (tile % tile_columns);
    }
    return parts;
}

#endif
