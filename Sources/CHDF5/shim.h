// HDF5's type and flag "constants" are macros that call H5open(); Swift cannot import them.
#include <hdf5.h>
static inline hid_t chdf5_native_float(void) { return H5T_NATIVE_FLOAT; }
static inline hid_t chdf5_native_int64(void) { return H5T_NATIVE_INT64; }
static inline hid_t chdf5_c_s1(void) { return H5T_C_S1; }
static inline hid_t chdf5_ieee_f32le(void) { return H5T_IEEE_F32LE; }
static inline hid_t chdf5_file_access(void) { return H5P_FILE_ACCESS; }
static inline hid_t chdf5_file_create(void) { return H5P_FILE_CREATE; }
static inline hid_t chdf5_dataset_create(void) { return H5P_DATASET_CREATE; }
static inline hid_t chdf5_group_create(void) { return H5P_GROUP_CREATE; }
static inline hid_t chdf5_object_create(void) { return H5P_OBJECT_CREATE; }
static inline hid_t chdf5_default(void) { return H5P_DEFAULT; }
static inline hid_t chdf5_all(void) { return H5S_ALL; }
static inline unsigned chdf5_file_truncate(void) { return H5F_ACC_TRUNC; }
static inline unsigned chdf5_file_exclusive(void) { return H5F_ACC_EXCL; }
static inline unsigned chdf5_file_read_only(void) { return H5F_ACC_RDONLY; }
static inline size_t chdf5_variable(void) { return H5T_VARIABLE; }
static inline hid_t chdf5_std_i32le(void) { return H5T_STD_I32LE; }
static inline hid_t chdf5_native_int32(void) { return H5T_NATIVE_INT32; }
static inline hid_t chdf5_error_default(void) { return H5E_DEFAULT; }
