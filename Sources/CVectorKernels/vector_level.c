/* Which of CVectorKernels' instruction sets this CPU runs, and the sizes every set shares. */

#include "vector_kernels.h"

int facetrain_vector_level(void) {
    static int level = -1;
    if (level < 0) {
        __builtin_cpu_init();
        int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                     __builtin_cpu_supports("avx512dq");
        int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        level = avx512 && avx2 ? 2 : avx2 ? 1 : 0;
    }
    return level;
}

long facetrain_winograd_band_scratch_size(
    long channels, long output_channels, long tile_columns, long band_rows) {
    long tiles = band_rows * tile_columns;
    /* The patch offsets first (longs, at the scratch's alignment), then V, M and the band's plane. */
    return tiles * (long)(sizeof(long) / sizeof(float)) + 36 * (channels + output_channels) * tiles +
           (4 * band_rows + 2) * (4 * tile_columns + 2);
}

void facetrain_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}
