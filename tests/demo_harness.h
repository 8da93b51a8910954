/* What the C harnesses share (clib_harness.c, reliability_harness.c): both drive the generated "demo" library
 * (tests/clib_support.py: demo_artifacts) on the fake libcuda.so.1 and print one "TAG status=NAME msg=MESSAGE" line
 * per call (clib_support.results parses them). */
#ifndef KP_TEST_DEMO_HARNESS_H
#define KP_TEST_DEMO_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "demo.h"

#define REPORT(tag, call)                                                                             \
    do {                                                                                              \
        kp_status s_ = (call);                                                                        \
        printf("%s status=%s msg=%s\n", tag, demo_status_name(s_), s_ ? demo_last_error() : "");      \
    } while (0)

/* A launch of grid x block threads (x only), everything else zero. */
static inline kp_launch L(uint32_t grid, uint32_t block) {
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = grid;
    l.block[0] = block;
    return l;
}

/* A fake device address (the fake driver never touches memory). */
static inline void* at(uintptr_t addr) { return (void*)addr; }

#endif
