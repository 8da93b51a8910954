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

#include "_launch_scalars.c"

#include "_launch_desc.c"
#include "_launch_args.c"
#include "_launch_config.c"
#include "_launch_call.c"
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
