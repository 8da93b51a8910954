/* kernelpack.runtime._launch: the fast launch path.
 *
 * One Family object per kernel family is the callable users hold. Per parameter layout of each specialization it
 * keeps a packing plan (built once from kernelpack.abi by launch/plan.py); per device, the dispatch table (per
 * specialization: the plan of the binary chosen for the device, its kernel handle and launch facts, the values of
 * its device-derived params; the device's limits) pushed by runtime/family.py after the device was loaded. A call reads the arguments (torch tensors
 * through the optional torch bridge, ints, floats), picks the first specialization every argument fits, checks the
 * launch configuration, packs the parameters into a stack buffer and calls cuLaunchKernel / cuLaunchKernelEx with
 * the GIL released. It allocates nothing and calls no Python code on that path.
 *
 * Anything else -- another kind of argument, a device not loaded yet, any failed check -- goes to the Python
 * path (KernelFamily.call), which launches the general case or raises the error with its full message. So this
 * file never formats a user error; the one error it raises itself is a driver failure of the launch.
 *
 * Driver entry points are handed over by runtime/driver.py (resolved there with cuGetProcAddress_v2 from the
 * dlopen-ed driver), so both paths always call one driver.
 *
 * Built as a version-specific extension (ints and floats read inline: CPython's compact ints); with
 * KERNELPACK_BUILD_ABI3=1, with the limited API (abi3) for CPython >= 3.12, where vectorcall is part of it.
 *
 * Its shared declarations are in _launch.h, and the parts split off so far are included where they stood (one
 * translation unit: setup.py compiles this file alone).
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

/* ------------------------------------------------------------------ scalar arguments */

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
    uint32_t b; /* bf16, as kernelpack.packing.bf16_bits */
    memcpy(&b, &f, 4);
    uint16_t h = (b & 0x7F800000u) == 0x7F800000u && (b & 0x7FFFFFu) ? (uint16_t)((b >> 16) | 0x40)
                                                                      : (uint16_t)(((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16) & 0xFFFFu);
    memcpy(p, &h, 2);
    return 1;
}

/* ------------------------------------------------------------------ tensor descriptors */

/* The 128-byte CUtensorMap of tensor v for the TMA descriptor slot s, into p: the family's cached copy when the slot
 * saw the same address, shape and strides under this driver, else encoded with cuTensorMapEncodeTiled as
 * kernelpack.tma.encode_args does it (Triton's fillTMADescriptorTiled: dims innermost first, byte strides of the
 * outer dims, element strides 1, no interleave, L2 promotion 128B, zero OOB fill, bit 21 of the second word
 * cleared for a tensor under 128 KiB on drivers up to 13.1) and kept (least recently used replaced).
 * 1: done; -1: the Python path decides (a tensor TMA cannot address -- it raises DescriptorArgumentError -- or a
 * driver refusal, which it reports). */
static int tensor_map(kp_family* f, const kp_slot* s, const kp_view* v, unsigned char* p) {
    const int n = s->rank;
    const size_t nb = (size_t)n * sizeof(int64_t);
    kp_tmap* c = f->tmaps;
    (void)c, (void)nb; /* unused in free-threaded builds, which encode at every launch */
#ifndef Py_GIL_DISABLED /* the cache is guarded by the GIL */
    if (c != NULL) {
        for (int i = 0; i < KP_TMAP_CACHE; i++, c++) {
            if (c->slot != s || c->ptr != v->data || c->gen != driver_gen || memcmp(c->shape, v->shape, nb) ||
                memcmp(c->stride, v->stride, nb))
                continue;
            c->used = ++f->tmap_clock;
            memcpy(p, c->map, sizeof c->map);
            return 1;
        }
    }
#endif
    if (cu_tmap_encode == NULL || v->stride[n - 1] != 1 || v->data % 16) return -1;
    uint64_t dims[KP_MAX_TMA_RANK], bstrides[KP_MAX_TMA_RANK], last = 0;
    uint32_t box[KP_MAX_TMA_RANK], es[KP_MAX_TMA_RANK];
    for (int i = 0; i < n; i++) { /* i: innermost first; k: the tensor's mode */
        const int k = n - 1 - i;
        int64_t d = v->shape[k];
        if (d < 1 || d >= ((int64_t)1 << 32)) return -1;
        if (s->fp4 && i == 0) d *= 2;
        if (d >= ((int64_t)1 << 32)) return -1;
        uint64_t b = (uint64_t)s->elem_size;
        if (i > 0) {
            int64_t st = v->stride[k];
            if (st <= 0 || st > INT64_MAX / s->elem_size) return -1;
            b = (uint64_t)st * (uint64_t)s->elem_size;
            if (b % 16) return -1;
            bstrides[i - 1] = b;
        }
        dims[i] = (uint64_t)d, box[i] = s->box[k], es[i] = 1;
        uint64_t span = (uint64_t)(d - 1);
        last = span && b > (UINT64_MAX - last) / span ? UINT64_MAX : last + span * b; /* saturates: compared only */
    }
    uint64_t out[16] __attribute__((aligned(64))); /* the driver wants the map 64-byte aligned */
    if (cu_tmap_encode(out, s->elem_type, (unsigned)n, (void*)(uintptr_t)v->data, dims, bstrides, box, es, 0,
                       s->swizzle, 2, 0) != 0)
        return -1;
    if (driver_version > 0 && driver_version <= 13010 && last < 128 * 1024 - 1) out[1] &= ~((uint64_t)1 << 21);
    memcpy(p, out, sizeof out);
#ifndef Py_GIL_DISABLED
    if (f->tmaps == NULL) f->tmaps = (kp_tmap*)PyMem_Calloc(KP_TMAP_CACHE, sizeof(kp_tmap));
    if (f->tmaps != NULL) {
        kp_tmap* victim = f->tmaps;
        for (int i = 1; i < KP_TMAP_CACHE && victim->slot != NULL; i++)
            if (f->tmaps[i].slot == NULL || f->tmaps[i].used < victim->used) victim = &f->tmaps[i];
        memcpy(victim->map, out, sizeof out);
        victim->slot = s, victim->ptr = v->data, victim->gen = driver_gen, victim->used = ++f->tmap_clock;
        memcpy(victim->shape, v->shape, nb), memcpy(victim->stride, v->stride, nb);
    }
#endif
    return 1;
}

/* A tensor-descriptor argument (KP_OP_DESC: its first param, the map or the decomposed base pointer), tensor v.
 * 1: packed; 0: it does not fit this specialization (dtype, rank, ranges); -1: the Python path decides. */
static KP_NOINLINE int fit_desc(kp_family* f, const kp_slot* s, const kp_view* v, unsigned char* p) {
    if (v->dtype == KP_DT_ANY) return -1; /* an element type kernelpack does not name: Python says so */
    if (v->dtype != s->dtype || v->ndim != s->rank) return 0;
    if (s->nranges && !ranges_ok(s, 0, v->shape)) return 0;
    if (s->tma) return tensor_map(f, s, v, p);
    memcpy(p, &v->data, 8); /* decomposed: the base pointer, no constraint of its own */
    return 1;
}

/* A param a tensor descriptor fills after its first (KP_OP_DESC_FIELD): extent or stride `pos` (elements), or a
 * flag (0: no NaN padding, no TF32 rounding). Its descriptor slot came first and checked the tensor. */
static KP_NOINLINE int fit_desc_field(const kp_slot* s, const kp_view* v, unsigned char* p) {
    if (v->ndim != s->rank) return 0;
    if (s->field == 2) {
        memset(p, 0, s->size);
        return 1;
    }
    int64_t x = s->field == 0 ? v->shape[s->pos] : v->stride[s->pos];
    if (!int_range_ok(s->dtype, x)) return -1;
    store_int(p, s->dtype, (uint64_t)x);
    return 1;
}

/* ------------------------------------------------------------------ the arguments of one launch */

/* A view's device, dtype and contiguity as one word (little-endian: device in bits 0-15, dtype 16-23, contiguous
 * 24-31), so a pointer slot checks all three with one compare (kp_slot.kmask, kwant). */
_Static_assert(offsetof(kp_view, device) % 4 == 0 && offsetof(kp_view, dtype) == offsetof(kp_view, device) + 2 &&
                   offsetof(kp_view, contiguous) == offsetof(kp_view, device) + 3,
               "kp_view: device, dtype, contiguous in one word");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "view_key assumes a little-endian target"
#endif
static KP_INLINE uint32_t view_key(const kp_view* v) {
    uint32_t k;
    memcpy(&k, &v->device, 4);
    return k;
}

/* The views of args[which[0..n)] into c->v: through the bridge; without one, none is a tensor (a launch with a tensor
 * takes the Python path). 0: done; -1: the Python path. */
static int read_views(const kp_family* f, kp_call* c, const uint8_t* which, int n) {
    if (bridge == NULL) {
        for (int k = 0; k < n; k++) c->v[which[k]].device = KP_VIEW_NONE;
        return 0;
    }
    int r = bridge->unpack_args(c->args, which, n, f->dims, c->v);
    if (r < 0) return -1;
    c->ntensors += r;
    return 0;
}

/* Argument o is no torch tensor: 0 when the fast path reads it (an int that fits 64 bits, a float, a bool, bytes:
 * a slot that takes none of these just does not fit, and dispatch goes on); -1 when it does not (Python path). */
static KP_NOINLINE int not_tensor(PyObject* o) {
    if (PyLong_CheckExact(o)) {
        int64_t i;
        uint64_t u;
        return read_long(o, &i, &u) < 0 ? -1 : 0;
    }
    return PyFloat_CheckExact(o) || o == Py_True || o == Py_False || PyBytes_CheckExact(o) ? 0 : -1;
}

/* Argument i (read: a candidate, or read by not_taken) whose view is not a tensor on the launch device: 0 when it is
 * no tensor but an argument the fast path reads, -1 otherwise (a tensor elsewhere, another kind of object). */
static KP_NOINLINE int view_miss(const kp_call* c, int i) {
    return c->v[i].device == KP_VIEW_NONE ? not_tensor(c->args[i]) : -1;
}

/* Candidate argument i as a tensor: 1 with *out, a tensor on the launch device; else view_miss. */
static KP_INLINE int arg_view(kp_call* c, int i, const kp_view** out) {
    const kp_view* v = &c->v[i];
    if (KP_UNLIKELY(v->device != c->device)) return view_miss(c, i);
    *out = v;
    return 1;
}

/* Argument i, of a kind its slot does not take: 0 when the fast path reads it (dispatch goes on), -1 when not. */
static KP_NOINLINE int not_taken(const kp_family* f, kp_call* c, int i) {
    if (!f->cand[i]) { /* not read before dispatch: read it now */
        PyObject* o = c->args[i];
        if (PyLong_CheckExact(o) || PyFloat_CheckExact(o) || o == Py_True || o == Py_False || PyBytes_CheckExact(o))
            return not_tensor(o);
        const uint8_t one = (uint8_t)i;
        if (read_views(f, c, &one, 1) < 0) return -1;
    }
    return c->v[i].device == c->device ? 0 : view_miss(c, i);
}

/* Is x a multiple of m (> 1; pow2: a power of two)? */
static KP_INLINE int multiple(uint64_t x, uint64_t m, int pow2) { return pow2 ? (x & (m - 1)) == 0 : x % m == 0; }

/* An int argument i for scalar slot s. */
static KP_INLINE int fit_int(const kp_slot* s, unsigned char* p, int64_t i) {
    switch (s->dtype) {
    case KP_DT_I32: {
        if (i < INT32_MIN || i > INT32_MAX) return 0;
        int32_t x = (int32_t)i;
        memcpy(p, &x, 4);
        break;
    }
    case KP_DT_I64: memcpy(p, &i, 8); break;
    case KP_DT_F16: case KP_DT_BF16: case KP_DT_F32: case KP_DT_F64:
        return store_float(p, s->dtype, (double)i);
    case KP_DT_BOOL:
        if (i != 0 && i != 1) return 0;
        *p = (unsigned char)i;
        return 1;
    default:
        if (!int_range_ok(s->dtype, i)) return 0;
        store_int(p, s->dtype, (uint64_t)i);
    }
    if (s->divisor > 1 && !multiple((uint64_t)i, (uint64_t)s->divisor, s->dpow2)) return 0;
    return !s->nranges || ranges_ok(s, i, NULL);
}

/* An int above INT64_MAX for scalar slot s: a uint64 param only. */
static KP_NOINLINE int fit_uint(const kp_slot* s, unsigned char* p, uint64_t u) {
    if (s->dtype != KP_DT_U64) return 0; /* a float param: the Python path decides */
    if (s->divisor > 1 && u % (uint64_t)s->divisor) return 0;
    /* above INT64_MAX: beyond every range's upper bound but INT64_MAX, which is none (Range: no bound) */
    for (int k = 0; k < s->nranges; k++)
        if (s->x->rmode[k] < 0 && s->x->rhi[k] < INT64_MAX) return 0;
    memcpy(p, &u, 8);
    return 1;
}

/* A torch-tensor argument v for a tensor-struct slot (KP_OP_TENSOR). */
static KP_NOINLINE int fit_tensor(const kp_slot* s, const kp_view* v, unsigned char* p) {
    if (v->dtype != s->dtype || v->ndim != s->rank) return 0;
    if (s->align > 1 && !multiple(v->data, s->align, s->apow2)) return 0;
    memset(p, 0, s->size); /* the struct's padding too: the driver copies every byte */
    memcpy(p + s->data_off, &v->data, 8);
    for (int i = 0; i < s->rank; i++) {
        int64_t sh = v->shape[i], st = v->stride[i];
        const kp_slot_x* x = s->x;
        if (x->shape[i] != KP_DYN) {
            if (sh != x->shape[i]) return 0;
        } else {
            if (!int_range_ok(s->shape_dt, sh)) return 0;
            store_int(p + x->shape_off[i], s->shape_dt, (uint64_t)sh);
        }
        if (x->stride[i] != KP_DYN) {
            if (st != x->stride[i]) return 0;
        } else {
            if (!int_range_ok(s->stride_dt, st)) return 0;
            store_int(p + x->stride_off[i], s->stride_dt, (uint64_t)st);
        }
    }
    return !s->nranges || ranges_ok(s, 0, v->shape);
}

/* Does the argument of slot s fit it? If so, pack it into buf (dv: the device values of the entry tried). 1: it
 * fits; 0: it does not; -1: the Python path decides (an argument the fast path does not read, a tensor descriptor
 * it alone can judge). */
static KP_NOINLINE int fit_slot(kp_family* f, const kp_slot* s, kp_call* c, unsigned char* buf, const int64_t* dv) {
    unsigned char* p = buf + s->offset;
    const kp_view* v = NULL;
    int r;
    switch (s->op) {
    case KP_OP_PTR: {
        uint64_t ptr;
        v = &c->v[s->arg];
        if (KP_LIKELY(v->device == c->device)) {
            if (s->dtype != KP_DT_ANY && v->dtype != s->dtype) return 0;
            if (!v->contiguous) return 0;
            ptr = v->data;
        } else {
            PyObject* o = c->args[s->arg];
            if (!PyLong_CheckExact(o)) return view_miss(c, s->arg);
            int64_t i;
            if ((r = read_long(o, &i, &ptr)) < 0) return -1;
            if (r == 1) {
                if (i < 0) return 0;
                ptr = (uint64_t)i;
            }
        }
        if (s->align > 1 && !multiple(ptr, s->align, s->apow2)) return 0;
        memcpy(p, &ptr, 8);
        return 1;
    }
    case KP_OP_SCALAR: {
        PyObject* o = c->args[s->arg];
        if (PyLong_CheckExact(o)) {
            int64_t i;
            uint64_t u;
            if ((r = read_long(o, &i, &u)) < 0) return -1;
            return r == 1 ? fit_int(s, p, i) : fit_uint(s, p, u);
        }
        if (PyFloat_CheckExact(o))
            return s->dtype >= KP_DT_F16 && s->dtype <= KP_DT_F64 ? store_float(p, s->dtype, KP_FLOAT_VALUE(o)) : 0;
        if (o == Py_True || o == Py_False) { /* only a bool param takes one (else the Python path refuses) */
            if (s->dtype != KP_DT_BOOL) return 0;
            *p = (unsigned char)(o == Py_True);
            return 1;
        }
        return not_taken(f, c, s->arg);
    }
    case KP_OP_NULL:
        memset(p, 0, s->size);
        return 1;
    case KP_OP_DEVICE:
        store_int(p, s->dtype, (uint64_t)dv[s->dev]);
        return 1;
    case KP_OP_TENSOR:
        if ((r = arg_view(c, s->arg, &v)) <= 0) return r;
        return fit_tensor(s, v, p);
    case KP_OP_DESC:
        if ((r = arg_view(c, s->arg, &v)) <= 0) return r;
        return fit_desc(f, s, v, p);
    case KP_OP_DESC_FIELD:
        if ((r = arg_view(c, s->arg, &v)) <= 0) return r;
        return fit_desc_field(s, v, p);
    case KP_OP_BYTES: {
        PyObject* o = c->args[s->arg];
        if (!PyBytes_CheckExact(o)) return not_taken(f, c, s->arg);
        char* data;
        Py_ssize_t n;
        if (PyBytes_AsStringAndSize(o, &data, &n) < 0) {
            PyErr_Clear();
            return 0;
        }
        if ((uint64_t)n != s->size) return 0;
        memcpy(p, data, (size_t)n);
        return 1;
    }
    }
    return 0;
}

/* Arguments no slot of the chosen plan reads (a plan that does not cover them all): each must be one the fast path
 * reads, as every argument of a launch it makes. 0: they are; -1: the Python path. */
static KP_NOINLINE int check_unread(const kp_family* f, kp_call* c) {
    for (int i = 0; i < c->nargs; i++)
        if (not_taken(f, c, i) < 0) return -1;
    return 0;
}

/* ------------------------------------------------------------------ launch configuration */

/* An int or a tuple of 1..3 ints, each in [1, 2**32); 0 when it is anything else. */
static int read_dims(PyObject* o, uint32_t out[3]) {
    out[0] = out[1] = out[2] = 1;
    if (PyLong_CheckExact(o)) {
        long long v = PyLong_AsLongLong(o);
        if (v < 1 || v > UINT32_MAX) {
            PyErr_Clear();
            return 0;
        }
        out[0] = (uint32_t)v;
        return 1;
    }
    if (!PyTuple_CheckExact(o)) return 0;
    Py_ssize_t n = PyTuple_Size(o);
    if (n < 1 || n > 3) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject* item = PyTuple_GetItem(o, i);
        if (item == NULL || !PyLong_CheckExact(item)) {
            PyErr_Clear();
            return 0;
        }
        long long v = PyLong_AsLongLong(item);
        if (v < 1 || v > UINT32_MAX) {
            PyErr_Clear();
            return 0;
        }
        out[i] = (uint32_t)v;
    }
    return 1;
}

static int dims_eq(const uint32_t* a, const uint32_t* b) { return a[0] == b[0] && a[1] == b[1] && a[2] == b[2]; }

/* The stream handle from stream=...; 0 when the Python path must resolve it. */
static int read_stream(PyObject* o, uint64_t* out) {
    if (PyLong_CheckExact(o)) {
        unsigned long long v = PyLong_AsUnsignedLongLong(o);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        *out = v;
        return 1;
    }
    PyObject* h = PyObject_GetAttr(o, s_cuda_stream);
    if (h == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = PyLong_CheckExact(h);
    if (ok) {
        *out = PyLong_AsUnsignedLongLong(h);
        if (PyErr_Occurred()) PyErr_Clear(), ok = 0;
    }
    Py_DECREF(h);
    return ok;
}

/* torch's current stream of `device`: from the bridge in C (c10's, when it was built against torch's CUDA headers),
 * else from the Python-level getter (runtime/streams.py c_getter: torch's builtin itself, called without a Python
 * frame). 0 when neither answers (the Python path resolves it). */
static int current_stream(int device, uint64_t* out) {
    if (KP_LIKELY(bridge != NULL) && bridge->current_stream(device, out) == 0) return 1;
    if (stream_getter == NULL) return 0;
    PyObject* dev = PyLong_FromLong(device);
    if (dev == NULL) return PyErr_Clear(), 0;
    PyObject* argv[1] = {dev};
    PyObject* r = PyObject_Vectorcall(stream_getter, argv, 1, NULL);
    Py_DECREF(dev);
    if (r == NULL) return PyErr_Clear(), 0;
    int ok = read_stream(r, out);
    Py_DECREF(r);
    return ok;
}

static PyObject* driver_error(kp_family* self, const kp_plan* plan, int device, CUresult r, const char* call) {
    const char* name = NULL;
    if (cu_error_name == NULL || cu_error_name(r, &name) != 0 || name == NULL) name = "CUDA_ERROR_UNKNOWN";
    PyObject* mod = PyImport_ImportModule("kernelpack.runtime.errors");
    if (mod == NULL) return NULL;
    PyObject* cls = PyObject_GetAttrString(mod, "DriverError");
    Py_DECREF(mod);
    if (cls == NULL) return NULL;
    PyObject* msg = PyUnicode_FromFormat("kernel %U on device %d: %s failed with %s (%d)", plan->label, device, call,
                                         name, (int)r);
    PyObject* args = msg ? PyTuple_Pack(1, msg) : NULL;
    PyObject* kw = Py_BuildValue("{s:i,s:s}", "code", (int)r, "name", name);
    PyObject* exc = args && kw ? PyObject_Call(cls, args, kw) : NULL;
    if (exc != NULL) PyErr_SetObject(cls, exc);
    Py_XDECREF(exc);
    Py_XDECREF(kw);
    Py_XDECREF(args);
    Py_XDECREF(msg);
    Py_DECREF(cls);
    (void)self;
    return NULL;
}

/* ------------------------------------------------------------------ grid formulas */

/* An integer parameter value as packed; 0 when it does not fit int64 (a u64 above INT64_MAX: Python decides). */
static int load_int(const unsigned char* p, int dt, int64_t* out) {
    switch (dt) {
    case KP_DT_I8: { int8_t x; memcpy(&x, p, 1); *out = x; return 1; }
    case KP_DT_I16: { int16_t x; memcpy(&x, p, 2); *out = x; return 1; }
    case KP_DT_I32: { int32_t x; memcpy(&x, p, 4); *out = x; return 1; }
    case KP_DT_I64: { int64_t x; memcpy(&x, p, 8); *out = x; return 1; }
    case KP_DT_U8: case KP_DT_BOOL: { uint8_t x; memcpy(&x, p, 1); *out = x; return 1; }
    case KP_DT_U16: { uint16_t x; memcpy(&x, p, 2); *out = x; return 1; }
    case KP_DT_U32: { uint32_t x; memcpy(&x, p, 4); *out = x; return 1; }
    case KP_DT_U64: { uint64_t x; memcpy(&x, p, 8); *out = (int64_t)x; return x <= (uint64_t)INT64_MAX; }
    }
    return 0;
}

/* Evaluate one formula on the packed parameters with kernelpack.artifact.evaluate_grid's semantics: exact integer
 * math, div truncates toward zero (0 for b == 0), ceil_div(a, b) = floor((a + b - 1) / b) and 0 for b <= 0.
 * Returns 0 when a value leaves int64 (Python's integers do not wrap: the Python path computes it). */
static int eval_grid(const kp_gop* code, int n, const unsigned char* buf, int64_t* out) {
    int64_t st[KP_GRID_STACK];
    int sp = 0;
    for (int i = 0; i < n; i++) {
        const kp_gop* g = &code[i];
        if (g->op == KP_G_CONST) {
            st[sp++] = g->v;
            continue;
        }
        if (g->op == KP_G_LOAD) {
            if (!load_int(buf + g->v, g->dtype, &st[sp++])) return 0;
            continue;
        }
        int64_t b = st[--sp], a = st[sp - 1], r;
        switch (g->op) {
        case KP_G_ADD: if (__builtin_add_overflow(a, b, &r)) return 0; break;
        case KP_G_SUB: if (__builtin_sub_overflow(a, b, &r)) return 0; break;
        case KP_G_MUL: if (__builtin_mul_overflow(a, b, &r)) return 0; break;
        case KP_G_DIV:
            if (b == 0) r = 0;
            else if (b == -1) { if (__builtin_sub_overflow((int64_t)0, a, &r)) return 0; }
            else r = a / b;
            break;
        case KP_G_CEIL_DIV:
            if (b <= 0) {
                r = 0;
            } else {
                int64_t m;
                if (__builtin_add_overflow(a, b - 1, &m)) return 0;
                r = m / b;
                if (m % b != 0 && m < 0) r--; /* floor, as Python's // */
            }
            break;
        case KP_G_MIN: r = a < b ? a : b; break;
        case KP_G_MAX: r = a > b ? a : b; break;
        default: return 0;
        }
        st[sp - 1] = r;
    }
    *out = st[0];
    return 1;
}

/* The grid from the plan's formulas. 1: *g is the grid; 0: nothing to launch (a dimension <= 0); -1: the Python
 * path decides (a value left int64, or the grid exceeds 2**32 - 1 in a dimension: Python raises the error). */
static int grid_from_rule(const kp_plan* plan, const unsigned char* buf, uint32_t g[3]) {
    int64_t v[3];
    const kp_gop* code = plan->gcode;
    for (int d = 0; d < 3; d++) {
        if (!eval_grid(code, plan->glen[d], buf, &v[d])) return -1;
        code += plan->glen[d];
    }
    if (v[0] <= 0 || v[1] <= 0 || v[2] <= 0) return 0;
    for (int d = 0; d < 3; d++) {
        if (v[d] > (int64_t)UINT32_MAX) return -1;
        g[d] = (uint32_t)v[d];
    }
    return 1;
}

/* ------------------------------------------------------------------ the driver call */

/* A launch with a cluster (c[0] != 0) and/or programmatic dependent launch (pdl) goes through cuLaunchKernelEx with
 * those attributes, in the C library's order (cluster dimension, programmatic stream serialization). */
static CUresult launch_once(void* kernel, const uint32_t g[3], const uint32_t b[3], uint32_t smem, void* stream,
                            const uint32_t c[3], int pdl, void** ptrs) {
    if (c[0] == 0 && !pdl) return cu_launch(kernel, g[0], g[1], g[2], b[0], b[1], b[2], smem, stream, ptrs, NULL);
    kp_attr attr[2];
    kp_config cfg;
    unsigned n = 0;
    memset(attr, 0, sizeof attr);
    if (c[0]) {
        attr[n].id = KP_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr[n].value.cluster.x = c[0], attr[n].value.cluster.y = c[1], attr[n].value.cluster.z = c[2];
        n++;
    }
    if (pdl) {
        attr[n].id = KP_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr[n].value.cluster.x = 1; /* programmaticStreamSerializationAllowed: the value's first int */
        n++;
    }
    memcpy(cfg.grid, g, 3 * sizeof *g), memcpy(cfg.block, b, 3 * sizeof *b);
    cfg.smem = smem, cfg.stream = stream, cfg.attrs = attr, cfg.nattrs = n;
    return cu_launch_ex(&cfg, kernel, ptrs, NULL);
}

/* Launch in the context of the launch device (its primary context `ctx`), with the GIL released.
 *
 * One visible device: every context is on it, so no context is asked for. A thread with no current context is
 * told so by the launch itself (KP_CUDA_ERROR_INVALID_CONTEXT): the device's primary context is made current -- and
 * stays current, as the Python path leaves it -- and the launch is retried once. (A context of the caller's own on
 * that device stays current and is launched in: the kernel handles are context-independent.)
 * Several devices: the current context is read; when it is not the launch device's, that one is made current for
 * the launch and the caller's restored after it. */
static CUresult launch(void* ctx, void* kernel, const uint32_t g[3], const uint32_t b[3], uint32_t smem,
                       void* stream, const uint32_t c[3], int pdl, void** ptrs, const char** call) {
    CUresult r;
    if (KP_LIKELY(one_device)) {
        r = launch_once(kernel, g, b, smem, stream, c, pdl, ptrs);
        if (KP_LIKELY(r != KP_CUDA_ERROR_INVALID_CONTEXT)) return r;
        r = cu_ctx_set(ctx);
        if (r != 0) {
            *call = "cuCtxSetCurrent";
            return r;
        }
        return launch_once(kernel, g, b, smem, stream, c, pdl, ptrs);
    }
    void* saved = NULL;
    r = cu_ctx_get(&saved);
    if (r != 0) {
        *call = "cuCtxGetCurrent";
        return r;
    }
    if (saved != ctx && (r = cu_ctx_set(ctx)) != 0) {
        *call = "cuCtxSetCurrent";
        return r;
    }
    r = launch_once(kernel, g, b, smem, stream, c, pdl, ptrs);
    if (saved != NULL && saved != ctx) cu_ctx_set(saved);
    return r;
}

/* The launch's stream: the one given, else torch's current stream on the device when torch tensors were passed, else
 * the legacy stream 0. 0: a stream it cannot read (the Python path decides). */
static KP_INLINE int launch_stream(PyObject* stream, int ntensors, int device, uint64_t* out) {
    *out = 0;
    if (stream == NULL || stream == Py_None) return ntensors == 0 || current_stream(device, out);
    return read_stream(stream, out);
}

/* launch() with the GIL released (unless set_release_gil(False)); *call names the entry point that answered r */
static KP_INLINE CUresult launch_nogil(void* ctx, void* kernel, const uint32_t g[3], const uint32_t b[3], uint32_t smem,
                                       uint64_t stream, const uint32_t c[3], int pdl, void** ptrs, const char** call) {
    *call = c[0] || pdl ? "cuLaunchKernelEx" : "cuLaunchKernel";
    PyThreadState* ts = release_gil ? PyEval_SaveThread() : NULL;
    CUresult r = launch(ctx, kernel, g, b, smem, (void*)(uintptr_t)stream, c, pdl, ptrs, call);
    if (ts != NULL) PyEval_RestoreThread(ts);
    return r;
}

/* ------------------------------------------------------------------ launch options */

/* The number of keywords, each mapped to a launch option or K_N + a parameter's position; -1 when one is neither
 * (pdl=, cooperative=, an unknown name: the Python path decides). */
static int map_kwnames(kp_family* f, PyObject* kwnames, int8_t map[KP_MAX_KW]) {
    if (KP_LIKELY(kwnames == f->kw_last)) {
        memcpy(map, f->kw_map, (size_t)f->kw_n);
        return f->kw_n;
    }
    Py_ssize_t nk = PyTuple_Size(kwnames);
    if (nk < 0 || nk > KP_MAX_KW) return PyErr_Clear(), -1;
    Py_ssize_t np = f->names != NULL ? PyTuple_Size(f->names) : 0;
    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject* k = PyTuple_GetItem(kwnames, i);
        if (k == s_grid) map[i] = K_GRID;
        else if (k == s_block) map[i] = K_BLOCK;
        else if (k == s_smem) map[i] = K_SMEM;
        else if (k == s_stream) map[i] = K_STREAM;
        else if (k == s_cluster) map[i] = K_CLUSTER;
        else {
            Py_ssize_t j = 0;
            for (; j < np; j++) { /* interned names compare by identity; a name built at run time by value */
                PyObject* name = PyTuple_GetItem(f->names, j);
                if (name == k || (PyUnicode_Check(k) && PyUnicode_Compare(name, k) == 0)) break;
            }
            if (PyErr_Occurred()) return PyErr_Clear(), -1;
            if (j == np) return -1;
            map[i] = (int8_t)(K_N + j);
        }
    }
#ifndef Py_GIL_DISABLED /* the cache is guarded by the GIL */
    PyObject* old = f->kw_last;
    f->kw_last = Py_NewRef(kwnames);
    f->kw_n = (int)nk;
    memcpy(f->kw_map, map, (size_t)nk);
    Py_XDECREF(old);
#endif
    return (int)nk;
}

/* ------------------------------------------------------------------ the call */

/* self->load(device, entry): 1 when the C path can go on, 0 when the launch takes the Python path, -1 on an error */
static int call_load(kp_family* self, int device, int entry) {
    if (self->load == NULL) return 0;
    PyObject* r = PyObject_CallFunction(self->load, "ii", device, entry);
    if (r == NULL) return -1;
    int ok = PyObject_IsTrue(r);
    Py_DECREF(r);
    return ok;
}

/* One call: resolve (arguments, dispatch, configuration) and launch; with cap, resolve only, into cap (ok = 0: the
 * Python path decides), and launch nothing. */
static PyObject* family_run(PyObject* op, PyObject* const* args, size_t nargsf, PyObject* kwnames, kp_capture* cap) {
    kp_family* self = (kp_family*)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject* const* argv = args; /* the parameters in order (some passed by keyword: put in place in named[]) */
    PyObject* named[KP_MAX_SLOTS];
    PyObject *grid = NULL, *block = NULL, *smem = NULL, *stream = NULL, *cluster = NULL;
    unsigned char buf[KP_BUF] __attribute__((aligned(16)));
    void* ptrs[KP_MAX_SLOTS];

    if (KP_UNLIKELY(nargs > self->nargs)) goto slow;
    if (KP_UNLIKELY(cu_launch == NULL)) { /* the process's first launch: Python hands over the driver */
        int ok = call_load(self, -1, -1);
        if (ok < 0) return NULL;
        if (!ok || cu_launch == NULL) goto slow;
    }
    if (kwnames != NULL) {
        int8_t map[KP_MAX_KW];
        int nk = map_kwnames(self, kwnames, map);
        if (nk < 0) goto slow;
        PyObject* opt[K_N] = {NULL, NULL, NULL, NULL, NULL};
        int nnamed = 0;
        for (int i = 0; i < nk; i++) {
            if (map[i] < K_N) opt[map[i]] = args[nargs + i];
            else nnamed++;
        }
        if (nnamed) { /* all parameters once each, else the Python path says what is missing or repeated */
            if (nargs + nnamed != self->nargs) goto slow;
            memcpy(named, args, (size_t)nargs * sizeof(PyObject*));
            for (int i = (int)nargs; i < self->nargs; i++) named[i] = NULL;
            for (int i = 0; i < nk; i++) {
                int j = map[i] - K_N;
                if (j < 0) continue;
                if (j < nargs || named[j] != NULL) goto slow;
                named[j] = args[nargs + i];
            }
            argv = named, nargs = self->nargs;
        }
        grid = opt[K_GRID], block = opt[K_BLOCK], smem = opt[K_SMEM], stream = opt[K_STREAM], cluster = opt[K_CLUSTER];
    }
    if (KP_UNLIKELY(nargs != self->nargs)) goto slow;
    /* the arguments that may be tensors, read at once; then the launch device: with one visible device, 0 (each
     * tensor is checked to be on it as a slot takes it); else the first tensor's, and without one the current
     * context's (device 0 when none is current), as in Python */
    kp_call a;
    a.args = argv, a.nargs = (int)nargs, a.device = -1, a.ntensors = 0;
    if (self->ncand > 0 && read_views(self, &a, self->which, self->ncand) < 0) goto slow;
    if (KP_LIKELY(one_device)) {
        a.device = 0;
    } else {
        for (int k = 0; k < self->ncand && a.device < 0; k++) {
            int d = a.v[self->which[k]].device;
            if (d == KP_VIEW_ELSEWHERE) goto slow;
            if (d >= 0) a.device = d;
        }
        if (a.device < 0) {
            void* cur = NULL;
            if (cu_ctx_get(&cur) != 0) goto slow;
            if (cur == NULL) {
                a.device = 0;
            } else {
                for (int d = 0; d < KP_MAX_DEVICES && a.device < 0; d++)
                    if (self->devs[d] != NULL && self->devs[d]->ctx == cur) a.device = d;
            }
        }
    }
    const int device = a.device;
    if (device < 0 || device >= KP_MAX_DEVICES) goto slow;
    int loaded = 0;
dispatch:;
    const kp_dev* dev = self->devs[device];
    if (dev == NULL) { /* the device's first launch: Python makes its table (entries not loaded yet), then retry */
        if (loaded) goto slow;
        int ok = call_load(self, device, -1);
        if (ok < 0) return NULL;
        if (!ok) goto slow;
        loaded = 1;
        goto dispatch;
    }

    /* dispatch: the first specialization (in this device's order) every argument fits, packed as it is read */
    const kp_entry* e = NULL;
    const kp_plan* plan = NULL;
    const kp_view* const views = a.v;
    const uint32_t dev16 = (uint16_t)device;
    for (int j = 0; j < dev->n && e == NULL; j++) {
        const kp_plan* pl = &self->plans[dev->e[j].plan];
        if (!pl->ok) goto slow;
        const int64_t* dv = dev->e[j].dv;
        const kp_slot* sl = pl->slots;
        const int nslots = pl->nslots; /* a local: the packing's byte stores may alias any field */
        int fits = 1;
        for (int s = 0; s < nslots; s++, sl++) {
            unsigned char* p = buf + sl->offset;
            ptrs[s] = p;
            const int fop = sl->fop; /* the common cases inline; anything else (or failing them) in fit_slot */
            if (KP_LIKELY(fop == F_PTR)) {
                const kp_view* v = &views[sl->arg];
                if (KP_LIKELY((view_key(v) & sl->kmask) == (sl->kwant | dev16)) &&
                    (sl->align <= 1 || multiple(v->data, sl->align, sl->apow2))) {
                    memcpy(p, &v->data, 8);
                    continue;
                }
            }
            switch (fop) {
            case F_I32: case F_I64: {
                PyObject* o = argv[sl->arg];
                int64_t i;
                uint64_t u;
                if (KP_LIKELY(PyLong_CheckExact(o)) && read_long(o, &i, &u) == 1) {
                    if (sl->fop == F_I64) {
                        memcpy(p, &i, 8);
                        continue;
                    }
                    if (i >= INT32_MIN && i <= INT32_MAX) {
                        int32_t x = (int32_t)i;
                        memcpy(p, &x, 4);
                        continue;
                    }
                }
                break;
            }
            case F_F32: {
                PyObject* o = argv[sl->arg];
                if (KP_LIKELY(PyFloat_CheckExact(o))) {
                    double x = KP_FLOAT_VALUE(o);
                    float y = (float)x;
                    if (KP_LIKELY(!isinf(y)) || isinf(x)) {
                        memcpy(p, &y, 4);
                        continue;
                    }
                }
                break;
            }
            }
            if ((fits = fit_slot(self, sl, &a, buf, dv)) <= 0) break;
        }
        if (fits < 0) goto slow;
        if (fits) {
            if (KP_UNLIKELY(!pl->covers) && check_unread(self, &a) < 0) goto slow;
            e = &dev->e[j], plan = pl;
        }
    }
    if (e == NULL) goto slow;
    if (e->kernel == NULL) { /* chosen for the first time: Python loads it and replaces its row (or the table) */
        int j = (int)(e - dev->e), pidx = e->plan; /* e is freed if the table is replaced */
        if (loaded > 1) goto slow;
        int ok = call_load(self, device, j);
        if (ok < 0) return NULL; /* its error names the kernel */
        if (!ok) goto slow;
        loaded = 2;
        if (plan->ndev > 0) goto dispatch; /* its device values were packed as 0: pack again */
        dev = self->devs[device]; /* its row replaced in place, or the table: the same entries, this one loaded */
        if (dev == NULL || j >= dev->n || dev->e[j].kernel == NULL || dev->e[j].plan != pidx) goto slow;
        e = &dev->e[j]; /* the arguments packed for its plan stay as they are (tensor maps are encoded once) */
    }

    /* launch configuration */
    uint32_t g[3], b[3], c[3] = {0, 0, 0};
    if (grid == NULL || grid == Py_None) {
        if (plan->grid != 1) goto slow; /* no formula (grid is required), or one only Python computes */
        int r = grid_from_rule(plan, buf, g);
        if (r < 0) goto slow;
        if (r == 0) { /* a dimension <= 0: nothing to launch, as in the C library */
            if (cap != NULL) cap->ok = 1, cap->empty = 1, cap->gen = driver_gen;
            Py_RETURN_NONE;
        }
    } else if (!read_dims(grid, g)) {
        goto slow;
    }
    for (int i = 0; i < 3; i++)
        if (g[i] > dev->max_grid[i]) goto slow;
    const uint32_t* fixed = e->fixed_block[0] ? e->fixed_block : e->reqntid[0] ? e->reqntid : NULL;
    if (block == NULL || block == Py_None) {
        if (fixed == NULL) goto slow;
        memcpy(b, fixed, sizeof b);
    } else {
        if (!read_dims(block, b)) goto slow;
        if (e->reqntid[0] && !dims_eq(b, e->reqntid)) goto slow;
        if (e->fixed_block[0] && !dims_eq(b, e->fixed_block)) goto slow;
        uint64_t threads = (uint64_t)b[0] * b[1] * b[2];
        if (b[0] > dev->max_block[0] || b[1] > dev->max_block[1] || b[2] > dev->max_block[2]) goto slow;
        if (threads > dev->max_threads || (e->max_threads && threads > e->max_threads)) goto slow;
    }
    uint32_t nsmem = e->dyn_smem;
    if (smem != NULL && smem != Py_None) {
        if (!PyLong_CheckExact(smem)) goto slow;
        long long v = PyLong_AsLongLong(smem);
        if (v < 0 || v > UINT32_MAX) goto slow_clear;
        nsmem = (uint32_t)v;
    }
    if (nsmem < e->dyn_smem || (uint64_t)nsmem + e->static_smem > dev->smem_optin || nsmem > e->smem_raised) goto slow;
    const uint32_t* cfixed = e->cluster[0] ? e->cluster : e->spec_cluster[0] ? e->spec_cluster : NULL;
    if ((cluster != NULL && cluster != Py_None) || cfixed != NULL) {
        uint32_t want[3] = {0, 0, 0};
        if (cluster != NULL && cluster != Py_None) {
            if (!read_dims(cluster, want)) goto slow;
            if (cfixed != NULL && !dims_eq(want, cfixed)) goto slow;
        } else {
            memcpy(want, cfixed, sizeof want);
        }
        if (!dev->cluster_ok || (uint64_t)want[0] * want[1] * want[2] > KP_MAX_PORTABLE_CLUSTER) goto slow;
        if (g[0] % want[0] || g[1] % want[1] || g[2] % want[2]) goto slow;
        if (!e->cluster[0]) memcpy(c, want, sizeof c); /* a compile-time cluster is never requested again */
    }
    if (cap != NULL) {
        cap->ok = 1, cap->empty = 0, cap->recheck = 0, cap->gen = driver_gen;
        cap->device = device, cap->pdl = e->pdl, cap->ntensors = a.ntensors;
        cap->ctx = dev->ctx, cap->kernel = e->kernel, cap->plan = plan;
        memcpy(cap->g, g, sizeof g), memcpy(cap->b, b, sizeof b), memcpy(cap->c, c, sizeof c);
        cap->smem = nsmem;
        for (int i = 0; i < self->nargs; i++) cap->argv[i] = argv[i];
        cap->nt = self->ncand;
        for (int k = 0; k < self->ncand; k++) {
            cap->which[k] = self->which[k];
            cap->v[k] = a.v[self->which[k]];
            if (self->dims[self->which[k]]) cap->recheck = 1;
        }
        memcpy(cap->buf, buf, sizeof buf);
        for (int s = 0; s < plan->nslots; s++) cap->ptrs[s] = cap->buf + ((unsigned char*)ptrs[s] - buf);
        Py_RETURN_NONE;
    }
    /* copies: the stream getter may run Python, and another thread may then replace the device's table */
    void* const ctx = dev->ctx;
    void* const kernel = e->kernel;
    const int pdl = e->pdl;
    uint64_t hstream;
    if (!launch_stream(stream, a.ntensors, device, &hstream)) goto slow;
    const char* call;
    CUresult r = launch_nogil(ctx, kernel, g, b, nsmem, hstream, c, pdl, ptrs, &call);
    if (KP_UNLIKELY(r != 0)) return driver_error(self, plan, device, r, call);
    Py_RETURN_NONE;

slow_clear:
    PyErr_Clear();
slow:
    if (cap != NULL) {
        PyErr_Clear();
        cap->ok = 0;
        Py_RETURN_NONE;
    }
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static PyObject* family_call(PyObject* op, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
    return family_run(op, args, nargsf, kwnames, NULL);
}

/* ------------------------------------------------------------------ prepared launches */

/* Family.prepare(*args, grid=..., ...): the call resolved once; calling it (optionally with stream=) launches the
 * packed parameters again. Each call re-reads the arguments that may be tensors (one bridge call) and resolves
 * again when one changed; scalars are immutable. The arguments are held, so their memory lives as long as it. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject* family;
    PyObject* args;    /* tuple: the positional and keyword values as passed */
    PyObject* kwnames; /* NULL or the keywords' names */
    Py_ssize_t nargs;
    int busy; /* launches of this capture in flight with the GIL released */
    kp_capture cap;
} kp_prepared;

static PyTypeObject* PreparedType;

/* Resolve the prepared call again, into a capture of its own (malloc'd; *out, NULL on error): the object's own
 * capture may be in use by a launch of another thread, which released the GIL. */
static int prepared_resolve(kp_prepared* p, kp_capture** out) {
    PyObject* items[KP_MAX_KW];
    *out = NULL;
    kp_capture* c = (kp_capture*)PyMem_Malloc(sizeof(kp_capture));
    if (c == NULL) return PyErr_NoMemory(), -1;
    c->ok = 0;
    Py_ssize_t n = PyTuple_Size(p->args);
    if (n <= KP_MAX_KW) { /* more than the fast path ever takes: the Python path */
        for (Py_ssize_t i = 0; i < n; i++) items[i] = PyTuple_GetItem(p->args, i);
        PyObject* r = family_run(p->family, items, (size_t)p->nargs, p->kwnames, c);
        if (r == NULL) {
            PyMem_Free(c);
            return -1;
        }
        Py_DECREF(r);
    }
    *out = c;
    return 0;
}

/* dst = src, its parameter pointers moved into dst's buffer */
static void capture_copy(kp_capture* dst, const kp_capture* src) {
    memcpy(dst, src, sizeof *dst);
    if (src->ok && !src->empty)
        for (int s = 0; s < src->plan->nslots; s++) dst->ptrs[s] = dst->buf + ((unsigned char*)src->ptrs[s] - src->buf);
}

/* The Python path with the prepared arguments and this call's stream (it launches, or raises the full error). */
static PyObject* prepared_slow(kp_prepared* p, PyObject* stream) {
    Py_ssize_t n = PyTuple_Size(p->args), nk = p->kwnames ? PyTuple_Size(p->kwnames) : 0;
    PyObject** vec = (PyObject**)PyMem_Malloc((size_t)(n + 1) * sizeof(PyObject*));
    if (vec == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) vec[i] = PyTuple_GetItem(p->args, i);
    PyObject* names = PyTuple_New(nk + (stream != NULL));
    if (names == NULL) {
        PyMem_Free(vec);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nk; i++) PyTuple_SetItem(names, i, Py_NewRef(PyTuple_GetItem(p->kwnames, i)));
    if (stream != NULL) {
        PyTuple_SetItem(names, nk, Py_NewRef(s_stream));
        vec[n] = stream;
    }
    PyObject* slow = ((kp_family*)p->family)->slow;
    PyObject* r = PyObject_Vectorcall(slow, vec, (size_t)p->nargs, PyTuple_Size(names) ? names : NULL);
    Py_DECREF(names);
    PyMem_Free(vec);
    return r;
}

/* Launch capture c (the object's own, or a private one) on this call's stream. */
static PyObject* prepared_launch(kp_prepared* p, kp_capture* c, PyObject* stream) {
    if (c->empty) Py_RETURN_NONE;
    uint64_t hstream;
    if (!launch_stream(stream, c->ntensors, c->device, &hstream)) return prepared_slow(p, stream);
    const char* call;
    p->busy++; /* under the GIL: while it is released, no other thread rewrites this capture */
    CUresult r = launch_nogil(c->ctx, c->kernel, c->g, c->b, c->smem, hstream, c->c, c->pdl, c->ptrs, &call);
    p->busy--;
    if (KP_UNLIKELY(r != 0)) return driver_error((kp_family*)p->family, c->plan, c->device, r, call);
    Py_RETURN_NONE;
}

/* A TypeError "kernel LABEL: what" (LABEL: the Python family's, family.label, when it is set) */
static PyObject* kernel_type_error(PyObject* family, const char* what) {
    PyObject* fam = PyObject_GetAttrString(family, "family");
    PyObject* label = fam != NULL ? PyObject_GetAttrString(fam, "label") : NULL;
    Py_XDECREF(fam);
    PyErr_Clear();
    if (label != NULL) PyErr_Format(PyExc_TypeError, "kernel %U: %s", label, what);
    else PyErr_SetString(PyExc_TypeError, what);
    Py_XDECREF(label);
    return NULL;
}

static PyObject* prepared_call(PyObject* op, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
    kp_prepared* p = (kp_prepared*)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject* stream = NULL;
    if (n == 1 && kwnames == NULL) {
        stream = args[0];
    } else if (n == 0 && kwnames != NULL && PyTuple_Size(kwnames) == 1 && PyTuple_GetItem(kwnames, 0) == s_stream) {
        stream = args[0];
    } else if (n != 0 || kwnames != NULL) {
        return kernel_type_error(p->family, "a prepared launch takes one argument, stream (the kernel's arguments "
                                            "and launch options were given to prepare())");
    }
    if (stream == Py_None) stream = NULL;
    kp_capture* c = &p->cap;
    if (KP_UNLIKELY(!c->ok || c->recheck || c->gen != driver_gen || cu_launch == NULL)) goto resolve;
    if (c->nt > 0 && bridge != NULL) { /* the tensors are still where, and what, they were */
        kp_view now[KP_MAX_SLOTS];
        if (bridge->unpack_args(c->argv, c->which, c->nt, ((kp_family*)p->family)->dims, now) < 0) goto resolve;
        for (int k = 0; k < c->nt; k++) {
            const kp_view *a = &now[c->which[k]], *b = &c->v[k];
            if (a->device != b->device) goto resolve;
            if (a->device >= 0 && (a->data != b->data || a->dtype != b->dtype || a->contiguous != b->contiguous))
                goto resolve;
        }
    }
    return prepared_launch(p, c, stream);
resolve: {
    kp_capture* fresh;
    if (prepared_resolve(p, &fresh) < 0) return NULL;
    PyObject* r;
    if (!fresh->ok) {
        r = prepared_slow(p, stream);
    } else if (p->busy == 0) { /* keep it for the next calls */
        capture_copy(&p->cap, fresh);
        r = prepared_launch(p, &p->cap, stream);
    } else {
        r = prepared_launch(p, fresh, stream);
    }
    PyMem_Free(fresh);
    return r;
}
}

static PyObject* family_prepare(PyObject* op, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
    Py_ssize_t nk = kwnames != NULL ? PyTuple_Size(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nk; i++)
        if (PyTuple_GetItem(kwnames, i) == s_stream)
            return kernel_type_error(op, "prepare() takes no stream: pass it to each call of the prepared launch");
    allocfunc alloc = (allocfunc)PyType_GetSlot(PreparedType, Py_tp_alloc);
    kp_prepared* p = (kp_prepared*)alloc(PreparedType, 0);
    if (p == NULL) return NULL;
    p->vectorcall = prepared_call;
    p->family = Py_NewRef(op);
    p->nargs = nargs;
    p->kwnames = kwnames != NULL ? Py_NewRef(kwnames) : NULL;
    p->args = PyTuple_New(nargs + nk);
    if (p->args == NULL) goto fail;
    for (Py_ssize_t i = 0; i < nargs + nk; i++) PyTuple_SetItem(p->args, i, Py_NewRef(args[i]));
    p->cap.ok = 0;
    kp_capture* fresh;
    if (prepared_resolve(p, &fresh) < 0) goto fail;
    capture_copy(&p->cap, fresh);
    PyMem_Free(fresh);
    return (PyObject*)p;
fail:
    Py_DECREF(p);
    return NULL;
}

static PyObject* prepared_fast(PyObject* op, void* unused) {
    (void)unused;
    return PyBool_FromLong(((kp_prepared*)op)->cap.ok);
}

static int prepared_traverse(PyObject* op, visitproc visit, void* arg) {
    kp_prepared* p = (kp_prepared*)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(p->family);
    Py_VISIT(p->args);
    Py_VISIT(p->kwnames);
    return 0;
}

static int prepared_clear(PyObject* op) {
    kp_prepared* p = (kp_prepared*)op;
    p->cap.ok = 0, p->cap.nt = 0;
    Py_CLEAR(p->family);
    Py_CLEAR(p->args);
    Py_CLEAR(p->kwnames);
    return 0;
}

static void prepared_dealloc(PyObject* op) {
    PyTypeObject* tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    prepared_clear(op);
    freefunc free_ = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free_(op);
    Py_DECREF(tp);
}

static PyObject* prepared_repr(PyObject* op) {
    kp_prepared* p = (kp_prepared*)op;
    if (p->family == NULL) return PyUnicode_FromString("<kernelpack prepared launch>");
    return PyUnicode_FromFormat("<kernelpack prepared launch of %R>", p->family);
}

static PyMemberDef prepared_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(kp_prepared, vectorcall), Py_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef prepared_getset[] = {
    {"fast", prepared_fast, NULL, "True when the launch was resolved on the C path (else each call takes Python's).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot prepared_slots[] = {
    {Py_tp_call, (void*)PyVectorcall_Call},
    {Py_tp_members, prepared_members},
    {Py_tp_getset, prepared_getset},
    {Py_tp_traverse, (void*)prepared_traverse},
    {Py_tp_clear, (void*)prepared_clear},
    {Py_tp_dealloc, (void*)prepared_dealloc},
    {Py_tp_repr, (void*)prepared_repr},
    {Py_tp_doc, (void*)"A kernelpack launch prepared once (Family.prepare); call it, optionally with stream=."},
    {0, NULL},
};

static PyType_Spec prepared_spec = {
    "kernelpack.runtime._launch.PreparedLaunch",
    sizeof(kp_prepared),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    prepared_slots,
};

/* ------------------------------------------------------------------ building plans and tables from Python */

static int get_i64s(PyObject* t, int64_t* out, int n, const char* what) {
    if (!PyTuple_Check(t) || PyTuple_Size(t) != n) {
        PyErr_Format(PyExc_ValueError, "plan: %s must be a tuple of %d ints", what, n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(PyTuple_GetItem(t, i));
        if (out[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* PyArg_ParseTuple's own argument must be a tuple (else SystemError): a plan from a dispatch record is data */
static int is_tuple(PyObject* t, const char* what) {
    if (t != NULL && PyTuple_Check(t)) return 1;
    if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "plan: %s must be a tuple", what);
    return 0;
}

/* A new out-of-line part for slot s (zeroed), owned by family f. */
static kp_slot_x* slot_x(kp_family* f, kp_slot* s) {
    if (s->x != NULL) return s->x;
    if (f->nxs == f->capxs) {
        int cap = f->capxs ? 2 * f->capxs : 16;
        kp_slot_x** xs = (kp_slot_x**)PyMem_Realloc(f->xs, (size_t)cap * sizeof *xs);
        if (xs == NULL) return (kp_slot_x*)PyErr_NoMemory();
        f->xs = xs, f->capxs = cap;
    }
    s->x = (kp_slot_x*)PyMem_Calloc(1, sizeof(kp_slot_x));
    if (s->x == NULL) return (kp_slot_x*)PyErr_NoMemory();
    f->xs[f->nxs++] = s->x;
    return s->x;
}

/* Does each range constraint of slot s bound what its packing reads: an integer's value (mode -1) for a scalar, an
 * extent (mode < rank) for a tensor or tensor descriptor? (No other slot reads its ranges.) */
static int ranges_fit(const kp_slot* s) {
    for (int k = 0; k < s->nranges; k++) {
        const int m = s->x->rmode[k];
        if (s->op == KP_OP_SCALAR ? m != -1 : (s->op == KP_OP_TENSOR || s->op == KP_OP_DESC) && (m < 0 || m >= s->rank))
            return 0;
    }
    return 1;
}

/* A tensor-descriptor slot's facts (KP_OP_DESC: (tma, rank, elem_type, elem_size, swizzle, fp4, box); KP_OP_DESC_FIELD:
 * (field, pos, rank): launch/plan.py Plan.to_c). 1: they are in bounds; 0: not (the plan takes the Python path); -1: an
 * exception (not such a tuple). */
static int parse_desc(PyObject* tensor, kp_slot* s) {
    long long tma, rank, et, es, sw, fp4, field, pos;
    PyObject* box;
    if (s->op == KP_OP_DESC_FIELD) {
        if (!is_tuple(tensor, "a descriptor field") || !PyArg_ParseTuple(tensor, "LLL", &field, &pos, &rank))
            return -1;
        const int good = KP_NARROW(s->rank, rank, 1, KP_MAX_TMA_RANK) & KP_NARROW(s->field, field, 0, 2);
        return good & KP_NARROW(s->pos, pos, 0, s->rank - 1); /* after the rank */
    }
    if (!is_tuple(tensor, "a descriptor") || !PyArg_ParseTuple(tensor, "LLLLLLO", &tma, &rank, &et, &es, &sw, &fp4, &box))
        return -1;
    int good = KP_NARROW(s->tma, tma, 0, 1) & KP_NARROW(s->rank, rank, 1, KP_MAX_TMA_RANK) &
               KP_NARROW(s->elem_type, et, 0, 255) & KP_NARROW(s->swizzle, sw, 0, 15) & KP_NARROW(s->fp4, fp4, 0, 1);
    if (!s->tma) return good;
    /* the 128-byte map, elements of 1..8 bytes, a box of 1..256 elements per mode (cuTensorMapEncodeTiled's) */
    good &= KP_NARROW(s->elem_size, es, 1, 8) & (s->offset + 128 <= KP_BUF); /* s->offset <= KP_BUF already */
    int64_t b[KP_MAX_TMA_RANK];
    if (get_i64s(box, b, s->rank, "box") < 0) return -1;
    for (int i = 0; i < s->rank; i++) good &= KP_NARROW(s->box[i], b[i], 1, 256);
    return good;
}

/* A tensor-struct slot's facts (KP_OP_TENSOR: (shape, stride, data_off, shape_off, stride_off, shape_dtype,
 * stride_dtype)): 1 when every field it writes lies in the buffer, 0 when not, -1 for an exception. */
static int parse_tensor(kp_family* f, PyObject* tensor, kp_slot* s) {
    PyObject *shape, *stride, *shape_off, *stride_off;
    long long data_off, shape_dt, stride_dt;
    if (!is_tuple(tensor, "a tensor") ||
        !PyArg_ParseTuple(tensor, "OOLOOLL", &shape, &stride, &data_off, &shape_off, &stride_off, &shape_dt, &stride_dt))
        return -1;
    if (!is_tuple(shape, "a tensor's shape")) return -1;
    Py_ssize_t rank = PyTuple_Size(shape);
    if (rank < 0) return -1;
    if (rank > KP_MAX_RANK) return 0;
    int64_t so[KP_MAX_RANK], st[KP_MAX_RANK];
    kp_slot_x* x = slot_x(f, s);
    if (x == NULL || get_i64s(shape, x->shape, (int)rank, "shape") < 0 ||
        get_i64s(stride, x->stride, (int)rank, "stride") < 0 || get_i64s(shape_off, so, (int)rank, "shape offsets") < 0 ||
        get_i64s(stride_off, st, (int)rank, "stride offsets") < 0)
        return -1;
    const long long room = KP_BUF - 8 - (long long)s->offset; /* an 8-byte field at most, inside the buffer */
    s->rank = (int8_t)rank;
    int good = KP_NARROW(s->data_off, data_off, 0, room) & KP_NARROW(s->shape_dt, shape_dt, KP_DT_ANY, KP_DT_LAST) &
               KP_NARROW(s->stride_dt, stride_dt, KP_DT_ANY, KP_DT_LAST);
    for (int i = 0; i < rank; i++) /* a run-time mode's field is written: within the buffer (a static one's: -1) */
        good &= KP_NARROW(x->shape_off[i], so[i], x->shape[i] == KP_DYN ? 0 : -1, room) &
                KP_NARROW(x->stride_off[i], st[i], x->stride[i] == KP_DYN ? 0 : -1, room);
    return good;
}

static int parse_slot(kp_family* f, PyObject* t, kp_slot* s, int* ok) {
    long long op, arg, offset, size, dtype, align, divisor;
    PyObject *tensor, *ranges;
    if (!is_tuple(t, "a slot") ||
        !PyArg_ParseTuple(t, "LLLLLLLOO", &op, &arg, &offset, &size, &dtype, &align, &divisor, &tensor, &ranges))
        return -1;
    memset(s, 0, sizeof *s);
    if (!PyTuple_Check(ranges)) {
        PyErr_SetString(PyExc_TypeError, "plan slot: ranges must be a tuple");
        return -1;
    }
    /* Every field narrowed to its type and bounded (KP_NARROW): each byte a slot's packing writes lies in the buffer,
     * a slot that reads an argument names one of at most KP_MAX_SLOTS (make_family: one of the family's), each code
     * is one kernelpack defines. A plan that does not keep to this takes the Python path (op -1: a value derived at
     * launch), which, for a plan of a bundle's dispatch record, builds the family from its entries and refuses a
     * record that disagrees with them. */
    int good = KP_NARROW(s->op, op, KP_OP_NULL, KP_OP_DEVICE) && op != KP_OP_SCRATCH;
    if (!good) s->op = KP_OP_NULL; /* packs nothing, reads no argument */
    const int dev = s->op == KP_OP_DEVICE;
    good &= KP_NARROW(s->arg, arg, s->op == KP_OP_NULL ? -1 : 0, dev ? KP_MAX_DEVICE_VALUES - 1 : KP_MAX_SLOTS - 1);
    good &= KP_NARROW(s->size, size, 0, KP_BUF);
    good &= !dev || s->size == 4 || s->size == 8;
    good &= KP_NARROW(s->offset, offset, 0, KP_BUF - (s->size > 8 ? s->size : 8));
    good &= KP_NARROW(s->dtype, dtype, KP_DT_ANY, KP_DT_LAST) & KP_NARROW(s->align, align, 0, UINT32_MAX) &
            KP_NARROW(s->divisor, divisor, 0, INT64_MAX);
    s->apow2 = s->align > 0 && (s->align & (s->align - 1)) == 0;
    s->dpow2 = s->divisor > 0 && (s->divisor & (s->divisor - 1)) == 0;
    Py_ssize_t nr = PyTuple_Size(ranges);
    if (nr < 0) return -1;
    if (nr > KP_MAX_RANK + 1) good = 0, nr = 0;
    if (nr > 0 && slot_x(f, s) == NULL) return -1;
    for (Py_ssize_t k = 0; k < nr; k++) {
        long long mode, lo, hi;
        PyObject* row = PyTuple_GetItem(ranges, k); /* borrowed */
        if (!is_tuple(row, "a range") || !PyArg_ParseTuple(row, "LLL", &mode, &lo, &hi)) return -1;
        good &= KP_NARROW(s->x->rmode[k], mode, -1, KP_MAX_RANK - 1);
        s->x->rlo[k] = lo, s->x->rhi[k] = hi;
    }
    s->nranges = (int8_t)nr;
    int r = 1;
    if (s->op == KP_OP_DESC || s->op == KP_OP_DESC_FIELD) r = parse_desc(tensor, s);
    else if (s->op == KP_OP_TENSOR) r = parse_tensor(f, tensor, s);
    if (r < 0) return -1;
    if (!(good & r) || !ranges_fit(s)) *ok = 0;
    if (s->op == KP_OP_PTR) {
        s->fop = F_PTR;
        s->kwant = ((uint32_t)(uint8_t)s->dtype << 16) | (1u << 24);
        s->kmask = 0xFF00FFFFu | (s->dtype != KP_DT_ANY ? 0x00FF0000u : 0);
    }
    else if (s->op == KP_OP_SCALAR && s->dtype == KP_DT_F32) s->fop = F_F32;
    else if (s->op == KP_OP_SCALAR && s->divisor <= 1 && s->nranges == 0)
        s->fop = s->dtype == KP_DT_I32 ? F_I32 : s->dtype == KP_DT_I64 ? F_I64 : F_GENERAL;
    return 0;
}

static void free_tables(kp_family* f) {
    PyMem_Free(f->tmaps);
    f->tmaps = NULL;
    for (int i = 0; i < f->nxs; i++) PyMem_Free(f->xs[i]);
    PyMem_Free(f->xs);
    f->xs = NULL, f->nxs = f->capxs = 0;
    for (int d = 0; d < KP_MAX_DEVICES; d++) {
        if (f->devs[d] != NULL) PyMem_Free(f->devs[d]->e), PyMem_Free(f->devs[d]);
        f->devs[d] = NULL;
    }
    if (f->plans != NULL) {
        for (int i = 0; i < f->nplan; i++)
            PyMem_Free(f->plans[i].slots), PyMem_Free(f->plans[i].gcode), Py_XDECREF(f->plans[i].label);
        PyMem_Free(f->plans);
        f->plans = NULL;
    }
}

/* A plan's grid formulas: None (no formula), False (one the C path does not evaluate) or three tuples of steps
 * (op, value, dtype) in postfix order (runtime/plan.py grid_program). */
static int parse_grid(PyObject* t, kp_plan* pl) {
    if (t == Py_None) return 0;
    if (t == Py_False) {
        pl->grid = -1;
        return 0;
    }
    if (!PyTuple_Check(t) || PyTuple_Size(t) != 3) {
        PyErr_SetString(PyExc_ValueError, "make_family: a grid program is None, False or 3 tuples of steps");
        return -1;
    }
    Py_ssize_t total = 0;
    for (int d = 0; d < 3; d++) {
        PyObject* steps = PyTuple_GetItem(t, d);
        if (!is_tuple(steps, "a grid dimension's steps")) return -1;
        Py_ssize_t n = PyTuple_Size(steps);
        if (!KP_NARROW(pl->glen[d], n, 1, INT32_MAX))
            return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_ValueError, "empty grid program"), -1);
        total += n;
    }
    pl->gcode = (kp_gop*)PyMem_Calloc((size_t)total, sizeof(kp_gop));
    if (pl->gcode == NULL) return PyErr_NoMemory(), -1;
    kp_gop* g = pl->gcode;
    for (int d = 0; d < 3; d++) {
        PyObject* steps = PyTuple_GetItem(t, d);
        int depth = 0, ok = 1;
        for (int i = 0; i < pl->glen[d]; i++, g++) {
            long long op, v, dtype;
            PyObject* step = PyTuple_GetItem(steps, i);
            if (!is_tuple(step, "a grid step") || !PyArg_ParseTuple(step, "LLL", &op, &v, &dtype)) return -1;
            ok &= KP_NARROW(g->op, op, KP_G_CONST, KP_G_MAX) & KP_NARROW(g->dtype, dtype, KP_DT_ANY, KP_DT_LAST);
            ok &= KP_NARROW(g->v, v, g->op == KP_G_LOAD ? 0 : INT64_MIN, g->op == KP_G_LOAD ? KP_BUF - 8 : INT64_MAX);
            depth += g->op <= KP_G_LOAD ? 1 : -1;
            if (depth < 1 || depth > KP_GRID_STACK) ok = 0;
        }
        if (!ok || depth != 1) {
            PyErr_SetString(PyExc_ValueError, "make_family: malformed grid program");
            return -1;
        }
    }
    pl->grid = 1;
    return 0;
}

typedef struct {
    PyObject* obj; /* the table's slot it was parsed from (borrowed: the table is alive for the call); NULL: not yet */
    kp_slot slot;  /* as parse_slot made it */
    int ok;
} kp_parsed_slot;

/* make_family(slow, nargs, plans, labels[, grids, names, load, slots]): plans[i] = tuple of slot tuples
 * (launch/plan.py Plan.to_c), one per parameter layout of each specialization, or with slots (a tuple of slot tuples:
 * a dispatch record's table) a tuple or list of indices into it; labels[i] = its specialization's; grids[i] = plan
 * i's grid program (parse_grid) */
static PyObject* make_family(PyObject* mod, PyObject* args) {
    PyObject *slow, *plans, *labels, *grids = Py_None, *names = Py_None, *load = Py_None, *table = Py_None;
    int nargs;
    (void)mod;
    if (!PyArg_ParseTuple(args, "OiOO|OOOO", &slow, &nargs, &plans, &labels, &grids, &names, &load, &table))
        return NULL;
    if (nargs < 0) {
        PyErr_Format(PyExc_ValueError, "make_family: nargs must be >= 0 (got %d)", nargs);
        return NULL;
    }
    if (table != Py_None && !PyTuple_Check(table)) {
        PyErr_SetString(PyExc_TypeError, "make_family: slots must be None or a tuple of slots");
        return NULL;
    }
    if (names != Py_None && (!PyTuple_Check(names) || PyTuple_Size(names) != nargs)) {
        PyErr_SetString(PyExc_ValueError, "make_family: names must be None or one str per parameter");
        return NULL;
    }
    Py_ssize_t nspec = PyTuple_Size(plans);
    if (nspec < 1 || nspec > INT32_MAX || !PyTuple_Check(labels) || PyTuple_Size(labels) != nspec) {
        PyErr_SetString(PyExc_ValueError, "make_family: plans and labels must be non-empty tuples of one length");
        return NULL;
    }
    if (grids != Py_None && (!PyTuple_Check(grids) || PyTuple_Size(grids) != nspec)) {
        PyErr_SetString(PyExc_ValueError, "make_family: grids must be None or one program per plan");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(FamilyType, Py_tp_alloc);
    kp_parsed_slot one, *parsed = NULL;
    PyObject* seq = NULL;
    const Py_ssize_t ntable = table != Py_None ? PyTuple_Size(table) : 0;
    kp_family* f = (kp_family*)alloc(FamilyType, 0);
    if (f == NULL) return NULL;
    f->vectorcall = family_call;
    f->nargs = nargs > KP_MAX_SLOTS ? -1 : nargs; /* more arguments than slots: always the Python path */
    f->nplan = (int)nspec;
    f->plans = (kp_plan*)PyMem_Calloc((size_t)nspec, sizeof(kp_plan));
    /* with a table of slots, plans are its indices: each slot of the table parsed once, when a plan first names it */
    parsed = (kp_parsed_slot*)PyMem_Calloc((size_t)(ntable ? ntable : 1), sizeof(kp_parsed_slot));
    if (f->plans == NULL || parsed == NULL) goto fail;
    for (Py_ssize_t i = 0; i < nspec; i++) {
        Py_CLEAR(seq);
        PyObject* plan = PyTuple_GetItem(plans, i);
        if (plan == NULL) goto fail;
        const char* hex = NULL; /* a plan of a slot table given as text: 4 hex digits per slot index */
        Py_ssize_t n = 0;
        if (table != Py_None && PyUnicode_Check(plan)) {
            hex = PyUnicode_AsUTF8AndSize(plan, &n);
            if (hex == NULL) goto fail;
            if (n % 4) {
                PyErr_SetString(PyExc_ValueError, "make_family: a plan's text is not 4 hex digits per slot");
                goto fail;
            }
            n /= 4;
        } else if (table == Py_None ? !PyTuple_Check(plan) : !PyTuple_Check(plan) && !PyList_Check(plan)) {
            PyErr_SetString(PyExc_TypeError, "make_family: a plan must be a tuple (of indices: a tuple, list or text)");
            goto fail;
        } else {
            seq = Py_NewRef(plan);
            n = PyTuple_Check(seq) ? PyTuple_Size(seq) : PyList_Size(seq);
        }
        kp_plan* pl = &f->plans[i];
        pl->label = PyTuple_GetItem(labels, i);
        Py_INCREF(pl->label);
        pl->ok = n <= KP_MAX_SLOTS;
        pl->nslots = pl->ok ? (int)n : 0;
        pl->slots = (kp_slot*)PyMem_Malloc((size_t)(n ? n : 1) * sizeof(kp_slot)); /* each is copied in below */
        if (pl->slots == NULL) goto fail;
        for (Py_ssize_t s = 0; s < pl->nslots; s++) {
            kp_slot* sl = &pl->slots[s];
            PyObject* t = hex != NULL ? NULL : PyTuple_Check(seq) ? PyTuple_GetItem(seq, s) : PyList_GetItem(seq, s);
            kp_parsed_slot* c = &one;
            one.obj = NULL;
            if (table != Py_None) {
                long long k = 0;
                if (hex != NULL) {
                    for (int d = 0; d < 4; d++) {
                        const char h = hex[4 * s + d];
                        const int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
                        if (v < 0) {
                            PyErr_SetString(PyExc_ValueError, "make_family: a plan's text is not hex digits");
                            goto fail;
                        }
                        k = k * 16 + v;
                    }
                } else {
                    k = PyLong_AsLongLong(t);
                    if (k == -1 && PyErr_Occurred()) goto fail;
                }
                if (k < 0 || k >= ntable) {
                    PyErr_SetString(PyExc_ValueError, "make_family: a plan names a slot the table lacks");
                    goto fail;
                }
                c = &parsed[k];
                t = PyTuple_GetItem(table, k);
            }
            if (t != c->obj) {
                c->ok = 1;
                if (parse_slot(f, t, &c->slot, &c->ok) < 0) goto fail;
                c->obj = t;
            }
            *sl = c->slot;
            if (!c->ok) pl->ok = 0;
            if ((sl->op == KP_OP_TENSOR || sl->op == KP_OP_DESC) && sl->arg >= 0 && sl->arg < KP_MAX_SLOTS)
                f->dims[sl->arg] = 1;
            if (sl->op != KP_OP_DEVICE) continue;
            if (sl->arg != pl->ndev || pl->ndev == KP_MAX_DEVICE_VALUES) {
                pl->ok = 0;
                continue;
            }
            sl->dev = (int8_t)pl->ndev++;
            sl->arg = -1; /* hidden: no caller argument */
        }
        if (grids != Py_None && parse_grid(PyTuple_GetItem(grids, i), pl) < 0) goto fail;
        uint8_t seen[KP_MAX_SLOTS] = {0};
        int nseen = 0;
        for (int s = 0; s < pl->nslots; s++) {
            int a = pl->slots[s].op == KP_OP_DEVICE ? -1 : pl->slots[s].arg;
            if (a >= f->nargs) pl->ok = 0; /* no such caller argument: never read past them */
            else if (a >= 0 && !seen[a]) seen[a] = 1, nseen++;
        }
        pl->covers = nseen == f->nargs;
        for (int s = 0; s < pl->nslots; s++) {
            const kp_slot* sl = &pl->slots[s];
            if ((sl->op == KP_OP_PTR || sl->op == KP_OP_TENSOR || sl->op == KP_OP_DESC || sl->op == KP_OP_DESC_FIELD) &&
                sl->arg >= 0 && sl->arg < f->nargs)
                f->cand[sl->arg] = 1;
        }
        for (int a = 0; a < f->nargs; a++)
            if (!seen[a]) f->cand[a] = 1; /* left unread by this plan: checked by check_unread (not_taken) */
    }
    for (int a = 0; a < f->nargs; a++)
        if (f->cand[a]) f->which[f->ncand++] = (uint8_t)a;
    if (names != Py_None) { /* interned, so a call site's keyword (interned by the compiler) matches by identity */
        Py_ssize_t n = PyTuple_Size(names);
        f->names = PyTuple_New(n);
        if (f->names == NULL) goto fail;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject* name = PyTuple_GetItem(names, i);
            if (!PyUnicode_Check(name)) {
                PyErr_SetString(PyExc_TypeError, "make_family: names must be str");
                goto fail;
            }
            Py_INCREF(name);
            PyUnicode_InternInPlace(&name);
            PyTuple_SetItem(f->names, i, name);
        }
    }
    PyMem_Free(parsed);
    Py_XDECREF(seq);
    Py_INCREF(slow);
    f->slow = slow;
    if (load != Py_None) f->load = Py_NewRef(load);
    return (PyObject*)f;
fail:
    PyMem_Free(parsed);
    Py_XDECREF(seq);
    if (!PyErr_Occurred()) PyErr_NoMemory();
    Py_DECREF(f);
    return NULL;
}

/* A device table's 32-bit unsigned field (a launch fact, a device limit; KP_NARROW): ValueError naming it when v is
 * none. */
static int u32_arg(long long v, uint32_t* out, const char* what) {
    if (KP_NARROW(*out, v, 0, UINT32_MAX)) return 0;
    PyErr_Format(PyExc_ValueError, "_set_device: %s must be in [0, 2**32) (got %lld)", what, v);
    return -1;
}

static int dim3_arg(PyObject* t, uint32_t out[3], const char* what) {
    int64_t v[3];
    if (get_i64s(t, v, 3, what) < 0) return -1;
    for (int i = 0; i < 3; i++)
        if (u32_arg(v[i], &out[i], what) < 0) return -1;
    return 0;
}

/* One row of a device's table: a plan index (an entry not loaded yet: C asks load() when dispatch chooses it) or
 * (plan, kernel, fixed_block, reqntid, max_threads, cluster, spec_cluster, static_smem, dyn_smem, smem_raised,
 * device values, pdl) */
static int parse_entry(const kp_family* self, PyObject* row, kp_entry* e) {
    memset(e, 0, sizeof *e);
    if (PyLong_Check(row)) {
        long v = PyLong_AsLong(row);
        if (v == -1 && PyErr_Occurred()) return -1;
        e->plan = v < 0 || v > INT32_MAX ? -1 : (int)v;
    } else {
        unsigned long long kernel;
        long long mt, ss, ds, raised;
        PyObject *fb, *rq, *cl, *scl, *dv;
        if (!is_tuple(row, "a device table row") ||
            !PyArg_ParseTuple(row, "iKOOLOOLLLOp", &e->plan, &kernel, &fb, &rq, &mt, &cl, &scl, &ss, &ds, &raised,
                              &dv, &e->pdl))
            return -1;
        if (e->plan >= 0 && e->plan < self->nplan) {
            int ndv = self->plans[e->plan].ndev;
            if (ndv > 0 && get_i64s(dv, e->dv, ndv, "device values") < 0) return -1;
        }
        e->kernel = (void*)(uintptr_t)kernel;
        if (u32_arg(mt, &e->max_threads, "max_threads") < 0 || u32_arg(ss, &e->static_smem, "static_smem") < 0 ||
            u32_arg(ds, &e->dyn_smem, "dyn_smem") < 0 || u32_arg(raised, &e->smem_raised, "smem_raised") < 0 ||
            dim3_arg(fb, e->fixed_block, "fixed_block") < 0 || dim3_arg(rq, e->reqntid, "reqntid") < 0 ||
            dim3_arg(cl, e->cluster, "cluster") < 0 || dim3_arg(scl, e->spec_cluster, "spec_cluster") < 0)
            return -1;
    }
    if (e->plan < 0 || e->plan >= self->nplan) {
        PyErr_SetString(PyExc_ValueError, "_set_device: plan index out of range");
        return -1;
    }
    return 0;
}

/* family._set_device(ordinal, ctx, max_grid, max_block, max_threads, smem_optin, cluster_ok, rows): rows in dispatch
 * order, each as parse_entry reads it */
static PyObject* family_set_device(PyObject* op, PyObject* args) {
    kp_family* self = (kp_family*)op;
    int ordinal, cluster_ok;
    unsigned long long ctx;
    long long max_threads, optin;
    PyObject *max_grid, *max_block, *rows;
    if (!PyArg_ParseTuple(args, "iKOOLLiO", &ordinal, &ctx, &max_grid, &max_block, &max_threads, &optin, &cluster_ok,
                          &rows))
        return NULL;
    if (ordinal < 0 || ordinal >= KP_MAX_DEVICES) Py_RETURN_NONE; /* such devices always take the Python path */
    Py_ssize_t n = PyTuple_Size(rows);
    if (n < 0) return NULL;
    kp_dev* d = (kp_dev*)PyMem_Calloc(1, sizeof(kp_dev));
    if (d == NULL) return PyErr_NoMemory();
    d->e = (kp_entry*)PyMem_Calloc((size_t)(n ? n : 1), sizeof(kp_entry));
    if (d->e == NULL) {
        PyMem_Free(d);
        return PyErr_NoMemory();
    }
    d->ctx = (void*)(uintptr_t)ctx, d->cluster_ok = cluster_ok;
    if (!KP_NARROW(d->n, n, 0, INT32_MAX)) {
        PyErr_SetString(PyExc_ValueError, "_set_device: too many rows");
        goto fail;
    }
    if (u32_arg(max_threads, &d->max_threads, "max_threads") < 0 || u32_arg(optin, &d->smem_optin, "smem_optin") < 0 ||
        dim3_arg(max_grid, d->max_grid, "max_grid") < 0 || dim3_arg(max_block, d->max_block, "max_block") < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++)
        if (parse_entry(self, PyTuple_GetItem(rows, i), &d->e[i]) < 0) goto fail;
    kp_dev* old = self->devs[ordinal];
    self->devs[ordinal] = d; /* under the GIL; a launch in flight holds copies, never this table */
    if (old != NULL) PyMem_Free(old->e), PyMem_Free(old);
    Py_RETURN_NONE;
fail:
    PyMem_Free(d->e);
    PyMem_Free(d);
    return NULL;
}

/* family._set_entry(ordinal, j, row): row j of the device's table replaced in place (an entry loaded now), its plan
 * unchanged; False when the device has no table or no such row (the caller publishes the whole table) */
static PyObject* family_set_entry(PyObject* op, PyObject* args) {
    kp_family* self = (kp_family*)op;
    int ordinal, j;
    PyObject* row;
    if (!PyArg_ParseTuple(args, "iiO", &ordinal, &j, &row)) return NULL;
    kp_dev* d = ordinal >= 0 && ordinal < KP_MAX_DEVICES ? self->devs[ordinal] : NULL;
    if (d == NULL || j < 0 || j >= d->n) Py_RETURN_FALSE;
    kp_entry e;
    if (parse_entry(self, row, &e) < 0) return NULL;
    if (e.plan != d->e[j].plan) {
        PyErr_SetString(PyExc_ValueError, "_set_entry: the row's plan is not the one it replaces");
        return NULL;
    }
    d->e[j] = e; /* under the GIL, as launches read it */
    Py_RETURN_TRUE;
}

/* family._check_layout(plan, kernel): 1 when the kernel's parameters, as the driver reports them, are the plan's slots
 * (count, offsets, sizes), so a launch hands the driver exactly what it reads; 0 when they differ (a plan from an
 * altered dispatch record: the driver would read past what is packed); -1 when the driver cannot say (no
 * cuKernelGetParamInfo, a kernel it cannot describe) or the C path never launches the plan */
static PyObject* family_check_layout(PyObject* op, PyObject* args) {
    kp_family* self = (kp_family*)op;
    int p;
    unsigned long long kernel;
    if (!PyArg_ParseTuple(args, "iK", &p, &kernel)) return NULL;
    if (p < 0 || p >= self->nplan) {
        PyErr_SetString(PyExc_ValueError, "_check_layout: plan index out of range");
        return NULL;
    }
    const kp_plan* pl = &self->plans[p];
    if (cu_param_info == NULL || kernel == 0 || !pl->ok) return PyLong_FromLong(-1);
    size_t base = 0; /* the driver's offsets may start past 0 (a kernel taking a CUtensorMap: 48 on sm_90): compared
                      * relative to the first parameter's */
    for (int s = 0; s <= pl->nslots; s++) {
        size_t off = 0, size = 0;
        const CUresult r = cu_param_info((void*)(uintptr_t)kernel, (size_t)s, &off, &size);
        if (r == 1) return PyLong_FromLong(s == pl->nslots); /* CUDA_ERROR_INVALID_VALUE: past the last parameter */
        if (r != 0) return PyLong_FromLong(-1);
        if (s == 0 && pl->nslots > 0) base = off - pl->slots[0].offset;
        if (s == pl->nslots || off - base != pl->slots[s].offset || size != pl->slots[s].size) return PyLong_FromLong(0);
    }
    return PyLong_FromLong(-1); /* not reached */
}

static PyObject* family_fast_devices(PyObject* op, PyObject* unused) {
    kp_family* self = (kp_family*)op;
    (void)unused;
    PyObject* out = PyList_New(0);
    for (int d = 0; out != NULL && d < KP_MAX_DEVICES; d++) {
        if (self->devs[d] == NULL) continue;
        PyObject* v = PyLong_FromLong(d);
        if (v == NULL || PyList_Append(out, v) < 0) Py_CLEAR(out);
        Py_XDECREF(v);
    }
    return out;
}

/* ------------------------------------------------------------------ the type */

static int family_traverse(PyObject* op, visitproc visit, void* arg) {
    kp_family* f = (kp_family*)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(f->dict);
    Py_VISIT(f->slow);
    Py_VISIT(f->load);
    Py_VISIT(f->names);
    Py_VISIT(f->kw_last);
    return 0;
}

static int family_clear(PyObject* op) {
    kp_family* f = (kp_family*)op;
    Py_CLEAR(f->dict);
    Py_CLEAR(f->slow);
    Py_CLEAR(f->load);
    Py_CLEAR(f->names);
    Py_CLEAR(f->kw_last);
    return 0;
}

static void family_dealloc(PyObject* op) {
    kp_family* f = (kp_family*)op;
    PyTypeObject* tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    if (f->weakrefs != NULL) PyObject_ClearWeakRefs(op);
    family_clear(op);
    free_tables(f);
    freefunc free_ = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    free_(op);
    Py_DECREF(tp);
}

/* The value of a documentation attribute (__doc__, __signature__, _kp_repr): the one stored in the instance dict,
 * else what its _kp_docs(name) computes, stored there (docs are made on first access, not when the family is
 * built); NULL without an error when there is neither. */
static PyObject* lazy_doc(kp_family* f, PyObject* name) {
    if (f->dict == NULL) return NULL;
    PyObject* v = PyDict_GetItemWithError(f->dict, name);
    if (v != NULL) return Py_NewRef(v);
    if (PyErr_Occurred()) return NULL;
    PyObject* make = PyDict_GetItemString(f->dict, "_kp_docs");
    if (make == NULL) return NULL;
    Py_INCREF(make);
    v = PyObject_CallFunctionObjArgs(make, name, NULL);
    Py_DECREF(make);
    if (v == NULL) return NULL;
    if (PyDict_SetItem(f->dict, name, v) < 0) Py_CLEAR(v);
    return v;
}

static PyObject* family_repr(PyObject* op) {
    PyObject* r = lazy_doc((kp_family*)op, s_repr);
    if (r != NULL || PyErr_Occurred()) return r;
    return PyUnicode_FromString("<kernelpack kernel>");
}

static PyObject* family_get_doc(PyObject* op, void* name) {
    PyObject* key = PyUnicode_FromString((const char*)name);
    if (key == NULL) return NULL;
    PyObject* v = lazy_doc((kp_family*)op, key);
    Py_DECREF(key);
    if (v != NULL || PyErr_Occurred()) return v;
    if (!strcmp((const char*)name, "__doc__")) Py_RETURN_NONE;
    PyErr_SetString(PyExc_AttributeError, (const char*)name);
    return NULL;
}

static int family_set_doc(PyObject* op, PyObject* value, void* name) {
    kp_family* f = (kp_family*)op;
    if (f->dict == NULL && (f->dict = PyDict_New()) == NULL) return -1;
    if (value == NULL) {
        int r = PyDict_DelItemString(f->dict, (const char*)name);
        if (r < 0 && PyErr_ExceptionMatches(PyExc_KeyError)) PyErr_Clear(), r = 0;
        return r;
    }
    return PyDict_SetItemString(f->dict, (const char*)name, value);
}

static PyGetSetDef family_getset[] = {
    {"__doc__", family_get_doc, family_set_doc, NULL, "__doc__"},
    {"__signature__", family_get_doc, family_set_doc, NULL, "__signature__"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject* family_descr_get(PyObject* self, PyObject* obj, PyObject* type) {
    (void)obj, (void)type;
    return Py_NewRef(self); /* a kernel stored on a class stays a kernel (like staticmethod) */
}

static PyMemberDef family_members[] = {
    {"__vectorcalloffset__", Py_T_PYSSIZET, offsetof(kp_family, vectorcall), Py_READONLY, NULL},
    {"__dictoffset__", Py_T_PYSSIZET, offsetof(kp_family, dict), Py_READONLY, NULL},
    {"__weaklistoffset__", Py_T_PYSSIZET, offsetof(kp_family, weakrefs), Py_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef family_methods[] = {
    {"_set_device", family_set_device, METH_VARARGS, "Install the dispatch table of one device."},
    {"_set_entry", family_set_entry, METH_VARARGS, "Replace one loaded row of a device's dispatch table."},
    {"_check_layout", family_check_layout, METH_VARARGS, "Do a kernel's parameters match a plan's slots?"},
    {"_fast_devices", family_fast_devices, METH_NOARGS, "Devices with a dispatch table."},
    {"prepare", (PyCFunction)(void (*)(void))family_prepare, METH_FASTCALL | METH_KEYWORDS,
     "prepare(*args, grid=, block=, smem=, cluster=): the call checked and packed once; the returned object launches "
     "it again when called (optionally with stream=), re-reading only the tensors' addresses."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot family_slots[] = {
    {Py_tp_call, (void*)PyVectorcall_Call},
    {Py_tp_members, family_members},
    {Py_tp_getset, family_getset},
    {Py_tp_methods, family_methods},
    {Py_tp_traverse, (void*)family_traverse},
    {Py_tp_clear, (void*)family_clear},
    {Py_tp_dealloc, (void*)family_dealloc},
    {Py_tp_repr, (void*)family_repr},
    {Py_tp_descr_get, (void*)family_descr_get},
    {Py_tp_getattro, (void*)PyObject_GenericGetAttr},
    {Py_tp_setattro, (void*)PyObject_GenericSetAttr},
    {0, NULL},
};

static PyType_Spec family_spec = {
    "kernelpack.runtime._launch.Family",
    sizeof(kp_family),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    family_slots,
};

/* ------------------------------------------------------------------ module functions */

/* set_driver({name: address}) with the entry points of runtime/driver.py FAST_ENTRY_POINTS */
static PyObject* set_driver(PyObject* mod, PyObject* addresses) {
    static const char* names[] = {"cuCtxGetCurrent", "cuCtxSetCurrent", "cuLaunchKernel", "cuLaunchKernelEx",
                                  "cuGetErrorName"};
    void* fns[5];
    (void)mod;
    if (!PyDict_Check(addresses)) {
        PyErr_SetString(PyExc_TypeError, "set_driver takes a dict of entry point addresses");
        return NULL;
    }
    for (int i = 0; i < 5; i++) {
        PyObject* v = PyDict_GetItemString(addresses, names[i]);
        if (v == NULL) return PyErr_Format(PyExc_KeyError, "set_driver: no address for %s", names[i]);
        fns[i] = PyLong_AsVoidPtr(v);
        if (fns[i] == NULL) return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "%s is NULL", names[i]);
    }
    memcpy(&cu_ctx_get, &fns[0], sizeof fns[0]);
    memcpy(&cu_ctx_set, &fns[1], sizeof fns[1]);
    memcpy(&cu_launch, &fns[2], sizeof fns[2]);
    memcpy(&cu_launch_ex, &fns[3], sizeof fns[3]);
    memcpy(&cu_error_name, &fns[4], sizeof fns[4]);
    /* optional: cuTensorMapEncodeTiled (a driver without it: TMA launches take the Python path, which says so) and
     * the driver's version; maps encoded under another driver are not reused */
    PyObject* enc = PyDict_GetItemString(addresses, "cuTensorMapEncodeTiled");
    void* fn = enc != NULL && enc != Py_None ? PyLong_AsVoidPtr(enc) : NULL;
    if (fn == NULL && PyErr_Occurred()) return NULL;
    PyObject* ver = PyDict_GetItemString(addresses, "driver_version");
    long version = ver != NULL ? PyLong_AsLong(ver) : 0;
    if (version == -1 && PyErr_Occurred()) return NULL;
    memcpy(&cu_tmap_encode, &fn, sizeof fn);
    PyObject* info = PyDict_GetItemString(addresses, "cuKernelGetParamInfo"); /* optional too: checks layouts */
    fn = info != NULL && info != Py_None ? PyLong_AsVoidPtr(info) : NULL;
    if (fn == NULL && PyErr_Occurred()) return NULL;
    memcpy(&cu_param_info, &fn, sizeof fn);
    driver_version = (int)version;
    driver_gen++;
    Py_RETURN_NONE;
}

/* forget_driver(): the process's driver was replaced (runtime/driver.py use_library): no launch through the old entry
 * points; the next launch asks Python for the new ones (family load callback, else the Python path). */
static PyObject* forget_driver(PyObject* mod, PyObject* unused) {
    (void)mod, (void)unused;
    cu_launch = NULL;
    driver_gen++; /* encoded tensor maps and prepared launches of the old driver are stale */
    Py_RETURN_NONE;
}

static PyObject* bridge_owner;

/* set_bridge(capsule or None): torch tensors become readable on the fast path */
static PyObject* set_bridge(PyObject* mod, PyObject* capsule) {
    (void)mod;
    if (capsule == Py_None) {
        bridge = NULL;
        Py_CLEAR(bridge_owner);
        Py_RETURN_NONE;
    }
    const kp_bridge* b = (const kp_bridge*)PyCapsule_GetPointer(capsule, KP_BRIDGE_CAPSULE);
    if (b == NULL) return NULL;
    if (b->abi != KP_BRIDGE_ABI)
        return PyErr_Format(PyExc_ImportError, "torch bridge ABI %d, expected %d", b->abi, KP_BRIDGE_ABI);
    Py_INCREF(capsule);
    PyObject* old = bridge_owner;
    bridge_owner = capsule;
    Py_XDECREF(old);
    bridge = b;
    Py_RETURN_NONE;
}

static PyObject* set_stream_getter(PyObject* mod, PyObject* fn) {
    (void)mod;
    PyObject* old = stream_getter;
    stream_getter = fn == Py_None ? NULL : Py_NewRef(fn);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

/* set_device_count(n): the number of visible devices (fixed for the process once the driver is initialized) */
static PyObject* set_device_count(PyObject* mod, PyObject* n) {
    (void)mod;
    long v = PyLong_AsLong(n);
    if (v == -1 && PyErr_Occurred()) return NULL;
    one_device = v == 1;
    Py_RETURN_NONE;
}

static PyObject* set_release_gil(PyObject* mod, PyObject* flag) {
    (void)mod;
    int v = PyObject_IsTrue(flag);
    if (v < 0) return NULL;
    release_gil = v;
    Py_RETURN_NONE;
}

static PyObject* state(PyObject* mod, PyObject* unused) {
    (void)mod, (void)unused;
    return Py_BuildValue("{s:O,s:O,s:O,s:O}", "driver", cu_launch ? Py_True : Py_False, "torch_bridge",
                         bridge ? Py_True : Py_False, "torch_streams",
                         bridge && bridge->cuda_streams ? Py_True : Py_False, "one_device",
                         one_device ? Py_True : Py_False);
}

static PyMethodDef module_methods[] = {
    {"forget_driver", forget_driver, METH_NOARGS, "The driver was replaced: launch nothing through the old one."},
    {"make_family", make_family, METH_VARARGS, "make_family(slow, nargs, plans, labels) -> Family"},
    {"set_driver", set_driver, METH_O, "Install the driver entry points (a dict name -> address)."},
    {"set_bridge", set_bridge, METH_O, "Install the torch bridge capsule (or None)."},
    {"set_stream_getter", set_stream_getter, METH_O, "Fallback f(device) -> torch's current stream handle."},
    {"set_release_gil", set_release_gil, METH_O, "Release the GIL around the driver call (default True)."},
    {"set_device_count", set_device_count, METH_O, "The number of visible devices (1: no context query per launch)."},
    {"state", state, METH_NOARGS, "What the fast path can do now."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "kernelpack.runtime._launch", "kernelpack's fast launch path (see runtime/family.py).",
    -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__launch(void) {
    PyObject* m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    FamilyType = (PyTypeObject*)PyType_FromSpec(&family_spec);
    if (FamilyType == NULL) goto fail;
    Py_INCREF((PyObject*)FamilyType);
    if (PyModule_AddObject(m, "Family", (PyObject*)FamilyType) < 0) goto fail;
    PreparedType = (PyTypeObject*)PyType_FromSpec(&prepared_spec);
    if (PreparedType == NULL) goto fail;
    Py_INCREF((PyObject*)PreparedType);
    if (PyModule_AddObject(m, "PreparedLaunch", (PyObject*)PreparedType) < 0) goto fail;
    s_grid = PyUnicode_InternFromString("grid");
    s_block = PyUnicode_InternFromString("block");
    s_smem = PyUnicode_InternFromString("smem");
    s_stream = PyUnicode_InternFromString("stream");
    s_cluster = PyUnicode_InternFromString("cluster");
    s_cuda_stream = PyUnicode_InternFromString("cuda_stream");
    s_repr = PyUnicode_InternFromString("_kp_repr");
    if (!s_grid || !s_block || !s_smem || !s_stream || !s_cluster || !s_cuda_stream || !s_repr) goto fail;
    if (PyModule_AddIntConstant(m, "BUFFER_BYTES", KP_BUF) < 0 || PyModule_AddIntConstant(m, "MAX_SLOTS", KP_MAX_SLOTS) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
