#ifndef FACETRAIN_DETECTOR_MODEL_H
#define FACETRAIN_DETECTOR_MODEL_H
#include <stddef.h>

/* File `index` of the builtin face detector (0 manifest.json, 1 weights.h5, 2 SHA256SUMS): its
   bytes and, through `size`, their count; NULL for other indices. */
const unsigned char *facetrain_detector_file(int index, size_t *size);

#endif
