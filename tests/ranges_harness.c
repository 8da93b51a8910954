/* Shape-range dispatch through the generated "rng" library (tests/test_ranges.py) on the fake libcuda.so.1.
 * Usage: ranges_harness radd N... | rsum COLS... | bench REPS. Prints "tag status=NAME" per call; the fake's log says
 * which specialization ran (each has its own default block). bench REPS: the time of a launch whose dispatch chooses
 * among 64 range specializations, less that of the typed entry (printed as "bench ... dispatch64_ns=..."; nothing
 * asserts on it). */
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
        /* rng_disp holds 64 disjoint range specializations (n in [64i+1, 64i+64]); rng_disp_r63 is the typed entry
         * of the last, rng_one a family of one (its typed entry). Cases: n fitting the first, a middle one and the
         * last of the 64; "mixed": n cycling over all 64 in a scattered order (no branch history helps); the same
         * launch through the typed entry. dispatch64 = last - typed (bench/clib_launch.py's familyr64 - typedr64,
         * on the fake). Best of 5 interleaved rounds of REPS calls each. */
        long reps = argc > 2 ? atol(argv[2]) : 100000;
        enum { ONE, TYPED, FIRST, MID, LAST, MIXED, NCASE };
        static const char* const names[NCASE] = {"one", "typed", "first", "mid", "last", "mixed"};
        const int32_t n_of[NCASE] = {1, 63 * 64 + 1, 1, 32 * 64 + 1, 63 * 64 + 1, 0};
        int32_t mixed[64];
        for (int i = 0; i < 64; i++) mixed[i] = 64 * ((i * 37) % 64) + 1 + (i * 13) % 64;
        double best[NCASE];
        for (int k = 0; k < NCASE; k++) best[k] = 1e30;
        l.block[0] = 32;
        for (int round = 0; round < 5; round++) {
            for (int k = 0; k < NCASE; k++) {
                struct timespec t0, t1;
                clock_gettime(CLOCK_MONOTONIC, &t0);
                for (long r = 0; r < reps; r++) {
                    const float *x = (const float*)at(0x10000), *y = (const float*)at(0x20000);
                    float* o = (float*)at(0x30000);
                    kp_status s = k == ONE     ? rng_one(&l, x, y, o, 1)
                                  : k == TYPED ? rng_disp_r63(&l, x, y, o, n_of[k])
                                  : k == MIXED ? rng_disp(&l, x, y, o, mixed[r & 63])
                                               : rng_disp(&l, x, y, o, n_of[k]);
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
        printf("bench");
        for (int k = 0; k < NCASE; k++) printf(" %s_ns=%.1f", names[k], best[k]);
        printf(" dispatch64_ns=%.1f mixed64_ns=%.1f\n", best[LAST] - best[TYPED], best[MIXED] - best[TYPED]);
#endif
    }
    return 0;
}
