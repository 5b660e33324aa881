/* The install test's consumer: built against an installed cvfuse (find_package or pkg-config), it
 * checks that the run-time library is the header's version and runs one small fused matmul on the
 * CPU: C = relu(A @ B + bias), every element compared with the product computed here. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cvfuse.h>

#define STR2(x) #x
#define STR(x) STR2(x)

/* 0 when cvf_version() is the version of the header this file was compiled against. */
static int check_version(void)
{
    const char *expected = STR(CVF_VERSION_MAJOR) "." STR(CVF_VERSION_MINOR) "." STR(CVF_VERSION_PATCH);
    const char *got = cvf_version();
    printf("cvf_version: %s (header %s)\n", got, expected);
    return strcmp(got, expected) == 0 ? 0 : 1;
}

/* 0 when a 2x3 @ 3x2 matmul with a bias and ReLU matches the same computed in plain C. */
static int check_matmul(void)
{
    float a[2 * 3] = {1, 2, 3, -4, 5, -6};
    float b[3 * 2] = {0.5f, -1, 2, 0.25f, -3, 1};
    float bias[2] = {1, -0.5f};
    float c[2 * 2] = {-99, -99, -99, -99};
    cvf_context *ctx;
    cvf_status status = cvf_context_create(NULL, &ctx);
    if (status != CVF_STATUS_SUCCESS) {
        fprintf(stderr, "cvf_context_create: %s: %s\n", cvf_status_string(status), cvf_context_create_error());
        return 1;
    }
    cvf_matrix A = cvf_matrix_row_major(a, CVF_F32, 2, 3);
    cvf_matrix B = cvf_matrix_row_major(b, CVF_F32, 3, 2);
    cvf_matrix C = cvf_matrix_row_major(c, CVF_F32, 2, 2);
    cvf_vector bv = cvf_vector_dense(bias, CVF_F32, 2);
    cvf_epilogue ep = {.activation = CVF_ACTIVATION_RELU, .bias = &bv};
    status = cvf_matmul(ctx, &A, &B, &C, &ep);
    if (status != CVF_STATUS_SUCCESS)
        fprintf(stderr, "cvf_matmul: %s: %s\n", cvf_status_string(status), cvf_context_last_error(ctx));
    cvf_context_destroy(ctx);
    if (status != CVF_STATUS_SUCCESS)
        return 1;
    int bad = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            float want = bias[j];
            for (int k = 0; k < 3; k++)
                want += a[i * 3 + k] * b[k * 2 + j];
            want = want > 0 ? want : 0;
            if (fabsf(c[i * 2 + j] - want) > 1e-5f) {
                fprintf(stderr, "C[%d][%d] = %g, expected %g\n", i, j, (double)c[i * 2 + j], (double)want);
                bad = 1;
            }
        }
    printf("cvf_matmul: %s\n", bad ? "WRONG" : "ok");
    return bad;
}

int main(void)
{
    int rc = check_version();
    rc |= check_matmul();
    return rc;
}
