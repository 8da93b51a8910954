/* kernelpack.runtime._launch -- prepared launches (Family.prepare): a call resolved once into a kp_capture and
 * launched again by each call of the PreparedLaunch, which re-reads only the tensors' views; its type.
 * A part of the extension's one translation unit: _launch.c includes the parts in order; not compiled alone.
 */
#include "_launch.h"

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
    if (KP_UNLIKELY(dry_note != NULL)) note_launch(c->plan);
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

#ifdef KP_ABI3_COMPAT
static PyObject* prepared_tp_call(PyObject* self, PyObject* args, PyObject* kw) {
    return kp_call_vector(self, args, kw, offsetof(kp_prepared, vectorcall));
}
#endif

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
