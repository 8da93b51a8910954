/* kernelpack C runtime, part 0: a small zlib stream decoder (RFC 1950 wrapper around RFC 1951 deflate) for the
 * binaries a bundle stores compressed (kernelpack.bundle writes them with Python's zlib). libc only.
 *
 * Pasted into every generated translation unit before the runtime; all functions are static. The decoder reads
 * whole Huffman codes bit by bit from canonical count/symbol tables (the method of Mark Adler's puff.c): small
 * and easy to check, a few hundred MB/s, and it runs once per binary on its first load. It never reads past the
 * input or writes past the output; malformed data, an output of another size than expected or an Adler-32
 * mismatch return -1. The library's own embedded data is the only input it ever sees. */

typedef struct kp_inf {
    const unsigned char* in;
    size_t in_len, in_pos;
    uint32_t bitbuf;
    int bitcnt;
    unsigned char* out;
    size_t out_len, out_pos;
} kp_inf;

/* A canonical Huffman code: the number of codes of each length, and the symbols ordered by code. */
typedef struct kp_huff {
    short count[16];
    short symbol[288];
} kp_huff;

/* need (0..16) bits, least significant first; -1 when the input ends. */
static int kp_inf_bits(kp_inf* s, int need, uint32_t* v) {
    while (s->bitcnt < need) {
        if (s->in_pos >= s->in_len) return -1;
        s->bitbuf |= (uint32_t)s->in[s->in_pos++] << s->bitcnt;
        s->bitcnt += 8;
    }
    *v = s->bitbuf & ((1u << need) - 1u);
    s->bitbuf >>= need;
    s->bitcnt -= need;
    return 0;
}

/* The next symbol of code h; -1 on a code h does not hold or at the end of the input. */
static int kp_inf_decode(kp_inf* s, const kp_huff* h) {
    int code = 0, first = 0, index = 0;
    for (int len = 1; len < 16; len++) {
        uint32_t bit;
        if (kp_inf_bits(s, 1, &bit)) return -1;
        code |= (int)bit;
        int count = h->count[len];
        if (code - count < first) return h->symbol[index + (code - first)];
        index += count;
        first = (first + count) << 1;
        code <<= 1;
    }
    return -1;
}

/* Build h from n code lengths (each 0..15); -1 when the lengths over-subscribe the code space. An incomplete
 * code is accepted: its unused bit patterns fail in kp_inf_decode. */
static int kp_inf_build(kp_huff* h, const unsigned char* length, int n) {
    short offs[16];
    memset(h->count, 0, sizeof h->count);
    for (int sym = 0; sym < n; sym++) h->count[length[sym]]++;
    int left = 1;
    for (int len = 1; len < 16; len++) {
        left = (left << 1) - h->count[len];
        if (left < 0) return -1;
    }
    offs[1] = 0;
    for (int len = 1; len < 15; len++) offs[len + 1] = (short)(offs[len] + h->count[len]);
    for (int sym = 0; sym < n; sym++)
        if (length[sym] != 0) h->symbol[offs[length[sym]]++] = (short)sym;
    return 0;
}

static const short kp_inf_lbase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                       31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const short kp_inf_lext[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const short kp_inf_dbase[30] = {1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
                                       193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const short kp_inf_dext[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

/* The literal/length and distance symbols of one compressed block, up to its end-of-block code. */
static int kp_inf_codes(kp_inf* s, const kp_huff* lencode, const kp_huff* distcode) {
    for (;;) {
        int sym = kp_inf_decode(s, lencode);
        if (sym < 0) return -1;
        if (sym < 256) {
            if (s->out_pos >= s->out_len) return -1;
            s->out[s->out_pos++] = (unsigned char)sym;
            continue;
        }
        if (sym == 256) return 0;
        sym -= 257;
        if (sym >= 29) return -1;
        uint32_t extra;
        if (kp_inf_bits(s, kp_inf_lext[sym], &extra)) return -1;
        size_t len = (size_t)kp_inf_lbase[sym] + extra;
        int dsym = kp_inf_decode(s, distcode);
        if (dsym < 0 || dsym >= 30) return -1;
        if (kp_inf_bits(s, kp_inf_dext[dsym], &extra)) return -1;
        size_t dist = (size_t)kp_inf_dbase[dsym] + extra;
        if (dist > s->out_pos || len > s->out_len - s->out_pos) return -1;
        unsigned char* to = s->out + s->out_pos;
        const unsigned char* from = to - dist;
        for (size_t i = 0; i < len; i++) to[i] = from[i]; /* byte by byte: the ranges may overlap */
        s->out_pos += len;
    }
}

static int kp_inf_stored(kp_inf* s) {
    s->bitbuf = 0, s->bitcnt = 0; /* the rest of the current byte */
    if (s->in_len - s->in_pos < 4) return -1;
    const unsigned char* p = s->in + s->in_pos;
    size_t len = (size_t)p[0] | (size_t)p[1] << 8;
    if ((size_t)(p[2] | p[3] << 8) != (~len & 0xffff)) return -1;
    s->in_pos += 4;
    if (len > s->in_len - s->in_pos || len > s->out_len - s->out_pos) return -1;
    memcpy(s->out + s->out_pos, s->in + s->in_pos, len);
    s->in_pos += len, s->out_pos += len;
    return 0;
}

static int kp_inf_fixed(kp_inf* s) {
    unsigned char lengths[288 + 30];
    kp_huff lencode, distcode;
    int i = 0;
    for (; i < 144; i++) lengths[i] = 8;
    for (; i < 256; i++) lengths[i] = 9;
    for (; i < 280; i++) lengths[i] = 7;
    for (; i < 288; i++) lengths[i] = 8;
    for (; i < 288 + 30; i++) lengths[i] = 5;
    if (kp_inf_build(&lencode, lengths, 288) || kp_inf_build(&distcode, lengths + 288, 30)) return -1;
    return kp_inf_codes(s, &lencode, &distcode);
}

static int kp_inf_dynamic(kp_inf* s) {
    static const unsigned char order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    unsigned char lengths[286 + 30];
    kp_huff lencode, distcode;
    uint32_t nlen, ndist, ncode, v;
    if (kp_inf_bits(s, 5, &nlen) || kp_inf_bits(s, 5, &ndist) || kp_inf_bits(s, 4, &ncode)) return -1;
    nlen += 257, ndist += 1, ncode += 4;
    if (nlen > 286 || ndist > 30) return -1;
    memset(lengths, 0, sizeof lengths);
    for (uint32_t i = 0; i < ncode; i++) {
        if (kp_inf_bits(s, 3, &v)) return -1;
        lengths[order[i]] = (unsigned char)v;
    }
    if (kp_inf_build(&lencode, lengths, 19)) return -1;
    uint32_t index = 0;
    while (index < nlen + ndist) {
        int sym = kp_inf_decode(s, &lencode);
        if (sym < 0) return -1;
        if (sym < 16) {
            lengths[index++] = (unsigned char)sym;
            continue;
        }
        unsigned char value = 0;
        uint32_t repeat;
        if (sym == 16) {
            if (index == 0 || kp_inf_bits(s, 2, &repeat)) return -1;
            value = lengths[index - 1], repeat += 3;
        } else if (sym == 17) {
            if (kp_inf_bits(s, 3, &repeat)) return -1;
            repeat += 3;
        } else {
            if (kp_inf_bits(s, 7, &repeat)) return -1;
            repeat += 11;
        }
        if (index + repeat > nlen + ndist) return -1;
        while (repeat--) lengths[index++] = value;
    }
    if (lengths[256] == 0) return -1; /* no end-of-block code */
    if (kp_inf_build(&lencode, lengths, (int)nlen) || kp_inf_build(&distcode, lengths + nlen, (int)ndist)) return -1;
    return kp_inf_codes(s, &lencode, &distcode);
}

/* Decode the zlib stream in[0, in_len) into exactly out_len bytes at out. 0: done and checked; -1: malformed,
 * another size, trailing bytes, or an Adler-32 mismatch. */
static int kp_inflate(const unsigned char* in, size_t in_len, unsigned char* out, size_t out_len) {
    kp_inf s;
    memset(&s, 0, sizeof s);
    s.in = in, s.in_len = in_len, s.out = out, s.out_len = out_len;
    if (in_len < 6 || (in[0] & 0x0f) != 8 || (in[0] >> 4) > 7 || (in[1] & 0x20) || ((in[0] << 8) | in[1]) % 31)
        return -1; /* deflate, window <= 32 KiB, no preset dictionary, header check */
    s.in_pos = 2;
    uint32_t last, type;
    do {
        if (kp_inf_bits(&s, 1, &last) || kp_inf_bits(&s, 2, &type)) return -1;
        int r = type == 0 ? kp_inf_stored(&s) : type == 1 ? kp_inf_fixed(&s) : type == 2 ? kp_inf_dynamic(&s) : -1;
        if (r) return -1;
    } while (!last);
    if (s.out_pos != out_len || s.in_len - s.in_pos != 4) return -1; /* the bits left of the last byte are padding */
    uint32_t a = 1, b = 0;
    for (size_t i = 0; i < out_len;) {
        size_t end = i + 5552 < out_len ? i + 5552 : out_len; /* the most bytes before b can overflow */
        for (; i < end; i++) a += out[i], b += a;
        a %= 65521u, b %= 65521u;
    }
    const unsigned char* t = in + s.in_pos;
    return ((uint32_t)t[0] << 24 | (uint32_t)t[1] << 16 | (uint32_t)t[2] << 8 | t[3]) == (b << 16 | a) ? 0 : -1;
}
