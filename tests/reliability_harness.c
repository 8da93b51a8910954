/* Reliability scenarios against the generated "demo" library (tests/clib_support.py: demo_artifacts) with the fake
 * libcuda.so.1 (tests/fakecuda/).
 *
 *   reliability_harness row NAME    one bad-input row: prints "NAME status=S msg=M", then "alive" (the process
 *                                   keeps running after the refusal)
 *   reliability_harness storm REPS  REPS times (each in a fresh forked process, so every launch is a first launch):
 *                                   32 threads released together, each launching every kernel once with its own
 *                                   argument values; prints "storm rep=R ok=N" per repetition and "storm done"
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "demo_harness.h"

#define ROW(call) REPORT(name, call)

static kp_tensor T2(uintptr_t data, kp_dtype dtype, int64_t s0, int64_t s1, int64_t t0, int64_t t1) {
    kp_tensor t;
    memset(&t, 0, sizeof t);
    t.data = at(data), t.dtype = dtype, t.rank = 2;
    t.shape[0] = s0, t.shape[1] = s1, t.stride[0] = t0, t.stride[1] = t1;
    return t;
}

static kp_tensor T1(uintptr_t data, kp_dtype dtype, int64_t s0, int64_t t0) {
    kp_tensor t;
    memset(&t, 0, sizeof t);
    t.data = at(data), t.dtype = dtype, t.rank = 1;
    t.shape[0] = s0, t.stride[0] = t0;
    return t;
}

static int row(const char* name) {
    const float *x = (const float*)at(0x10000), *y = (const float*)at(0x20000);
    float* out = (float*)at(0x30000);
    kp_launch l = L(2, 128);
    kp_tensor t = T2(0x40000, KP_F32, 3, 5, 8, 1);
    if (!strcmp(name, "wrong_type")) {
        t.dtype = (kp_dtype)999; /* not a kp_dtype at all */
        ROW(demo_tsum(&l, &t, out));
    } else if (!strcmp(name, "wrong_dtype")) {
        ROW(demo_add(&l, at(0x10000), KP_F16, at(0x20000), KP_F16, out, KP_F16, 1000));
    } else if (!strcmp(name, "wrong_dtype_tensor")) {
        t.dtype = KP_F64;
        ROW(demo_tsum(&l, &t, out));
    } else if (!strcmp(name, "wrong_rank")) {
        t.rank = 3;
        ROW(demo_tsum(&l, &t, out));
    } else if (!strcmp(name, "wrong_rank_huge")) {
        t.rank = 1 << 30; /* beyond KP_MAX_RANK: never indexes past the arrays */
        ROW(demo_tsum(&l, &t, out));
    } else if (!strcmp(name, "wrong_rank_negative")) {
        t.rank = -1;
        ROW(demo_tma2d(&l, &t, 7, out));
    } else if (!strcmp(name, "static_extent")) {
        t.stride[1] = 2; /* tsum's inner stride is fixed to 1 when compiled */
        ROW(demo_tsum(&l, &t, out));
    } else if (!strcmp(name, "misaligned")) {
        ROW(demo_add_f32_vec4(&l, (const float*)at(0x10004), y, out, 1024));
    } else if (!strcmp(name, "null_tensor")) {
        ROW(demo_tsum(&l, NULL, out));
    } else if (!strcmp(name, "null_tensor_tma")) {
        ROW(demo_tma2d(&l, NULL, 7, out));
    } else if (!strcmp(name, "null_launch")) {
        ROW(demo_add_f32(NULL, x, y, out, 8));
    } else if (!strcmp(name, "non_contiguous")) {
        kp_tensor m = T2(0x100000, KP_F16, 64, 64, 64, 2); /* TMA needs a unit inner stride */
        ROW(demo_tma2d(&l, &m, 7, out));
    } else if (!strcmp(name, "grid_zero")) {
        l.grid[0] = 0;
        ROW(demo_add_f32(&l, x, y, out, 8));
    } else if (!strcmp(name, "grid_beyond")) {
        l.grid[1] = 70000;
        ROW(demo_add_f32(&l, x, y, out, 8));
    } else if (!strcmp(name, "block_beyond")) {
        l.block[0] = 2048;
        ROW(demo_add_f32(&l, x, y, out, 8));
    } else if (!strcmp(name, "block_reqntid")) {
        l.block[0] = 64;
        ROW(demo_fixed_block(&l, out));
    } else if (!strcmp(name, "smem_limit")) {
        l.dynamic_smem = 300 * 1024;
        ROW(demo_big_smem(&l, x, out, 76800));
    } else if (!strcmp(name, "cluster_grid")) {
        l = L(3, 64);
        ROW(demo_cluster2(&l, out));
    } else if (!strcmp(name, "cluster_other")) {
        l = L(4, 64);
        l.cluster[0] = 4;
        ROW(demo_cluster2(&l, out));
    } else if (!strcmp(name, "arch_not_carried") || !strcmp(name, "no_driver") || !strcmp(name, "driver_too_old")) {
        ROW(demo_add_f64(&l, (const double*)at(0x10000), (const double*)at(0x20000), (double*)at(0x30000), 100));
    } else if (!strcmp(name, "null_struct")) { /* a 128-byte CUtensorMap passed by pointer: NULL */
        ROW(demo_tmap_f32(&l, NULL, 64, 64, 64, 1, 7, out));
    } else if (!strcmp(name, "null_struct_family")) {
        ROW(demo_tmap(&l, NULL, 64, 64, 64, 1, 7, out, KP_F32));
    } else if (!strcmp(name, "negative_extent")) {
        t.shape[0] = -5; /* an i32 shape field: would be packed as 0xfffffffb */
        ROW(demo_tsum(&l, &t, out));
    } else if (!strcmp(name, "negative_extent_grid")) {
        t.shape[0] = -5; /* grid {0,0,0}: gsum's grid comes from shape[0]: launched nothing, reported success */
        l.grid[0] = 0;
        ROW(demo_gsum(&l, &t, out));
    } else if (!strcmp(name, "negative_extent_desc")) {
        kp_tensor p = T2(0x100000, KP_F32, 64, -5, 64, 1); /* decomposed descriptor: shapes go to the kernel */
        ROW(demo_desc_dec(&l, &p, out));
    } else if (!strcmp(name, "partial_block")) {
        l.block[0] = 0, l.block[1] = 5; /* {0,5,0}: would launch as {1,5,1} */
        ROW(demo_add_f32(&l, x, y, out, 8));
    } else if (!strcmp(name, "partial_block_fixed")) {
        l = L(2, 0);
        l.block[2] = 1; /* {0,0,1} is not {0,0,0}: the fixed block is asked for with all zeros */
        ROW(demo_fixed_block(&l, out));
    } else if (!strcmp(name, "ok_add")) { /* valid launches (tests/test_same_answer.py: launched everywhere) */
        ROW(demo_add(&l, x, KP_F32, y, KP_F32, out, KP_F32, 8));
    } else if (!strcmp(name, "ok_tsum")) {
        ROW(demo_tsum(&l, &t, out));
    } else if (!strcmp(name, "ok_pdl_cooperative")) { /* per-call launch flags (KP_LAUNCH_*) */
        l.flags = KP_LAUNCH_PDL | KP_LAUNCH_COOPERATIVE;
        ROW(demo_add(&l, x, KP_F32, y, KP_F32, out, KP_F32, 8));
    } else if (!strcmp(name, "pdl_pre90")) { /* run with FAKECUDA_CC=8.0 */
        l.flags = KP_LAUNCH_PDL;
        ROW(demo_add(&l, x, KP_F32, y, KP_F32, out, KP_F32, 8));
    } else if (!strcmp(name, "cooperative_too_big")) { /* 100000 blocks of 128 threads: 2112 fit on the fake */
        l = L(100000, 128);
        l.flags = KP_LAUNCH_COOPERATIVE;
        ROW(demo_add(&l, x, KP_F32, y, KP_F32, out, KP_F32, 8));
    } else if (!strcmp(name, "cooperative_no_driver")) { /* run without cuOccupancyMaxActiveBlocksPerMultiprocessor */
        l.flags = KP_LAUNCH_COOPERATIVE;
        ROW(demo_add(&l, x, KP_F32, y, KP_F32, out, KP_F32, 8));
    } else if (!strcmp(name, "cluster_too_big")) { /* 16 blocks: beyond the portable cluster size */
        l = L(16, 128);
        l.cluster[0] = 16;
        ROW(demo_add(&l, x, KP_F32, y, KP_F32, out, KP_F32, 8));
    } else if (!strcmp(name, "cluster_pre90")) { /* spec_cluster asks for a cluster; run with FAKECUDA_CC=8.0 */
        l = L(4, 64);
        ROW(demo_spec_cluster(&l, out));
    } else if (!strcmp(name, "per_arch_block")) { /* 64 threads on sm_80, 128 on sm_90a: run with FAKECUDA_CC=8.0 */
        l = L(2, 128);
        ROW(demo_arch_block(&l));
    } else if (!strcmp(name, "requires_unmet")) { /* built for 108 SMs; the fake has 132 */
        ROW(demo_needs_108(&l, x, y, out, 8));
    } else if (!strcmp(name, "family_newer_minor") || !strcmp(name, "nothing_fits")) { /* sm_90a + sm_100f */
        l = L(2, 32);
        ROW(demo_on_family(&l));
    } else if (!strcmp(name, "arch_specific_elsewhere")) { /* sm_90a only, on 10.0 */
        l = L(4, 64);
        ROW(demo_cluster2(&l, out));
    } else if (!strcmp(name, "ptx_newer_device")) { /* sm_90a + compute_80 PTX, on 12.0 */
        l = L(2, 32);
        ROW(demo_on_ptx(&l));
    } else if (!strcmp(name, "ptx_too_new")) { /* PTX ISA 9.5 on a CUDA 13.0 driver */
        l = L(2, 32);
        ROW(demo_new_ptx(&l));
    } else if (!strcmp(name, "mac_no_driver")) { /* run with FAKECUDA_MISSING=cuOccupancyMaxActiveClusters */
        l = L(4, 128);
        ROW(demo_mac(&l, x, y, out));
    } else if (!strcmp(name, "partial_cluster")) {
        l = L(4, 64);
        l.cluster[1] = 2; /* {0,2,0}: would launch as {1,2,1} */
        ROW(demo_add_f32(&l, x, y, out, 8));
    } else if (!strcmp(name, "ok_list_many")) { /* 400 tensors a list: more descriptor words than the stack stages */
        static kp_tensor many[400];
        for (int k = 0; k < 400; k++) many[k] = T1(0x100000 + 0x100 * (uintptr_t)k, KP_F32, 4 * (k % 7 + 1), 1);
        l = L(1, 128);
        l.grid[1] = 400;
        ROW(demo_glist(&l, many, 400, many, 400, 1.0f));
    } else if (!strncmp(name, "ok_list", 7) || strstr(name, "list_") == name || strstr(name, "typed_list_") == name) {
        /* glist: two lists of f32 tensors, through the family entry (typed_*: the f32 specialization's) */
        kp_tensor xs[3] = {T1(0x50000, KP_F32, 8, 1), T1(0x50100, KP_F32, 12, 1), T1(0x50200, KP_F32, 4, 1)};
        kp_tensor ys[2] = {T1(0x60000, KP_F32, 8, 1), T1(0x60100, KP_F32, 12, 1)};
        const kp_tensor* px = xs;
        int32_t nx = 2;
        l = L(1, 128);
        l.grid[1] = 2;
        if (!strcmp(name, "list_mixed_dtype") || !strcmp(name, "typed_list_mixed_dtype")) xs[1].dtype = KP_F64;
        if (!strcmp(name, "list_empty")) nx = 0;
        if (!strcmp(name, "ok_list_odd")) nx = 3; /* 9 descriptor words: ys's start is padded to 16 bytes */
        if (!strcmp(name, "list_null")) px = NULL;
        if (!strcmp(name, "list_wrong_rank")) xs[1].rank = 2, xs[1].shape[1] = 1, xs[1].stride[1] = 1;
        if (!strcmp(name, "list_static_stride")) xs[1].stride[0] = 2;
        if (!strcmp(name, "list_shape_divisor")) xs[0].shape[0] = 6;
        if (!strcmp(name, "list_misaligned")) xs[1].data = at(0x50104);
        if (!strcmp(name, "list_negative_extent")) xs[1].shape[0] = -4;
        if (!strcmp(name, "list_index_range")) xs[1].shape[0] = (int64_t)1 << 32; /* beyond the int32 index type */
        if (strstr(name, "typed_") == name) {
            ROW(demo_glist_f32(&l, px, nx, ys, 2, 2.0f));
        } else {
            ROW(demo_glist(&l, px, nx, ys, 2, 2.0f));
        }
    } else {
        printf("unknown row %s\n", name);
        return 2;
    }
    printf("alive\n");
    return 0;
}

/* ------------------------------------------------------------------ storm */

enum { THREADS = 32 };
static pthread_barrier_t start;

static int launch_all(uintptr_t tag) {
    const float* x = (const float*)at(tag + 0x10000);
    const float* y = (const float*)at(tag + 0x20000);
    float* out = (float*)at(tag + 0x30000);
    int32_t n = (int32_t)(tag >> 20) * 4; /* a multiple of 4 that tells the thread apart */
    kp_launch l = L(2, 128);
    kp_tensor t = T2(tag + 0x40000, KP_F32, 3, 5, 8, 1);
    kp_tensor m = T2(tag + 0x100000, KP_F16, 64, 64, 64, 1);
    demo_Tensor2f d = {(float*)at(tag + 0x40000), 6, 9, 16};
    kp_f16 h = {0x3c00};
    int ok = 0;
    ok += demo_add_f32(&l, x, y, out, n) == KP_SUCCESS;
    ok += demo_add_f32_vec4(&l, x, y, out, n) == KP_SUCCESS;
    ok += demo_add_f64(&l, (const double*)x, (const double*)y, (double*)out, n) == KP_SUCCESS;
    ok += demo_add(&l, x, KP_F32, y, KP_F32, out, KP_F32, n + 1) == KP_SUCCESS;
    ok += demo_tsum(&l, &t, out) == KP_SUCCESS;
    ok += demo_gsum_default(&l, d, out) == KP_SUCCESS;
    ok += demo_gadd(&l, x, y, out, n) == KP_SUCCESS;
    ok += demo_hidden(&l, out, n) == KP_SUCCESS;
    ok += demo_scratch(&l, out, n) == KP_SUCCESS;
    ok += demo_tma2d(&l, &m, n, out) == KP_SUCCESS;
    l.dynamic_smem = 64 * 1024;
    ok += demo_big_smem(&l, x, out, n) == KP_SUCCESS;
    l = L(1, 1);
    ok += demo_pack(&l, -5, -300, n, -1234567890123LL, 1.5f, 2.25, true, h, 200, 0xfedcba9876543210ULL, out) ==
          KP_SUCCESS;
    l = L(2, 0);
    ok += demo_fixed_block(&l, out) == KP_SUCCESS;
    ok += demo_noargs(&l) == KP_SUCCESS;
    l = L(4, 64);
    ok += demo_cluster2(&l, out) == KP_SUCCESS;
    return ok;
}

static void* storm_thread(void* arg) {
    int* slot = (int*)arg; /* in: the thread's index; out: its successful launches */
    uintptr_t tag = ((uintptr_t)*slot + 1) << 24;
    pthread_barrier_wait(&start);
    *slot = launch_all(tag);
    return NULL;
}

static int storm_once(void) {
    pthread_t th[THREADS];
    int ok[THREADS];
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) ok[i] = i, pthread_create(&th[i], NULL, storm_thread, &ok[i]);
    int total = 0;
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL), total += ok[i];
    pthread_barrier_destroy(&start);
    return total;
}

static int storm(int reps) {
    for (int r = 0; r < reps; r++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            int ok = storm_once();
            printf("storm rep=%d ok=%d\n", r, ok);
            fflush(stdout);
            _exit(0);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf("storm rep=%d child failed (status %d)\n", r, st);
            return 1;
        }
    }
    printf("storm done\n");
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 3 && !strcmp(argv[1], "row")) return row(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "storm")) return storm(atoi(argv[2]));
    fprintf(stderr, "usage: %s row NAME | storm REPS\n", argv[0]);
    return 2;
}
