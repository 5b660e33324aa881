/*
 * tools/npy.c: round trips through npy_save / npy_load for every dtype and for empty, 1x1 and
 * ordinary 1-D and 2-D shapes (data compared byte for byte, the written header compared with the
 * text NumPy writes); hand-written valid files (versions 2.0 and 3.0, Fortran order, double
 * quotes, other key orders, odd spacing, Python 2 'L' suffixes, an unpadded header); malformed
 * files, each of which must fail with a message that starts with the path and names the problem;
 * the same through a pipe (a file whose size is not known in advance); every truncation and many
 * one-byte corruptions of a valid file; npy_save failures; and npy_array_free / view edge cases.
 * A FIFO with no writer and a pipe whose writer never stops must fail promptly (an alarm turns a
 * hang into a failure); npy_load_memory parses bytes in memory exactly as npy_load parses a file.
 *
 * Self-contained (npy.h, cvfuse.h and libc only). Files live in a fresh mkdtemp directory under
 * /tmp that is removed at the end.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cvfuse.h"
#include "npy.h"

#define ERR_LEN 512
#define PATH_LEN 512

/* The state of the run: check counts and the temporary directory. */
typedef struct suite {
    int passed;
    int failed;
    char dir[64];
} suite;

static int check_at(suite *s, int ok, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Counts one check; prints "test_npy.c:LINE: FAIL: message" when it fails. Returns ok. */
static int check_at(suite *s, int ok, int line, const char *fmt, ...)
{
    if (ok) {
        s->passed++;
        return 1;
    }
    s->failed++;
    fprintf(stderr, "test_npy.c:%d: FAIL: ", line);
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    return 0;
}

#define CHECK(s, cond, ...) check_at((s), (cond) ? 1 : 0, __LINE__, __VA_ARGS__)

/* ---- files -------------------------------------------------------------------------------- */

/* Writes the path of name inside the temporary directory into buf. */
static void path_in(const suite *s, const char *name, char *buf)
{
    snprintf(buf, PATH_LEN, "%s/%s", s->dir, name);
}

/* Writes len bytes to path (replacing it). Returns 0 or -1. */
static int write_file(const char *path, const void *bytes, size_t len)
{
    FILE *file = fopen(path, "wb");
    if (file == NULL)
        return -1;
    size_t written = len == 0 ? 0 : fwrite(bytes, 1, len, file);
    int closed = fclose(file);
    return written == len && closed == 0 ? 0 : -1;
}

/* Reads a whole file into a new buffer (free it) and its length into *len; NULL on failure. */
static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        return NULL;
    size_t cap = 4096, used = 0;
    unsigned char *buf = malloc(cap);
    while (buf != NULL) {
        used += fread(buf + used, 1, cap - used, file);
        if (used < cap)
            break;
        unsigned char *bigger = realloc(buf, cap * 2);
        if (bigger == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    fclose(file);
    *len = used;
    return buf;
}

/* Builds a .npy image in a new buffer (free it): magic, version major.minor, the header length
 * (2 bytes for major 1, else 4; header_len_field, or strlen(header) when it is UINT32_MAX), the
 * header text and data_len bytes of data (data, or a byte pattern when data is NULL). */
static unsigned char *build_npy(unsigned major, unsigned minor, uint32_t header_len_field, const char *header,
                                const void *data, size_t data_len, size_t *len)
{
    size_t header_len = strlen(header);
    uint32_t field = header_len_field == UINT32_MAX ? (uint32_t)header_len : header_len_field;
    size_t len_bytes = major == 1 ? 2 : 4;
    size_t total = 8 + len_bytes + header_len + data_len;
    unsigned char *buf = malloc(total + 1);
    if (buf == NULL)
        return NULL;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = (unsigned char)minor;
    for (size_t i = 0; i < len_bytes; i++)
        buf[8 + i] = (unsigned char)(field >> (8 * i));
    memcpy(buf + 8 + len_bytes, header, header_len);
    unsigned char *payload = buf + 8 + len_bytes + header_len;
    for (size_t i = 0; i < data_len; i++)
        payload[i] = data != NULL ? ((const unsigned char *)data)[i] : (unsigned char)(i * 29 + 7);
    *len = total;
    return buf;
}

/* Writes a .npy image (see build_npy) to the file name in the temporary directory; the path
 * goes to path. Returns 0 or -1. */
static int write_npy(const suite *s, const char *name, unsigned major, unsigned minor, uint32_t header_len_field,
                     const char *header, const void *data, size_t data_len, char *path)
{
    path_in(s, name, path);
    size_t len;
    unsigned char *image = build_npy(major, minor, header_len_field, header, data, data_len, &len);
    if (image == NULL)
        return -1;
    int result = write_file(path, image, len);
    free(image);
    return result;
}

/* Removes every file in the temporary directory, then the directory. */
static void remove_temp_dir(const suite *s)
{
    DIR *dir = opendir(s->dir);
    if (dir != NULL) {
        struct dirent *entry;
        while ((entry = readdir(dir)) != NULL) {
            if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
                continue;
            char path[PATH_LEN];
            path_in(s, entry->d_name, path);
            if (unlink(path) != 0)
                rmdir(path);
        }
        closedir(dir);
    }
    if (rmdir(s->dir) != 0)
        fprintf(stderr, "test_npy: could not remove %s: %s\n", s->dir, strerror(errno));
}

/* ---- shared checks ------------------------------------------------------------------------ */

/* Returns whether an array holds nothing, as a failed npy_load must leave it. */
static int is_zeroed(const npy_array *a)
{
    return a->data == NULL && a->nbytes == 0 && a->ndim == 0 && a->shape[0] == 0 && a->shape[1] == 0 &&
           a->fortran_order == 0 && a->dtype == (cvf_dtype)0;
}

/* Returns whether a message has the form "PATH: ..." and contains word. */
static int message_ok(const char *err, const char *path, const char *word)
{
    size_t path_len = strlen(path);
    return strncmp(err, path, path_len) == 0 && strncmp(err + path_len, ": ", 2) == 0 &&
           strstr(err + path_len, word) != NULL;
}

/* Loads path expecting a failure whose message starts with the path and contains word. */
static void expect_load_failure(suite *s, const char *what, const char *path, const char *word)
{
    npy_array a;
    memset(&a, 0xA5, sizeof a); /* npy_load must zero it */
    char err[ERR_LEN] = "";
    int rc = npy_load(path, &a, err, sizeof err);
    CHECK(s, rc == -1 && is_zeroed(&a) && message_ok(err, path, word),
          "%s: expected failure mentioning \"%s\", got rc %d, message \"%s\"", what, word, rc, err);
    if (getenv("TEST_NPY_VERBOSE") != NULL)
        printf("  %-36s %s\n", what, err);
    if (rc == 0)
        npy_array_free(&a);
}

/* Writes a version-1.0 file with the given header and data_len pattern bytes, then expects
 * npy_load to fail with word in the message. */
static void expect_header_failure(suite *s, const char *name, const char *header, size_t data_len, const char *word)
{
    char path[PATH_LEN];
    if (!CHECK(s, write_npy(s, name, 1, 0, UINT32_MAX, header, NULL, data_len, path) == 0, "writing %s", name))
        return;
    expect_load_failure(s, name, path, word);
}

/* Loads path expecting success; returns 0 and fills *a, or -1 after counting a failure. */
static int expect_load(suite *s, const char *what, const char *path, npy_array *a)
{
    char err[ERR_LEN] = "";
    int rc = npy_load(path, a, err, sizeof err);
    if (!CHECK(s, rc == 0, "%s: npy_load failed: %s", what, err))
        return -1;
    CHECK(s, a->data != NULL && (uintptr_t)a->data % 64 == 0, "%s: data %p is not a 64-byte aligned block", what,
          a->data);
    return 0;
}

/* Returns the bits of a double. */
static uint64_t f64_bits(double value)
{
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* Returns element (i, j) of a float32 matrix view. */
static float f32_at(cvf_matrix m, int64_t i, int64_t j)
{
    return ((const float *)m.data)[i * m.row_stride + j * m.col_stride];
}

/* Returns element (i, j) of a float64 matrix view. */
static double f64_at(cvf_matrix m, int64_t i, int64_t j)
{
    return ((const double *)m.data)[i * m.row_stride + j * m.col_stride];
}

/* ---- round trips -------------------------------------------------------------------------- */

typedef struct dtype_case {
    cvf_dtype dtype;
    const char *descr;
    size_t size;
} dtype_case;

typedef struct shape_case {
    int ndim;
    int64_t shape[2];
    const char *text; /* as NumPy writes the tuple */
} shape_case;

/* Checks the bytes of a file written by npy_save: the version 1.0 preamble, the header text
 * NumPy writes padded with spaces to a 64-byte boundary and ended by '\n', then the data. */
static void check_written_file(suite *s, const char *path, const dtype_case *d, const shape_case *sh,
                               const unsigned char *data, size_t nbytes)
{
    size_t len;
    unsigned char *bytes = read_file(path, &len);
    if (!CHECK(s, bytes != NULL && len >= 10, "%s: cannot read back", path)) {
        free(bytes);
        return;
    }
    size_t header_len = (size_t)bytes[8] | (size_t)bytes[9] << 8;
    size_t offset = 10 + header_len;
    CHECK(s, memcmp(bytes, "\x93NUMPY\x01\x00", 8) == 0, "%s: magic or version 1.0 missing", path);
    CHECK(s, offset % 64 == 0, "%s: data offset %zu is not a multiple of 64", path, offset);
    CHECK(s, len == offset + nbytes, "%s: file is %zu bytes, expected %zu", path, len, offset + nbytes);
    if (len != offset + nbytes || offset % 64 != 0) {
        free(bytes);
        return;
    }
    char expected[256];
    int n = snprintf(expected, sizeof expected, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", d->descr,
                     sh->text);
    const char *header = (const char *)bytes + 10;
    int header_ok =
        (size_t)n < header_len && memcmp(header, expected, (size_t)n) == 0 && header[header_len - 1] == '\n';
    for (size_t i = (size_t)n; header_ok && i + 1 < header_len; i++)
        header_ok = header[i] == ' ';
    CHECK(s, header_ok, "%s: header is \"%.*s\", expected \"%s\" + spaces + newline", path, (int)header_len, header,
          expected);
    CHECK(s, nbytes == 0 || memcmp(bytes + offset, data, nbytes) == 0, "%s: data bytes differ in the file", path);
    free(bytes);
}

/* Checks the matrix and vector views of a loaded C-order array. */
static void check_views(suite *s, const char *what, const npy_array *a)
{
    cvf_matrix m = npy_array_matrix(a);
    int64_t rows = a->ndim == 1 ? 1 : a->shape[0];
    int64_t cols = a->ndim == 1 ? a->shape[0] : a->shape[1];
    CHECK(s,
          m.data == a->data && m.dtype == a->dtype && m.rows == rows && m.cols == cols && m.row_stride == cols &&
              m.col_stride == 1,
          "%s: matrix view %lld x %lld strides (%lld, %lld)", what, (long long)m.rows, (long long)m.cols,
          (long long)m.row_stride, (long long)m.col_stride);
    cvf_vector v = npy_array_vector(a);
    CHECK(s, v.data == a->data && v.dtype == a->dtype && v.length == rows * cols && v.stride == 1,
          "%s: vector view length %lld stride %lld", what, (long long)v.length, (long long)v.stride);
}

/* Saves one array of pattern bytes, checks the file, loads it back and compares everything. */
static void round_trip(suite *s, const dtype_case *d, const shape_case *sh)
{
    char name[64], path[PATH_LEN], what[128];
    int64_t count = sh->ndim == 1 ? sh->shape[0] : sh->shape[0] * sh->shape[1];
    snprintf(name, sizeof name, "rt_%s_%lld_%lld_%d.npy", d->descr + 1, (long long)sh->shape[0],
             (long long)sh->shape[1], sh->ndim);
    snprintf(what, sizeof what, "round trip %s %s", d->descr, sh->text);
    path_in(s, name, path);
    size_t nbytes = (size_t)count * d->size;
    unsigned char *data = malloc(nbytes + 1);
    if (!CHECK(s, data != NULL, "%s: out of memory", what))
        return;
    for (size_t i = 0; i < nbytes; i++)
        data[i] = (unsigned char)(i * 131 + 17 + d->size);
    char err[ERR_LEN] = "";
    int rc = npy_save(path, d->dtype, sh->ndim, sh->shape, count == 0 ? NULL : data, err, sizeof err);
    if (CHECK(s, rc == 0, "%s: npy_save failed: %s", what, err)) {
        check_written_file(s, path, d, sh, data, nbytes);
        npy_array a;
        if (expect_load(s, what, path, &a) == 0) {
            CHECK(s, a.dtype == d->dtype && a.ndim == sh->ndim && a.fortran_order == 0 && a.nbytes == nbytes,
                  "%s: loaded dtype %d ndim %d fortran %d nbytes %zu", what, (int)a.dtype, a.ndim, a.fortran_order,
                  a.nbytes);
            CHECK(s, a.shape[0] == sh->shape[0] && (sh->ndim == 1 || a.shape[1] == sh->shape[1]),
                  "%s: loaded shape (%lld, %lld)", what, (long long)a.shape[0], (long long)a.shape[1]);
            CHECK(s, nbytes == 0 || memcmp(a.data, data, nbytes) == 0, "%s: loaded data differs", what);
            check_views(s, what, &a);
            npy_array_free(&a);
        }
    }
    free(data);
}

/* Round trips every dtype through every shape. */
static void test_round_trips(suite *s)
{
    static const dtype_case dtypes[] = {{CVF_F16, "<f2", 2}, {CVF_F32, "<f4", 4}, {CVF_F64, "<f8", 8}};
    static const shape_case shapes[] = {
        {1, {7, 0}, "(7,)"},   {2, {3, 4}, "(3, 4)"},       {1, {0, 0}, "(0,)"},
        {2, {0, 5}, "(0, 5)"}, {2, {3, 0}, "(3, 0)"},       {2, {1, 1}, "(1, 1)"},
        {1, {1, 0}, "(1,)"},   {2, {37, 129}, "(37, 129)"}, {1, {1000, 0}, "(1000,)"},
    };
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++)
            round_trip(s, &dtypes[i], &shapes[j]);
}

/* ---- hand-written valid files ------------------------------------------------------------- */

/* A version 2.0 file (4-byte header length) of float64 (2, 3). */
static void test_version_2(suite *s)
{
    double values[6];
    for (int i = 0; i < 6; i++)
        values[i] = i + 0.5;
    char path[PATH_LEN];
    const char *header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }    \n";
    write_npy(s, "v2.npy", 2, 0, UINT32_MAX, header, values, sizeof values, path);
    npy_array a;
    if (expect_load(s, "version 2.0", path, &a) != 0)
        return;
    cvf_matrix m = npy_array_matrix(&a);
    int ok = a.dtype == CVF_F64 && a.ndim == 2 && m.rows == 2 && m.cols == 3;
    for (int i = 0; ok && i < 2; i++)
        for (int j = 0; ok && j < 3; j++)
            ok = f64_bits(f64_at(m, i, j)) == f64_bits(i * 3 + j + 0.5);
    CHECK(s, ok, "version 2.0: wrong dtype, shape or values");
    npy_array_free(&a);
}

/* A version 3.0 file (UTF-8 header, 4-byte length) of float32 (4,). */
static void test_version_3(suite *s)
{
    float values[4] = {1.0f, -2.0f, 0.25f, 1e30f};
    char path[PATH_LEN];
    write_npy(s, "v3.npy", 3, 0, UINT32_MAX, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n", values,
              sizeof values, path);
    npy_array a;
    if (expect_load(s, "version 3.0", path, &a) != 0)
        return;
    CHECK(s, a.dtype == CVF_F32 && a.ndim == 1 && a.shape[0] == 4 && memcmp(a.data, values, sizeof values) == 0,
          "version 3.0: wrong dtype, shape or values");
    npy_array_free(&a);
}

/* A Fortran-order (2, 3) float32 matrix: the view must have row_stride 1, col_stride 2 and read
 * a(i, j) = 10 i + j from the column-major data. */
static void test_fortran_order(suite *s)
{
    float column_major[6];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 2; i++)
            column_major[j * 2 + i] = (float)(10 * i + j);
    char path[PATH_LEN];
    write_npy(s, "fortran.npy", 1, 0, UINT32_MAX, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n",
              column_major, sizeof column_major, path);
    npy_array a;
    if (expect_load(s, "fortran order", path, &a) != 0)
        return;
    CHECK(s, a.fortran_order == 1 && a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3,
          "fortran order: fortran_order %d shape (%lld, %lld)", a.fortran_order, (long long)a.shape[0],
          (long long)a.shape[1]);
    cvf_matrix m = npy_array_matrix(&a);
    CHECK(s, m.data == a.data && m.rows == 2 && m.cols == 3 && m.row_stride == 1 && m.col_stride == 2,
          "fortran order: view %lld x %lld strides (%lld, %lld)", (long long)m.rows, (long long)m.cols,
          (long long)m.row_stride, (long long)m.col_stride);
    int ok = 1;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            ok = ok && f32_at(m, i, j) == (float)(10 * i + j);
    CHECK(s, ok, "fortran order: element (i, j) does not read 10 i + j");
    cvf_vector v = npy_array_vector(&a);
    CHECK(s, v.length == 6 && v.stride == 1 && v.data == a.data, "fortran order: vector view length %lld",
          (long long)v.length);
    npy_array_free(&a);

    /* 1-D with fortran_order True is the same as C order. */
    write_npy(s, "fortran1d.npy", 1, 0, UINT32_MAX, "{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }\n",
              column_major, 12, path);
    if (expect_load(s, "fortran 1-D", path, &a) != 0)
        return;
    m = npy_array_matrix(&a);
    CHECK(s, m.rows == 1 && m.cols == 3 && m.col_stride == 1 && f32_at(m, 0, 2) == column_major[2],
          "fortran 1-D: view %lld x %lld", (long long)m.rows, (long long)m.cols);
    npy_array_free(&a);
}

/* Headers written differently from NumPy's own output, all valid Python dict literals. */
static void test_header_variants(suite *s)
{
    static const struct {
        const char *name;
        const char *header;
        cvf_dtype dtype;
        int ndim;
        int64_t shape[2];
        int fortran_order;
    } cases[] = {
        {"dquote.npy", "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3,)}", CVF_F32, 1, {3, 0}, 0},
        {"reorder.npy",
         "  {  'shape' :\t( 2 ,  2 , ) ,'fortran_order':False,   'descr':'<f2'   }  \n",
         CVF_F16,
         2,
         {2, 2},
         0},
        {"mixedquote.npy", "{'fortran_order': True, \"descr\": '<f8', 'shape': (2,3)}\r\n", CVF_F64, 2, {2, 3}, 1},
        {"long.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", CVF_F32, 2, {2, 3}, 0},
        {"newlines.npy",
         "{\n'descr':\n'<f4',\n'fortran_order':\nFalse,\n'shape':\n(\n5\n,\n)\n,\n}\n",
         CVF_F32,
         1,
         {5, 0},
         0},
        {"plus.npy", "{'descr': '<f2', 'fortran_order': False, 'shape': (+4, 0), }", CVF_F16, 2, {4, 0}, 0},
        {"hugezero.npy",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 0), }",
         CVF_F64,
         2,
         {INT64_C(4611686018427387904), 0},
         0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t elem = cases[c].dtype == CVF_F16 ? 2 : cases[c].dtype == CVF_F32 ? 4 : 8;
        int64_t count = cases[c].ndim == 1 ? cases[c].shape[0] : cases[c].shape[0] * cases[c].shape[1];
        size_t nbytes = (size_t)count * elem;
        char path[PATH_LEN];
        write_npy(s, cases[c].name, 1, 0, UINT32_MAX, cases[c].header, NULL, nbytes, path);
        npy_array a;
        if (expect_load(s, cases[c].name, path, &a) != 0)
            continue;
        int ok = a.dtype == cases[c].dtype && a.ndim == cases[c].ndim && a.shape[0] == cases[c].shape[0] &&
                 (a.ndim == 1 || a.shape[1] == cases[c].shape[1]) && a.fortran_order == cases[c].fortran_order &&
                 a.nbytes == nbytes;
        for (size_t i = 0; ok && i < nbytes; i++)
            ok = ((unsigned char *)a.data)[i] == (unsigned char)(i * 29 + 7);
        CHECK(s, ok, "%s: wrong dtype, shape, order or data", cases[c].name);
        npy_array_free(&a);
    }
}

/* ---- malformed files ---------------------------------------------------------------------- */

/* Files that are not .npy at all, or are cut short before the header. */
static void test_bad_preambles(suite *s)
{
    char path[PATH_LEN];
    path_in(s, "empty.npy", path);
    write_file(path, "", 0);
    expect_load_failure(s, "empty file", path, "empty");

    path_in(s, "magic.npy", path);
    write_file(path, "\x93NUMPX\x01\x00\x10\x00{}", 12);
    expect_load_failure(s, "bad magic", path, "magic");

    path_in(s, "text.npy", path);
    write_file(path, "hello", 5);
    expect_load_failure(s, "short non-npy file", path, "magic");

    path_in(s, "noversion.npy", path);
    write_file(path, "\x93NUMPY\x01", 7);
    expect_load_failure(s, "cut in the version", path, "truncated");

    path_in(s, "nolength.npy", path);
    write_file(path, "\x93NUMPY\x01\x00\x05", 9);
    expect_load_failure(s, "cut in the header length", path, "truncated");

    const char *header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
    write_npy(s, "v9.npy", 9, 0, UINT32_MAX, header, NULL, 8, path);
    expect_load_failure(s, "version 9.0", path, "version 9.0");
    write_npy(s, "v1_1.npy", 1, 1, UINT32_MAX, header, NULL, 8, path);
    expect_load_failure(s, "version 1.1", path, "version 1.1");
    write_npy(s, "v0.npy", 0, 0, UINT32_MAX, header, NULL, 8, path);
    expect_load_failure(s, "version 0.0", path, "version");

    write_npy(s, "beyond.npy", 1, 0, 0xFFFF, "{'descr': '<f4'", NULL, 0, path);
    expect_load_failure(s, "v1 header length beyond the file", path, "beyond the end");
    write_npy(s, "beyond2.npy", 2, 0, UINT32_C(0xFFFFFFF0), header, NULL, 8, path);
    expect_load_failure(s, "v2 header length beyond the file", path, "beyond the end");

    path_in(s, "missing.npy", path);
    expect_load_failure(s, "nonexistent path", path, "No such file");

    path_in(s, "adir.npy", path);
    mkdir(path, 0700);
    expect_load_failure(s, "a directory", path, "directory");

    path_in(s, "nul.npy", path);
    size_t len;
    unsigned char *image =
        build_npy(1, 0, UINT32_MAX, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", NULL, 8, &len);
    if (image != NULL) {
        image[10 + 20] = '\0';
        write_file(path, image, len);
        free(image);
        expect_load_failure(s, "NUL byte in the header", path, "NUL");
    }
}

/* Headers that are not what a .npy header must be. */
static void test_bad_headers(suite *s)
{
    expect_header_failure(s, "notdict.npy", "['descr', '<f4']\n", 8, "not a dict");
    expect_header_failure(s, "emptyheader.npy", "", 8, "not a dict");
    expect_header_failure(s, "noshape.npy", "{'descr': '<f4', 'fortran_order': False}\n", 8, "missing the 'shape'");
    expect_header_failure(s, "nodescr.npy", "{'fortran_order': False, 'shape': (2,)}\n", 8, "missing the 'descr'");
    expect_header_failure(s, "noorder.npy", "{'descr': '<f4', 'shape': (2,)}\n", 8, "missing the 'fortran_order'");
    expect_header_failure(s, "emptydict.npy", "{}\n", 8, "missing");
    expect_header_failure(s, "unknown.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}\n", 8,
                          "unknown key 'extra'");
    expect_header_failure(s, "dupkey.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,)}\n",
                          8, "duplicate");
    expect_header_failure(s, "i4.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n", 8,
                          "unsupported dtype '<i4'");
    expect_header_failure(s, "f4nobo.npy", "{'descr': 'f4', 'fortran_order': False, 'shape': (2,), }\n", 8,
                          "unsupported dtype");
    expect_header_failure(s, "bigendian.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", 8,
                          "big-endian data is not supported");
    expect_header_failure(s, "native.npy", "{'descr': '=f8', 'fortran_order': False, 'shape': (1,), }\n", 8,
                          "native byte order");
    expect_header_failure(s, "structured.npy", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n",
                          8, "structured");
    expect_header_failure(s, "order01.npy", "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }\n", 8,
                          "True or False");
    expect_header_failure(s, "orderstr.npy", "{'descr': '<f4', 'fortran_order': 'False', 'shape': (2,), }\n", 8,
                          "True or False");
    expect_header_failure(s, "true.npy", "{'descr': '<f4', 'fortran_order': true, 'shape': (2,), }\n", 8,
                          "True or False");
    expect_header_failure(s, "3d.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 1), }\n", 8,
                          "expected 1 or 2 dimensions, file has 3");
    expect_header_failure(s, "0d.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", 4, "0-d");
    expect_header_failure(s, "negative.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }\n", 8,
                          "negative");
    expect_header_failure(s, "overflow.npy",
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }\n", 8,
                          "overflow");
    expect_header_failure(s, "overflow2.npy",
                          "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n", 8,
                          "overflow");
    expect_header_failure(s, "toolarge.npy",
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }\n", 8,
                          "too large");
    expect_header_failure(s, "int64max.npy",
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,), }\n", 8,
                          "too large");
    expect_header_failure(s, "notuple.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2), }\n", 8,
                          "not a tuple");
    expect_header_failure(s, "shapelist.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': [2], }\n", 8,
                          "must be a tuple");
    expect_header_failure(s, "shapefloat.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,), }\n", 8,
                          "expected ',' or ')'");
    expect_header_failure(s, "doublecomma.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,,), }\n", 8,
                          "expected an integer");
    expect_header_failure(s, "unterminated.npy", "{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }\n", 8,
                          "malformed header");
    expect_header_failure(s, "escape.npy", "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,), }\n", 8,
                          "escape");
    expect_header_failure(s, "nocolon.npy", "{'descr' '<f4', 'fortran_order': False, 'shape': (2,), }\n", 8,
                          "expected ':'");
    expect_header_failure(s, "barekey.npy", "{descr: '<f4', 'fortran_order': False, 'shape': (2,), }\n", 8,
                          "quoted string");
    expect_header_failure(s, "nocomma.npy", "{'descr': '<f4' 'fortran_order': False, 'shape': (2,), }\n", 8,
                          "expected ',' or '}'");
    expect_header_failure(s, "unclosed.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), \n", 8,
                          "end of the header");
    expect_header_failure(s, "garbage.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x\n", 8,
                          "after the dict");
    expect_header_failure(s, "longkey.npy",
                          "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), "
                          "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa': 1}\n",
                          8, "longer than");
}

/* Files whose data part is not exactly the size the header says. */
static void test_bad_data_sizes(suite *s)
{
    const char *header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n";
    expect_header_failure(s, "truncated.npy", header, 12, "file is truncated: expected 16 data bytes, found 12");
    expect_header_failure(s, "nodata.npy", header, 0, "file is truncated: expected 16 data bytes, found 0");
    expect_header_failure(s, "trailing.npy", header, 20, "has 4 bytes after the data");
    expect_header_failure(s, "emptytrailing.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 3), }\n", 1,
                          "has 1 bytes after the data");
    expect_header_failure(s, "hugetruncated.npy",
                          "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000, 1000), }\n", 64,
                          "file is truncated: expected 8000000000000 data bytes, found 64");
}

/* ---- a pipe: a file whose size is not known in advance ------------------------------------ */

/* Puts len bytes (at most a pipe's capacity) into a new pipe, closes its write end and loads
 * the read end through its /dev/fd/N name (as a shell's process substitution passes it).
 * Returns npy_load's result, or -2 with a reason in err when the pipe cannot be set up; the
 * name used goes to path. */
static int load_through_pipe(const void *bytes, size_t len, npy_array *a, char *err, char *path)
{
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(err, ERR_LEN, "pipe: %s", strerror(errno));
        return -2;
    }
    ssize_t written = write(fds[1], bytes, len);
    close(fds[1]);
    if (written < 0 || (size_t)written != len) {
        snprintf(err, ERR_LEN, "write to a pipe: %s", written < 0 ? strerror(errno) : "short write");
        close(fds[0]);
        return -2;
    }
    snprintf(path, PATH_LEN, "/dev/fd/%d", fds[0]);
    int rc = -2;
    if (access(path, R_OK) != 0)
        snprintf(err, ERR_LEN, "cannot access /dev/fd: %s", strerror(errno));
    else
        rc = npy_load(path, a, err, ERR_LEN);
    close(fds[0]);
    return rc;
}

/* npy_load on a pipe: a valid file, short and long data, a header beyond the end, a header over
 * the size limit. Skipped (with a note) where /dev/fd is missing. */
static void test_pipe(suite *s)
{
    static const struct {
        const char *name;
        unsigned major;
        uint32_t header_len_field;
        size_t data_len;
        const char *word; /* NULL: must load */
    } cases[] = {
        {"pipe_ok", 1, UINT32_MAX, 24, NULL},
        {"pipe_truncated", 1, UINT32_MAX, 20, "file is truncated: expected 24 data bytes, found 20"},
        {"pipe_trailing", 1, UINT32_MAX, 24 + 5000, "has 5000 bytes after the data"},
        {"pipe_beyond", 2, 500, 0, "beyond the end"},
        {"pipe_limit", 2, UINT32_C(0x7FFFFFFF), 0, "exceeds the limit"},
    };
    const char *header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t len;
        unsigned char *image =
            build_npy(cases[c].major, 0, cases[c].header_len_field, header, NULL, cases[c].data_len, &len);
        if (image == NULL)
            continue;
        npy_array a;
        memset(&a, 0x5A, sizeof a);
        char err[ERR_LEN] = "", path[PATH_LEN];
        int rc = load_through_pipe(image, len, &a, err, path);
        if (rc == -2) {
            printf("test_npy: note: pipe case %s skipped (%s)\n", cases[c].name, err);
            free(image);
            continue;
        }
        if (cases[c].word == NULL) {
            CHECK(s,
                  rc == 0 && a.nbytes == 24 && a.shape[0] == 2 && a.shape[1] == 3 &&
                      memcmp(a.data, image + len - 24, 24) == 0,
                  "%s: expected a (2, 3) array, got rc %d: %s", cases[c].name, rc, err);
        } else {
            CHECK(s, rc == -1 && is_zeroed(&a) && message_ok(err, path, cases[c].word),
                  "%s: expected failure mentioning \"%s\", got rc %d: %s", cases[c].name, cases[c].word, rc, err);
        }
        if (rc == 0)
            npy_array_free(&a);
        free(image);
    }
}

/* ---- FIFOs, endless writers, memory ------------------------------------------------------- */

/* Seconds on the monotonic clock. */
static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Starts a child that writes image to fd, then zero bytes forever (until the reader goes away and
 * SIGPIPE ends it). Returns the child's pid, or -1. */
static pid_t start_endless_writer(int fd, const unsigned char *image, size_t len)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    signal(SIGPIPE, SIG_DFL);
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, image + done, len - done);
        if (w <= 0)
            _exit(0);
        done += (size_t)w;
    }
    static const unsigned char zeros[4096];
    for (;;)
        if (write(fd, zeros, sizeof zeros) <= 0)
            _exit(0);
}

/* Loads path and expects a failure with word in the message within a few seconds. */
static void expect_prompt_failure(suite *s, const char *what, const char *path, const char *word)
{
    double start = now_seconds();
    expect_load_failure(s, what, path, word);
    double took = now_seconds() - start;
    CHECK(s, took < 10.0, "%s: npy_load took %.1f s (expected a prompt failure)", what, took);
}

/* A named FIFO with no writer (an ordinary open would block forever), a FIFO and a pipe whose
 * writer sends a valid file and then never stops (reading to the end would never end). An alarm
 * ends the test program instead of letting it hang if one of them blocks. */
static void test_fifo(suite *s)
{
    char path[PATH_LEN];
    path_in(s, "fifo.npy", path);
    if (mkfifo(path, 0600) != 0) {
        printf("test_npy: note: FIFO cases skipped (mkfifo: %s)\n", strerror(errno));
        return;
    }
    alarm(60);
    expect_prompt_failure(s, "fifo_no_writer", path, "FIFO with no writer");

    const char *header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";
    size_t len;
    unsigned char *image = build_npy(1, 0, UINT32_MAX, header, NULL, 24, &len);
    if (!CHECK(s, image != NULL, "building the endless-writer image")) {
        alarm(0);
        return;
    }
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);

    /* The FIFO: a reader held open so that the writer's open does not block, and so that the
     * writer is connected before npy_load opens the FIFO. */
    int hold = open(path, O_RDONLY | O_NONBLOCK);
    int wfd = hold >= 0 ? open(path, O_WRONLY) : -1;
    if (CHECK(s, hold >= 0 && wfd >= 0, "opening the FIFO: %s", strerror(errno))) {
        pid_t child = start_endless_writer(wfd, image, len);
        close(wfd);
        if (CHECK(s, child > 0, "fork: %s", strerror(errno))) {
            expect_prompt_failure(s, "fifo_endless_writer", path, "bytes after the data");
            close(hold);
            hold = -1;
            kill(child, SIGKILL);
            waitpid(child, NULL, 0);
        }
    }
    if (hold >= 0)
        close(hold);

    /* An anonymous pipe through its /dev/fd name, as a shell's process substitution passes it. */
    int fds[2];
    if (CHECK(s, pipe(fds) == 0, "pipe: %s", strerror(errno))) {
        pid_t child = start_endless_writer(fds[1], image, len);
        close(fds[1]);
        char fd_path[PATH_LEN];
        snprintf(fd_path, sizeof fd_path, "/dev/fd/%d", fds[0]);
        if (CHECK(s, child > 0, "fork: %s", strerror(errno)) && access(fd_path, R_OK) == 0)
            expect_prompt_failure(s, "pipe_endless_writer", fd_path, "more than");
        close(fds[0]);
        if (child > 0) {
            kill(child, SIGKILL);
            waitpid(child, NULL, 0);
        }
    }
    signal(SIGPIPE, old_pipe);
    alarm(0);
    free(image);
}

/* npy_load_memory: the same array as from a file; failures name the given name; a huge declared
 * shape with few bytes fails without allocating it; NULL with length 0 is an empty file. */
static void test_memory(suite *s)
{
    const char *header = "{'descr': '<f8', 'fortran_order': True, 'shape': (3, 2), }\n";
    size_t len;
    unsigned char *image = build_npy(2, 0, UINT32_MAX, header, NULL, 48, &len);
    if (!CHECK(s, image != NULL, "building the memory image"))
        return;
    npy_array a;
    char err[ERR_LEN] = "";
    int rc = npy_load_memory(image, len, "mem", &a, err, sizeof err);
    if (CHECK(s, rc == 0, "memory load failed: %s", err)) {
        CHECK(s,
              a.dtype == CVF_F64 && a.ndim == 2 && a.shape[0] == 3 && a.shape[1] == 2 && a.fortran_order == 1 &&
                  a.nbytes == 48 && (uintptr_t)a.data % 64 == 0 && memcmp(a.data, image + len - 48, 48) == 0,
              "memory load: wrong array");
        npy_array_free(&a);
    }
    for (size_t cut = 0; cut < len; cut++) {
        memset(&a, 0x5A, sizeof a);
        rc = npy_load_memory(image, cut, "mem", &a, err, sizeof err);
        CHECK(s, rc == -1 && is_zeroed(&a) && message_ok(err, "mem", ""), "memory prefix of %zu bytes: rc %d: %s", cut,
              rc, err);
    }
    free(image);
    image = build_npy(1, 0, UINT32_MAX, "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000,), }", NULL, 8,
                      &len);
    if (image != NULL) {
        rc = npy_load_memory(image, len, "huge", &a, err, sizeof err);
        CHECK(s, rc == -1 && message_ok(err, "huge", "truncated"), "huge declared shape: rc %d: %s", rc, err);
        free(image);
    }
    rc = npy_load_memory(NULL, 0, "none", &a, err, sizeof err);
    CHECK(s, rc == -1 && message_ok(err, "none", "empty"), "NULL, 0: rc %d: %s", rc, err);
    rc = npy_load_memory(NULL, 5, "none", &a, err, sizeof err);
    CHECK(s, rc == -1 && message_ok(err, "none", "no bytes"), "NULL, 5: rc %d: %s", rc, err);
}

/* ---- robustness sweeps -------------------------------------------------------------------- */

/* Every proper prefix of a valid file fails cleanly; many one-byte changes to its preamble and
 * header either load a consistent array or fail cleanly. */
static void test_sweeps(suite *s)
{
    char source[PATH_LEN], path[PATH_LEN], err[ERR_LEN];
    path_in(s, "sweep_source.npy", source);
    path_in(s, "sweep.npy", path);
    float values[12];
    for (int i = 0; i < 12; i++)
        values[i] = (float)i;
    const int64_t shape[2] = {3, 4};
    if (!CHECK(s, npy_save(source, CVF_F32, 2, shape, values, err, sizeof err) == 0, "sweep source: %s", err))
        return;
    size_t len;
    unsigned char *bytes = read_file(source, &len);
    if (!CHECK(s, bytes != NULL && len == 128 + sizeof values, "sweep source has %zu bytes", len)) {
        free(bytes);
        return;
    }

    int bad_prefixes = 0;
    for (size_t cut = 0; cut < len; cut++) {
        write_file(path, bytes, cut);
        npy_array a;
        int rc = npy_load(path, &a, err, sizeof err);
        if (rc != -1 || !is_zeroed(&a) || !message_ok(err, path, "")) {
            if (bad_prefixes++ < 3)
                fprintf(stderr, "prefix %zu: rc %d, message \"%s\"\n", cut, rc, err);
            if (rc == 0)
                npy_array_free(&a);
        }
    }
    CHECK(s, bad_prefixes == 0, "%d proper prefixes of a valid file did not fail cleanly", bad_prefixes);

    static const unsigned char replacements[] = {' ', '\0', '\n', '{', '}', '(',  ')',  ',',  ':',  '\'', '"',
                                                 '-', '0',  '9',  'L', 'x', 0x80, 0xff, 0x01, 0x02, 0x03};
    int bad_mutations = 0, loaded = 0;
    for (size_t pos = 0; pos < 128; pos++) {
        for (size_t r = 0; r < sizeof replacements; r++) {
            unsigned char saved = bytes[pos];
            bytes[pos] = replacements[r];
            write_file(path, bytes, len);
            bytes[pos] = saved;
            npy_array a;
            memset(&a, 0xA5, sizeof a);
            int rc = npy_load(path, &a, err, sizeof err);
            int ok;
            if (rc == 0) {
                cvf_vector v = npy_array_vector(&a);
                size_t elem = a.dtype == CVF_F16 ? 2 : a.dtype == CVF_F32 ? 4 : 8;
                ok = a.data != NULL && (a.ndim == 1 || a.ndim == 2) && a.nbytes == (size_t)v.length * elem;
                loaded++;
                npy_array_free(&a);
            } else {
                ok = rc == -1 && is_zeroed(&a) && message_ok(err, path, "");
            }
            if (!ok && bad_mutations++ < 3)
                fprintf(stderr, "byte %zu = 0x%02x: rc %d, message \"%s\"\n", pos, replacements[r], rc, err);
        }
    }
    CHECK(s, bad_mutations == 0, "%d one-byte mutations were not handled cleanly", bad_mutations);
    CHECK(s, loaded > 0, "no one-byte mutation loaded (padding spaces should be harmless)");
    free(bytes);
}

/* ---- npy_save failures -------------------------------------------------------------------- */

/* Calls npy_save expecting a failure whose message starts with the path and contains word. */
static void expect_save_failure(suite *s, const char *what, const char *path, cvf_dtype dtype, int ndim,
                                const int64_t *shape, const void *data, const char *word)
{
    char err[ERR_LEN] = "";
    int rc = npy_save(path, dtype, ndim, shape, data, err, sizeof err);
    CHECK(s, rc == -1 && message_ok(err, path, word), "%s: expected failure mentioning \"%s\", got rc %d: \"%s\"", what,
          word, rc, err);
}

/* npy_save refuses bad arguments before touching the file, and reports I/O failures. */
static void test_save_failures(suite *s)
{
    float values[8] = {0};
    const int64_t shape2[2] = {2, 4};
    char path[PATH_LEN];

    path_in(s, "no_such_dir/out.npy", path);
    expect_save_failure(s, "missing directory", path, CVF_F32, 2, shape2, values, "No such file");

    path_in(s, "bf16.npy", path);
    expect_save_failure(s, "bf16", path, CVF_BF16, 2, shape2, values, "unsupported dtype");
    CHECK(s, access(path, F_OK) != 0, "a refused npy_save created %s", path);
    expect_save_failure(s, "dtype 42", path, (cvf_dtype)42, 2, shape2, values, "unsupported dtype");
    expect_save_failure(s, "ndim 3", path, CVF_F32, 3, shape2, values, "dimensions");
    expect_save_failure(s, "ndim 0", path, CVF_F32, 0, shape2, values, "dimensions");
    expect_save_failure(s, "NULL shape", path, CVF_F32, 1, NULL, values, "shape");
    const int64_t negative[2] = {2, -1};
    expect_save_failure(s, "negative shape", path, CVF_F32, 2, negative, values, "negative");
    const int64_t huge[2] = {INT64_C(4611686018427387904), 8};
    expect_save_failure(s, "overflowing shape", path, CVF_F32, 2, huge, values, "overflow");
    expect_save_failure(s, "NULL data", path, CVF_F32, 2, shape2, NULL, "no data");
    CHECK(s, access(path, F_OK) != 0, "a refused npy_save created %s", path);

    char err[ERR_LEN] = "";
    const int64_t empty[1] = {0};
    path_in(s, "nulldata_empty.npy", path);
    CHECK(s, npy_save(path, CVF_F16, 1, empty, NULL, err, sizeof err) == 0, "NULL data with no elements: %s", err);

    if (access("/dev/full", W_OK) == 0) {
        expect_save_failure(s, "/dev/full (buffered)", "/dev/full", CVF_F32, 2, shape2, values, "No space left");
        size_t count = (size_t)1 << 20;
        float *big = calloc(count, sizeof *big);
        const int64_t big_shape[1] = {(int64_t)count};
        if (big != NULL)
            expect_save_failure(s, "/dev/full (large write)", "/dev/full", CVF_F32, 1, big_shape, big, "No space left");
        free(big);
    }

    CHECK(s, npy_save(NULL, CVF_F32, 2, shape2, values, err, sizeof err) == -1 && strstr(err, "no path") != NULL,
          "NULL path: \"%s\"", err);
}

/* ---- small API edges ---------------------------------------------------------------------- */

/* npy_array_free on NULL, a zeroed struct, and twice; views of a zeroed struct; NULL out / err
 * and a tiny err buffer. */
static void test_api_edges(suite *s)
{
    npy_array zero;
    memset(&zero, 0, sizeof zero);
    npy_array_free(NULL);
    npy_array_free(&zero);
    CHECK(s, is_zeroed(&zero), "npy_array_free changed a zeroed struct");

    char path[PATH_LEN], err[ERR_LEN];
    path_in(s, "edge.npy", path);
    const int64_t shape[1] = {3};
    const double values[3] = {1, 2, 3};
    npy_save(path, CVF_F64, 1, shape, values, err, sizeof err);
    npy_array a;
    if (expect_load(s, "edge", path, &a) == 0) {
        npy_array_free(&a);
        CHECK(s, is_zeroed(&a), "npy_array_free did not zero the struct");
        npy_array_free(&a);
        CHECK(s, is_zeroed(&a), "a second npy_array_free changed the struct");
    }

    cvf_matrix m = npy_array_matrix(&zero);
    CHECK(s, m.data == NULL && m.rows == 0 && m.cols == 0, "matrix view of a zeroed array is not empty");
    cvf_vector v = npy_array_vector(&zero);
    CHECK(s, v.data == NULL && v.length == 0, "vector view of a zeroed array is not empty");
    m = npy_array_matrix(NULL);
    v = npy_array_vector(NULL);
    CHECK(s, m.data == NULL && m.rows == 0 && v.data == NULL && v.length == 0, "views of NULL are not empty");

    char missing[PATH_LEN];
    path_in(s, "missing_edge.npy", missing);
    CHECK(s, npy_load(missing, &a, NULL, 0) == -1 && is_zeroed(&a), "npy_load with no err buffer");
    char tiny[6];
    memset(tiny, 'x', sizeof tiny);
    CHECK(s,
          npy_load(missing, &a, tiny, sizeof tiny) == -1 && memchr(tiny, '\0', sizeof tiny) != NULL &&
              strncmp(tiny, missing, sizeof tiny - 1) == 0,
          "npy_load with a 6-byte err buffer: not a terminated prefix of the message");
    CHECK(s, npy_load(path, NULL, err, sizeof err) == -1 && message_ok(err, path, "no output"),
          "npy_load with NULL out: \"%s\"", err);
    CHECK(s, npy_load(NULL, &a, err, sizeof err) == -1 && is_zeroed(&a) && strstr(err, "no path") != NULL,
          "npy_load with NULL path: \"%s\"", err);

    /* A 0-element array still has a usable, aligned data pointer. */
    const int64_t empty_shape[2] = {0, 5};
    path_in(s, "edge_empty.npy", path);
    npy_save(path, CVF_F32, 2, empty_shape, NULL, err, sizeof err);
    if (expect_load(s, "edge empty", path, &a) == 0) {
        CHECK(s, a.nbytes == 0 && a.shape[0] == 0 && a.shape[1] == 5, "empty array: nbytes %zu", a.nbytes);
        m = npy_array_matrix(&a);
        CHECK(s, m.rows == 0 && m.cols == 5 && m.data == a.data, "empty array: view %lld x %lld", (long long)m.rows,
              (long long)m.cols);
        npy_array_free(&a);
    }
}

int main(void)
{
    suite s;
    memset(&s, 0, sizeof s);
    strcpy(s.dir, "/tmp/test_npy.XXXXXX");
    if (mkdtemp(s.dir) == NULL) {
        fprintf(stderr, "test_npy: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_round_trips(&s);
    test_version_2(&s);
    test_version_3(&s);
    test_fortran_order(&s);
    test_header_variants(&s);
    test_bad_preambles(&s);
    test_bad_headers(&s);
    test_bad_data_sizes(&s);
    test_pipe(&s);
    test_fifo(&s);
    test_memory(&s);
    test_sweeps(&s);
    test_save_failures(&s);
    test_api_edges(&s);
    remove_temp_dir(&s);
    printf("test_npy: %d passed, %d failed\n", s.passed, s.failed);
    return s.failed == 0 && s.passed > 0 ? 0 : 1;
}
