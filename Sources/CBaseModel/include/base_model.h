#ifndef FACETRAIN_BASE_MODEL_H
#define FACETRAIN_BASE_MODEL_H
#include <stddef.h>

/* File `index` of the builtin base model (0 manifest.json, 1 weights.h5, 2 bank.h5,
   3 SHA256SUMS): its bytes and, through `size`, their count; NULL for other indices. */
const unsigned char *facetrain_base_file(int index, size_t *size);

#endif
