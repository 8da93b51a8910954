/* Drives the C runtime's zlib decoder (csrc/kp_inflate.c, included as the generated libraries include it) over
 * records read from stdin: u32 input size, u32 expected output size, input bytes. Prints per record "ok FNV" (the
 * FNV-1a of the output) or "err". Built with AddressSanitizer and UBSan by tests/test_inflate.py. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp_inflate.c"

static int read_u32(uint32_t* v) {
    unsigned char b[4];
    if (fread(b, 1, 4, stdin) != 4) return 0;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 1;
}

int main(void) {
    uint32_t in_len, out_len;
    while (read_u32(&in_len) && read_u32(&out_len)) {
        unsigned char* in = (unsigned char*)malloc(in_len ? in_len : 1);
        unsigned char* out = (unsigned char*)malloc(out_len ? out_len : 1);
        if (!in || !out || fread(in, 1, in_len, stdin) != in_len) return 2;
        if (kp_inflate(in, in_len, out, out_len) == 0) {
            uint64_t h = 1469598103934665603ull;
            for (uint32_t i = 0; i < out_len; i++) h = (h ^ out[i]) * 1099511628211ull;
            printf("ok %016llx\n", (unsigned long long)h);
        } else {
            printf("err\n");
        }
        free(in), free(out);
    }
    return 0;
}
