/* kernelpack.runtime._launch -- the arguments of one launch: the views of those that may be torch tensors (one
 * bridge call), each slot's argument checked and packed into the parameter buffer (fit_slot and its cases),
 * and the arguments no slot of the chosen plan reads.
 * A part of the extension's one translation unit: _launch.c includes the parts in order; not compiled alone.
 */
#include "_launch.h"

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
static KP_INLINE int read_views(const kp_family* f, kp_call* c, const uint8_t* which, int n) {
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

/* The tensors of list argument i, read through the torch bridge into c->lc: 0, or -1 when the C path does not take
 * the list (no bridge, not a list or tuple, empty, too long, an element that is no torch tensor: the Python path
 * decides, and refuses what it must). */
static KP_NOINLINE int read_list(kp_call* c, int i) {
    uint8_t ones[256];
    kp_lcall* lc = c->lc;
    PyObject* o = c->args[i];
    const int is_list = PyList_CheckExact(o);
    if (bridge == NULL || (!is_list && !PyTuple_CheckExact(o))) return -1;
    Py_ssize_t n = is_list ? PyList_Size(o) : PyTuple_Size(o);
    if (n < 1 || n > KP_LIST_VIEWS - lc->nv) return -1;
    memset(ones, 1, sizeof ones);
    for (Py_ssize_t base = 0; base < n; base += 256) { /* the bridge takes argument indices as bytes */
        PyObject* items[256];
        int m = (int)(n - base < 256 ? n - base : 256);
        for (int k = 0; k < m; k++) items[k] = is_list ? PyList_GetItem(o, base + k) : PyTuple_GetItem(o, base + k);
        uint8_t which[256];
        for (int k = 0; k < m; k++) which[k] = (uint8_t)k;
        int r = bridge->unpack_args(items, which, m, ones, &lc->v[lc->nv + base]);
        if (r != m) return -1; /* an element the bridge cannot read, or no torch tensor */
    }
    c->ntensors += (int)n;
    lc->first[i] = (int16_t)lc->nv, lc->count[i] = (int16_t)n;
    lc->nv += (int)n;
    return 0;
}

/* A list argument for a tensor-list slot (KP_OP_LIST): every tensor on the launch device fits what the slot's
 * tensors must be (launch/plan.py _list_c; runtime/checks.py _list is the Python path's). The param itself (the
 * descriptors' device address) is written at the launch (launch_lists). */
static KP_NOINLINE int fit_list(const kp_slot* s, kp_call* c, unsigned char* p) {
    kp_lcall* lc = c->lc;
    if (lc == NULL) return -1;
    if (lc->first[s->arg] < 0 && read_list(c, s->arg) < 0) return -1;
    const kp_slot_x* x = s->x;
    const kp_view* v = &lc->v[lc->first[s->arg]];
    for (int k = 0; k < lc->count[s->arg]; k++, v++) {
        if (v->device != c->device) return -1; /* elsewhere: the Python path says where */
        if (v->dtype != s->dtype || v->ndim != s->rank) return 0;
        if (s->align > 1 && !multiple(v->data, s->align, s->apow2)) return 0;
        for (int i = 0; i < s->rank; i++) {
            const int64_t sh = v->shape[i], st = v->stride[i];
            if ((x->shape[i] != KP_DYN && sh != x->shape[i]) || (x->stride[i] != KP_DYN && st != x->stride[i])) return 0;
            if (sh < x->lo || sh > x->hi || st < x->lo || st > x->hi) return 0;
            if ((x->sdiv[i] > 1 && sh % x->sdiv[i]) || (x->tdiv[i] > 1 && st % x->tdiv[i])) return 0;
            if (x->tmin[i] != KP_DYN && st < x->tmin[i]) return 0;
        }
    }
    memset(p, 0, 8);
    return 1;
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
    case KP_OP_LIST:
        return fit_list(s, c, p);
    case KP_OP_LIST_COUNT: { /* the number of tensors of the list argument (its list slot checks them) */
        PyObject* o = c->args[s->arg];
        Py_ssize_t n = PyList_CheckExact(o) ? PyList_Size(o) : PyTuple_CheckExact(o) ? PyTuple_Size(o) : -1;
        if (n < 1 || n > KP_LIST_VIEWS) return -1;
        store_int(p, s->dtype, (uint64_t)n);
        return 1;
    }
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
