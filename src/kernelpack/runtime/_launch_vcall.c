/* kernelpack.runtime._launch -- calls in and out in the build for the limited API of CPython 3.10 (KP_ABI3_COMPAT,
 * _launch.h): the types' tp_call, the stand-in for PyObject_Vectorcall, and what init learns of the interpreter.
 * Other builds (version-specific, or the limited API of 3.12) have vectorcall itself: this part is empty there.
 * A part of the extension's one translation unit: _launch.c includes the parts in order; not compiled alone.
 */
#include "_launch.h"

#ifdef KP_ABI3_COMPAT
static vectorcallfunc kp_object_vectorcall; /* the interpreter's PyObject_Vectorcall (set_vectorcall; 3.12+ only) */
static int kp_vectorcall_types;             /* the interpreter is 3.12 or newer: the types are made with vectorcall */

/* PyObject_Vectorcall: the interpreter's own when it was handed over, else a tuple and a dict for PyObject_Call */
static PyObject* kp_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
    if (kp_object_vectorcall != NULL) return kp_object_vectorcall(callable, args, nargsf, kwnames);
    const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    const Py_ssize_t nk = kwnames != NULL ? PyTuple_Size(kwnames) : 0;
    PyObject* tuple = PyTuple_New(n);
    if (tuple == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SetItem(tuple, i, Py_NewRef(args[i]));
    PyObject* kw = NULL;
    if (nk > 0) {
        kw = PyDict_New();
        for (Py_ssize_t i = 0; kw != NULL && i < nk; i++)
            if (PyDict_SetItem(kw, PyTuple_GetItem(kwnames, i), args[n + i]) < 0) Py_CLEAR(kw);
        if (kw == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
    }
    PyObject* r = PyObject_Call(callable, tuple, kw);
    Py_DECREF(tuple);
    Py_XDECREF(kw);
    return r;
}

/* tp_call of an object that keeps its vectorcall function at `offset`: the tuple and the dict as one vector */
static PyObject* kp_call_vector(PyObject* self, PyObject* tuple, PyObject* kw, size_t offset) {
    vectorcallfunc fn;
    memcpy(&fn, (const char*)self + offset, sizeof fn);
    const Py_ssize_t n = PyTuple_Size(tuple), nk = kw != NULL ? PyDict_Size(kw) : 0;
    if (n < 0 || nk < 0) return NULL;
    PyObject* small[32];
    PyObject** vec = n + nk <= 32 ? small : PyMem_Malloc(sizeof(PyObject*) * (size_t)(n + nk));
    if (vec == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) vec[i] = PyTuple_GetItem(tuple, i); /* borrowed: the tuple lives */
    PyObject* names = NULL;
    if (nk > 0) {
        names = PyTuple_New(nk);
        PyObject *k, *v;
        Py_ssize_t pos = 0, j = 0;
        while (names != NULL && PyDict_Next(kw, &pos, &k, &v) && j < nk) {
            PyTuple_SetItem(names, j, Py_NewRef(k));
            vec[n + j++] = v; /* borrowed: the dict lives */
        }
    }
    PyObject* r = nk > 0 && names == NULL ? NULL : fn(self, vec, (size_t)n, names);
    Py_XDECREF(names);
    if (vec != small) PyMem_Free(vec);
    return r;
}

/* Is the running interpreter 3.12 or newer? (Py_Version is not in 3.10's stable ABI; sys.version_info is.) */
static int kp_python_at_least_312(void) {
    PyObject* info = PySys_GetObject("version_info"); /* borrowed */
    if (info == NULL) return 0;
    PyObject* major = PySequence_GetItem(info, 0);
    PyObject* minor = PySequence_GetItem(info, 1);
    const long a = major != NULL ? PyLong_AsLong(major) : -1, b = minor != NULL ? PyLong_AsLong(minor) : -1;
    Py_XDECREF(major);
    Py_XDECREF(minor);
    if (PyErr_Occurred()) PyErr_Clear();
    return a > 3 || (a == 3 && b >= 12);
}

/* A type spec made for this interpreter: on 3.10 and 3.11 without vectorcall (no flag, no __vectorcalloffset__
 * member: the entries after it move up); its tp_call is `call` either way. */
static void kp_spec_for_interpreter(PyType_Spec* spec, PyMemberDef* members, PyType_Slot* slots,
                                    ternaryfunc call) {
    for (PyType_Slot* s = slots; s->slot != 0; s++)
        if (s->slot == Py_tp_call) s->pfunc = (void*)call;
    if (kp_vectorcall_types) return;
    spec->flags &= ~Py_TPFLAGS_HAVE_VECTORCALL;
    PyMemberDef* out = members;
    for (PyMemberDef* m = members; m->name != NULL; m++)
        if (strcmp(m->name, "__vectorcalloffset__") != 0) *out++ = *m;
    memset(out, 0, sizeof *out);
}

/* set_vectorcall(address): the interpreter's PyObject_Vectorcall (runtime/fast.py finds it through ctypes on 3.12+) */
static PyObject* set_vectorcall(PyObject* mod, PyObject* address) {
    (void)mod;
    void* p = address == Py_None ? NULL : PyLong_AsVoidPtr(address);
    if (p == NULL && PyErr_Occurred()) return NULL;
    if (p != NULL && !kp_vectorcall_types)
        return PyErr_Format(PyExc_ValueError, "set_vectorcall: this interpreter predates vectorcall's stable ABI");
    memcpy(&kp_object_vectorcall, &p, sizeof p);
    Py_RETURN_NONE;
}
#endif
