/* The range index's dispatch (tests/test_range_index.py) through the generated "rix" library on the fake
 * libcuda.so.1; compiled as C99 and as C++17. Usage: range_index_harness FAMILY ARGS...; each ARGS is one call, its
 * ranged values comma-separated: ei N | nb N | e64 D | two C,D | uns H,J | tx S0,S1. Prints "ARGS status=NAME
 * msg=..." per call; the fake's log says which specialization ran (each has its own default block). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rix.h"

static void* at(uintptr_t addr) { return (void*)addr; }

/* The comma-separated integers of text into v (at most 2): signed unless `u`. */
static void values(const char* text, long long v[2], unsigned long long u[2]) {
    char* end = NULL;
    v[0] = strtoll(text, &end, 10);
    u[0] = strtoull(text, NULL, 10);
    v[1] = 0, u[1] = 0;
    if (end != NULL && *end == ',') {
        v[1] = strtoll(end + 1, NULL, 10);
        u[1] = strtoull(end + 1, NULL, 10);
    }
}

int main(int argc, char** argv) {
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = 1;
    if (argc < 2) return 2;
    const char* fam = argv[1];
    const float* x = (const float*)at(0x10000);
    const float* y = (const float*)at(0x20000);
    float* out = (float*)at(0x30000);
    for (int k = 2; k < argc; k++) {
        long long v[2];
        unsigned long long u[2];
        values(argv[k], v, u);
        kp_status s;
        if (!strcmp(fam, "ei")) {
            s = rix_ei(&l, x, y, out, (int32_t)v[0]);
        } else if (!strcmp(fam, "nb")) {
            s = rix_nb(&l, x, y, out, (int32_t)v[0]);
        } else if (!strcmp(fam, "e64")) {
            s = rix_e64(&l, 0, 0, 0, (int64_t)v[0], 0.0f, 0.0, 0, 0, 0, 0, out);
        } else if (!strcmp(fam, "two")) {
            s = rix_two(&l, 0, 0, (int32_t)v[0], (int64_t)v[1], 0.0f, 0.0, 0, 0, 0, 0, out);
        } else if (!strcmp(fam, "uns")) {
            s = rix_uns(&l, 0, 0, 0, 0, 0.0f, 0.0, 0, (uint16_t)u[0], 0, (uint64_t)u[1], out);
        } else if (!strcmp(fam, "tx")) {
            kp_tensor t;
            memset(&t, 0, sizeof t);
            t.data = at(0x40000), t.dtype = KP_F32, t.rank = 2;
            t.shape[0] = v[0], t.shape[1] = v[1], t.stride[0] = v[1], t.stride[1] = 1;
            s = rix_tx(&l, &t, out);
        } else {
            return 2;
        }
        printf("%s status=%s msg=%s\n", argv[k], rix_status_name(s), s ? rix_last_error() : "");
    }
    return 0;
}
