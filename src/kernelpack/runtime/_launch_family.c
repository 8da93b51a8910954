/* kernelpack.runtime._launch -- a family built from Python: make_family's plans (slots, tensor structs, range
 * constraints, grid programs; every integer narrowed to its field and bounded with KP_NARROW), the devices'
 * dispatch tables (_set_device, _set_entry) and the parameter layout checked against the driver's.
 * A part of the extension's one translation unit: _launch.c includes the parts in order; not compiled alone.
 */
#include "_launch.h"

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

/* A tensor-list slot's facts (KP_OP_LIST: (rank, index dtype, lo, hi, shape, stride, shape divisors, stride divisors,
 * least strides), launch/plan.py _list_c): 1 when they are whole, 0 when not, -1 for an exception. */
static int parse_list(kp_family* f, PyObject* t, kp_slot* s) {
    long long rank, index_dt, lo, hi;
    PyObject *shape, *stride, *sdiv, *tdiv, *tmin;
    if (!is_tuple(t, "a tensor list") ||
        !PyArg_ParseTuple(t, "LLLLOOOOO", &rank, &index_dt, &lo, &hi, &shape, &stride, &sdiv, &tdiv, &tmin))
        return -1;
    if (rank < 1 || rank > KP_MAX_RANK) return 0;
    kp_slot_x* x = slot_x(f, s);
    if (x == NULL || get_i64s(shape, x->shape, (int)rank, "shape") < 0 ||
        get_i64s(stride, x->stride, (int)rank, "stride") < 0 || get_i64s(sdiv, x->sdiv, (int)rank, "divisors") < 0 ||
        get_i64s(tdiv, x->tdiv, (int)rank, "divisors") < 0 || get_i64s(tmin, x->tmin, (int)rank, "strides") < 0)
        return -1;
    s->rank = (int8_t)rank;
    int good = KP_NARROW(s->shape_dt, index_dt, KP_DT_I8, KP_DT_U64) && lo <= hi && s->size == 8 &&
               s->dtype != KP_DT_ANY && s->nranges == 0; /* no range constraint: nothing here would check it */
    x->lo = lo, x->hi = hi;
    for (int i = 0; i < rank; i++) good &= x->sdiv[i] >= 1 && x->tdiv[i] >= 1;
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
    int good = KP_NARROW(s->op, op, KP_OP_NULL, KP_OP_LIST_COUNT) && op != KP_OP_SCRATCH;
    if (!good) s->op = KP_OP_NULL; /* packs nothing, reads no argument */
    const int dev = s->op == KP_OP_DEVICE;
    good &= KP_NARROW(s->arg, arg, s->op == KP_OP_NULL ? -1 : 0, dev ? KP_MAX_DEVICE_VALUES - 1 : KP_MAX_SLOTS - 1);
    good &= KP_NARROW(s->size, size, 0, KP_BUF);
    good &= !dev || s->size == 4 || s->size == 8;
    good &= s->op != KP_OP_LIST_COUNT || s->size == 4 || s->size == 8; /* an integer count (store_int) */
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
    else if (s->op == KP_OP_LIST) r = parse_list(f, tensor, s);
    else if (s->op == KP_OP_LIST_COUNT) r = s->dtype >= KP_DT_I8 && s->dtype <= KP_DT_U64 && s->nranges == 0;
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
            if (sl->op == KP_OP_LIST) pl->nlists++, f->has_lists = 1;
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
    if (f->has_lists) f->vectorcall = family_call_lists; /* else family_call: no list branch on its calls */
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
