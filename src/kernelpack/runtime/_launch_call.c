/* kernelpack.runtime._launch -- one call of a Family (its vectorcall): keywords mapped to launch options and
 * parameters, the launch device, dispatch (the first specialization every argument fits, packed as it is read:
 * the common slots inline), the configuration checked against the device, the launch; for Family.prepare, the
 * same resolved into a kp_capture instead.
 * A part of the extension's one translation unit: _launch.c includes the parts in order; not compiled alone.
 */
#include "_launch.h"

/* ------------------------------------------------------------------ launch options */

/* The number of keywords, each mapped to a launch option or K_N + a parameter's position (in *out: the family's cached
 * map when kwnames is the call site's last tuple, no copy; else local, filled here); -1 when one is neither (pdl=,
 * cooperative=, an unknown name: the Python path decides). The cached map is read before anything that may run
 * Python (and change it). */
static int map_kwnames(kp_family* f, PyObject* kwnames, int8_t local[KP_MAX_KW], const int8_t** out) {
    if (KP_LIKELY(kwnames == f->kw_last)) {
        *out = f->kw_map;
        return f->kw_n;
    }
    int8_t* map = local;
    *out = local;
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
 * Python path decides), and launch nothing. lc: where the tensors of list arguments are read (NULL: no list).
 * Inlined into family_call with cap and lc NULL (constants there: a plain call of a family without lists compiles
 * without the capture's and the lists' branches) and into family_resolve_any for the rest (a capture, a family with
 * lists: family_call_lists). */
static KP_INLINE PyObject* family_resolve(PyObject* op, PyObject* const* args, size_t nargsf, PyObject* kwnames, kp_capture* cap,
                                kp_lcall* lc) {
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
        int8_t local[KP_MAX_KW];
        const int8_t* map;
        int nk = map_kwnames(self, kwnames, local, &map);
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
    a.args = argv, a.nargs = (int)nargs, a.device = -1, a.ntensors = 0, a.lc = lc;
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
    if (cap != NULL && plan->nlists) goto slow; /* a prepared launch with lists: each call stages them (Python path) */
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
    if (KP_UNLIKELY(dry_note != NULL)) note_launch(plan);
    CUresult r;
    if (KP_UNLIKELY(lc != NULL && plan->nlists)) { /* lc NULL: no plan of the family has lists */
        int staged = launch_lists(plan, &a, buf, ctx, kernel, g, b, nsmem, hstream, c, pdl, ptrs, &call, &r);
        if (staged < 0) return NULL;
        if (!staged) goto slow;
    } else {
        r = launch_nogil(ctx, kernel, g, b, nsmem, hstream, c, pdl, ptrs, &call);
    }
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

/* family_resolve for a capture (Family.prepare) or a family with lists: one out-of-line copy */
static KP_NOINLINE PyObject* family_resolve_any(PyObject* op, PyObject* const* args, size_t nargsf, PyObject* kwnames,
                                                kp_capture* cap, kp_lcall* lc) {
    return family_resolve(op, args, nargsf, kwnames, cap, lc);
}

/* family_resolve with the memory its list arguments' tensors are read into, when the family takes lists. */
static PyObject* family_run(PyObject* op, PyObject* const* args, size_t nargsf, PyObject* kwnames, kp_capture* cap) {
    if (KP_LIKELY(!((kp_family*)op)->has_lists)) return family_resolve_any(op, args, nargsf, kwnames, cap, NULL);
    kp_lcall* lc = (kp_lcall*)PyMem_Malloc(sizeof(kp_lcall));
    if (lc == NULL) return PyErr_NoMemory();
    lc->nv = 0;
    memset(lc->first, 0xff, sizeof lc->first); /* -1: not read */
    PyObject* r = family_resolve_any(op, args, nargsf, kwnames, cap, lc);
    PyMem_Free(lc);
    return r;
}

/* The vectorcall of a family without lists (make_family picks it): family_resolve inlined with no capture and no
 * lists, so such a call pays nothing for either. */
static PyObject* family_call(PyObject* op, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
    return family_resolve(op, args, nargsf, kwnames, NULL, NULL);
}

/* The vectorcall of a family some plan of which takes a tensor list */
static PyObject* family_call_lists(PyObject* op, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
    return family_run(op, args, nargsf, kwnames, NULL);
}
