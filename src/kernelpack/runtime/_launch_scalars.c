/* kernelpack.runtime._launch -- scalar values: a slot's range constraints (ranges_ok), a Python int or float
 * read (CPython's compact ints inline, outside abi3) and stored at a parameter's width (integers, half, bf16,
 * float, double).
 * A part of the extension's one translation unit: _launch.c includes the parts in order; not compiled alone.
 */
#include "_launch.h"

/* Do the value (mode -1) or the extents of an argument meet slot s's range constraints? */
static int ranges_ok(const kp_slot* s, int64_t value, const int64_t* shape) {
    for (int k = 0; k < s->nranges; k++) {
        int64_t x = s->x->rmode[k] < 0 ? value : shape[s->x->rmode[k]];
        if (x < s->x->rlo[k] || x > s->x->rhi[k]) return 0;
    }
    return 1;
}

/* An exact int in general: 1 with *i when it fits int64, 2 with *u when it fits only uint64 (above INT64_MAX); -1
 * otherwise (the Python path). */
static KP_INLINE int read_long_any(PyObject* o, int64_t* i, uint64_t* u) {
    int of = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &of);
    if (of == 0) {
        if (v == -1 && PyErr_Occurred()) return PyErr_Clear(), -1;
        *i = v;
        return 1;
    }
    if (of < 0) return -1;
    unsigned long long x = PyLong_AsUnsignedLongLong(o);
    if (x == (unsigned long long)-1 && PyErr_Occurred()) return PyErr_Clear(), -1;
    *u = x;
    return 2;
}

#ifdef Py_LIMITED_API
#define read_long read_long_any /* abi3: the int's layout is not part of the API */
#define KP_FLOAT_VALUE(o) PyFloat_AsDouble(o)
#else
static KP_NOINLINE int read_long_big(PyObject* o, int64_t* i, uint64_t* u) { return read_long_any(o, i, u); }

/* The same with CPython's compact ints (one digit, or a 3.12+ compact value) read inline. */
static KP_INLINE int read_long(PyObject* o, int64_t* i, uint64_t* u) {
#if PY_VERSION_HEX >= 0x030C0000
    if (KP_LIKELY(PyUnstable_Long_IsCompact((PyLongObject*)o))) {
        *i = (int64_t)PyUnstable_Long_CompactValue((PyLongObject*)o);
        return 1;
    }
#else
    Py_ssize_t size = Py_SIZE(o);
    if (KP_LIKELY(size >= -1 && size <= 1)) { /* CPython's MEDIUM_VALUE */
        *i = (int64_t)size * (int64_t)((PyLongObject*)o)->ob_digit[0];
        return 1;
    }
#endif
    return read_long_big(o, i, u);
}
#define KP_FLOAT_VALUE(o) PyFloat_AS_DOUBLE(o)
#endif

static KP_INLINE int int_range_ok(int dt, int64_t v) {
    switch (dt) {
    case KP_DT_I8: return v >= INT8_MIN && v <= INT8_MAX;
    case KP_DT_I16: return v >= INT16_MIN && v <= INT16_MAX;
    case KP_DT_I32: return v >= INT32_MIN && v <= INT32_MAX;
    case KP_DT_I64: return 1;
    case KP_DT_U8: return v >= 0 && v <= UINT8_MAX;
    case KP_DT_U16: return v >= 0 && v <= UINT16_MAX;
    case KP_DT_U32: return v >= 0 && v <= (int64_t)UINT32_MAX;
    case KP_DT_U64: return v >= 0;
    }
    return 0;
}

static KP_INLINE void store_int(unsigned char* p, int dt, uint64_t v) {
    switch (dt) {
    case KP_DT_I8: case KP_DT_U8: case KP_DT_BOOL: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case KP_DT_I16: case KP_DT_U16: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case KP_DT_I32: case KP_DT_U32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8);
    }
}

/* double -> IEEE half, rounding as CPython's PyFloat_Pack2; -1 on overflow of a finite value */
static int to_half(double x, uint16_t* out) {
    unsigned short sign, bits;
    int e;
    if (x == 0.0) {
        sign = copysign(1.0, x) == -1.0, e = 0, bits = 0;
    } else if (isinf(x)) {
        sign = x < 0.0, e = 0x1f, bits = 0;
    } else if (isnan(x)) {
        sign = copysign(1.0, x) == -1.0, e = 0x1f, bits = 512;
    } else {
        sign = x < 0.0;
        if (sign) x = -x;
        double f = frexp(x, &e);
        f *= 2.0, e--;
        if (e >= 16) return -1;
        if (e < -25) f = 0.0, e = 0;
        else if (e < -14) f = ldexp(f, 14 + e), e = 0;
        else e += 15, f -= 1.0;
        f *= 1024.0;
        bits = (unsigned short)f;
        if ((f - bits > 0.5) || ((f - bits == 0.5) && (bits % 2 == 1))) {
            if (++bits == 1024) {
                bits = 0;
                if (++e == 31) return -1;
            }
        }
    }
    *out = (uint16_t)(bits | (e << 10) | (sign << 15));
    return 0;
}

/* Pack a float argument for scalar type dt; 0 when it does not fit (the Python path raises). */
static int store_float(unsigned char* p, int dt, double x) {
    if (dt == KP_DT_F64) {
        memcpy(p, &x, 8);
        return 1;
    }
    if (dt == KP_DT_F16) {
        uint16_t h;
        if (to_half(x, &h) < 0) return 0;
        memcpy(p, &h, 2);
        return 1;
    }
    float f = (float)x;
    if (isinf(f) && !isinf(x)) return 0;
    if (dt == KP_DT_F32) {
        memcpy(p, &f, 4);
        return 1;
    }
    uint32_t b; /* bf16, as kernelpack.core.packing.bf16_bits */
    memcpy(&b, &f, 4);
    uint16_t h = (b & 0x7F800000u) == 0x7F800000u && (b & 0x7FFFFFu) ? (uint16_t)((b >> 16) | 0x40)
                                                                      : (uint16_t)(((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16) & 0xFFFFu);
    memcpy(p, &h, 2);
    return 1;
}
