/* Launch-cost benchmark for a generated kernelpack library ("bench", see bench/clib_launch.py).
 *
 * usage: clib_bench launch CUBIN   per-launch host cost: raw cuLaunchKernel vs typed wrapper vs family entries
 *        clib_bench cold LIB.so    dlopen + first launch of a kernel of a big library
 * Prints "key value" lines (nanoseconds or microseconds as named). Driver entry points are dlopen'ed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

typedef unsigned long long dptr;
static int (*cuInit)(unsigned);
static int (*cuDevicePrimaryCtxRetain)(void**, int);
static int (*cuCtxSetCurrent)(void*);
static int (*cuCtxSynchronize)(void);
static int (*cuMemAlloc)(dptr*, size_t);
static int (*cuLibraryLoadData)(void**, const void*, void*, void**, unsigned, void*, void**, unsigned);
static int (*cuLibraryGetKernel)(void**, void*, const char*);
static int (*cuLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                             void**, void**);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void driver(void) {
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) fprintf(stderr, "no driver: %s\n", dlerror()), exit(1);
#define SYM(v, n) *(void**)&v = dlsym(h, n)
    SYM(cuInit, "cuInit");
    SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(cuCtxSetCurrent, "cuCtxSetCurrent");
    SYM(cuCtxSynchronize, "cuCtxSynchronize");
    SYM(cuMemAlloc, "cuMemAlloc_v2");
    SYM(cuLibraryLoadData, "cuLibraryLoadData");
    SYM(cuLibraryGetKernel, "cuLibraryGetKernel");
    SYM(cuLaunchKernel, "cuLaunchKernel");
    void* ctx;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) fprintf(stderr, "ctx\n"), exit(1);
}

static void* read_file(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) perror(path), exit(1);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void* p = malloc(n);
    if (fread(p, 1, n, f) != (size_t)n) exit(1);
    fclose(f);
    return p;
}

enum { BATCH = 500, ROUNDS = 15, REPS = 7 };
static float *a, *b, *c;
static void* raw_kernel;
static void* spin_kernel;

typedef int (*launch_fn)(int n);

static int raw(int n) {
    void* args[] = {&a, &b, &c, &n};
    return cuLaunchKernel(raw_kernel, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
}
static const kp_launch L = {{1, 1, 1}, {32, 1, 1}, 0, {0, 0, 0}, NULL, 0};
static int typed(int n) { return bench_noop_default(&L, a, b, c, n); }
static int family1(int n) { return bench_noop(&L, a, b, c, n); }
static int typed_generic8(int n) { return bench_noop8_d1(&L, a, b, c, n); }
static int family8(int n) { return bench_noop8(&L, a, b, c, n); }
/* 64 range specializations (n in [64i+1, 64i+64]): n = 4033 fits only the last, so dispatch walks all 64 */
static int typed_range64(int n) { return (void)n, bench_range64_r63(&L, a, b, c, 63 * 64 + 1); }
static int family_range64(int n) { return (void)n, bench_range64(&L, a, b, c, 63 * 64 + 1); }

static void spin(double ms) {
    long long cycles = (long long)(ms * 2.0e6); /* ~2 GHz SM clock; only needs to outlast a batch */
    void* args[] = {&cycles};
    cuLaunchKernel(spin_kernel, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
}

/* Host ns per launch of one batch queued behind a spin kernel, so the GPU never drains the queue. */
static double queued_once(launch_fn f, int n) {
    spin(4.0);
    double t = now();
    for (int i = 0; i < BATCH; i++)
        if (f(n)) fprintf(stderr, "launch failed: %s\n", bench_last_error()), exit(1);
    double ns = (now() - t) / BATCH * 1e9;
    cuCtxSynchronize();
    return ns;
}

/* Host ns per launch, back to back with the GPU running them (queue-bound steady state). */
static double steady(launch_fn f, int n) {
    const int N = 20000;
    for (int i = 0; i < 2000; i++) f(n);
    cuCtxSynchronize();
    double t = now();
    for (int i = 0; i < N; i++) f(n);
    cuCtxSynchronize();
    return (now() - t) / N * 1e9;
}

int main(int argc, char** argv) {
    if (argc < 3) return fprintf(stderr, "usage: clib_bench launch CUBIN | cold LIB.so KERNEL\n"), 2;
    driver();
    dptr d;
    cuMemAlloc(&d, 1 << 20);
    a = b = c = (float*)(uintptr_t)d;
    if (!strcmp(argv[1], "launch")) {
        void* lib;
        void* image = read_file(argv[2]);
        if (cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0) ||
            cuLibraryGetKernel(&raw_kernel, lib, "noop") || cuLibraryGetKernel(&spin_kernel, lib, "spin"))
            return fprintf(stderr, "load failed\n"), 1;
        bench_preload(0);
        int odd = 1001; /* fails every divisibility test: dispatch walks all 8 specializations */
        struct {
            const char* name;
            launch_fn f;
        } cases[] = {{"raw", raw}, {"typed", typed}, {"family1", family1}, {"typed8", typed_generic8},
                     {"family8", family8}, {"typedr64", typed_range64}, {"familyr64", family_range64}};
        const int ncase = (int)(sizeof cases / sizeof cases[0]);
        for (int k = 0; k < ncase; k++) steady(cases[k].f, odd); /* warm every path */
        /* interleaved (A B A B ...), the starting case rotating, so drift and order effects hit every case alike */
        for (int rep = 0; rep < REPS; rep++) {
            for (int r = 0; r < ROUNDS; r++)
                for (int j = 0; j < ncase; j++) {
                    int k = (j + r) % ncase;
                    printf("queued_ns %d %s %.1f\n", rep, cases[k].name, queued_once(cases[k].f, odd));
                }
            for (int j = 0; j < ncase; j++) {
                int k = (j + rep) % ncase;
                printf("steady_ns %d %s %.1f\n", rep, cases[k].name, steady(cases[k].f, odd));
            }
        }
        return 0;
    }
    if (!strcmp(argv[1], "cold") && argc > 3) {
        double t = now();
        void* h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        if (!h) return fprintf(stderr, "%s\n", dlerror()), 1;
        kp_status (*fn)(const kp_launch*, float*) = (kp_status(*)(const kp_launch*, float*))dlsym(h, argv[3]);
        if (!fn) return fprintf(stderr, "no %s\n", argv[3]), 1;
        kp_status s = fn(&L, a);
        double t1 = now();
        cuCtxSynchronize();
        printf("cold_ms %.3f status %d\n", (t1 - t) * 1e3, (int)s);
        return s != KP_SUCCESS;
    }
    return 2;
}
