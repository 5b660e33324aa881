/* Status strings, enum names and the per-context error message. */
#include <stdarg.h>
#include <stdio.h>

#include "core/internal.h"

const char *cvf_status_string(cvf_status status)
{
    switch (status) {
    case CVF_STATUS_SUCCESS: return "success";
    case CVF_STATUS_NULL_POINTER: return "null pointer";
    case CVF_STATUS_INVALID_VALUE: return "invalid value";
    case CVF_STATUS_SHAPE_MISMATCH: return "shape mismatch";
    case CVF_STATUS_OVERLAPPING_OUTPUT: return "overlapping output elements";
    case CVF_STATUS_ALIASED_OUTPUT: return "output aliases another operand";
    case CVF_STATUS_SIZE_OVERFLOW: return "size overflow";
    case CVF_STATUS_UNSUPPORTED: return "unsupported";
    case CVF_STATUS_OUT_OF_MEMORY: return "out of memory";
    case CVF_STATUS_INTERNAL_ERROR: return "internal error";
    case CVF_STATUS_WORKSPACE_TOO_SMALL: return "workspace too small";
    case CVF_STATUS_COMMUNICATION_FAILED: return "communication failed";
    case CVF_STATUS_PEER_FAILED: return "another rank failed";
    }
    return "unknown status";
}

const char *cvf_activation_name(cvf_activation activation)
{
    switch (activation) {
    case CVF_ACTIVATION_NONE: return "none";
    case CVF_ACTIVATION_RELU: return "relu";
    case CVF_ACTIVATION_GELU_TANH: return "gelu_tanh";
    case CVF_ACTIVATION_DGELU_TANH: return "dgelu_tanh";
    case CVF_ACTIVATION_GELU_ERF: return "gelu_erf";
    case CVF_ACTIVATION_DGELU_ERF: return "dgelu_erf";
    }
    return "unknown";
}

const char *cvf_version(void)
{
#define CVF_STRINGIFY_(x) #x
#define CVF_STRINGIFY(x) CVF_STRINGIFY_(x)
    return CVF_STRINGIFY(CVF_VERSION_MAJOR) "." CVF_STRINGIFY(CVF_VERSION_MINOR) "." CVF_STRINGIFY(CVF_VERSION_PATCH);
#undef CVF_STRINGIFY
#undef CVF_STRINGIFY_
}

const char *cvf_device_name(cvf_device device)
{
    switch (device) {
    case CVF_DEVICE_CPU: return "cpu";
    case CVF_DEVICE_REFERENCE: return "reference";
    case CVF_DEVICE_CUDA: return "cuda";
    }
    return "unknown";
}

cvf_status cvf_fail(cvf_context *ctx, cvf_status status, const char *format, ...)
{
    if (ctx) {
        va_list args;
        va_start(args, format);
        vsnprintf(ctx->message, sizeof ctx->message, format, args);
        va_end(args);
    }
    return status;
}

void cvf_clear_error(cvf_context *ctx)
{
    ctx->message[0] = '\0';
}
