/* kernelpack.runtime._launch -- tensor descriptors: the CUtensorMap of a TMA descriptor encoded and kept per
 * family (tensor_map), a descriptor argument packed (fit_desc, fit_desc_field), and a descriptor slot's facts
 * read from a plan (parse_desc).
 * A part of the extension's one translation unit: _launch.c includes the parts in order; not compiled alone.
 */
#include "_launch.h"

/* The 128-byte CUtensorMap of tensor v for the TMA descriptor slot s, into p: the family's cached copy when the slot
 * saw the same address, shape and strides under this driver, else encoded with cuTensorMapEncodeTiled as
 * kernelpack.core.tma.encode_args does it (Triton's fillTMADescriptorTiled: dims innermost first, byte strides of the
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
