/*
 * NumPy .npy files (format versions 1.0, 2.0 and 3.0), for the CLI and the tests.
 *
 * Reads little-endian '<f2', '<f4', '<f8' arrays of 1 or 2 dimensions, C or Fortran order
 * (a Fortran-order matrix is returned as-is with fortran_order set: the caller views it with
 * swapped strides, no transpose is materialised). Writes C-order '<f2', '<f4', '<f8' arrays.
 * Every failure returns -1 and a message "PATH: problem" in err (e.g. "a.npy: expected 2
 * dimensions, file has 3"); nothing is ever printed.
 */
#ifndef CVF_TOOLS_NPY_H
#define CVF_TOOLS_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "cvfuse.h"

#define NPY_MAX_DIMS 2

typedef struct npy_array {
    cvf_dtype dtype; /* CVF_F16, CVF_F32 or CVF_F64 */
    int ndim;        /* 1 or 2 */
    int64_t shape[NPY_MAX_DIMS];
    int fortran_order; /* 1 when the file stores the matrix column-major */
    void *data;        /* malloc'd, nbytes long, aligned to 64 bytes; free with npy_array_free.
                          Never NULL after a successful npy_load: an array with no elements gets
                          a 64-byte block (nbytes 0). Bytes past nbytes up to a multiple of 64
                          are allocated and zero. */
    size_t nbytes;
} npy_array;

/* Loads path into *out. Returns 0 on success, -1 with a message in err (size errlen) otherwise;
 * on failure *out is zeroed and owns nothing. path may also name a pipe or FIFO (e.g. a shell's
 * process substitution, /dev/fd/N): the open never blocks (a FIFO with no writer fails at once as
 * empty), the data is read up to the size the header declares, and at most about 1 MiB of
 * trailing bytes is counted before failing, so a writer that never stops cannot hang the reader. */
int npy_load(const char *path, npy_array *out, char *err, size_t errlen);

/* Parses the len bytes at bytes as the contents of a .npy file into *out, exactly as npy_load
 * parses a regular file of those bytes; name stands for the path in messages ("NAME: problem").
 * bytes may be NULL when len is 0. Returns 0, or -1 with a message (then *out is zeroed). */
int npy_load_memory(const void *bytes, size_t len, const char *name, npy_array *out, char *err, size_t errlen);

/* Writes a C-order array of dtype (F16, F32 or F64; anything else is an error) with ndim (1 or 2)
 * dimensions shape[] from the dense data to path. Returns 0, or -1 with a message in err. */
int npy_save(const char *path, cvf_dtype dtype, int ndim, const int64_t *shape, const void *data, char *err,
             size_t errlen);

/* Frees what npy_load allocated and zeroes *array. NULL and zeroed arrays are fine. */
void npy_array_free(npy_array *array);

/* Returns the matrix view of a loaded 2-D array (Fortran order gives swapped strides), or of a
 * 1-D array as a (1 x n) row. A NULL or zeroed array gives an empty (0 x 0) view, data NULL. */
cvf_matrix npy_array_matrix(const npy_array *array);

/* Returns the vector view of a loaded 1-D array (stride 1). For a 2-D array it covers all
 * rows * cols elements in storage order (row-major, or column-major for Fortran order), stride 1.
 * A NULL or zeroed array gives an empty view, data NULL. */
cvf_vector npy_array_vector(const npy_array *array);

#endif /* CVF_TOOLS_NPY_H */
