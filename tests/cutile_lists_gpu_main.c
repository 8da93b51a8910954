/* GPU test program for the library of cuTile kernels taking lists of arrays (scripts/gpu.py prepare cutile_lists:
 * kplists from tests/cutile_list_kernels.py, sm_90a): real launches through the C entries (an array of kp_tensor
 * and a count per list), fresh random inputs, references computed here in double, and a check that every output
 * element was written and nothing past the arrays' ends (outputs start as a NaN sentinel, each followed by a guard
 * zone). Prints "PASS name" or "FAIL name: why" per check; exits 1 if any check failed. The driver API used here for
 * memory is dlopen'ed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kplists.h"

typedef unsigned long long dptr;
static int (*cuInit)(unsigned);
static int (*cuDevicePrimaryCtxRetain)(void**, int);
static int (*cuCtxSetCurrent)(void*);
static int (*cuCtxSynchronize)(void);
static int (*cuMemAlloc)(dptr*, size_t);
static int (*cuMemFree)(dptr);
static int (*cuMemcpyHtoD)(dptr, const void*, size_t);
static int (*cuMemcpyDtoH)(void*, dptr, size_t);
static int failures;

#define CHECK_CU(x)                                                        \
    do {                                                                   \
        int r_ = (x);                                                      \
        if (r_) {                                                          \
            printf("FAIL driver: %s = %d (line %d)\n", #x, r_, __LINE__); \
            exit(1);                                                       \
        }                                                                  \
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
    SYM(cuMemAlloc, "cuMemAlloc_v2");
    SYM(cuMemFree, "cuMemFree_v2");
    SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    void* ctx = NULL;
    CHECK_CU(cuInit(0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK_CU(cuCtxSetCurrent(ctx));
}

static void report(const char* name, const char* why) {
    if (why == NULL) {
        printf("PASS %s\n", name);
    } else {
        printf("FAIL %s: %s\n", name, why);
        failures++;
    }
}

static float frand(void) { return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f; }

/* fp16 bits of v, a multiple of 1/16 with |v| <= 8 (exact in fp16: no rounding needed) */
static uint16_t half_bits(float v) {
    if (v == 0.0f) return 0;
    uint16_t sign = v < 0 ? 0x8000 : 0;
    float a = fabsf(v);
    int e = 0;
    while (a >= 2.0f) a /= 2.0f, e++;
    while (a < 1.0f) a *= 2.0f, e--;
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (uint16_t)((a - 1.0f) * 1024.0f));
}

static kp_tensor tensor(dptr data, kp_dtype dtype, int rank, const int64_t* shape) {
    kp_tensor t;
    memset(&t, 0, sizeof t);
    t.data = (void*)(uintptr_t)data, t.dtype = dtype, t.rank = rank;
    for (int i = rank - 1, s = 1; i >= 0; s *= (int)shape[i], i--) t.shape[i] = shape[i], t.stride[i] = s;
    return t;
}

enum { GROUPS = 3, GUARD = 300, TILE = 256 };

/* ys[g] = alpha * xs[g] for three groups of different lengths (none a multiple of the tile), through the family
 * entry (f32) */
static void group_scale(void) {
    static const int64_t len[GROUPS] = {1000, 4099, 33};
    kp_tensor xs[GROUPS], ys[GROUPS];
    dptr dx[GROUPS], dy[GROUPS];
    float* hx[GROUPS];
    float alpha = frand() * 4.0f, nan = nanf(""), sentinel = 7.0f;
    int64_t most = 0;
    for (int g = 0; g < GROUPS; g++) {
        size_t n = (size_t)len[g];
        hx[g] = malloc(n * sizeof(float));
        float* hy = malloc((n + GUARD) * sizeof(float));
        for (size_t i = 0; i < n; i++) hx[g][i] = frand(), hy[i] = nan;
        for (size_t i = n; i < n + GUARD; i++) hy[i] = sentinel;
        CHECK_CU(cuMemAlloc(&dx[g], n * sizeof(float)));
        CHECK_CU(cuMemAlloc(&dy[g], (n + GUARD) * sizeof(float)));
        CHECK_CU(cuMemcpyHtoD(dx[g], hx[g], n * sizeof(float)));
        CHECK_CU(cuMemcpyHtoD(dy[g], hy, (n + GUARD) * sizeof(float)));
        free(hy);
        xs[g] = tensor(dx[g], KP_F32, 1, &len[g]), ys[g] = tensor(dy[g], KP_F32, 1, &len[g]);
        most = len[g] > most ? len[g] : most;
    }
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = (uint32_t)((most + TILE - 1) / TILE), l.grid[1] = GROUPS;
    kp_status s = kplists_group_scale(&l, xs, GROUPS, ys, GROUPS, alpha);
    char why[256] = "";
    if (s != KP_SUCCESS) snprintf(why, sizeof why, "status %d: %s", (int)s, kplists_last_error());
    CHECK_CU(cuCtxSynchronize());
    for (int g = 0; g < GROUPS && !why[0]; g++) {
        size_t n = (size_t)len[g];
        float* got = malloc((n + GUARD) * sizeof(float));
        CHECK_CU(cuMemcpyDtoH(got, dy[g], (n + GUARD) * sizeof(float)));
        for (size_t i = 0; i < n + GUARD && !why[0]; i++) {
            double want = i < n ? (double)(alpha * hx[g][i]) : sentinel;
            if (!(fabs((double)got[i] - want) <= 1e-6 * fabs(want)))
                snprintf(why, sizeof why, "group %d element %zu: got %g, want %g%s", g, i, got[i], want,
                         i >= n ? " (past the array's end)" : "");
        }
        free(got);
    }
    for (int g = 0; g < GROUPS; g++) cuMemFree(dx[g]), cuMemFree(dy[g]), free(hx[g]);
    report("group_scale_f32", why[0] ? why : NULL);
}

/* Cs[g] = As[g] @ Bs[g] for three groups of different shapes, exact inputs (multiples of 1/16): the fp32 sums are
 * exact, so the reference is too */
static void group_matmul(void) {
    static const int64_t mnk[GROUPS][3] = {{200, 136, 96}, {64, 64, 32}, {129, 70, 160}};
    kp_tensor as[GROUPS], bs[GROUPS], cs[GROUPS];
    dptr da[GROUPS], db[GROUPS], dc[GROUPS];
    float *ha[GROUPS], *hb[GROUPS];
    uint32_t gx = 0, gy = 0;
    for (int g = 0; g < GROUPS; g++) {
        int64_t m = mnk[g][0], n = mnk[g][1], k = mnk[g][2];
        int64_t sa[2] = {m, k}, sb[2] = {k, n}, sc[2] = {m, n};
        ha[g] = malloc((size_t)(m * k) * sizeof(float)), hb[g] = malloc((size_t)(k * n) * sizeof(float));
        uint16_t* a16 = malloc((size_t)(m * k) * 2);
        uint16_t* b16 = malloc((size_t)(k * n) * 2);
        float* c = malloc((size_t)(m * n) * sizeof(float));
        for (int64_t i = 0; i < m * k; i++) ha[g][i] = (float)(rand() % 33 - 16) / 16.0f, a16[i] = half_bits(ha[g][i]);
        for (int64_t i = 0; i < k * n; i++) hb[g][i] = (float)(rand() % 33 - 16) / 16.0f, b16[i] = half_bits(hb[g][i]);
        for (int64_t i = 0; i < m * n; i++) c[i] = nanf("");
        CHECK_CU(cuMemAlloc(&da[g], (size_t)(m * k) * 2));
        CHECK_CU(cuMemAlloc(&db[g], (size_t)(k * n) * 2));
        CHECK_CU(cuMemAlloc(&dc[g], (size_t)(m * n) * sizeof(float)));
        CHECK_CU(cuMemcpyHtoD(da[g], a16, (size_t)(m * k) * 2));
        CHECK_CU(cuMemcpyHtoD(db[g], b16, (size_t)(k * n) * 2));
        CHECK_CU(cuMemcpyHtoD(dc[g], c, (size_t)(m * n) * sizeof(float)));
        free(a16), free(b16), free(c);
        as[g] = tensor(da[g], KP_F16, 2, sa), bs[g] = tensor(db[g], KP_F16, 2, sb), cs[g] = tensor(dc[g], KP_F32, 2, sc);
        gx = (uint32_t)((m + 63) / 64) > gx ? (uint32_t)((m + 63) / 64) : gx;
        gy = (uint32_t)((n + 63) / 64) > gy ? (uint32_t)((n + 63) / 64) : gy;
    }
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = GROUPS;
    kp_status s = kplists_group_matmul(&l, as, GROUPS, bs, GROUPS, cs, GROUPS);
    char why[256] = "";
    if (s != KP_SUCCESS) snprintf(why, sizeof why, "status %d: %s", (int)s, kplists_last_error());
    CHECK_CU(cuCtxSynchronize());
    for (int g = 0; g < GROUPS && !why[0]; g++) {
        int64_t m = mnk[g][0], n = mnk[g][1], k = mnk[g][2];
        float* got = malloc((size_t)(m * n) * sizeof(float));
        CHECK_CU(cuMemcpyDtoH(got, dc[g], (size_t)(m * n) * sizeof(float)));
        for (int64_t i = 0; i < m && !why[0]; i++)
            for (int64_t j = 0; j < n && !why[0]; j++) {
                double want = 0;
                for (int64_t q = 0; q < k; q++) want += (double)ha[g][i * k + q] * hb[g][q * n + j];
                if (!((double)got[i * n + j] == want))
                    snprintf(why, sizeof why, "group %d C[%lld][%lld]: got %g, want %g", g, (long long)i,
                             (long long)j, got[i * n + j], want);
            }
        free(got);
    }
    for (int g = 0; g < GROUPS; g++) cuMemFree(da[g]), cuMemFree(db[g]), cuMemFree(dc[g]), free(ha[g]), free(hb[g]);
    report("group_matmul", why[0] ? why : NULL);
}

/* A refusal on the GPU as on the fake: a list of mixed dtypes dispatches to no specialization, launching nothing */
static void mixed_refused(void) {
    int64_t n = 256;
    kp_tensor xs[2] = {tensor(0x100000, KP_F32, 1, &n), tensor(0x100400, KP_F16, 1, &n)};
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = 1, l.grid[1] = 2;
    kp_status s = kplists_group_scale(&l, xs, 2, xs, 2, 1.0f);
    report("mixed_dtypes_refused", s == KP_ERROR_NO_MATCHING_SPECIALIZATION ? NULL : kplists_last_error());
}

int main(void) {
    srand((unsigned)time(NULL));
    load_driver();
    group_scale();
    group_matmul();
    mixed_refused();
    if (failures == 0) printf("ALL PASSED\n");
    return failures ? 1 : 0;
}
