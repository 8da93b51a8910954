/* Scenarios against the generated "demo" library (tests/clib_support.py: demo_artifacts), run with the fake
 * libcuda.so.1. Usage: harness SCENARIO. Prints "tag status=NAME msg=MESSAGE" per call. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo_harness.h"

#define P(tag, call) REPORT(tag, call)

static void* race_thread(void* arg) {
    kp_launch l = L(4, 256);
    kp_status* out = (kp_status*)arg;
    *out = demo_add_f32(&l, (const float*)at(0x10000), (const float*)at(0x20000), (float*)at(0x30000), 1000);
    return NULL;
}

int main(int argc, char** argv) {
    const char* what = argc > 1 ? argv[1] : "";
    kp_launch l = L(2, 128);
    if (!strcmp(what, "binary_for")) { /* binary_for KERNEL MAJOR MINOR ...: which binary each device gets */
        for (int i = 2; i + 2 < argc; i += 3) {
            char buf[64], tag[160];
            kp_status s = demo_binary_for_device(argv[i], atoi(argv[i + 1]), atoi(argv[i + 2]), buf, sizeof buf);
            snprintf(tag, sizeof tag, "%s@%s.%s", argv[i], argv[i + 1], argv[i + 2]);
            printf("%s status=%s msg=%s\n", tag, demo_status_name(s), s ? demo_last_error() : buf);
        }
        return 0;
    }
    if (!strcmp(what, "rule_launch")) { /* launch ladder and ptx_only once on the fake's device */
        l = L(1, 32);
        P("ladder", demo_ladder(&l));
        P("ptx_only", demo_ptx_only(&l));
        return 0;
    }
    if (!strcmp(what, "pack")) {
        kp_f16 h = {0x3c00};
        l = L(1, 1);
        P("pack", demo_pack(&l, -5, -300, 123456, -1234567890123LL, 1.5f, 2.25, true, h, 200,
                            0xfedcba9876543210ULL, (float*)at(0x7000)));
        P("pack_typed", demo_pack_default(&l, -5, -300, 123456, -1234567890123LL, 1.5f, 2.25, true, h, 200,
                                          0xfedcba9876543210ULL, (float*)at(0x7000)));
    } else if (!strcmp(what, "dispatch")) {
        P("f32_aligned", demo_add(&l, at(0x10000), KP_F32, at(0x20000), KP_F32, at(0x30000), KP_F32, 1024));
        P("f32_misaligned", demo_add(&l, at(0x10004), KP_F32, at(0x20000), KP_F32, at(0x30000), KP_F32, 1024));
        P("f32_odd_n", demo_add(&l, at(0x10000), KP_F32, at(0x20000), KP_F32, at(0x30000), KP_F32, 1023));
        P("f64", demo_add(&l, at(0x10000), KP_F64, at(0x20000), KP_F64, at(0x30000), KP_F64, 1024));
        P("f16", demo_add(&l, at(0x10008), KP_F16, at(0x20000), KP_F16, at(0x30000), KP_F16, 1000));
        P("mixed", demo_add(&l, at(0x10000), KP_F32, at(0x20000), KP_F64, at(0x30000), KP_F32, 1024));
        P("typed_misaligned", demo_add_f32_vec4(&l, (const float*)at(0x10004), (const float*)at(0x20000),
                                                (float*)at(0x30000), 1024));
        P("typed_n", demo_add_f32_vec4(&l, (const float*)at(0x10000), (const float*)at(0x20000),
                                       (float*)at(0x30000), 1022));
    } else if (!strcmp(what, "tensor")) {
        kp_tensor t;
        memset(&t, 0, sizeof t);
        t.data = at(0x40000), t.dtype = KP_F32, t.rank = 2;
        t.shape[0] = 3, t.shape[1] = 5, t.stride[0] = 8, t.stride[1] = 1;
        l = L(3, 5);
        P("tensor_ok", demo_tsum(&l, &t, (float*)at(0x50000)));
        t.stride[1] = 2;
        P("tensor_stride", demo_tsum(&l, &t, (float*)at(0x50000)));
        t.stride[1] = 1, t.shape[0] = 3000000000LL;
        P("tensor_big", demo_tsum(&l, &t, (float*)at(0x50000)));
        t.shape[0] = 3, t.dtype = KP_F16;
        P("tensor_dtype", demo_tsum(&l, &t, (float*)at(0x50000)));
        P("tensor_null", demo_tsum(&l, NULL, (float*)at(0x50000)));
        demo_Tensor2f d = {(float*)at(0x40000), 3, 5, 8};
        P("tensor_typed", demo_tsum_default(&l, d, (float*)at(0x50000)));
    } else if (!strcmp(what, "smem")) {
        l.dynamic_smem = 64 * 1024;
        P("smem64a", demo_big_smem(&l, (const float*)at(0x1000), (float*)at(0x2000), 16384));
        P("smem64b", demo_big_smem(&l, (const float*)at(0x1000), (float*)at(0x2000), 16384));
        l.dynamic_smem = 40 * 1024;
        P("smem40", demo_big_smem(&l, (const float*)at(0x1000), (float*)at(0x2000), 10240));
        l.dynamic_smem = 100 * 1024;
        P("smem100", demo_big_smem(&l, (const float*)at(0x1000), (float*)at(0x2000), 25600));
        l.dynamic_smem = 300 * 1024;
        P("smem300", demo_big_smem(&l, (const float*)at(0x1000), (float*)at(0x2000), 76800));
    } else if (!strcmp(what, "cluster")) {
        l = L(4, 64);
        P("explicit", demo_cluster2(&l, (float*)at(0x1000)));
        l.grid[0] = 3;
        P("explicit_bad_grid", demo_cluster2(&l, (float*)at(0x1000)));
        l.grid[0] = 4, l.cluster[0] = 4;
        P("explicit_other", demo_cluster2(&l, (float*)at(0x1000)));
        l = L(4, 128);
        l.cluster[0] = 2;
        P("requested", demo_add_f32(&l, (const float*)at(0x10000), (const float*)at(0x20000), (float*)at(0x30000),
                                    512));
        l = L(8, 64);
        P("spec", demo_spec_cluster(&l, (float*)at(0x1000)));
    } else if (!strcmp(what, "block")) {
        l = L(2, 0);
        P("fixed", demo_fixed_block(&l, (float*)at(0x1000)));
        l = L(2, 64);
        P("wrong", demo_fixed_block(&l, (float*)at(0x1000)));
        l = L(2, 128);
        P("right", demo_fixed_block(&l, (float*)at(0x1000)));
        l = L(2, 0);
        P("missing", demo_add_f32(&l, (const float*)at(0x10000), (const float*)at(0x20000), (float*)at(0x30000), 1));
        P("spec_block", demo_noargs(&l));
        l.grid[0] = 0;
        P("zero_grid", demo_noargs(&l));
        P("null_launch", demo_noargs(NULL));
    } else if (!strcmp(what, "hidden")) {
        P("hidden", demo_hidden(&l, (float*)at(0x1000), 77));
    } else if (!strcmp(what, "add")) {
        P("add", demo_add(&l, at(0x10004), KP_F32, at(0x20000), KP_F32, at(0x30000), KP_F32, 1000));
        P("add_f64", demo_add_f64(&l, (const double*)at(0x10000), (const double*)at(0x20000), (double*)at(0x30000),
                                  100));
    } else if (!strcmp(what, "stream")) {
        l.stream = at(0x2000);
        P("stream", demo_add_f32(&l, (const float*)at(0x10000), (const float*)at(0x20000), (float*)at(0x30000), 1));
        l.stream = NULL;
        P("after", demo_add_f32(&l, (const float*)at(0x10000), (const float*)at(0x20000), (float*)at(0x30000), 1));
    } else if (!strcmp(what, "preload")) {
        P("preload0", demo_preload(0));
        P("preload_all", demo_preload(-1));
        P("preload_bad", demo_preload(7));
        size_t size = 0;
        const unsigned char* b = (const unsigned char*)demo_bundle(&size);
        printf("bundle size=%zu magic=%02x%c%c%c%c%c aligned=%d\n", size, b[0], b[1], b[2], b[3], b[4], b[5],
               (int)((uintptr_t)b % 64 == 0));
    } else if (!strcmp(what, "grid")) {
        static const int32_t ns[] = {1000, 1, 256, 257, 50, 0, -5};
        char tag[32];
        const float *x = (const float*)at(0x10000), *y = (const float*)at(0x20000);
        l = L(0, 128);
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            snprintf(tag, sizeof tag, "gadd_%d", (int)ns[i]);
            P(tag, demo_gadd(&l, x, y, (float*)at(0x30000), ns[i]));
        }
        l = L(7, 128);
        P("gadd_given", demo_gadd(&l, x, y, (float*)at(0x30000), 1000));
        kp_tensor t;
        memset(&t, 0, sizeof t);
        t.data = at(0x40000), t.dtype = KP_F32, t.rank = 2;
        t.shape[0] = 3, t.shape[1] = 5, t.stride[0] = 8, t.stride[1] = 1;
        l = L(0, 32);
        P("gsum_family", demo_gsum(&l, &t, (float*)at(0x50000)));
        demo_Tensor2f d = {(float*)at(0x40000), 6, 9, 16};
        P("gsum_typed", demo_gsum_default(&l, d, (float*)at(0x50000)));
        d.shape0 = 0;
        P("gsum_empty", demo_gsum_default(&l, d, (float*)at(0x50000)));
        t.shape[1] = 4;
        P("gsum_empty_y", demo_gsum(&l, &t, (float*)at(0x50000)));
    } else if (!strcmp(what, "scratch")) {
        l = L(10, 64);
        P("scratch", demo_scratch(&l, (float*)at(0x1000), 5));
        l.grid[1] = 3, l.stream = at(0x1000);
        P("scratch_stream", demo_scratch(&l, (float*)at(0x1000), 5));
        l = L(2, 64);
        P("hidden_null", demo_hidden(&l, (float*)at(0x1000), 5));
    } else if (!strcmp(what, "tma")) {
        static const int64_t shapes[][3] = {{256, 512, 512}, {64, 64, 64}, {100, 72, 72}, {1, 8, 8}, {300, 200, 256},
                                            {4096, 64, 64}};
        char tag[32];
        kp_tensor t;
        memset(&t, 0, sizeof t);
        t.dtype = KP_F16, t.rank = 2, t.stride[1] = 1;
        l = L(2, 128);
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            t.data = at(0x100000 + 0x1000 * i);
            t.shape[0] = shapes[i][0], t.shape[1] = shapes[i][1], t.stride[0] = shapes[i][2];
            snprintf(tag, sizeof tag, "tma_%d", (int)i);
            P(tag, demo_tma2d(&l, &t, 7, (float*)at(0x2000)));
        }
        P("tma_typed", demo_tma2d_default(&l, &t, 7, (float*)at(0x2000)));
        t.data = at(0x100002);
        P("tma_misaligned", demo_tma2d(&l, &t, 7, (float*)at(0x2000)));
        t.data = at(0x100000), t.stride[1] = 2;
        P("tma_inner", demo_tma2d(&l, &t, 7, (float*)at(0x2000)));
        t.stride[1] = 1, t.stride[0] = 70;
        P("tma_stride", demo_tma2d(&l, &t, 7, (float*)at(0x2000)));
        t.stride[0] = 64, t.shape[0] = 0;
        P("tma_dims", demo_tma2d(&l, &t, 7, (float*)at(0x2000)));
        t.shape[0] = 4, t.rank = 3;
        P("tma_rank", demo_tma2d(&l, &t, 7, (float*)at(0x2000)));
        t.rank = 2, t.dtype = KP_F32;
        P("tma_dtype", demo_tma2d(&l, &t, 7, (float*)at(0x2000)));
        P("tma_null", demo_tma2d(&l, NULL, 7, (float*)at(0x2000)));
        t.dtype = KP_F32, t.data = at(0x3000), t.shape[0] = 5, t.shape[1] = 7, t.stride[0] = 9, t.stride[1] = 3;
        P("dec", demo_desc_dec(&l, &t, (float*)at(0x2000)));
    } else if (!strcmp(what, "race")) {
        enum { N = 32 };
        pthread_t th[N];
        kp_status st[N];
        for (int i = 0; i < N; i++) pthread_create(&th[i], NULL, race_thread, &st[i]);
        int ok = 0;
        for (int i = 0; i < N; i++) pthread_join(th[i], NULL), ok += st[i] == KP_SUCCESS;
        printf("race ok=%d\n", ok);
    } else {
        printf("unknown scenario %s\n", what);
        return 2;
    }
    return 0;
}
