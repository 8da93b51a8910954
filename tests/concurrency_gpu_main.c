/* On a real GPU: 32 threads released together make the first launches of every kernel of the "kpconc" library
 * (the demo bundle: axpy, scale[float], scale[double], row_sum, affine, and the scale family), each on its own
 * buffers, then check the results on the host. Repeated REPS times, each repetition in a fresh forked process so
 * every launch is a first launch (module load, kernel lookup, context binding all race).
 * Usage: concurrency_gpu_main REPS. Prints "rep R ok=N bad=M" per repetition and "ALL PASSED" at the end.
 * The test program talks to the driver through dlopen (for its own buffers); the library does the same. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kpconc.h"

enum { THREADS = 32, N = 4096, ROWS = 64, COLS = 64, CHECKS = 6 };

typedef int (*fn_i)(unsigned);
typedef int (*fn_dev)(int*, int);
typedef int (*fn_retain)(void**, int);
typedef int (*fn_ctx)(void*);
typedef int (*fn_alloc)(unsigned long long*, size_t);
typedef int (*fn_free)(unsigned long long);
typedef int (*fn_htod)(unsigned long long, const void*, size_t);
typedef int (*fn_dtoh)(void*, unsigned long long, size_t);
typedef int (*fn_sync)(void);
static struct {
    fn_i Init;
    fn_dev DeviceGet;
    fn_retain Retain;
    fn_ctx SetCurrent;
    fn_alloc Alloc;
    fn_free Free;
    fn_htod HtoD;
    fn_dtoh DtoH;
    fn_sync Sync;
} cu;
static void* ctx;
static pthread_barrier_t start;

#define CK(call)                                                                       \
    do {                                                                               \
        int r_ = (call);                                                               \
        if (r_) {                                                                      \
            fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #call, r_);        \
            exit(3);                                                                   \
        }                                                                              \
    } while (0)

static int load_driver(void) {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    *(void**)&cu.Init = dlsym(h, "cuInit");
    *(void**)&cu.DeviceGet = dlsym(h, "cuDeviceGet");
    *(void**)&cu.Retain = dlsym(h, "cuDevicePrimaryCtxRetain");
    *(void**)&cu.SetCurrent = dlsym(h, "cuCtxSetCurrent");
    *(void**)&cu.Alloc = dlsym(h, "cuMemAlloc_v2");
    *(void**)&cu.Free = dlsym(h, "cuMemFree_v2");
    *(void**)&cu.HtoD = dlsym(h, "cuMemcpyHtoD_v2");
    *(void**)&cu.DtoH = dlsym(h, "cuMemcpyDtoH_v2");
    *(void**)&cu.Sync = dlsym(h, "cuCtxSynchronize");
    return cu.Init && cu.Sync ? 0 : -1;
}

static unsigned long long dev_copy(const void* host, size_t bytes) {
    unsigned long long p = 0;
    CK(cu.Alloc(&p, bytes));
    CK(cu.HtoD(p, host, bytes));
    return p;
}

static int close_to(double got, double want, double tol) { return fabs(got - want) <= tol * (1.0 + fabs(want)); }

static void* worker(void* arg) {
    int t = (int)(intptr_t)arg, ok = 0;
    float x[N], y[N], m[ROWS * COLS], sums[ROWS] = {0};
    double xd[N];
    for (int i = 0; i < N; i++) x[i] = (float)((i * 7 + t) % 101) / 50.0f - 1.0f, y[i] = (float)(t - i % 13), xd[i] = x[i];
    for (int i = 0; i < ROWS * COLS; i++) m[i] = (float)((i + t) % 17) - 8.0f;
    CK(cu.SetCurrent(ctx)); /* for this program's own copies; the library needs no current context */
    unsigned long long dx = dev_copy(x, sizeof x), dy = dev_copy(y, sizeof y), dout = dev_copy(y, sizeof y);
    unsigned long long dxd = dev_copy(xd, sizeof xd), doutd = dev_copy(xd, sizeof xd);
    unsigned long long dm = dev_copy(m, sizeof m), dsums = dev_copy(sums, sizeof sums), dout2 = dev_copy(y, sizeof y);
    CK(cu.SetCurrent(NULL)); /* launch from a thread with no current context, as a fresh server thread */
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = N / 256, l.block[0] = 256;
    float alpha = 0.5f + (float)t;
    kpconc_Affine p;
    float sc = 0.5f, sh = 0.25f;
    int clamp = 0;
    memcpy(p.bytes, &sc, 4), memcpy(p.bytes + 4, &sh, 4), memcpy(p.bytes + 8, &clamp, 4);
    pthread_barrier_wait(&start);
    kp_status st[CHECKS];
    st[0] = kpconc_axpy(&l, alpha, (const float*)(uintptr_t)dx, (float*)(uintptr_t)dy, N);
    st[1] = kpconc_scale_float(&l, (const float*)(uintptr_t)dx, (float*)(uintptr_t)dout, 2.0f + (float)t, N);
    st[2] = kpconc_scale_double(&l, (const double*)(uintptr_t)dxd, (double*)(uintptr_t)doutd, 3.0f, N);
    st[3] = kpconc_affine(&l, (const float*)(uintptr_t)dx, (float*)(uintptr_t)dout2, &p, N);
    kp_launch lr = l;
    lr.grid[0] = ROWS;
    st[4] = kpconc_row_sum(&lr, (const float*)(uintptr_t)dm, (float*)(uintptr_t)dsums, ROWS, COLS);
    st[5] = KP_SUCCESS;
    for (int i = 0; i < 5; i++)
        if (st[i] != KP_SUCCESS) fprintf(stderr, "thread %d launch %d: %s\n", t, i, kpconc_last_error()), st[5] = st[i];
    CK(cu.SetCurrent(ctx));
    CK(cu.Sync());
    float ry[N], rout[N], rout2[N], rsums[ROWS];
    double routd[N];
    CK(cu.DtoH(ry, dy, sizeof ry));
    CK(cu.DtoH(rout, dout, sizeof rout));
    CK(cu.DtoH(routd, doutd, sizeof routd));
    CK(cu.DtoH(rout2, dout2, sizeof rout2));
    CK(cu.DtoH(rsums, dsums, sizeof rsums));
    int good[CHECKS] = {1, 1, 1, 1, 1, st[5] == KP_SUCCESS};
    for (int i = 0; i < N; i++) {
        good[0] &= close_to(ry[i], (double)alpha * x[i] + y[i], 1e-5);
        good[1] &= close_to(rout[i], (double)x[i] * (2.0f + (float)t), 1e-5);
        good[2] &= close_to(routd[i], xd[i] * 3.0, 1e-6);
        good[3] &= close_to(rout2[i], x[i] * 0.5 + 0.25, 1e-5);
    }
    for (int r = 0; r < ROWS; r++) {
        double s = 0;
        for (int c = 0; c < COLS; c++) s += m[r * COLS + c];
        good[4] &= close_to(rsums[r], s, 1e-4);
    }
    for (int i = 0; i < CHECKS; i++) ok += good[i];
    unsigned long long all[] = {dx, dy, dout, dxd, doutd, dm, dsums, dout2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CK(cu.Free(all[i]));
    return (void*)(intptr_t)ok;
}

static int one_rep(void) {
    int dev = 0;
    CK(cu.Init(0));
    CK(cu.DeviceGet(&dev, 0));
    CK(cu.Retain(&ctx, dev));
    pthread_t th[THREADS];
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, worker, (void*)(intptr_t)i);
    int ok = 0;
    for (int i = 0; i < THREADS; i++) {
        void* r;
        pthread_join(th[i], &r);
        ok += (int)(intptr_t)r;
    }
    return ok;
}

int main(int argc, char** argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 100, failed = 0;
    if (load_driver()) {
        printf("no driver\n");
        return 2;
    }
    for (int r = 0; r < reps; r++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            int ok = one_rep();
            printf("rep %d ok=%d bad=%d\n", r, ok, THREADS * CHECKS - ok);
            fflush(stdout);
            _exit(ok == THREADS * CHECKS ? 0 : 1);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    if (failed) printf("FAILED %d repetitions\n", failed);
    else printf("ALL PASSED\n");
    return failed != 0;
}
