/*
 * NumPy .npy reader and writer: the contract is in npy.h.
 *
 * File layout (all versions): the magic string "\x93NUMPY", one byte major and one byte minor
 * version, the header length (2 bytes little-endian for version 1.0, 4 bytes for 2.0 and 3.0),
 * the header (a Python dict literal with the keys 'descr', 'fortran_order' and 'shape', padded
 * with spaces and ended by '\n'), then the raw data.
 *
 * The header is parsed here by a small recursive-descent parser that accepts exactly the subset
 * of Python literal syntax a .npy header uses: single or double quoted strings (no escapes),
 * True/False, and tuples of integers (with the optional trailing comma, and the 'L' suffix of
 * files written by Python 2), with any whitespace between tokens.
 *
 * Decisions the header leaves open:
 *  - A loaded array with no elements still gets a non-NULL data pointer (a 64-byte block) and
 *    nbytes 0, so data is never NULL after a successful npy_load.
 *  - The allocation is rounded up to a multiple of 64 bytes; the bytes past nbytes are zero.
 *  - Headers longer than NPY_MAX_HEADER_LEN bytes are rejected (NumPy writes ~128 bytes).
 *  - descr '=f4' (native byte order) is rejected: in a file it does not say which order it is.
 *  - A failed npy_save may leave a partially written file behind (it is not removed: the path
 *    may be something like /dev/full that must not be unlinked).
 *  - npy_array_vector of a 2-D array covers all its elements in storage order, stride 1.
 */
#include "npy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
#define NPY_MAX_HEADER_LEN (UINT32_C(1) << 20)
#define NPY_MAX_KEY_LEN 63
#define NPY_MAX_DESCR_LEN 31
#define NPY_SHAPE_TEXT_LEN 64
#define NPY_SAVE_HEADER_CAPACITY 256
/* Bytes after the data read from a stream (a pipe) before giving up counting them: a writer that
 * never stops (e.g. a FIFO fed by `yes`) must not make the reader loop forever. */
#define NPY_MAX_TRAILING_COUNT (UINT64_C(1) << 20)
/* A stream's data is read in chunks of at most this many bytes into a growing buffer, so that a
 * header claiming a huge array costs memory only for the bytes that actually arrive. */
#define NPY_STREAM_CHUNK (size_t)(1u << 20)

#if defined(__GNUC__)
#define NPY_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define NPY_PRINTF(fmt_index, first_arg)
#endif

/* Where the messages of one call go: every message is "PATH: problem". */
typedef struct error_sink {
    const char *path;
    char *err;
    size_t errlen;
} error_sink;

/* An open input: a file, or bytes in memory (npy_load_memory; file NULL). */
typedef struct npy_source {
    FILE *file;
    const unsigned char *bytes; /* memory input: bytes[0, size) read from pos on */
    size_t pos;
    const error_sink *sink;
    int64_t size; /* bytes in the file, or -1 when it is not a regular file (a pipe) */
} npy_source;

/* What the fixed-size part of the file says. */
typedef struct npy_preamble {
    unsigned major;
    unsigned minor;
    uint32_t header_len;
    int64_t data_offset; /* preamble + header */
} npy_preamble;

/* The values of the header dict. */
typedef struct header_fields {
    char descr[NPY_MAX_DESCR_LEN + 1];
    int fortran_order;
    int ndim; /* number of entries in 'shape'; only the first NPY_MAX_DIMS are kept */
    int64_t shape[NPY_MAX_DIMS];
    int have_descr;
    int have_fortran_order;
    int have_shape;
} header_fields;

/* Cursor over the NUL-terminated header text. */
typedef struct header_parser {
    const char *text;
    size_t pos;
    const error_sink *sink;
} header_parser;

static int set_error(const error_sink *sink, const char *fmt, ...) NPY_PRINTF(2, 3);
static int header_error(const header_parser *p, const char *fmt, ...) NPY_PRINTF(2, 3);

/* ---- errors ------------------------------------------------------------------------------- */

/* Returns the path as shown in messages. */
static const char *shown_path(const char *path)
{
    return path != NULL ? path : "(null)";
}

/* Returns the text of an errno value, never "Success". */
static const char *errno_text(int error)
{
    return error != 0 ? strerror(error) : "unknown I/O error";
}

/* Writes "PATH: problem" into the sink's buffer (truncated to fit; nothing when there is no
 * buffer). Always returns -1 so that callers can `return set_error(...)`. */
static int set_error(const error_sink *sink, const char *fmt, ...)
{
    if (sink->err == NULL || sink->errlen == 0)
        return -1;
    int prefix = snprintf(sink->err, sink->errlen, "%s: ", shown_path(sink->path));
    if (prefix < 0) {
        sink->err[0] = '\0';
        return -1;
    }
    if ((size_t)prefix >= sink->errlen)
        return -1; /* the path alone filled the buffer; snprintf has terminated it */
    va_list args;
    va_start(args, fmt);
    vsnprintf(sink->err + prefix, sink->errlen - (size_t)prefix, fmt, args);
    va_end(args);
    return -1;
}

/* Returns whether the host stores integers little-endian (the only order this file handles). */
static int host_is_little_endian(void)
{
    const uint16_t probe = 1;
    unsigned char first;
    memcpy(&first, &probe, 1);
    return first == 1;
}

/* ---- sizes and shapes --------------------------------------------------------------------- */

/* Formats a shape as NumPy prints a tuple: "(5,)" or "(3, 4)". */
static void format_shape(char *buf, size_t size, int ndim, const int64_t *shape)
{
    if (ndim == 1)
        snprintf(buf, size, "(%" PRId64 ",)", shape[0]);
    else
        snprintf(buf, size, "(%" PRId64 ", %" PRId64 ")", shape[0], shape[1]);
}

/* Computes the byte size of an array of non-negative shape[ndim] and element size elem.
 * Returns 0, or -1 with a message when it does not fit in size_t / int64_t (with room to round
 * the allocation up to NPY_ALIGN). A zero dimension makes the size 0 whatever the others are. */
static int checked_byte_size(const error_sink *sink, int ndim, const int64_t *shape, size_t elem, size_t *nbytes)
{
    uint64_t limit = (uint64_t)INT64_MAX;
    if ((uint64_t)SIZE_MAX - (NPY_ALIGN - 1) < limit)
        limit = (uint64_t)SIZE_MAX - (NPY_ALIGN - 1);
    uint64_t total = elem;
    int overflow = 0;
    for (int i = 0; i < ndim; i++) {
        uint64_t dim = (uint64_t)shape[i];
        if (dim == 0) {
            *nbytes = 0;
            return 0;
        }
        if (total > limit / dim)
            overflow = 1;
        else
            total *= dim;
    }
    if (overflow) {
        char text[NPY_SHAPE_TEXT_LEN];
        format_shape(text, sizeof text, ndim, shape);
        return set_error(sink, "shape %s with %zu-byte elements is too large: its byte size overflows", text, elem);
    }
    *nbytes = (size_t)total;
    return 0;
}

/* Returns a 64-byte aligned block of at least max(nbytes, 1) bytes whose bytes past nbytes are
 * zero, or NULL when out of memory. Free it with free(). */
static void *alloc_aligned(size_t nbytes)
{
    size_t rounded = nbytes == 0 ? NPY_ALIGN : (nbytes + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
    unsigned char *block = aligned_alloc(NPY_ALIGN, rounded);
    if (block != NULL)
        memset(block + nbytes, 0, rounded - nbytes);
    return block;
}

/* ---- header parser ------------------------------------------------------------------------ */

/* Writes "PATH: malformed header: problem (at byte N of the header)" and returns -1. */
static int header_error(const header_parser *p, const char *fmt, ...)
{
    char problem[256];
    va_list args;
    va_start(args, fmt);
    vsnprintf(problem, sizeof problem, fmt, args);
    va_end(args);
    return set_error(p->sink, "malformed header: %s (at byte %zu of the header)", problem, p->pos);
}

/* Returns the character under the cursor ('\0' at the end). */
static char peek_char(const header_parser *p)
{
    return p->text[p->pos];
}

/* Returns whether c is Python whitespace. */
static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Returns whether c may appear in a Python identifier or number. */
static int is_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Moves the cursor past whitespace. */
static void skip_spaces(header_parser *p)
{
    while (is_space(peek_char(p)))
        p->pos++;
}

/* Describes the character under the cursor for a message: "'x'", "byte 0x07", "the end". */
static void describe_next(const header_parser *p, char *buf, size_t size)
{
    unsigned char c = (unsigned char)peek_char(p);
    if (c == '\0')
        snprintf(buf, size, "the end of the header");
    else if (c == '\'')
        snprintf(buf, size, "a quote \"'\"");
    else if (c >= 0x20 && c < 0x7f)
        snprintf(buf, size, "'%c'", (char)c);
    else
        snprintf(buf, size, "byte 0x%02x", (unsigned)c);
}

/* Skips whitespace, then consumes the character c, or fails naming what was expected. */
static int expect_char(header_parser *p, char c, const char *where)
{
    skip_spaces(p);
    if (peek_char(p) == c) {
        p->pos++;
        return 0;
    }
    char found[32];
    describe_next(p, found, sizeof found);
    return header_error(p, "expected '%c' %s, found %s", c, where, found);
}

/* Parses a quoted string ('...' or "...", no escapes, no control characters) into buf. */
static int parse_string(header_parser *p, char *buf, size_t size, const char *what)
{
    skip_spaces(p);
    char quote = peek_char(p);
    if (quote != '\'' && quote != '"') {
        char found[32];
        describe_next(p, found, sizeof found);
        return header_error(p, "expected a quoted string for %s, found %s", what, found);
    }
    p->pos++;
    size_t len = 0;
    for (;;) {
        unsigned char c = (unsigned char)peek_char(p);
        if (c == '\0')
            return header_error(p, "unterminated string in %s", what);
        if (c == '\\')
            return header_error(p, "escape sequences are not supported (in %s)", what);
        if (c < 0x20 || c == 0x7f)
            return header_error(p, "control character 0x%02x in %s", (unsigned)c, what);
        p->pos++;
        if (c == (unsigned char)quote)
            break;
        if (len + 1 >= size)
            return header_error(p, "%s is longer than %zu characters", what, size - 1);
        buf[len++] = (char)c;
    }
    buf[len] = '\0';
    return 0;
}

/* Parses the value of 'fortran_order': the Python literal True or False. */
static int parse_bool(header_parser *p, int *value)
{
    skip_spaces(p);
    size_t start = p->pos;
    while (is_word_char(peek_char(p)))
        p->pos++;
    size_t len = p->pos - start;
    if (len == 4 && memcmp(p->text + start, "True", 4) == 0) {
        *value = 1;
        return 0;
    }
    if (len == 5 && memcmp(p->text + start, "False", 5) == 0) {
        *value = 0;
        return 0;
    }
    if (len == 0) {
        char found[32];
        describe_next(p, found, sizeof found);
        return header_error(p, "'fortran_order' must be True or False, found %s", found);
    }
    return header_error(p, "'fortran_order' must be True or False, found %.*s", (int)(len > 40 ? 40 : len),
                        p->text + start);
}

/* Parses one entry of 'shape': an optionally signed decimal integer, with an optional Python 2
 * 'L' suffix. Negative values and values beyond int64_t are errors. */
static int parse_shape_entry(header_parser *p, int64_t *value)
{
    skip_spaces(p);
    int negative = 0;
    char sign = peek_char(p);
    if (sign == '-' || sign == '+') {
        negative = sign == '-';
        p->pos++;
        skip_spaces(p);
    }
    size_t start = p->pos;
    uint64_t magnitude = 0;
    int too_large = 0;
    for (char c = peek_char(p); c >= '0' && c <= '9'; c = peek_char(p)) {
        unsigned digit = (unsigned)(c - '0');
        if (magnitude > (UINT64_MAX - digit) / 10)
            too_large = 1;
        else
            magnitude = magnitude * 10 + digit;
        p->pos++;
    }
    size_t len = p->pos - start;
    if (len == 0) {
        char found[32];
        describe_next(p, found, sizeof found);
        return header_error(p, "expected an integer in 'shape', found %s", found);
    }
    if (peek_char(p) == 'L' || peek_char(p) == 'l')
        p->pos++;
    int shown = (int)(len > 40 ? 40 : len);
    const char *ellipsis = len > 40 ? "..." : "";
    if (negative && (too_large || magnitude != 0))
        return set_error(p->sink, "shape entry -%.*s%s is negative", shown, p->text + start, ellipsis);
    if (too_large || magnitude > (uint64_t)INT64_MAX)
        return set_error(p->sink, "shape entry %.*s%s is too large (more than %" PRId64 ")", shown, p->text + start,
                         ellipsis, INT64_MAX);
    *value = (int64_t)magnitude;
    return 0;
}

/* Parses the value of 'shape': a tuple of integers, "()" or "(5,)" or "(3, 4)" or "(3, 4,)".
 * Counts every entry into fields->ndim but keeps only the first NPY_MAX_DIMS. */
static int parse_shape(header_parser *p, header_fields *fields)
{
    skip_spaces(p);
    if (peek_char(p) != '(') {
        char found[32];
        describe_next(p, found, sizeof found);
        return header_error(p, "'shape' must be a tuple, found %s", found);
    }
    p->pos++;
    fields->ndim = 0;
    skip_spaces(p);
    if (peek_char(p) == ')') {
        p->pos++;
        return 0;
    }
    int trailing_comma = 0;
    for (;;) {
        int64_t entry = 0;
        if (parse_shape_entry(p, &entry) != 0)
            return -1;
        if (fields->ndim < NPY_MAX_DIMS)
            fields->shape[fields->ndim] = entry;
        fields->ndim++; /* bounded by the header length limit */
        skip_spaces(p);
        char c = peek_char(p);
        if (c == ',') {
            p->pos++;
            skip_spaces(p);
            if (peek_char(p) == ')') {
                p->pos++;
                trailing_comma = 1;
                break;
            }
            continue;
        }
        if (c == ')') {
            p->pos++;
            break;
        }
        char found[32];
        describe_next(p, found, sizeof found);
        return header_error(p, "expected ',' or ')' in 'shape', found %s", found);
    }
    if (fields->ndim == 1 && !trailing_comma)
        return header_error(p,
                            "'shape' (%" PRId64 ") is an integer, not a tuple: a 1-D shape is written (%" PRId64 ",)",
                            fields->shape[0], fields->shape[0]);
    return 0;
}

/* Parses the value of 'descr': a string (a list means a structured dtype, which is refused). */
static int parse_descr(header_parser *p, header_fields *fields)
{
    skip_spaces(p);
    if (peek_char(p) == '[')
        return set_error(p->sink, "unsupported dtype: structured arrays (a list 'descr') are not supported");
    return parse_string(p, fields->descr, sizeof fields->descr, "'descr'");
}

/* Parses the value of one key, rejecting unknown and repeated keys. */
static int parse_value(header_parser *p, const char *key, header_fields *fields)
{
    int *seen;
    if (strcmp(key, "descr") == 0)
        seen = &fields->have_descr;
    else if (strcmp(key, "fortran_order") == 0)
        seen = &fields->have_fortran_order;
    else if (strcmp(key, "shape") == 0)
        seen = &fields->have_shape;
    else
        return set_error(p->sink, "header has an unknown key '%s' (expected 'descr', 'fortran_order', 'shape')", key);
    if (*seen)
        return set_error(p->sink, "header has a duplicate key '%s'", key);
    *seen = 1;
    if (seen == &fields->have_descr)
        return parse_descr(p, fields);
    if (seen == &fields->have_fortran_order)
        return parse_bool(p, &fields->fortran_order);
    return parse_shape(p, fields);
}

/* Parses the whole header: one dict literal, then only whitespace. */
static int parse_dict(header_parser *p, header_fields *fields)
{
    skip_spaces(p);
    if (peek_char(p) != '{') {
        char found[32];
        describe_next(p, found, sizeof found);
        return set_error(p->sink, "header is not a dict literal (it starts with %s)", found);
    }
    p->pos++;
    skip_spaces(p);
    if (peek_char(p) == '}') {
        p->pos++;
    } else {
        for (;;) {
            char key[NPY_MAX_KEY_LEN + 1];
            if (parse_string(p, key, sizeof key, "a key") != 0)
                return -1;
            if (expect_char(p, ':', "after a key") != 0)
                return -1;
            if (parse_value(p, key, fields) != 0)
                return -1;
            skip_spaces(p);
            char c = peek_char(p);
            if (c == ',') {
                p->pos++;
                skip_spaces(p);
                if (peek_char(p) == '}') {
                    p->pos++;
                    break;
                }
                continue;
            }
            if (c == '}') {
                p->pos++;
                break;
            }
            char found[32];
            describe_next(p, found, sizeof found);
            return header_error(p, "expected ',' or '}' after the value of '%s', found %s", key, found);
        }
    }
    skip_spaces(p);
    if (peek_char(p) != '\0') {
        char found[32];
        describe_next(p, found, sizeof found);
        return header_error(p, "unexpected %s after the dict", found);
    }
    return 0;
}

/* Parses header text into fields and checks that every key was present. */
static int parse_header(const error_sink *sink, const char *text, header_fields *fields)
{
    memset(fields, 0, sizeof *fields);
    header_parser parser = {text, 0, sink};
    if (parse_dict(&parser, fields) != 0)
        return -1;
    if (!fields->have_descr)
        return set_error(sink, "header is missing the 'descr' key");
    if (!fields->have_fortran_order)
        return set_error(sink, "header is missing the 'fortran_order' key");
    if (!fields->have_shape)
        return set_error(sink, "header is missing the 'shape' key");
    return 0;
}

/* ---- header semantics --------------------------------------------------------------------- */

/* Maps a descr to a dtype: only little-endian '<f2', '<f4', '<f8' are accepted. */
static int dtype_from_descr(const error_sink *sink, const char *descr, cvf_dtype *dtype, size_t *elem)
{
    static const struct {
        const char *code;
        cvf_dtype dtype;
        size_t size;
    } known[] = {{"f2", CVF_F16, 2}, {"f4", CVF_F32, 4}, {"f8", CVF_F64, 8}};
    char order = descr[0];
    for (size_t i = 0; order != '\0' && i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(descr + 1, known[i].code) != 0)
            continue;
        if (order == '<') {
            *dtype = known[i].dtype;
            *elem = known[i].size;
            return 0;
        }
        if (order == '>')
            return set_error(sink, "big-endian data is not supported (descr '%s')", descr);
        if (order == '=')
            return set_error(sink, "descr '%s' has native byte order ('='), which does not say the file's byte order",
                             descr);
        break;
    }
    return set_error(sink, "unsupported dtype '%s' (expected '<f2', '<f4' or '<f8')", descr);
}

/* Checks the parsed header and fills the array's description and its byte size (no data). */
static int describe_array(const error_sink *sink, const header_fields *fields, npy_array *array, size_t *nbytes)
{
    size_t elem = 0;
    if (dtype_from_descr(sink, fields->descr, &array->dtype, &elem) != 0)
        return -1;
    if (fields->ndim == 0)
        return set_error(sink, "expected 1 or 2 dimensions, file has a 0-d (scalar) shape ()");
    if (fields->ndim > NPY_MAX_DIMS)
        return set_error(sink, "expected 1 or 2 dimensions, file has %d", fields->ndim);
    array->ndim = fields->ndim;
    for (int i = 0; i < fields->ndim; i++)
        array->shape[i] = fields->shape[i];
    array->fortran_order = fields->fortran_order;
    return checked_byte_size(sink, array->ndim, array->shape, elem, nbytes);
}

/* ---- reading ------------------------------------------------------------------------------ */

/* Reads up to len bytes into buf; *got says how many arrived. Returns -1 with a message only
 * for a read error: a short read at the end of the file is for the caller to word. */
static int read_bytes(npy_source *src, void *buf, size_t len, size_t *got)
{
    if (src->file == NULL) {
        size_t left = (size_t)src->size - src->pos;
        *got = len < left ? len : left;
        if (*got > 0)
            memcpy(buf, src->bytes + src->pos, *got);
        src->pos += *got;
        return 0;
    }
    errno = 0;
    *got = len == 0 ? 0 : fread(buf, 1, len, src->file);
    if (*got < len && ferror(src->file))
        return set_error(src->sink, "read error: %s", errno_text(errno));
    return 0;
}

/* Opens path for reading and finds its size. Directories are refused. The open itself never
 * blocks: a FIFO is opened non-blocking (with no writer, an ordinary open would wait forever),
 * then read in blocking mode, where a FIFO without a writer reads as empty. */
static int open_source(const error_sink *sink, const char *path, npy_source *src)
{
    memset(src, 0, sizeof *src);
    src->sink = sink;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return set_error(sink, "cannot open: %s", errno_text(errno));
    struct stat info;
    if (fstat(fd, &info) != 0) {
        int error = errno;
        close(fd);
        return set_error(sink, "cannot stat: %s", errno_text(error));
    }
    if (S_ISDIR(info.st_mode)) {
        close(fd);
        return set_error(sink, "is a directory, not a .npy file");
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int error = errno;
        close(fd);
        return set_error(sink, "cannot read: %s", errno_text(error));
    }
    src->file = fdopen(fd, "rb");
    if (src->file == NULL) {
        int error = errno;
        close(fd);
        return set_error(sink, "cannot open: %s", errno_text(error));
    }
    src->size = S_ISREG(info.st_mode) ? (int64_t)info.st_size : -1;
    return 0;
}

/* Reads the magic string, the version and the header length. */
static int read_preamble(npy_source *src, npy_preamble *pre)
{
    unsigned char bytes[12];
    size_t got;
    if (read_bytes(src, bytes, 8, &got) != 0)
        return -1;
    if (got == 0 && src->size < 0)
        return set_error(src->sink, "no data (an empty pipe, or a FIFO with no writer), not a .npy file");
    if (got == 0)
        return set_error(src->sink, "file is empty, not a .npy file");
    if (got < NPY_MAGIC_LEN || memcmp(bytes, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return set_error(src->sink, "not a .npy file (bad magic string)");
    if (got < 8)
        return set_error(src->sink, "file is truncated inside the format version");
    pre->major = bytes[6];
    pre->minor = bytes[7];
    if (pre->major < 1 || pre->major > 3 || pre->minor != 0)
        return set_error(src->sink, "unsupported .npy format version %u.%u (expected 1.0, 2.0 or 3.0)", pre->major,
                         pre->minor);
    size_t len_bytes = pre->major == 1 ? 2 : 4;
    if (read_bytes(src, bytes + 8, len_bytes, &got) != 0)
        return -1;
    if (got < len_bytes)
        return set_error(src->sink, "file is truncated inside the header length");
    pre->header_len = (uint32_t)bytes[8] | (uint32_t)bytes[9] << 8;
    if (len_bytes == 4)
        pre->header_len |= (uint32_t)bytes[10] << 16 | (uint32_t)bytes[11] << 24;
    pre->data_offset = 8 + (int64_t)len_bytes + (int64_t)pre->header_len;
    return 0;
}

/* Reads the header into a new NUL-terminated string (free it), or returns NULL with a message. */
static char *read_header_text(npy_source *src, const npy_preamble *pre)
{
    if (src->size >= 0 && pre->data_offset > src->size) {
        set_error(src->sink, "header length %" PRIu32 " goes beyond the end of the file (%" PRId64 " bytes)",
                  pre->header_len, src->size);
        return NULL;
    }
    if (pre->header_len > NPY_MAX_HEADER_LEN) {
        set_error(src->sink, "header length %" PRIu32 " exceeds the limit of %" PRIu32 " bytes", pre->header_len,
                  NPY_MAX_HEADER_LEN);
        return NULL;
    }
    char *text = malloc((size_t)pre->header_len + 1);
    if (text == NULL) {
        set_error(src->sink, "out of memory reading a %" PRIu32 "-byte header", pre->header_len);
        return NULL;
    }
    size_t got;
    if (read_bytes(src, text, pre->header_len, &got) != 0) {
        free(text);
        return NULL;
    }
    if (got < pre->header_len) {
        set_error(src->sink, "header length %" PRIu32 " goes beyond the end of the file (%zu header bytes present)",
                  pre->header_len, got);
        free(text);
        return NULL;
    }
    text[got] = '\0';
    if (memchr(text, '\0', got) != NULL) {
        set_error(src->sink, "malformed header: it contains a NUL byte");
        free(text);
        return NULL;
    }
    return text;
}

/* For a regular file, checks before allocating that exactly nbytes follow the header. */
static int check_data_size(const npy_source *src, const npy_preamble *pre, size_t nbytes)
{
    if (src->size < 0)
        return 0; /* not a regular file: read_data and check_end_of_file find out */
    uint64_t available = (uint64_t)(src->size - pre->data_offset);
    if (available < nbytes)
        return set_error(src->sink, "file is truncated: expected %zu data bytes, found %" PRIu64, nbytes, available);
    if (available > nbytes)
        return set_error(src->sink, "file has %" PRIu64 " bytes after the data (expected exactly %zu data bytes)",
                         available - nbytes, nbytes);
    return 0;
}

/* Checks that the file ends right after nbytes of data. A stream is read until its end, but no
 * further than NPY_MAX_TRAILING_COUNT extra bytes (a writer may never stop). */
static int check_end_of_file(npy_source *src, size_t nbytes)
{
    unsigned char chunk[4096];
    uint64_t extra = 0;
    size_t got;
    do {
        if (read_bytes(src, chunk, sizeof chunk, &got) != 0)
            return -1;
        extra += got;
    } while (got == sizeof chunk && extra <= NPY_MAX_TRAILING_COUNT);
    if (extra > NPY_MAX_TRAILING_COUNT)
        return set_error(src->sink,
                         "file has more than %" PRIu64 " bytes after the data (expected exactly %zu data bytes)",
                         NPY_MAX_TRAILING_COUNT, nbytes);
    if (extra > 0)
        return set_error(src->sink, "file has %" PRIu64 " bytes after the data (expected exactly %zu data bytes)",
                         extra, nbytes);
    return 0;
}

/* Reads nbytes of a stream (whose size is not known in advance) into a growing buffer, then into
 * a new 64-byte aligned block, so that a header claiming a huge array costs memory only for the
 * bytes that arrive. Returns NULL with a message. */
static void *read_stream_data(npy_source *src, size_t nbytes)
{
    unsigned char *buffer = NULL;
    size_t have = 0;
    while (have < nbytes) {
        size_t want = nbytes - have < NPY_STREAM_CHUNK ? nbytes - have : NPY_STREAM_CHUNK;
        unsigned char *grown = realloc(buffer, have + want);
        if (grown == NULL) {
            free(buffer);
            set_error(src->sink, "out of memory: cannot allocate %zu bytes of data", have + want);
            return NULL;
        }
        buffer = grown;
        size_t got;
        if (read_bytes(src, buffer + have, want, &got) != 0) {
            free(buffer);
            return NULL;
        }
        have += got;
        if (got < want) {
            free(buffer);
            set_error(src->sink, "file is truncated: expected %zu data bytes, found %zu", nbytes, have);
            return NULL;
        }
    }
    void *data = alloc_aligned(nbytes);
    if (data == NULL)
        set_error(src->sink, "out of memory: cannot allocate %zu bytes of data", nbytes);
    else if (nbytes > 0)
        memcpy(data, buffer, nbytes);
    free(buffer);
    return data;
}

/* Reads the nbytes of data into a new 64-byte aligned block, or returns NULL with a message. */
static void *read_data(npy_source *src, size_t nbytes)
{
    if (src->size < 0) {
        void *data = read_stream_data(src, nbytes);
        if (data != NULL && check_end_of_file(src, nbytes) != 0) {
            free(data);
            return NULL;
        }
        return data;
    }
    void *data = alloc_aligned(nbytes);
    if (data == NULL) {
        set_error(src->sink, "out of memory: cannot allocate %zu bytes of data", nbytes);
        return NULL;
    }
    size_t got;
    if (read_bytes(src, data, nbytes, &got) != 0) {
        free(data);
        return NULL;
    }
    if (got < nbytes) {
        set_error(src->sink, "file is truncated: expected %zu data bytes, found %zu", nbytes, got);
        free(data);
        return NULL;
    }
    if (check_end_of_file(src, nbytes) != 0) {
        free(data);
        return NULL;
    }
    return data;
}

/* Reads a whole .npy file from an open source into *out (left untouched on failure). */
static int load_from_source(npy_source *src, npy_array *out)
{
    npy_preamble pre;
    memset(&pre, 0, sizeof pre);
    if (read_preamble(src, &pre) != 0)
        return -1;
    char *text = read_header_text(src, &pre);
    if (text == NULL)
        return -1;
    header_fields fields;
    int parsed = parse_header(src->sink, text, &fields);
    free(text);
    if (parsed != 0)
        return -1;
    npy_array array;
    memset(&array, 0, sizeof array);
    size_t nbytes = 0;
    if (describe_array(src->sink, &fields, &array, &nbytes) != 0)
        return -1;
    if (check_data_size(src, &pre, nbytes) != 0)
        return -1;
    array.data = read_data(src, nbytes);
    if (array.data == NULL)
        return -1;
    array.nbytes = nbytes;
    *out = array;
    return 0;
}

/* Loads path into *out (see npy.h). */
int npy_load(const char *path, npy_array *out, char *err, size_t errlen)
{
    const error_sink sink = {path, err, errlen};
    if (out == NULL)
        return set_error(&sink, "no output array given");
    memset(out, 0, sizeof *out);
    if (path == NULL)
        return set_error(&sink, "no path given");
    if (!host_is_little_endian())
        return set_error(&sink, "big-endian hosts are not supported");
    npy_source src;
    if (open_source(&sink, path, &src) != 0)
        return -1;
    int result = load_from_source(&src, out);
    fclose(src.file); /* read-only: a close error loses nothing */
    return result;
}

/* Parses len bytes at bytes as a .npy file into *out (see npy.h). */
int npy_load_memory(const void *bytes, size_t len, const char *name, npy_array *out, char *err, size_t errlen)
{
    const error_sink sink = {name, err, errlen};
    if (out == NULL)
        return set_error(&sink, "no output array given");
    memset(out, 0, sizeof *out);
    if (bytes == NULL && len > 0)
        return set_error(&sink, "no bytes given for a %zu-byte buffer", len);
    if ((uint64_t)len > (uint64_t)INT64_MAX)
        return set_error(&sink, "buffer of %zu bytes is too large", len);
    if (!host_is_little_endian())
        return set_error(&sink, "big-endian hosts are not supported");
    npy_source src;
    memset(&src, 0, sizeof src);
    src.bytes = bytes;
    src.sink = &sink;
    src.size = (int64_t)len;
    return load_from_source(&src, out);
}

/* ---- writing ------------------------------------------------------------------------------ */

/* Returns the descr and element size of a dtype npy_save writes, or NULL for any other. */
static const char *descr_of_dtype(cvf_dtype dtype, size_t *elem)
{
    switch (dtype) {
    case CVF_F16: *elem = 2; return "<f2";
    case CVF_F32: *elem = 4; return "<f4";
    case CVF_F64: *elem = 8; return "<f8";
    default: return NULL;
    }
}

/* Returns a short name of a dtype for messages (without calling into the library). */
static const char *dtype_label(cvf_dtype dtype)
{
    switch (dtype) {
    case CVF_F32: return "f32";
    case CVF_F16: return "f16";
    case CVF_BF16: return "bf16";
    case CVF_F64: return "f64";
    default: return "unknown";
    }
}

/* Builds the version 1.0 preamble and header into buf as NumPy writes it, padded with spaces and
 * ended by '\n' so that the data starts at a multiple of NPY_ALIGN. Returns its length, or 0 if
 * it does not fit in size bytes (it always does with NPY_SAVE_HEADER_CAPACITY). */
static size_t build_header(char *buf, size_t size, const char *descr, int ndim, const int64_t *shape)
{
    char shape_text[NPY_SHAPE_TEXT_LEN];
    format_shape(shape_text, sizeof shape_text, ndim, shape);
    const size_t preamble = 10;
    int dict_len = snprintf(buf + preamble, size - preamble, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                            descr, shape_text);
    if (dict_len < 0)
        return 0;
    size_t used = preamble + (size_t)dict_len + 1; /* + '\n' */
    size_t total = (used + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
    if (total > size)
        return 0;
    memset(buf + used - 1, ' ', total - used);
    buf[total - 1] = '\n';
    size_t header_len = total - preamble;
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)(header_len & 0xff);
    buf[9] = (char)(header_len >> 8);
    return total;
}

/* Writes len bytes to file, or fails with a message. */
static int write_bytes(const error_sink *sink, FILE *file, const void *data, size_t len)
{
    if (len == 0)
        return 0;
    errno = 0;
    if (fwrite(data, 1, len, file) != len)
        return set_error(sink, "write failed: %s", errno_text(errno));
    return 0;
}

/* Checks npy_save's arguments and computes the data's byte size. */
static int check_save_arguments(const error_sink *sink, int ndim, const int64_t *shape, const void *data, size_t elem,
                                size_t *nbytes)
{
    if (ndim < 1 || ndim > NPY_MAX_DIMS)
        return set_error(sink, "expected 1 or 2 dimensions, got %d", ndim);
    if (shape == NULL)
        return set_error(sink, "no shape given");
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0)
            return set_error(sink, "shape entry %" PRId64 " is negative", shape[i]);
    if (checked_byte_size(sink, ndim, shape, elem, nbytes) != 0)
        return -1;
    if (*nbytes > 0 && data == NULL)
        return set_error(sink, "no data given for %zu bytes", *nbytes);
    return 0;
}

/* Writes a C-order array to path as a version 1.0 .npy file (see npy.h). */
int npy_save(const char *path, cvf_dtype dtype, int ndim, const int64_t *shape, const void *data, char *err,
             size_t errlen)
{
    const error_sink sink = {path, err, errlen};
    if (path == NULL)
        return set_error(&sink, "no path given");
    if (!host_is_little_endian())
        return set_error(&sink, "big-endian hosts are not supported");
    size_t elem = 0;
    const char *descr = descr_of_dtype(dtype, &elem);
    if (descr == NULL)
        return set_error(&sink, "unsupported dtype %s for .npy (expected f16, f32 or f64)", dtype_label(dtype));
    size_t nbytes = 0;
    if (check_save_arguments(&sink, ndim, shape, data, elem, &nbytes) != 0)
        return -1;
    char header[NPY_SAVE_HEADER_CAPACITY];
    size_t header_len = build_header(header, sizeof header, descr, ndim, shape);
    if (header_len == 0)
        return set_error(&sink, "internal error: the header does not fit in %zu bytes", sizeof header);
    FILE *file = fopen(path, "wb");
    if (file == NULL)
        return set_error(&sink, "cannot open for writing: %s", errno_text(errno));
    if (write_bytes(&sink, file, header, header_len) != 0 || write_bytes(&sink, file, data, nbytes) != 0) {
        fclose(file);
        return -1;
    }
    errno = 0;
    if (fclose(file) != 0)
        return set_error(&sink, "write failed on close: %s", errno_text(errno));
    return 0;
}

/* ---- release and views -------------------------------------------------------------------- */

/* Frees what npy_load allocated and zeroes *array (see npy.h). */
void npy_array_free(npy_array *array)
{
    if (array == NULL)
        return;
    free(array->data);
    memset(array, 0, sizeof *array);
}

/* Returns the matrix view of a loaded array: 2-D C order (rows x cols) row-major, 2-D Fortran
 * order with row_stride 1 and col_stride rows, 1-D as one row (1 x n). NULL or anything else
 * (a zeroed array) gives an empty (0 x 0) view with NULL data. */
cvf_matrix npy_array_matrix(const npy_array *array)
{
    if (array == NULL)
        return cvf_matrix_row_major(NULL, CVF_F32, 0, 0);
    if (array->ndim == 1)
        return cvf_matrix_row_major(array->data, array->dtype, 1, array->shape[0]);
    if (array->ndim != 2)
        return cvf_matrix_row_major(NULL, array->dtype, 0, 0);
    int64_t rows = array->shape[0];
    int64_t cols = array->shape[1];
    if (array->fortran_order) {
        cvf_matrix column_major = {array->data, array->dtype, rows, cols, 1, rows};
        return column_major;
    }
    return cvf_matrix_row_major(array->data, array->dtype, rows, cols);
}

/* Returns the vector view of a loaded array: 1-D gives length shape[0], stride 1; 2-D gives all
 * its elements in storage order (length rows * cols, stride 1). NULL or a zeroed array gives an
 * empty view with NULL data. */
cvf_vector npy_array_vector(const npy_array *array)
{
    if (array == NULL)
        return cvf_vector_dense(NULL, CVF_F32, 0);
    if (array->ndim == 1)
        return cvf_vector_dense(array->data, array->dtype, array->shape[0]);
    if (array->ndim != 2)
        return cvf_vector_dense(NULL, array->dtype, 0);
    int64_t rows = array->shape[0];
    int64_t cols = array->shape[1];
    if (rows <= 0 || cols <= 0)
        return cvf_vector_dense(array->data, array->dtype, 0);
    if (rows > INT64_MAX / cols) /* not from npy_load, which bounds the byte size */
        return cvf_vector_dense(NULL, array->dtype, 0);
    return cvf_vector_dense(array->data, array->dtype, rows * cols);
}
