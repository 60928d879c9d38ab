#include "detector_model.h"

extern const unsigned char facetrain_detector_manifest_start[], facetrain_detector_manifest_end[];
extern const unsigned char facetrain_detector_weights_start[], facetrain_detector_weights_end[];
extern const unsigned char facetrain_detector_sums_start[], facetrain_detector_sums_end[];

const unsigned char *facetrain_detector_file(int index, size_t *size) {
    const unsigned char *start, *end;
    switch (index) {
    case 0: start = facetrain_detector_manifest_start; end = facetrain_detector_manifest_end; break;
    case 1: start = facetrain_detector_weights_start; end = facetrain_detector_weights_end; break;
    case 2: start = facetrain_detector_sums_start; end = facetrain_detector_sums_end; break;
    default: *size = 0; return 0;
    }
    *size = (size_t)(end - start);
    return start;
}
