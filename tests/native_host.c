/* Host code that launches kernels through the CUDA driver itself, as a package's own C/C++ does: the "native" code
 * `kernelpack capture --native` records (tests/test_capture_native.py). Loaded by a Python script with ctypes.
 *
 * native_run(cubin, n, x, y, out): loads the cubin (cuLibraryLoadData, or cuModuleLoadData where the driver has it),
 * launches scale<float>(x, out, s, n) and then pair_add(Pair{a, b}, x, y, out, n) with the launch its own host code
 * computes (block 128, grid cdiv(n, 128), the second through cuLaunchKernelEx with 64 bytes of dynamic shared memory).
 * Returns 0, or the failing step's number * 1000 + the driver's status. Built with -DNATIVE_HOST_MAIN: a program
 * whose 8 threads do that 20 times each (the recorder under the sanitizers). */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef CUresult (*GetProc)(const char*, void**, int, uint64_t, int*);
typedef struct {
    unsigned gx, gy, gz, bx, by, bz, smem;
    void* stream;
    void* attrs;
    unsigned nattrs;
} LaunchConfig;
typedef struct {
    float a, b;
} Pair;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDevicePrimaryCtxRetain)(void**, int);
static CUresult (*cuCtxSetCurrent)(void*);
static CUresult (*cuLibraryLoadData)(void**, const void*, void*, void**, unsigned, void*, void**, unsigned);
static CUresult (*cuLibraryGetKernel)(void**, void*, const char*);
static CUresult (*cuKernelGetFunction)(void**, void*);
static CUresult (*cuLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                                  void**, void**);
static CUresult (*cuLaunchKernelEx)(const LaunchConfig*, void*, void**, void**);

#define STEP(n, call)                       \
    do {                                    \
        CUresult r_ = (call);               \
        if (r_ != 0) return (n) * 1000 + r_; \
    } while (0)

static int loaded;

static void load_once(void) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        loaded = 1;
        return;
    }
    GetProc get = (GetProc)dlsym(lib, "cuGetProcAddress_v2");
    if (get == NULL) {
        loaded = 2;
        return;
    }
#define G(name)                                                          \
    if (get(#name, (void**)&name, 12000, 0, NULL) != 0 || name == NULL) { \
        loaded = 3;                                                      \
        return;                                                          \
    }
    G(cuInit);
    G(cuDevicePrimaryCtxRetain);
    G(cuCtxSetCurrent);
    G(cuLibraryLoadData);
    G(cuLibraryGetKernel);
    G(cuKernelGetFunction);
    G(cuLaunchKernel);
    G(cuLaunchKernelEx);
#undef G
}

static int load(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load_once);
    return loaded;
}

static int launch_both(const unsigned char* image, int n, uint64_t x, uint64_t y, uint64_t out);

int native_run(const char* cubin_path, int n, uint64_t x, uint64_t y, uint64_t out) {
    int got = load();
    if (got != 0) return got;
    FILE* f = fopen(cubin_path, "rb");
    if (f == NULL) return 4;
    unsigned char* image = (unsigned char*)malloc(1 << 20);
    size_t size = image != NULL ? fread(image, 1, 1 << 20, f) : 0;
    fclose(f);
    if (size == 0) {
        free(image);
        return 5;
    }
    int r = launch_both(image, n, x, y, out);
    free(image);
    return r;
}

static int launch_both(const unsigned char* image, int n, uint64_t x, uint64_t y, uint64_t out) {
    void *ctx, *lib, *k_scale, *k_pair, *f_scale, *f_pair;
    STEP(10, cuInit(0));
    STEP(11, cuDevicePrimaryCtxRetain(&ctx, 0));
    STEP(12, cuCtxSetCurrent(ctx));
    STEP(13, cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
    STEP(14, cuLibraryGetKernel(&k_scale, lib, "_Z5scaleIfEvPKT_PS0_fi"));
    STEP(15, cuLibraryGetKernel(&k_pair, lib, "_Z8pair_add4PairPKfS1_Pfi"));
    STEP(16, cuKernelGetFunction(&f_scale, k_scale));
    STEP(17, cuKernelGetFunction(&f_pair, k_pair));
    float s = 2.5f;
    void* scale_args[] = {&x, &out, &s, &n};
    unsigned grid = (unsigned)((n + 127) / 128);
    STEP(18, cuLaunchKernel(f_scale, grid, 1, 1, 128, 1, 1, 0, NULL, scale_args, NULL));
    Pair p = {0.5f, -1.25f};
    void* pair_args[] = {&p, &x, &y, &out, &n};
    LaunchConfig c = {grid, 1, 1, 128, 1, 1, 64, NULL, NULL, 0};
    STEP(19, cuLaunchKernelEx(&c, f_pair, pair_args, NULL));
    return 0;
}

#ifdef NATIVE_HOST_MAIN
/* A storm for the sanitizers: 8 threads, each launching both kernels 20 times with its own n and pointers. */
static const char* cubin;

static void* storm(void* arg) {
    uintptr_t t = (uintptr_t)arg;
    for (int i = 0; i < 20; i++) {
        uint64_t base = (uint64_t)(t + 1) << 32;
        if (native_run(cubin, (int)(1000 + t), base + 0x1000, base + 0x2000, base + 0x3000) != 0) return (void*)1;
    }
    return NULL;
}

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    cubin = argv[1];
    pthread_t threads[8];
    for (uintptr_t t = 0; t < 8; t++) pthread_create(&threads[t], NULL, storm, (void*)t);
    int bad = 0;
    for (int t = 0; t < 8; t++) {
        void* r;
        pthread_join(threads[t], &r);
        bad |= r != NULL;
    }
    return bad;
}
#endif
