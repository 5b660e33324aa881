/*
 * libFuzzer target: tools/npy.c's reader on arbitrary bytes (npy_load_memory, and now and then
 * npy_load on the same bytes in a memfd, which must give the same result).
 *
 * Properties, each a __builtin_trap() (ASan/UBSan catch the rest):
 *   - a failure leaves *out zeroed and a NUL-terminated message "NAME: ..." (also when the message
 *     buffer is tiny: it is malloc'd at its exact size, so an overrun is caught);
 *   - a success gives a 64-byte aligned block, a 1-D or 2-D f16/f32/f64 array whose byte size is
 *     its shape's, equal to the input's last nbytes (the data ends the file), zero padding up to
 *     the next multiple of 64, and matrix / vector views that agree with the shape.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond, ...)                                                                                             \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "fuzz_npy: property violated at line %d: ", __LINE__);                                     \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
            __builtin_trap();                                                                                          \
        }                                                                                                              \
    } while (0)

static int is_zeroed(const npy_array *a)
{
    return a->data == NULL && a->nbytes == 0 && a->ndim == 0 && a->shape[0] == 0 && a->shape[1] == 0 &&
           a->fortran_order == 0 && a->dtype == (cvf_dtype)0;
}

static void check_loaded(const npy_array *a, const uint8_t *data, size_t size)
{
    REQUIRE(a->data != NULL && (uintptr_t)a->data % 64 == 0, "data %p not a 64-byte aligned block", a->data);
    REQUIRE(a->ndim == 1 || a->ndim == 2, "ndim %d", a->ndim);
    size_t elem = a->dtype == CVF_F16 ? 2 : a->dtype == CVF_F32 ? 4 : a->dtype == CVF_F64 ? 8 : 0;
    REQUIRE(elem != 0, "dtype %d", (int)a->dtype);
    REQUIRE(a->fortran_order == 0 || a->fortran_order == 1, "fortran_order %d", a->fortran_order);
    unsigned __int128 bytes = elem;
    for (int i = 0; i < a->ndim; i++) {
        REQUIRE(a->shape[i] >= 0, "negative shape entry %lld", (long long)a->shape[i]);
        bytes *= (uint64_t)a->shape[i];
    }
    REQUIRE(bytes == a->nbytes, "nbytes %zu, shape says %llu", a->nbytes, (unsigned long long)bytes);
    REQUIRE(a->nbytes <= size && memcmp(a->data, data + size - a->nbytes, a->nbytes) == 0,
            "data differs from the input's last %zu bytes", a->nbytes);
    size_t rounded = a->nbytes == 0 ? 64 : (a->nbytes + 63) / 64 * 64;
    for (size_t i = a->nbytes; i < rounded; i++)
        REQUIRE(((const unsigned char *)a->data)[i] == 0, "padding byte %zu is not zero", i);
    cvf_matrix m = npy_array_matrix(a);
    cvf_vector v = npy_array_vector(a);
    REQUIRE(m.data == a->data && m.dtype == a->dtype && v.data == a->data && v.dtype == a->dtype, "views' data");
    if (a->ndim == 1) {
        REQUIRE(m.rows == 1 && m.cols == a->shape[0] && v.length == a->shape[0] && v.stride == 1, "1-D views");
    } else {
        REQUIRE(m.rows == a->shape[0] && m.cols == a->shape[1], "2-D matrix view shape");
        REQUIRE(a->fortran_order ? (m.row_stride == 1 && m.col_stride == a->shape[0])
                                 : (m.row_stride == a->shape[1] && m.col_stride == 1),
                "2-D matrix view strides");
        REQUIRE(v.length == (int64_t)(a->nbytes / elem) && v.stride == 1, "2-D vector view");
    }
}

/* Loads the same bytes through a memfd and npy_load: same result, same message after the name. */
static void check_file_path(const uint8_t *data, size_t size, int rc, const npy_array *mem, const char *err)
{
    int fd = memfd_create("fuzz_npy", 0);
    if (fd < 0)
        return;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) {
            close(fd);
            return;
        }
        done += (size_t)w;
    }
    char path[64], ferr[512];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    npy_array a;
    int frc = npy_load(path, &a, ferr, sizeof ferr);
    close(fd);
    REQUIRE(frc == rc, "npy_load says %d, npy_load_memory %d (%s / %s)", frc, rc, ferr, err);
    if (frc == 0) {
        REQUIRE(a.dtype == mem->dtype && a.ndim == mem->ndim && a.shape[0] == mem->shape[0] &&
                    a.shape[1] == mem->shape[1] && a.fortran_order == mem->fortran_order && a.nbytes == mem->nbytes &&
                    memcmp(a.data, mem->data, a.nbytes) == 0,
                "npy_load and npy_load_memory load different arrays");
        npy_array_free(&a);
    } else {
        size_t plen = strlen(path);
        REQUIRE(strncmp(ferr, path, plen) == 0 && strcmp(ferr + plen, err + strlen("fuzz")) == 0,
                "messages differ: \"%s\" / \"%s\"", ferr, err);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned long runs;
    npy_array a;
    memset(&a, 0x5A, sizeof a);
    char err[512];
    err[0] = '\0';
    int rc = npy_load_memory(data, size, "fuzz", &a, err, sizeof err);
    REQUIRE(rc == 0 || rc == -1, "rc %d", rc);
    if (rc == 0) {
        REQUIRE(err[0] == '\0', "success with a message: %s", err);
        check_loaded(&a, data, size);
    } else {
        REQUIRE(is_zeroed(&a), "a failed load left *out non-zero");
        REQUIRE(memchr(err, '\0', sizeof err) != NULL && strncmp(err, "fuzz: ", 6) == 0 && err[6] != '\0',
                "message \"%s\"", err);
    }
    if (++runs % 64 == 0)
        check_file_path(data, size, rc, &a, err);
    if (rc == 0)
        npy_array_free(&a);

    /* A tiny message buffer, allocated at its exact size. */
    size_t errlen = size > 0 ? data[0] % 12 : 0;
    char *small = errlen ? malloc(errlen) : NULL;
    npy_array b;
    int rc2 = npy_load_memory(data, size, "fuzz", &b, small, errlen);
    REQUIRE(rc2 == rc, "rc %d with a %zu-byte message buffer, %d with a large one", rc2, errlen, rc);
    if (small != NULL && rc2 != 0)
        REQUIRE(memchr(small, '\0', errlen) != NULL, "message not terminated in %zu bytes", errlen);
    if (rc2 == 0)
        npy_array_free(&b);
    free(small);
    return 0;
}
