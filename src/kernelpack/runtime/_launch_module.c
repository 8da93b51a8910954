/* kernelpack.runtime._launch -- the Family type (its slots, lazy docs and methods), the module's functions
 * (set_driver, set_bridge, ...) and its init.
 * A part of the extension's one translation unit: _launch.c includes the parts in order; not compiled alone.
 */
#include "_launch.h"

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

#ifdef KP_ABI3_COMPAT
static PyObject* family_tp_call(PyObject* self, PyObject* args, PyObject* kw) {
    return kp_call_vector(self, args, kw, offsetof(kp_family, vectorcall));
}
#endif

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
    /* optional (NULL where the driver lacks one): what a tensor list's launch copies its descriptors with (without
     * them: the Python path, which says what the driver lacks); cuTensorMapEncodeTiled (without it: TMA launches take
     * the Python path, which says so); cuKernelGetParamInfo (checks layouts); the dry-run driver's kpDryrunNote (each
     * launch is named) */
    static const char* optional[] = {"cuMemAllocAsync", "cuMemcpyHtoDAsync", "cuMemFreeAsync", "cuTensorMapEncodeTiled",
                                     "cuKernelGetParamInfo", "kpDryrunNote"};
    void* ofns[6];
    for (int i = 0; i < 6; i++) {
        PyObject* v = PyDict_GetItemString(addresses, optional[i]);
        ofns[i] = v != NULL && v != Py_None ? PyLong_AsVoidPtr(v) : NULL;
        if (ofns[i] == NULL && PyErr_Occurred()) return NULL;
    }
    /* the driver's version: maps encoded under another driver are not reused */
    PyObject* ver = PyDict_GetItemString(addresses, "driver_version");
    long version = ver != NULL ? PyLong_AsLong(ver) : 0;
    if (version == -1 && PyErr_Occurred()) return NULL;
    /* every address read: the driver is replaced whole */
    memcpy(&cu_ctx_get, &fns[0], sizeof fns[0]);
    memcpy(&cu_ctx_set, &fns[1], sizeof fns[1]);
    memcpy(&cu_launch, &fns[2], sizeof fns[2]);
    memcpy(&cu_launch_ex, &fns[3], sizeof fns[3]);
    memcpy(&cu_error_name, &fns[4], sizeof fns[4]);
    memcpy(&cu_alloc_async, &ofns[0], sizeof ofns[0]);
    memcpy(&cu_copy_async, &ofns[1], sizeof ofns[1]);
    memcpy(&cu_free_async, &ofns[2], sizeof ofns[2]);
    memcpy(&cu_tmap_encode, &ofns[3], sizeof ofns[3]);
    memcpy(&cu_param_info, &ofns[4], sizeof ofns[4]);
    memcpy(&dry_note, &ofns[5], sizeof ofns[5]);
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
#ifdef KP_ABI3_COMPAT
    {"set_vectorcall", set_vectorcall, METH_O, "The interpreter's PyObject_Vectorcall (3.12+), for calls out."},
#endif
    {NULL, NULL, 0, NULL},
};

/* the version as bytes, found without loading the extension (kernelpack/wheel/runtime.py reads it from the file) */
__attribute__((used)) static const char kp_version_tag[] = "kernelpack-launch-version=" KP_VERSION ";";

static struct PyModuleDef module_def = {
    /* its last name only: the import system names the module after where it lies (kernelpack.runtime._launch, or
     * the copy a generated wheel carries: NAME._kernelpack.runtime._launch) */
    PyModuleDef_HEAD_INIT, "_launch", "kernelpack's fast launch path (see runtime/family.py).",
    -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__launch(void) {
    PyObject* m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
#ifdef KP_ABI3_COMPAT
    kp_vectorcall_types = kp_python_at_least_312();
    kp_spec_for_interpreter(&family_spec, family_members, family_slots, family_tp_call);
    kp_spec_for_interpreter(&prepared_spec, prepared_members, prepared_slots, prepared_tp_call);
#endif
    FamilyType = (PyTypeObject*)PyType_FromSpec(&family_spec);
    if (FamilyType == NULL) goto fail;
    Py_INCREF((PyObject*)FamilyType);
    if (PyModule_AddObject(m, "Family", (PyObject*)FamilyType) < 0) goto fail;
    PreparedType = (PyTypeObject*)PyType_FromSpec(&prepared_spec);
    if (PreparedType == NULL) goto fail;
    Py_INCREF((PyObject*)PreparedType);
    if (PyModule_AddObject(m, "PreparedLaunch", (PyObject*)PreparedType) < 0) goto fail;
    PyObject* full = PyModule_GetNameObject(m);
    if (full == NULL) goto fail;
    const Py_ssize_t dot = PyUnicode_FindChar(full, '.', 0, PyUnicode_GetLength(full), -1);
    PyObject* package = dot > 0 ? PyUnicode_Substring(full, 0, dot) : NULL;
    Py_DECREF(full);
    PyObject* old_errors = s_errors_module;
    s_errors_module = package != NULL ? PyUnicode_FromFormat("%U.errors", package)
                                      : PyUnicode_FromString("kernelpack.runtime.errors");
    Py_XDECREF(old_errors);
    Py_XDECREF(package);
    if (s_errors_module == NULL) goto fail;
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
    /* the kernelpack it belongs to (runtime/fast.py refuses another's), and whether calls in use vectorcall */
    if (PyModule_AddStringConstant(m, "VERSION", KP_VERSION) < 0) goto fail;
#ifdef KP_ABI3_COMPAT
    if (PyModule_AddIntConstant(m, "VECTORCALL", kp_vectorcall_types) < 0) goto fail;
#else
    if (PyModule_AddIntConstant(m, "VECTORCALL", 1) < 0) goto fail;
#endif
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
