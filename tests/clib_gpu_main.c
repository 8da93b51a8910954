/* GPU test program for the generated "demo" library: real launches, fresh random inputs, CPU references, and a
 * check that every output element was written (outputs start as a NaN sentinel). Prints "PASS name" or
 * "FAIL name: why" per check; exits 1 if any check failed. The driver API used here for memory is dlopen'ed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "demo.h"

typedef unsigned long long dptr;
static int (*cuInit)(unsigned);
static int (*cuDevicePrimaryCtxRetain)(void**, int);
static int (*cuCtxSetCurrent)(void*);
static int (*cuCtxSynchronize)(void);
static int (*cuDeviceGetCount)(int*);
static int (*cuCtxGetDevice)(int*);
static int (*cuStreamCreate)(void**, unsigned);
static int (*cuStreamSynchronize)(void*);
static int (*cuStreamDestroy)(void*);
static int (*cuMemAlloc)(dptr*, size_t);
static int (*cuMemFree)(dptr);
static int (*cuMemcpyHtoD)(dptr, const void*, size_t);
static int (*cuMemcpyDtoH)(void*, dptr, size_t);
static int failures;

#define CHECK_CU(x)                                                           \
    do {                                                                      \
        int r_ = (x);                                                         \
        if (r_) {                                                             \
            printf("FAIL driver: %s = %d (line %d)\n", #x, r_, __LINE__);    \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static void load_driver(void) {
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        printf("FAIL driver: %s\n", dlerror());
        exit(1);
    }
#define SYM(var, name) *(void**)&var = dlsym(h, name)
    SYM(cuInit, "cuInit");
    SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(cuCtxSetCurrent, "cuCtxSetCurrent");
    SYM(cuCtxSynchronize, "cuCtxSynchronize");
    SYM(cuDeviceGetCount, "cuDeviceGetCount");
    SYM(cuCtxGetDevice, "cuCtxGetDevice");
    SYM(cuStreamCreate, "cuStreamCreate");
    SYM(cuStreamSynchronize, "cuStreamSynchronize");
    SYM(cuStreamDestroy, "cuStreamDestroy_v2");
    SYM(cuMemAlloc, "cuMemAlloc_v2");
    SYM(cuMemFree, "cuMemFree_v2");
    SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
}

static void report(const char* name, int ok, const char* why) {
    if (ok) printf("PASS %s\n", name);
    else printf("FAIL %s: %s\n", name, why), failures++;
}

static void expect_ok(const char* name, kp_status s) {
    if (s != KP_SUCCESS) {
        char buf[2300];
        snprintf(buf, sizeof buf, "%s: %s", demo_status_name(s), demo_last_error());
        report(name, 0, buf);
    }
}

static float frand(void) { return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f + 0.001f; }

static dptr upload(const void* h, size_t bytes) {
    dptr d;
    CHECK_CU(cuMemAlloc(&d, bytes));
    CHECK_CU(cuMemcpyHtoD(d, h, bytes));
    return d;
}

static dptr sentinel(size_t bytes) { /* NaN bytes everywhere: unwritten elements stay NaN */
    unsigned char* h = malloc(bytes);
    memset(h, 0xff, bytes);
    dptr d = upload(h, bytes);
    free(h);
    return d;
}

static kp_launch L(uint32_t grid, uint32_t block) {
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = grid, l.block[0] = block;
    return l;
}

static void test_add_f32(int n, int offset, const char* name) {
    float *x = malloc(n * 4), *y = malloc(n * 4), *out = malloc((n + 4) * 4);
    for (int i = 0; i < n; i++) x[i] = frand(), y[i] = frand();
    dptr dx = upload(x, n * 4), dy = upload(y, n * 4), dout = sentinel((n + 4) * 4);
    kp_launch l = L((n + 255) / 256, 256);
    expect_ok(name, demo_add(&l, (void*)(uintptr_t)dx, KP_F32, (void*)(uintptr_t)dy, KP_F32,
                             (void*)(uintptr_t)(dout + 4 * offset), KP_F32, n));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH(out, dout + 4 * offset, n * 4));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += !(out[i] == x[i] + y[i]);
    report(name, bad == 0, "wrong or unwritten elements");
    cuMemFree(dx), cuMemFree(dy), cuMemFree(dout), free(x), free(y), free(out);
}

static void test_add_f64(void) {
    int n = 77777;
    double *x = malloc(n * 8), *y = malloc(n * 8), *out = malloc(n * 8);
    for (int i = 0; i < n; i++) x[i] = frand(), y[i] = frand() * 1e-3;
    dptr dx = upload(x, n * 8), dy = upload(y, n * 8), dout = sentinel(n * 8);
    kp_launch l = L((n + 127) / 128, 128);
    expect_ok("add_f64", demo_add(&l, (void*)(uintptr_t)dx, KP_F64, (void*)(uintptr_t)dy, KP_F64,
                                  (void*)(uintptr_t)dout, KP_F64, n));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH(out, dout, n * 8));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += !(out[i] == x[i] + y[i]);
    report("add_f64", bad == 0, "wrong or unwritten elements");
    cuMemFree(dx), cuMemFree(dy), cuMemFree(dout), free(x), free(y), free(out);
}

static void test_pack(void) {
    int8_t a = (int8_t)(rand() % 100 - 50);
    int16_t b = (int16_t)(rand() % 20000 - 10000);
    int32_t c = rand() % 1000000 - 500000;
    int64_t d = (int64_t)(rand() % 1000) * 1000000LL;
    float e = frand();
    double f = frand();
    bool g = rand() & 1;
    kp_f16 h = {0x3c00}; /* passed as unsigned short to the kernel: 15360 */
    uint8_t i = (uint8_t)(rand() % 256);
    uint64_t j = (uint64_t)(rand() % 1000);
    dptr dout = sentinel(4);
    kp_launch l = L(1, 1);
    expect_ok("pack", demo_pack(&l, a, b, c, d, e, f, g, h, i, j, (float*)(uintptr_t)dout));
    CHECK_CU(cuCtxSynchronize());
    float got, want = a + b + c + d + e + f + g + (unsigned short)15360 + i + j;
    CHECK_CU(cuMemcpyDtoH(&got, dout, 4));
    char why[128];
    snprintf(why, sizeof why, "got %.9g want %.9g", got, want);
    report("pack_scalars", got == want, why);
    cuMemFree(dout);
}

static void test_tensor(void) {
    int rows = 37, cols = 29, stride = 40;
    float* data = malloc(rows * stride * 4);
    float* out = malloc(rows * cols * 4);
    for (int k = 0; k < rows * stride; k++) data[k] = frand();
    dptr dd = upload(data, rows * stride * 4), dout = sentinel(rows * cols * 4);
    kp_tensor t;
    memset(&t, 0, sizeof t);
    t.data = (void*)(uintptr_t)dd, t.dtype = KP_F32, t.rank = 2;
    t.shape[0] = rows, t.shape[1] = cols, t.stride[0] = stride, t.stride[1] = 1;
    kp_launch l = L(rows, 32);
    expect_ok("tensor", demo_tsum(&l, &t, (float*)(uintptr_t)dout));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH(out, dout, rows * cols * 4));
    int bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) bad += !(out[r * cols + c] == 2.0f * data[r * stride + c]);
    report("tensor", bad == 0, "wrong or unwritten elements");
    cuMemFree(dd), cuMemFree(dout), free(data), free(out);
}

static void test_big_smem(void) {
    int n = 50000; /* 200 000 bytes of dynamic shared memory */
    float *x = malloc(n * 4), *out = malloc(n * 4);
    for (int i = 0; i < n; i++) x[i] = frand();
    dptr dx = upload(x, n * 4), dout = sentinel(n * 4);
    kp_launch l = L(1, 512);
    l.dynamic_smem = (uint32_t)n * 4;
    expect_ok("big_smem", demo_big_smem(&l, (const float*)(uintptr_t)dx, (float*)(uintptr_t)dout, n));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH(out, dout, n * 4));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += !(out[i] == x[n - 1 - i]);
    report("big_smem", bad == 0, "wrong or unwritten elements");
    cuMemFree(dx), cuMemFree(dout), free(x), free(out);
}

static void test_cluster(void) {
    int grid = 16, block = 64;
    float* out = malloc(grid * block * 4);
    dptr dout = sentinel(grid * block * 4);
    kp_launch l = L(grid, block);
    expect_ok("cluster", demo_cluster2(&l, (float*)(uintptr_t)dout));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH(out, dout, grid * block * 4));
    int bad = 0;
    for (int i = 0; i < grid * block; i++) bad += !(out[i] == (float)(i / block));
    report("cluster", bad == 0, "wrong or unwritten elements");
    l.grid[0] = 3;
    kp_status s = demo_cluster2(&l, (float*)(uintptr_t)dout);
    report("cluster_bad_grid", s == KP_ERROR_INVALID_LAUNCH, demo_last_error());
    cuMemFree(dout), free(out);
}

static void test_fixed_block_and_hidden(void) {
    float out[256];
    dptr dout = sentinel(sizeof out);
    kp_launch l = L(2, 0);
    expect_ok("fixed_block", demo_fixed_block(&l, (float*)(uintptr_t)dout));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH(out, dout, sizeof out));
    int bad = 0;
    for (int i = 0; i < 256; i++) bad += !(out[i] == (float)(i % 128));
    report("fixed_block", bad == 0, "wrong or unwritten elements");
    l = L(2, 64);
    report("fixed_block_wrong", demo_fixed_block(&l, (float*)(uintptr_t)dout) == KP_ERROR_INVALID_LAUNCH,
           demo_last_error());
    l = L(2, 128);
    expect_ok("hidden", demo_hidden(&l, (float*)(uintptr_t)dout, 256));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH(out, dout, sizeof out));
    bad = 0;
    for (int i = 0; i < 256; i++) bad += !(out[i] == 1.0f);
    report("hidden_null_scratch", bad == 0, "scratch pointers were not NULL");
    cuMemFree(dout);
}

static void test_no_binary(void) {
    kp_launch l = L(1, 32);
    kp_status s = demo_only_80_100(&l, (float*)(uintptr_t)0);
    report("no_binary_for_arch", s == KP_ERROR_NO_BINARY_FOR_ARCH && strstr(demo_last_error(), "sm_80, sm_100a"),
           demo_last_error());
}

typedef struct {
    dptr x, y, out;
    int n;
    kp_status status;
} thread_job;

static void* fresh_thread(void* arg) { /* no current context here: the library binds device 0's primary one */
    thread_job* j = (thread_job*)arg;
    kp_launch l = L((j->n + 255) / 256, 256);
    j->status = demo_add(&l, (void*)(uintptr_t)j->x, KP_F32, (void*)(uintptr_t)j->y, KP_F32,
                         (void*)(uintptr_t)j->out, KP_F32, j->n);
    return NULL;
}

static void test_fresh_thread(void) {
    int n = 5000;
    float *x = malloc(n * 4), *y = malloc(n * 4), *out = malloc(n * 4);
    for (int i = 0; i < n; i++) x[i] = frand(), y[i] = frand();
    thread_job j = {upload(x, n * 4), upload(y, n * 4), sentinel(n * 4), n, KP_SUCCESS};
    pthread_t th;
    pthread_create(&th, NULL, fresh_thread, &j);
    pthread_join(th, NULL);
    expect_ok("fresh_thread", j.status);
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH(out, j.out, n * 4));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += !(out[i] == x[i] + y[i]);
    report("fresh_thread", bad == 0, "wrong or unwritten elements");
    cuMemFree(j.x), cuMemFree(j.y), cuMemFree(j.out), free(x), free(y), free(out);
}

/* Several GPUs: the launch runs on the device of the current context (its own per-device module and binary
 * choice), and a thread with no context launching on a device-1 stream is bound to device 1's context. */
typedef struct stream_job {
    void* stream;
    dptr x, y, out;
    int n, device_after;
    kp_status status;
} stream_job;

static void* stream_thread(void* arg) {
    stream_job* j = (stream_job*)arg;
    kp_launch l = L((j->n + 255) / 256, 256);
    l.stream = j->stream;
    j->status = demo_add(&l, (void*)(uintptr_t)j->x, KP_F32, (void*)(uintptr_t)j->y, KP_F32,
                         (void*)(uintptr_t)j->out, KP_F32, j->n);
    j->device_after = -1;
    cuCtxGetDevice(&j->device_after);
    return NULL;
}

static int check_add(dptr dout, const float* x, const float* y, int n) {
    float* out = malloc(n * 4);
    CHECK_CU(cuMemcpyDtoH(out, dout, n * 4));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += !(out[i] == x[i] + y[i]);
    free(out);
    return bad == 0;
}

static void test_second_device(void* ctx0) {
    int count = 0;
    CHECK_CU(cuDeviceGetCount(&count));
    if (count < 2) {
        printf("SKIP second_device: %d device(s)\n", count);
        return;
    }
    void* ctx1;
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx1, 1));
    CHECK_CU(cuCtxSetCurrent(ctx1));
    expect_ok("second_device_preload", demo_preload(1));
    test_add_f32(300001, 0, "second_device_add_f32");  /* current context: device 1 */
    int n = 70000;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    for (int i = 0; i < n; i++) x[i] = frand(), y[i] = frand();
    stream_job j = {NULL, upload(x, n * 4), upload(y, n * 4), sentinel(n * 4), n, -1, KP_SUCCESS};
    CHECK_CU(cuStreamCreate(&j.stream, 0));
    pthread_t th;
    pthread_create(&th, NULL, stream_thread, &j);
    pthread_join(th, NULL);
    expect_ok("second_device_stream_in_fresh_thread", j.status);
    CHECK_CU(cuStreamSynchronize(j.stream));
    report("second_device_stream_in_fresh_thread", j.status == KP_SUCCESS && check_add(j.out, x, y, n) &&
           j.device_after == 1, "wrong or unwritten elements, or the thread was not bound to device 1");
    cuStreamDestroy(j.stream), cuMemFree(j.x), cuMemFree(j.y), cuMemFree(j.out), free(x), free(y);
    CHECK_CU(cuCtxSetCurrent(ctx0));
    test_add_f32(4099, 0, "second_device_then_device0_again");
}

int main(void) {
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    load_driver();
    void* ctx;
    CHECK_CU(cuInit(0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK_CU(cuCtxSetCurrent(ctx));
    test_add_f32(1 << 20, 0, "add_f32_vec4_path");
    test_add_f32(1000003, 0, "add_f32_odd_n");
    test_add_f32(4096, 1, "add_f32_misaligned");
    test_add_f64();
    test_pack();
    test_tensor();
    test_big_smem();
    test_cluster();
    test_fixed_block_and_hidden();
    test_no_binary();
    test_fresh_thread();
    test_second_device(ctx);
    printf(failures ? "FAILED %d\n" : "ALL PASSED\n", failures);
    return failures != 0;
}
