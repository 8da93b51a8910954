/* kernelpack.runtime._launch -- a launch's configuration and the driver call: grid, block and cluster and the
 * stream read from the call's options, torch's current stream, grid formulas evaluated on the packed parameters,
 * a driver failure raised, cuLaunchKernel(Ex) in the launch device's context with the GIL released.
 * A part of the extension's one translation unit: _launch.c includes the parts in order; not compiled alone.
 */
#include "_launch.h"

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

/* torch's current stream of `device` from the Python-level getter (runtime/streams.py c_getter: torch's builtin
 * itself, called without a Python frame), for a bridge that cannot answer it. 0 when it does not answer. */
static KP_NOINLINE int current_stream_getter(int device, uint64_t* out) {
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

/* torch's current stream of `device`: from the bridge in C (c10's, when it was built against torch's CUDA headers),
 * else from the getter (current_stream_getter). 0 when neither answers (the Python path resolves it). */
static KP_INLINE int current_stream(int device, uint64_t* out) {
    if (KP_LIKELY(bridge != NULL) && bridge->current_stream(device, out) == 0) return 1;
    return current_stream_getter(device, out);
}

static PyObject* driver_error(kp_family* self, const kp_plan* plan, int device, CUresult r, const char* call) {
    const char* name = NULL;
    if (cu_error_name == NULL || cu_error_name(r, &name) != 0 || name == NULL) name = "CUDA_ERROR_UNKNOWN";
    PyObject* mod = s_errors_module != NULL ? PyImport_Import(s_errors_module) : NULL; /* the runtime's own */
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

/* Evaluate one formula on the packed parameters with kernelpack.bundle.artifact.evaluate_grid's semantics: exact integer
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
static KP_INLINE CUresult launch(void* ctx, void* kernel, const uint32_t g[3], const uint32_t b[3], uint32_t smem,
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

/* Tell the dry-run driver which specialization the next launch runs (it records it; no other driver is told). */
static void note_launch(const kp_plan* plan) {
    const char* label = PyUnicode_AsUTF8AndSize(plan->label, NULL);
    if (label == NULL) PyErr_Clear();
    dry_note(label != NULL ? label : "");
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

/* ------------------------------------------------------------------ tensor lists */

/* launch() of a plan with tensor lists, in the launch device's context with the GIL released: one allocation on the
 * launch stream for the descriptors (cuMemAllocAsync), one copy of them from host memory the driver has read when it
 * returns (cuMemcpyHtoDAsync), the list params (at buf + at[i]) set to their addresses, the launch, cuMemFreeAsync
 * -- as kp_run_lists in the C library and runtime/pylaunch.py staged_lists on the Python path. */
static CUresult launch_staged(void* ctx, void* kernel, const uint32_t g[3], const uint32_t b[3], uint32_t smem,
                              void* stream, const uint32_t c[3], int pdl, void** ptrs, const char** call,
                              const int64_t* words, size_t nwords, unsigned char* buf, const uint32_t* at,
                              const size_t* start, int nl) {
    void* saved = NULL;
    int restore = 0;
    uint64_t base = 0;
    CUresult r;
    if (!one_device) {
        if ((r = cu_ctx_get(&saved)) != 0) {
            *call = "cuCtxGetCurrent";
            return r;
        }
        if (saved != ctx) {
            if ((r = cu_ctx_set(ctx)) != 0) {
                *call = "cuCtxSetCurrent";
                return r;
            }
            restore = saved != NULL;
        }
    }
    r = cu_alloc_async(&base, nwords * sizeof(int64_t), stream);
    if (r == KP_CUDA_ERROR_INVALID_CONTEXT && one_device) { /* no current context yet: the device's, as launch() */
        if ((r = cu_ctx_set(ctx)) != 0) {
            *call = "cuCtxSetCurrent";
            return r;
        }
        r = cu_alloc_async(&base, nwords * sizeof(int64_t), stream);
    }
    if (r != 0) {
        *call = "cuMemAllocAsync (tensor-list descriptors)";
    } else {
        r = cu_copy_async(base, words, nwords * sizeof(int64_t), stream);
        if (r != 0) {
            *call = "cuMemcpyHtoDAsync (tensor-list descriptors)";
        } else {
            for (int i = 0; i < nl; i++) {
                uint64_t a = base + start[i] * sizeof(int64_t);
                memcpy(buf + at[i], &a, 8);
            }
            r = launch_once(kernel, g, b, smem, stream, c, pdl, ptrs);
        }
        CUresult rf = cu_free_async(base, stream);
        if (r == 0 && rf != 0) r = rf, *call = "cuMemFreeAsync (tensor-list descriptors)";
    }
    if (restore) cu_ctx_set(saved);
    return r;
}

/* Launch plan's kernel with its tensor lists (the tensors checked by fit_list, in a->lc): their descriptors staged
 * here, each list 16-byte aligned (1 + 2 * rank 64-bit words a tensor: data pointer, extents, strides), then
 * launch_staged. 1: launched, or refused by the driver (*r, *call); 0: nothing done, the Python path decides (a
 * driver without these entry points); -1: an exception. */
static KP_NOINLINE int launch_lists(const kp_plan* plan, const kp_call* a, unsigned char* buf, void* ctx, void* kernel,
                                    const uint32_t g[3], const uint32_t b[3], uint32_t smem, uint64_t stream,
                                    const uint32_t c[3], int pdl, void** ptrs, const char** call, CUresult* r) {
    if (cu_alloc_async == NULL || cu_copy_async == NULL || cu_free_async == NULL || a->lc == NULL) return 0;
    const kp_lcall* lc = a->lc;
    uint32_t at[KP_MAX_SLOTS];
    size_t start[KP_MAX_SLOTS], nwords = 0;
    int nl = 0;
    for (int s = 0; s < plan->nslots; s++) {
        const kp_slot* sl = &plan->slots[s];
        if (sl->op != KP_OP_LIST) continue;
        if (lc->first[sl->arg] < 0) return 0; /* fit_list read it: never here */
        nwords += nwords % 2;
        at[nl] = sl->offset, start[nl++] = nwords;
        nwords += (size_t)lc->count[sl->arg] * (1u + 2u * (unsigned)sl->rank);
    }
    int64_t* words = (int64_t*)PyMem_Calloc(nwords, sizeof(int64_t)); /* zeros: the pad words between lists */
    if (words == NULL) return PyErr_NoMemory(), -1;
    for (int s = 0, i = 0; s < plan->nslots; s++) {
        const kp_slot* sl = &plan->slots[s];
        if (sl->op != KP_OP_LIST) continue;
        int64_t* w = words + start[i++];
        const kp_view* v = &lc->v[lc->first[sl->arg]];
        for (int k = 0; k < lc->count[sl->arg]; k++, v++) {
            *w++ = (int64_t)v->data;
            for (int m = 0; m < sl->rank; m++) *w++ = v->shape[m];
            for (int m = 0; m < sl->rank; m++) *w++ = v->stride[m];
        }
    }
    *call = c[0] || pdl ? "cuLaunchKernelEx" : "cuLaunchKernel";
    PyThreadState* ts = release_gil ? PyEval_SaveThread() : NULL;
    *r = launch_staged(ctx, kernel, g, b, smem, (void*)(uintptr_t)stream, c, pdl, ptrs, call, words, nwords, buf, at,
                       start, nl);
    if (ts != NULL) PyEval_RestoreThread(ts);
    PyMem_Free(words);
    return 1;
}
