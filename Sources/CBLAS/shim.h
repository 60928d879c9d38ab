// OpenBLAS's CBLAS interface plus its runtime queries (kernel name, thread count).
#include <cblas.h>
