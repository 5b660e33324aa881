/*
 * cvfuse._cvfuse: the CPython binding of the C library, on DLPack.
 *
 * Every operand arrives as an object with __dlpack__ (a NumPy array, a PyTorch / CuPy / JAX
 * tensor). The binding takes its capsule (versioned when the producer offers DLPack 1.x, the
 * legacy one otherwise), builds a cvf_matrix / cvf_vector view of the memory in place (strides in
 * elements, byte_offset applied), runs the call with the GIL released and hands the capsules back.
 * Outputs are allocated by the Python layer (python/cvfuse/__init__.py) in the caller's array
 * library and passed in, so results come back as the caller's type with no copy.
 *
 * Contexts are opaque capsules ("cvfuse.context") that the Python layer caches per thread and per
 * device; the capsule's destructor destroys the context. Nothing here holds per-call state in a
 * global.
 *
 * Workspace: when the caller passes an allocator (a callable taking a byte count and returning an
 * object with __dlpack__, e.g. torch.empty(n, dtype=torch.uint8, device=...)), the call's
 * workspace is sized with cvf_*_workspace_size, taken from that allocator and given to the context
 * (cvf_context_set_workspace) for this call only, so a framework's allocator owns it. Without one
 * (or where the library cannot size it) the context grows its own.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlpack/dlpack.h>
#include <stdint.h>
#include <string.h>

#include "cvfuse.h"

/* DLPack 1.x's versioned capsule, declared here when the installed header predates it (Debian's
 * libdlpack-dev is 0.6). The layout is DLPack's stable ABI. */
#ifndef DLPACK_MAJOR_VERSION
typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#endif

#define CONTEXT_CAPSULE "cvfuse.context"

/* ------------------------------------------------------------------------------------------ */
/* Contexts                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static void context_capsule_destroy(PyObject *capsule)
{
    cvf_context *ctx = PyCapsule_GetPointer(capsule, CONTEXT_CAPSULE);
    if (ctx)
        cvf_context_destroy(ctx);
    else
        PyErr_Clear();
}

/* context(device, index) -> capsule: a new context (CPU: all cores). */
static PyObject *py_context(PyObject *self, PyObject *args)
{
    (void)self;
    int device, index;
    if (!PyArg_ParseTuple(args, "ii", &device, &index))
        return NULL;
    if (device != CVF_DEVICE_CPU && device != CVF_DEVICE_REFERENCE && device != CVF_DEVICE_CUDA) {
        PyErr_Format(PyExc_ValueError, "cvfuse: unknown device %d", device);
        return NULL;
    }
    cvf_context_options options = {(cvf_device)device, 0, index, NULL};
    cvf_context *ctx = NULL;
    cvf_status status;
    Py_BEGIN_ALLOW_THREADS
    status = cvf_context_create(&options, &ctx);
    Py_END_ALLOW_THREADS
    if (status != CVF_STATUS_SUCCESS) {
        const char *why = cvf_context_create_error();
        PyErr_Format(PyExc_RuntimeError, "cvfuse: cannot create a %s context (device index %d): %s%s%s",
                     cvf_device_name((cvf_device)device), index, cvf_status_string(status), why[0] ? ": " : "",
                     why);
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(ctx, CONTEXT_CAPSULE, context_capsule_destroy);
    if (!capsule)
        cvf_context_destroy(ctx);
    return capsule;
}

static cvf_context *context_from(PyObject *capsule)
{
    cvf_context *ctx = PyCapsule_GetPointer(capsule, CONTEXT_CAPSULE);
    if (!ctx) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "cvfuse: expected a context capsule");
    }
    return ctx;
}

/* ------------------------------------------------------------------------------------------ */
/* DLPack views                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* One consumed DLPack capsule. */
typedef struct dl_view {
    PyObject *capsule; /* NULL when unused */
    DLManagedTensor *legacy;
    DLManagedTensorVersioned *versioned;
    DLTensor *tensor;
    const char *name; /* the argument's name, for messages */
} dl_view;

/* The device an operation runs on, as DLPack names it, and the stream producers order against. */
typedef struct dl_target {
    int32_t device_type; /* kDLCPU or kDLCUDA */
    int32_t device_id;
    PyObject *stream; /* the consumer stream for __dlpack__(stream=...); Py_None on the CPU */
} dl_target;

static void view_release(dl_view *v)
{
    if (!v->capsule)
        return;
    if (v->versioned && v->versioned->deleter)
        v->versioned->deleter(v->versioned);
    else if (v->legacy && v->legacy->deleter)
        v->legacy->deleter(v->legacy);
    Py_CLEAR(v->capsule);
    v->legacy = NULL;
    v->versioned = NULL;
    v->tensor = NULL;
}

/* Calls obj.__dlpack__(stream=..., max_version=(1, 0)), falling back to the legacy call for
 * producers that do not take max_version. Returns a new reference or NULL with an exception. */
static PyObject *call_dlpack(PyObject *obj, const dl_target *target, const char *name)
{
    PyObject *method = PyObject_GetAttrString(obj, "__dlpack__");
    if (!method) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "cvfuse: %s: expected an array that supports DLPack (__dlpack__: a NumPy array, a torch "
                     "tensor, ...), got %.200s",
                     name, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyObject *result = NULL;
    PyObject *empty = PyTuple_New(0);
    PyObject *kwargs = PyDict_New();
    PyObject *version = Py_BuildValue("(ii)", 1, 0);
    if (!empty || !kwargs || !version)
        goto done;
    if (target->stream != Py_None && PyDict_SetItemString(kwargs, "stream", target->stream) < 0)
        goto done;
    if (PyDict_SetItemString(kwargs, "max_version", version) < 0)
        goto done;
    result = PyObject_Call(method, empty, kwargs);
    if (!result && PyErr_ExceptionMatches(PyExc_TypeError)) {
        /* a producer from before DLPack 1.0: no max_version keyword */
        PyErr_Clear();
        if (PyDict_DelItemString(kwargs, "max_version") < 0)
            goto done;
        result = PyObject_Call(method, empty, kwargs);
    }
done:
    Py_XDECREF(version);
    Py_XDECREF(kwargs);
    Py_XDECREF(empty);
    Py_DECREF(method);
    return result;
}

/* Takes obj's DLPack tensor into v, checking it lives on target's device. */
static int view_take(PyObject *obj, const char *name, const dl_target *target, int writable, dl_view *v)
{
    memset(v, 0, sizeof *v);
    v->name = name;
    PyObject *capsule = call_dlpack(obj, target, name);
    if (!capsule)
        return -1;
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        v->versioned = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (v->versioned->version.major != 1) {
            /* Unknown major version: the struct may differ; do not touch it (nor its deleter). */
            PyErr_Format(PyExc_TypeError, "cvfuse: %s: DLPack version %u.%u is not supported (1.x is)", name,
                         (unsigned)v->versioned->version.major, (unsigned)v->versioned->version.minor);
            Py_DECREF(capsule);
            v->versioned = NULL;
            return -1;
        }
        PyCapsule_SetName(capsule, "used_dltensor_versioned");
        v->tensor = &v->versioned->dl_tensor;
        v->capsule = capsule;
        if (writable && (v->versioned->flags & DLPACK_FLAG_BITMASK_READ_ONLY)) {
            PyErr_Format(PyExc_ValueError, "cvfuse: %s: the output array is read-only", name);
            view_release(v);
            return -1;
        }
    } else if (PyCapsule_IsValid(capsule, "dltensor")) {
        v->legacy = PyCapsule_GetPointer(capsule, "dltensor");
        PyCapsule_SetName(capsule, "used_dltensor");
        v->tensor = &v->legacy->dl_tensor;
        v->capsule = capsule;
    } else {
        PyErr_Format(PyExc_TypeError, "cvfuse: %s: __dlpack__ did not return a DLPack capsule", name);
        Py_DECREF(capsule);
        return -1;
    }
    const DLTensor *t = v->tensor;
    if ((int32_t)t->device.device_type != target->device_type || t->device.device_id != target->device_id) {
        PyErr_Format(PyExc_ValueError,
                     "cvfuse: %s is on DLPack device (%d, %d) but the operation runs on (%d, %d): every "
                     "operand must be on the same device",
                     name, (int)t->device.device_type, (int)t->device.device_id, (int)target->device_type,
                     (int)target->device_id);
        view_release(v);
        return -1;
    }
    return 0;
}

/* The cvf dtype of a DLPack dtype, or -1 with a TypeError. */
static int dtype_of(const dl_view *v, cvf_dtype *out)
{
    DLDataType d = v->tensor->dtype;
    if (d.lanes == 1) {
        if (d.code == kDLFloat && d.bits == 32)
            return *out = CVF_F32, 0;
        if (d.code == kDLFloat && d.bits == 16)
            return *out = CVF_F16, 0;
        if (d.code == kDLFloat && d.bits == 64)
            return *out = CVF_F64, 0;
        if (d.code == kDLBfloat && d.bits == 16)
            return *out = CVF_BF16, 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "cvfuse: %s: unsupported dtype (DLPack code %d, %d bits, %d lanes); cvfuse takes float32, "
                 "float16, bfloat16 and (on the reference device) float64",
                 v->name, (int)d.code, (int)d.bits, (int)d.lanes);
    return -1;
}

static void *data_of(const DLTensor *t)
{
    return t->data ? (char *)t->data + t->byte_offset : NULL;
}

static int check_strides(const dl_view *v)
{
    const DLTensor *t = v->tensor;
    for (int i = 0; t->strides && i < t->ndim; i++)
        if (t->strides[i] < 0) {
            PyErr_Format(PyExc_ValueError,
                         "cvfuse: %s has a negative stride (%lld in dimension %d): cvfuse reads non-negative "
                         "strides only; pass a copy",
                         v->name, (long long)t->strides[i], i);
            return -1;
        }
    return 0;
}

static int matrix_of(const dl_view *v, cvf_matrix *m)
{
    const DLTensor *t = v->tensor;
    if (t->ndim != 2) {
        PyErr_Format(PyExc_ValueError, "cvfuse: %s must be 2-D, got %d dimensions", v->name, (int)t->ndim);
        return -1;
    }
    if (dtype_of(v, &m->dtype) < 0 || check_strides(v) < 0)
        return -1;
    m->data = data_of(t);
    m->rows = t->shape[0];
    m->cols = t->shape[1];
    m->row_stride = t->strides ? t->strides[0] : t->shape[1];
    m->col_stride = t->strides ? t->strides[1] : 1;
    return 0;
}

static int vector_of(const dl_view *v, cvf_vector *out)
{
    const DLTensor *t = v->tensor;
    if (t->ndim != 1) {
        PyErr_Format(PyExc_ValueError, "cvfuse: %s must be 1-D, got %d dimensions", v->name, (int)t->ndim);
        return -1;
    }
    if (dtype_of(v, &out->dtype) < 0 || check_strides(v) < 0)
        return -1;
    out->data = data_of(t);
    out->length = t->shape[0];
    out->stride = t->strides ? t->strides[0] : 1;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Calls                                                                                       */
/* ------------------------------------------------------------------------------------------ */

#define MAX_OPERANDS 12

/* What one call holds: its context, its operands' capsules, its workspace. */
typedef struct call_state {
    cvf_context *ctx;
    dl_target target;
    void *stream; /* cudaStream_t for cvf_context_set_stream */
    dl_view views[MAX_OPERANDS];
    int count;
    PyObject *workspace_owner; /* the allocator's object, kept alive through the call */
    dl_view workspace;
    int workspace_set;
} call_state;

/* Reads ctx, the device and the streams: the cudaStream_t handle the call is queued on (0: the
 * default stream) and dl_stream, what __dlpack__(stream=...) receives (None: not passed). */
static int call_begin(call_state *s, PyObject *ctx_capsule, unsigned long long stream, PyObject *dl_stream)
{
    memset(s, 0, sizeof *s);
    s->ctx = context_from(ctx_capsule);
    if (!s->ctx)
        return -1;
    cvf_device device = cvf_context_device(s->ctx);
    s->stream = (void *)(uintptr_t)stream;
    if (device == CVF_DEVICE_CUDA) {
        /* the CUDA device's ordinal is not exposed by the API: the Python layer passed contexts per
         * index, so the first operand names it (checked against the others) */
        s->target.device_type = kDLCUDA;
        s->target.device_id = -1;
    } else {
        if (stream) {
            PyErr_SetString(PyExc_ValueError, "cvfuse: a stream was given for a CPU operation");
            return -1;
        }
        s->target.device_type = kDLCPU;
        s->target.device_id = 0;
    }
    s->target.stream = dl_stream;
    Py_INCREF(dl_stream);
    return 0;
}

static void call_end(call_state *s)
{
    if (s->workspace_set)
        cvf_context_set_workspace(s->ctx, NULL, 0);
    view_release(&s->workspace);
    Py_CLEAR(s->workspace_owner);
    for (int i = 0; i < s->count; i++)
        view_release(&s->views[i]);
    Py_CLEAR(s->target.stream);
}

/* Takes operand obj; returns its view or NULL with an exception. */
static dl_view *call_take(call_state *s, PyObject *obj, const char *name, int writable)
{
    if (s->target.device_type == kDLCUDA && s->target.device_id < 0) {
        /* the first operand fixes the GPU */
        PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
        if (!dev)
            return NULL;
        int type = 0, id = 0;
        int ok = PyArg_ParseTuple(dev, "ii", &type, &id);
        Py_DECREF(dev);
        if (!ok)
            return NULL;
        s->target.device_id = id;
    }
    dl_view *v = &s->views[s->count];
    if (view_take(obj, name, &s->target, writable, v) < 0)
        return NULL;
    s->count++;
    return v;
}

static int take_matrix(call_state *s, PyObject *obj, const char *name, int writable, cvf_matrix *m)
{
    dl_view *v = call_take(s, obj, name, writable);
    return v ? matrix_of(v, m) : -1;
}

static int take_vector(call_state *s, PyObject *obj, const char *name, int writable, cvf_vector *out)
{
    dl_view *v = call_take(s, obj, name, writable);
    return v ? vector_of(v, out) : -1;
}

/* The Python exception for a failed call: the library's message, the status's class. */
static void raise_status(cvf_context *ctx, const char *what, cvf_status status)
{
    PyObject *type;
    switch (status) {
    case CVF_STATUS_UNSUPPORTED: type = PyExc_TypeError; break;
    case CVF_STATUS_OUT_OF_MEMORY: type = PyExc_MemoryError; break;
    case CVF_STATUS_INTERNAL_ERROR:
    case CVF_STATUS_WORKSPACE_TOO_SMALL: type = PyExc_RuntimeError; break;
    case CVF_STATUS_COMMUNICATION_FAILED: type = PyExc_RuntimeError; break;
    case CVF_STATUS_PEER_FAILED: type = PyExc_RuntimeError; break;
    case CVF_STATUS_NULL_POINTER:
    case CVF_STATUS_INVALID_VALUE:
    case CVF_STATUS_SHAPE_MISMATCH:
    case CVF_STATUS_OVERLAPPING_OUTPUT:
    case CVF_STATUS_ALIASED_OUTPUT:
    case CVF_STATUS_SIZE_OVERFLOW: type = PyExc_ValueError; break;
    default: type = PyExc_RuntimeError; break;
    }
    const char *message = cvf_context_last_error(ctx);
    PyErr_Format(type, "%s failed (%s): %s", what, cvf_status_string(status),
                 message && message[0] ? message : "no message");
}

/* Sets the stream, then the workspace the query sized (when the caller gave an allocator). */
static int call_prepare(call_state *s, PyObject *alloc, cvf_status query_status, size_t bytes, const char *what)
{
    cvf_status status = cvf_context_set_stream(s->ctx, s->stream);
    if (status != CVF_STATUS_SUCCESS) {
        raise_status(s->ctx, "cvf_context_set_stream", status);
        return -1;
    }
    if (alloc == Py_None)
        return 0;
    if (query_status == CVF_STATUS_UNSUPPORTED)
        return 0; /* the library cannot size this call: the context grows its own workspace */
    if (query_status != CVF_STATUS_SUCCESS) {
        raise_status(s->ctx, what, query_status);
        return -1;
    }
    if (bytes == 0)
        return 0;
    /* 256-byte alignment: ask for 256 more bytes and align the pointer inside */
    s->workspace_owner = PyObject_CallFunction(alloc, "K", (unsigned long long)bytes + 256);
    if (!s->workspace_owner)
        return -1;
    if (view_take(s->workspace_owner, "workspace", &s->target, 1, &s->workspace) < 0)
        return -1;
    uintptr_t base = (uintptr_t)data_of(s->workspace.tensor);
    uintptr_t aligned = (base + 255) & ~(uintptr_t)255;
    status = cvf_context_set_workspace(s->ctx, (void *)aligned, bytes);
    if (status != CVF_STATUS_SUCCESS) {
        raise_status(s->ctx, "cvf_context_set_workspace", status);
        return -1;
    }
    s->workspace_set = 1;
    return 0;
}

/* One library call the binding makes: its workspace query and its run, on arguments of its own
 * type, and their names for the errors. */
typedef struct call_op {
    const char *size_name, *run_name;
    cvf_status (*size)(cvf_context *ctx, const void *args, size_t *bytes);
    cvf_status (*run)(cvf_context *ctx, const void *args);
} call_op;

/* Sizes the workspace (when alloc is given), binds it, runs op with the GIL released: None, or
 * NULL with the exception set. */
static PyObject *call_run(call_state *s, PyObject *alloc, const call_op *op, const void *args)
{
    size_t bytes = 0;
    cvf_status status = CVF_STATUS_SUCCESS;
    if (alloc != Py_None)
        status = op->size(s->ctx, args, &bytes);
    if (call_prepare(s, alloc, status, bytes, op->size_name) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    status = op->run(s->ctx, args);
    Py_END_ALLOW_THREADS
    if (status != CVF_STATUS_SUCCESS) {
        raise_status(s->ctx, op->run_name, status);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* cvf_matmul's arguments as one object, for call_run. */
typedef struct matmul_args {
    cvf_matrix a, b, c;
    cvf_epilogue ep;
} matmul_args;

static cvf_status matmul_size(cvf_context *ctx, const void *args, size_t *bytes)
{
    const matmul_args *m = args;
    return cvf_matmul_workspace_size(ctx, &m->a, &m->b, &m->c, &m->ep, bytes);
}

static cvf_status matmul_run(cvf_context *ctx, const void *args)
{
    const matmul_args *m = args;
    return cvf_matmul(ctx, &m->a, &m->b, &m->c, &m->ep);
}

static cvf_status forward_size(cvf_context *ctx, const void *args, size_t *bytes)
{
    return cvf_mlp_forward_workspace_size(ctx, args, bytes);
}

static cvf_status forward_run(cvf_context *ctx, const void *args)
{
    return cvf_mlp_forward(ctx, args);
}

static cvf_status backward_size(cvf_context *ctx, const void *args, size_t *bytes)
{
    return cvf_mlp_backward_workspace_size(ctx, args, bytes);
}

static cvf_status backward_run(cvf_context *ctx, const void *args)
{
    return cvf_mlp_backward(ctx, args);
}

static const call_op matmul_op = {"cvf_matmul_workspace_size", "cvf_matmul", matmul_size, matmul_run};
static const call_op forward_op = {"cvf_mlp_forward_workspace_size", "cvf_mlp_forward", forward_size, forward_run};
static const call_op backward_op = {"cvf_mlp_backward_workspace_size", "cvf_mlp_backward", backward_size,
                                    backward_run};

static const char *const kwlist_matmul[] = {"ctx", "a", "b", "c", "bias", "activation", "stream", "dl_stream", "alloc", NULL};

/* matmul(ctx, a, b, c, bias, activation, stream, dl_stream, alloc): c = activation(a @ b + bias). */
static PyObject *py_matmul(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    PyObject *ctx_obj, *a_obj, *b_obj, *c_obj, *bias_obj, *dl_stream, *alloc;
    int activation;
    unsigned long long stream;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOiKOO", (char **)kwlist_matmul, &ctx_obj, &a_obj, &b_obj,
                                     &c_obj, &bias_obj, &activation, &stream, &dl_stream, &alloc))
        return NULL;
    call_state s;
    PyObject *result = NULL;
    if (call_begin(&s, ctx_obj, stream, dl_stream) < 0)
        goto done;
    matmul_args m;
    cvf_vector bias;
    if (take_matrix(&s, a_obj, "a", 0, &m.a) < 0 || take_matrix(&s, b_obj, "b", 0, &m.b) < 0 ||
        take_matrix(&s, c_obj, "out", 1, &m.c) < 0)
        goto done;
    if (bias_obj != Py_None && take_vector(&s, bias_obj, "bias", 0, &bias) < 0)
        goto done;
    m.ep = (cvf_epilogue){(cvf_activation)activation, bias_obj != Py_None ? &bias : NULL, NULL, NULL, NULL};
    result = call_run(&s, alloc, &matmul_op, &m);
done:
    call_end(&s);
    return result;
}

static const char *const kwlist_forward[] = {"ctx",        "x",         "fc1_weight", "fc1_bias", "fc2_weight",
                                             "fc2_bias",   "fc1_output", "gelu_output", "output",  "gelu",
                                             "stream",     "dl_stream",  "alloc",      "tp_size", "tp_rank",
                                             "tp_intermediate", NULL};

/* mlp_forward(ctx, x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, fc1_output|None,
 *             gelu_output|None, output, gelu, stream, dl_stream, alloc, tp_size=0, tp_rank=0,
 *             tp_intermediate=0): tp_* are args.tp (partial mode: no communicator here) */
static PyObject *py_mlp_forward(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    PyObject *ctx_obj, *x, *w1, *b1, *w2, *b2, *fc1, *gelu_out, *out, *dl_stream, *alloc;
    int gelu, tp_size = 0, tp_rank = 0;
    long long tp_intermediate = 0;
    unsigned long long stream;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOOiKOO|iiL", (char **)kwlist_forward, &ctx_obj, &x, &w1,
                                     &b1, &w2, &b2, &fc1, &gelu_out, &out, &gelu, &stream, &dl_stream, &alloc, &tp_size,
                                     &tp_rank, &tp_intermediate))
        return NULL;
    call_state s;
    PyObject *result = NULL;
    if (call_begin(&s, ctx_obj, stream, dl_stream) < 0)
        goto done;
    cvf_mlp_forward_args a;
    memset(&a, 0, sizeof a);
    a.gelu = (cvf_gelu)gelu;
    a.tp.size = tp_size;
    a.tp.rank = tp_rank;
    a.tp.intermediate = tp_intermediate;
    if (take_matrix(&s, x, "x", 0, &a.hidden_state) < 0 || take_matrix(&s, w1, "fc1_weight", 0, &a.fc1_weight) < 0 ||
        take_vector(&s, b1, "fc1_bias", 0, &a.fc1_bias) < 0 || take_matrix(&s, w2, "fc2_weight", 0, &a.fc2_weight) < 0 ||
        take_vector(&s, b2, "fc2_bias", 0, &a.fc2_bias) < 0 || take_matrix(&s, out, "output", 1, &a.output) < 0)
        goto done;
    if (fc1 != Py_None && take_matrix(&s, fc1, "fc1_output", 1, &a.fc1_output) < 0)
        goto done;
    if (gelu_out != Py_None && take_matrix(&s, gelu_out, "gelu_output", 1, &a.gelu_output) < 0)
        goto done;
    result = call_run(&s, alloc, &forward_op, &a);
done:
    call_end(&s);
    return result;
}

static const char *const kwlist_backward[] = {
    "ctx",    "grad_output",     "x",              "fc1_weight",      "fc2_weight", "fc1_output", "gelu_output",
    "grad_x", "grad_fc1_weight", "grad_fc1_bias", "grad_fc2_weight", "grad_fc2_bias", "gelu",    "stream",
    "dl_stream", "alloc", "tp_size", "tp_rank", "tp_intermediate", NULL};

/* mlp_backward(ctx, grad_output, x, fc1_weight, fc2_weight, fc1_output, gelu_output, grad_x,
 *              grad_fc1_weight, grad_fc1_bias, grad_fc2_weight, grad_fc2_bias, gelu, stream, dl_stream, alloc,
 *              tp_size=0, tp_rank=0, tp_intermediate=0) */
static PyObject *py_mlp_backward(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    PyObject *ctx_obj, *g, *x, *w1, *w2, *fc1, *gelu_out, *gx, *gw1, *gb1, *gw2, *gb2, *dl_stream, *alloc;
    int gelu, tp_size = 0, tp_rank = 0;
    long long tp_intermediate = 0;
    unsigned long long stream;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOOOOOiKOO|iiL", (char **)kwlist_backward, &ctx_obj, &g, &x,
                                     &w1, &w2, &fc1, &gelu_out, &gx, &gw1, &gb1, &gw2, &gb2, &gelu, &stream, &dl_stream,
                                     &alloc, &tp_size, &tp_rank, &tp_intermediate))
        return NULL;
    call_state s;
    PyObject *result = NULL;
    if (call_begin(&s, ctx_obj, stream, dl_stream) < 0)
        goto done;
    cvf_mlp_backward_args a;
    memset(&a, 0, sizeof a);
    a.gelu = (cvf_gelu)gelu;
    a.tp.size = tp_size;
    a.tp.rank = tp_rank;
    a.tp.intermediate = tp_intermediate;
    if (take_matrix(&s, g, "grad_output", 0, &a.grad_output) < 0 || take_matrix(&s, x, "x", 0, &a.hidden_state) < 0 ||
        take_matrix(&s, w1, "fc1_weight", 0, &a.fc1_weight) < 0 ||
        take_matrix(&s, w2, "fc2_weight", 0, &a.fc2_weight) < 0 ||
        take_matrix(&s, fc1, "fc1_output", 0, &a.fc1_output) < 0 ||
        take_matrix(&s, gelu_out, "gelu_output", 0, &a.gelu_output) < 0 ||
        take_matrix(&s, gx, "grad_x", 1, &a.grad_hidden_state) < 0 ||
        take_matrix(&s, gw1, "grad_fc1_weight", 1, &a.grad_fc1_weight) < 0 ||
        take_vector(&s, gb1, "grad_fc1_bias", 1, &a.grad_fc1_bias) < 0 ||
        take_matrix(&s, gw2, "grad_fc2_weight", 1, &a.grad_fc2_weight) < 0 ||
        take_vector(&s, gb2, "grad_fc2_bias", 1, &a.grad_fc2_bias) < 0)
        goto done;
    result = call_run(&s, alloc, &backward_op, &a);
done:
    call_end(&s);
    return result;
}

/* context_info(ctx) -> (device name, threads) */
static PyObject *py_context_info(PyObject *self, PyObject *arg)
{
    (void)self;
    cvf_context *ctx = context_from(arg);
    if (!ctx)
        return NULL;
    return Py_BuildValue("(si)", cvf_device_name(cvf_context_device(ctx)), (int)cvf_context_threads(ctx));
}

/* park_threads(ctx): the context's idle workers stop spinning and sleep (cvf_context_park_threads). */
static PyObject *py_park_threads(PyObject *self, PyObject *arg)
{
    (void)self;
    cvf_context *ctx = context_from(arg);
    if (!ctx)
        return NULL;
    cvf_context_park_threads(ctx);
    Py_RETURN_NONE;
}

static PyObject *py_version(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(cvf_version());
}

static PyMethodDef methods[] = {
    {"context", py_context, METH_VARARGS, "context(device, index) -> a new cvf_context capsule"},
    {"context_info", py_context_info, METH_O, "context_info(ctx) -> (device name, threads)"},
    {"matmul", (PyCFunction)(void (*)(void))py_matmul, METH_VARARGS | METH_KEYWORDS,
     "matmul(ctx, a, b, c, bias, activation, stream, dl_stream, alloc): c = activation(a @ b + bias)"},
    {"mlp_forward", (PyCFunction)(void (*)(void))py_mlp_forward, METH_VARARGS | METH_KEYWORDS,
     "mlp_forward(ctx, x, fc1_weight, fc1_bias, fc2_weight, fc2_bias, fc1_output, gelu_output, output, gelu, "
     "stream, dl_stream, alloc)"},
    {"mlp_backward", (PyCFunction)(void (*)(void))py_mlp_backward, METH_VARARGS | METH_KEYWORDS,
     "mlp_backward(ctx, grad_output, x, fc1_weight, fc2_weight, fc1_output, gelu_output, grad_x, "
     "grad_fc1_weight, grad_fc1_bias, grad_fc2_weight, grad_fc2_bias, gelu, stream, dl_stream, alloc)"},
    {"park_threads", py_park_threads, METH_O, "park_threads(ctx): its idle CPU workers sleep now"},
    {"version", py_version, METH_NOARGS, "version() -> the C library's version string"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cvfuse", "cvfuse's C binding (use the cvfuse package)", -1, methods,
    NULL,                  NULL,      NULL,                                           NULL,
};

PyMODINIT_FUNC PyInit__cvfuse(void);

PyMODINIT_FUNC PyInit__cvfuse(void)
{
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddIntConstant(m, "DEVICE_CPU", CVF_DEVICE_CPU) < 0 ||
        PyModule_AddIntConstant(m, "DEVICE_REFERENCE", CVF_DEVICE_REFERENCE) < 0 ||
        PyModule_AddIntConstant(m, "DEVICE_CUDA", CVF_DEVICE_CUDA) < 0 ||
        PyModule_AddIntConstant(m, "ACTIVATION_NONE", CVF_ACTIVATION_NONE) < 0 ||
        PyModule_AddIntConstant(m, "ACTIVATION_RELU", CVF_ACTIVATION_RELU) < 0 ||
        PyModule_AddIntConstant(m, "ACTIVATION_GELU_TANH", CVF_ACTIVATION_GELU_TANH) < 0 ||
        PyModule_AddIntConstant(m, "ACTIVATION_GELU_ERF", CVF_ACTIVATION_GELU_ERF) < 0 ||
        PyModule_AddIntConstant(m, "GELU_TANH", CVF_GELU_TANH) < 0 ||
        PyModule_AddIntConstant(m, "GELU_ERF", CVF_GELU_ERF) < 0 ||
#ifdef CVF_HAVE_CUDA
        PyModule_AddIntConstant(m, "BUILT_WITH_CUDA", 1) < 0 ||
#else
        PyModule_AddIntConstant(m, "BUILT_WITH_CUDA", 0) < 0 ||
#endif
        PyModule_AddStringConstant(m, "HEADER_VERSION", "0.2.0") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
