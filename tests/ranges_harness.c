/* Shape-range dispatch through the generated "rng" library (tests/test_ranges.py) on the fake libcuda.so.1.
 * Usage: ranges_harness radd N... | rsum COLS... | bench REPS. Prints "tag status=NAME" per call; the fake's log says
 * which specialization ran (each has its own default block). bench: the mean time of one dispatch over 64 range
 * specializations (rng_disp with n matching the last), printed as "bench ns=..." (no assertion on it anywhere). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rng.h"

static void* at(uintptr_t addr) { return (void*)addr; }

int main(int argc, char** argv) {
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = 1;
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "radd")) {
        for (int i = 2; i < argc; i++) {
            kp_status s = rng_radd(&l, (const float*)at(0x10000), (const float*)at(0x20000), (float*)at(0x30000),
                                   (int32_t)atoi(argv[i]));
            printf("radd%s status=%s msg=%s\n", argv[i], rng_status_name(s), s ? rng_last_error() : "");
        }
    } else if (!strcmp(argv[1], "rsum")) {
        for (int i = 2; i < argc; i++) {
            kp_tensor t;
            memset(&t, 0, sizeof t);
            t.data = at(0x40000), t.dtype = KP_F32, t.rank = 2;
            t.shape[0] = 3, t.shape[1] = atoi(argv[i]), t.stride[0] = t.shape[1], t.stride[1] = 1;
            kp_status s = rng_rsum(&l, &t, (float*)at(0x50000));
            printf("rsum%s status=%s msg=%s\n", argv[i], rng_status_name(s), s ? rng_last_error() : "");
        }
    } else if (!strcmp(argv[1], "bench")) {
        long reps = argc > 2 ? atol(argv[2]) : 100000;
        struct timespec t0, t1;
        l.block[0] = 32;
        /* the fake's launch costs are in the loop too: time the same loop on a one-specialization family */
        double ns[2];
        for (int k = 0; k < 2; k++) {
            clock_gettime(CLOCK_MONOTONIC, &t0);
            for (long r = 0; r < reps; r++) {
                kp_status s = k ? rng_disp(&l, (const float*)at(0x10000), (const float*)at(0x20000),
                                           (float*)at(0x30000), 63 * 64 + 1)
                                : rng_one(&l, (const float*)at(0x10000), (const float*)at(0x20000),
                                          (float*)at(0x30000), 63 * 64 + 1);
                if (s) {
                    printf("bench status=%s msg=%s\n", rng_status_name(s), rng_last_error());
                    return 1;
                }
            }
            clock_gettime(CLOCK_MONOTONIC, &t1);
            ns[k] = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)reps;
        }
        printf("bench one_ns=%.1f disp64_ns=%.1f dispatch_ns=%.1f\n", ns[0], ns[1], ns[1] - ns[0]);
    }
    return 0;
}
