/* Shape-range dispatch through the generated "rng" library (tests/test_ranges.py) on the fake libcuda.so.1.
 * Usage: ranges_harness radd N... | rsum COLS... | bench REPS. Prints "tag status=NAME" per call; the fake's log says
 * which specialization ran (each has its own default block). bench REPS: the time of a launch whose dispatch walks
 * 64 range specializations (printed as "bench ... dispatch64_ns=..."; nothing asserts on it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rng.h"
#ifndef RADD
#define RADD rng_radd /* the tuned library of test_tuning.py builds with -DRADD=rng_mm -DONLY_RADD */
#endif

static void* at(uintptr_t addr) { return (void*)addr; }

int main(int argc, char** argv) {
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = 1;
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "radd")) {
        for (int i = 2; i < argc; i++) {
            kp_status s = RADD(&l, (const float*)at(0x10000), (const float*)at(0x20000), (float*)at(0x30000),
                                   (int32_t)atoi(argv[i]));
            printf("radd%s status=%s msg=%s\n", argv[i], rng_status_name(s), s ? rng_last_error() : "");
        }
#ifndef ONLY_RADD
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
        /* rng_disp holds 64 disjoint range specializations in dispatch order; n = 1 matches the first, n = 4033 the
         * last: the difference is the walk over 63 range checks that fail (the launch itself, on the fake, is the
         * same in both). Best of 5 rounds of each. */
        long reps = argc > 2 ? atol(argv[2]) : 100000;
        const int32_t ns_of[3] = {1, 63 * 64 + 1, 0};
        double best[3] = {1e30, 1e30, 1e30};
        l.block[0] = 32;
        for (int round = 0; round < 5; round++) {
            for (int k = 0; k < 3; k++) {
                struct timespec t0, t1;
                clock_gettime(CLOCK_MONOTONIC, &t0);
                for (long r = 0; r < reps; r++) {
                    kp_status s = k < 2 ? rng_disp(&l, (const float*)at(0x10000), (const float*)at(0x20000),
                                                   (float*)at(0x30000), ns_of[k])
                                        : rng_one(&l, (const float*)at(0x10000), (const float*)at(0x20000),
                                                  (float*)at(0x30000), 1);
                    if (s) {
                        printf("bench status=%s msg=%s\n", rng_status_name(s), rng_last_error());
                        return 1;
                    }
                }
                clock_gettime(CLOCK_MONOTONIC, &t1);
                double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)reps;
                if (ns < best[k]) best[k] = ns;
            }
        }
        printf("bench one_ns=%.1f first_ns=%.1f last_ns=%.1f dispatch64_ns=%.1f\n", best[2], best[0], best[1],
               best[1] - best[0]);
#endif
    }
    return 0;
}
