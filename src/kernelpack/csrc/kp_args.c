/* kernelpack C runtime, part 4: launch values derived from the arguments. Pasted after part 3 (kp_launch.c); each
 * part is compiled only into libraries whose kernels need it (KP_GRID, KP_NDESC, KP_NLIST).
 *
 *   grid formulas (LaunchSpec.grid): kernelpack.core.launchspec.evaluate_grid is the reference: 64-bit signed math
 *     (wrapping instead of undefined on overflow), div truncates (0 for b == 0), ceil_div(a, b) = floor((a+b-1)/b)
 *     and 0 for b <= 0; a dimension <= 0 means nothing to launch.
 *   tensor descriptors (LaunchSpec.tensor_descs): kernelpack.core.tma.encode_args is the reference: the checks, the
 *     cuTensorMapEncodeTiled arguments, the clear_bit21 rule and the values of the params a descriptor fills.
 *   tensor lists (kernelpack.core.abi.TensorList): runtime/checks.py _list and runtime/pylaunch.py staged_lists are
 *     the Python path's: the same checks, the same descriptor words at the same places in one allocation.
 */

#if KP_GRID
static KP_UNUSED int64_t kp_gadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static KP_UNUSED int64_t kp_gsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static KP_UNUSED int64_t kp_gmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static KP_UNUSED int64_t kp_gmin(int64_t a, int64_t b) { return a < b ? a : b; }
static KP_UNUSED int64_t kp_gmax(int64_t a, int64_t b) { return a > b ? a : b; }
static KP_UNUSED int64_t kp_gdiv(int64_t a, int64_t b) { return b == 0 ? 0 : b == -1 ? kp_gsub(0, a) : a / b; }
static KP_UNUSED int64_t kp_gceil_div(int64_t a, int64_t b) {
    if (b <= 0) return 0;
    int64_t n = kp_gadd(a, b - 1), q = n / b;
    return n % b != 0 && n < 0 ? q - 1 : q; /* floor division, as the reference's Python // */
}

/* The launch with the grid a spec's formulas computed (g). Returns 1 to launch *out; 0 when there is nothing to
 * launch (*st = KP_SUCCESS) or the grid does not fit (*st = the error). */
static int kp_grid(const kp_ctx* c, uint32_t spec, const kp_launch* l, const int64_t g[3], kp_launch* out,
                   kp_status* st) {
    if (g[0] <= 0 || g[1] <= 0 || g[2] <= 0) {
        *st = KP_SUCCESS;
        return 0;
    }
    if (g[0] > UINT32_MAX || g[1] > UINT32_MAX || g[2] > UINT32_MAX) {
        *st = kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: the grid computed from the arguments {%lld,%lld,%lld} "
                      "exceeds 2^32-1 blocks in a dimension", c->fn, KP_STR(kp_specs[spec].label), (long long)g[0],
                      (long long)g[1], (long long)g[2]);
        return 0;
    }
    *out = *l;
    out->grid[0] = (uint32_t)g[0], out->grid[1] = (uint32_t)g[1], out->grid[2] = (uint32_t)g[2];
    return 1;
}
#endif

#if KP_NDESC
#define KP_TMA_L2_PROMOTION_128B 2

/* The values one tensor-descriptor argument fills, laid out so the kernel params can point into it. */
typedef struct kp_desc_vals {
    unsigned char map[128] __attribute__((aligned(64))); /* CUtensorMap (tma lowering) */
    void* ptr;                                           /* base pointer (decomposed lowering) */
    int64_t shape64[5], stride[5];                       /* strides in elements */
    int32_t shape32[5];
    bool flags[2]; /* decomposed: padding_nan, round_tf32 (both off: zero padding, no tf32 rounding) */
} kp_desc_vals;

static kp_status kp_desc_bad(const kp_ctx* c, uint32_t spec, const kp_desc_info* di, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static kp_status kp_desc_bad(const kp_ctx* c, uint32_t spec, const kp_desc_info* di, const char* fmt, ...) {
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: kernel %s: tensor descriptor %s: %s", c->fn,
                   KP_STR(kp_specs[spec].label), KP_STR(di->arg), why);
}

/* Check tensor t for descriptor di of specialization spec and fill v; for the tma lowering encode the map. */
static kp_status kp_desc_fill(const kp_ctx* c, uint32_t spec, const kp_desc_info* di, const kp_tensor* t,
                              kp_desc_vals* v) {
    int r = di->rank;
    if (t == NULL) return kp_desc_bad(c, spec, di, "the kp_tensor pointer is NULL");
    if (t->rank != r) return kp_desc_bad(c, spec, di, "expected a rank-%d tensor, got rank %d", r, (int)t->rank);
    if (di->dtype && (int)t->dtype != di->dtype)
        return kp_desc_bad(c, spec, di, "expected %s elements, got %s", kp_dtype_name(di->dtype),
                           kp_dtype_name((int)t->dtype));
    for (int i = 0; i < r; i++) {
        if (t->shape[i] < 0)
            return kp_desc_bad(c, spec, di, "shape[%d] = %lld is negative: extents must be >= 0", i,
                               (long long)t->shape[i]);
        if (t->shape[i] > INT32_MAX)
            return kp_desc_bad(c, spec, di, "shape[%d] = %lld does not fit the kernel's 32-bit shape parameter", i,
                               (long long)t->shape[i]);
        v->shape64[i] = t->shape[i], v->shape32[i] = (int32_t)t->shape[i], v->stride[i] = t->stride[i];
    }
    if (di->lowering) { /* decomposed: base pointer, shapes, strides, flags, shapes, strides */
        v->ptr = t->data;
        v->flags[0] = v->flags[1] = 0;
        return KP_SUCCESS;
    }
    if (t->stride[r - 1] != 1)
        return kp_desc_bad(c, spec, di, "the innermost stride must be 1 for TMA (got %lld)", (long long)t->stride[r - 1]);
    if ((uintptr_t)t->data % 16)
        return kp_desc_bad(c, spec, di, "TMA needs a 16-byte aligned base address (got %p)", t->data);
    uint64_t dims[5], bstrides[5] = {0, 0, 0, 0, 0};
    unsigned int box[5], estrides[5] = {1, 1, 1, 1, 1};
    for (int i = 0; i < r - 1; i++) {
        int64_t s = t->stride[i];
        if (s <= 0 || s > INT64_MAX / di->elem_size || (s * di->elem_size) % 16)
            return kp_desc_bad(c, spec, di, "TMA needs positive strides that are multiples of 16 bytes (stride[%d] = "
                               "%lld elements of %u bytes)", i, (long long)s, (unsigned)di->elem_size);
        bstrides[r - 2 - i] = (uint64_t)s * di->elem_size; /* the driver wants innermost first */
    }
    for (int i = 0; i < r; i++) {
        int64_t d = t->shape[i] * (di->fp4_padded && i == r - 1 ? 2 : 1);
        if (d < 1 || d >= ((int64_t)1 << 32))
            return kp_desc_bad(c, spec, di, "dims must be in [1, 2^32) (got shape[%d] = %lld)", i, (long long)d);
        dims[r - 1 - i] = (uint64_t)d;
        box[r - 1 - i] = di->box[i];
    }
    if (kp_cu.TensorMapEncodeTiled == NULL)
        return kp_fail(KP_ERROR_DRIVER_TOO_OLD, "%s: kernel %s: tensor descriptor %s needs cuTensorMapEncodeTiled, "
                       "which this CUDA driver does not provide (CUDA 12.0+)", c->fn, KP_STR(kp_specs[spec].label),
                       KP_STR(di->arg));
    /* Triton 3.9 (after CUTLASS) clears bit 21 of the map's second word on drivers <= 13.1 when the tensor spans
     * less than 128 KiB */
    uint64_t span = 0, limit = 128 * 1024;
    for (int i = 0; i < r && span < limit; i++) {
        uint64_t b = i ? bstrides[i - 1] : di->elem_size;
        span = dims[i] - 1 > (limit - span) / b ? limit : span + (dims[i] - 1) * b;
    }
    kp_CUresult e = kp_cu.TensorMapEncodeTiled(v->map, di->elem_type, (unsigned)r, t->data, dims, bstrides, box,
                                               estrides, 0 /* no interleave */, di->swizzle, KP_TMA_L2_PROMOTION_128B,
                                               0 /* OOB fill zero */);
    if (e != KP_CUDA_SUCCESS) {
        char call[64];
        snprintf(call, sizeof call, "cuTensorMapEncodeTiled(%s)", KP_STR(di->arg));
        return kp_cuda_fail(e, c->fn, KP_STR(kp_specs[spec].label), call);
    }
    if (kp_driver_version > 0 && kp_driver_version <= 13010 && span + 1 < limit) {
        uint64_t w;
        memcpy(&w, v->map + 8, 8);
        w &= ~((uint64_t)1 << 21);
        memcpy(v->map + 8, &w, 8);
    }
    return KP_SUCCESS;
}
#endif

#if KP_NLIST
/* ------------------------------------------------------------------ tensor lists (kernelpack.core.abi.TensorList) */

#define KP_LIST_STACK 1024 /* descriptor words staged on the stack; more are staged in malloc'd memory */

/* The tensors of a list argument, read before anything else: a count below 1 (cuTile's own launch refuses an empty
 * list: its kernels index the list by block), a NULL array, a tensor filled in wrongly (kp_tensor_valid) are
 * refused (KP_ERROR_INVALID_ARGUMENT). */
static kp_status kp_list_valid(const char* fn, const char* name, const kp_tensor* xs, int32_t n) {
    if (n < 1)
        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: argument '%s': a list of %d tensors; a tensor list takes 1 to "
                       "%d tensors", fn, name, (int)n, INT32_MAX);
    if (xs == NULL)
        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: argument '%s' (kp_tensor*) is NULL with a count of %d", fn,
                       name, (int)n);
    for (int32_t k = 0; k < n; k++) { /* as kp_tensor_valid, naming the tensor */
        const kp_tensor* t = &xs[k];
        if ((int)t->dtype < 0 || (int)t->dtype >= KP_DTYPE_COUNT)
            return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: argument '%s' element %d: dtype %d is not a kp_dtype", fn,
                           name, (int)k, (int)t->dtype);
        if (t->rank < 0 || t->rank > KP_MAX_RANK)
            return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: argument '%s' element %d: rank %d is outside [0, %d]", fn,
                           name, (int)k, (int)t->rank, KP_MAX_RANK);
        for (int i = 0; i < t->rank; i++)
            if (t->shape[i] < 0)
                return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: argument '%s' element %d: shape[%d] = %lld is "
                               "negative: extents must be >= 0", fn, name, (int)k, i, (long long)t->shape[i]);
    }
    return KP_SUCCESS;
}

/* Does tensor t fit what list li's tensors must be? 1: yes; 0: no, and why (when why != NULL). */
static int kp_list_elem_fits(const kp_list_info* li, const kp_tensor* t, char* why, size_t size) {
    if ((int)t->dtype != li->dtype) {
        if (why) snprintf(why, size, "expected a %s tensor, got %s", kp_dtype_name(li->dtype),
                          kp_dtype_name((int)t->dtype));
        return 0;
    }
    if (t->rank != li->rank) {
        if (why) snprintf(why, size, "expected a tensor of rank %d, got rank %d", li->rank, (int)t->rank);
        return 0;
    }
    for (int i = 0; i < li->rank; i++) {
        for (int st = 0; st < 2; st++) {
            const char* what = st ? "stride" : "shape";
            int64_t v = st ? t->stride[i] : t->shape[i], fixed = st ? li->stride[i] : li->shape[i];
            int64_t div = st ? li->stride_div[i] : li->shape_div[i];
            if (fixed != KP_DYN && v != fixed) {
                if (why) snprintf(why, size, "%s[%d] must be %lld (fixed when compiled), got %lld", what, i,
                                  (long long)fixed, (long long)v);
                return 0;
            }
            if (v < li->index_min || v > li->index_max) {
                if (why) snprintf(why, size, "%s[%d] = %lld does not fit the kernel's %s index type", what, i,
                                  (long long)v, kp_dtype_name(li->index_dt));
                return 0;
            }
            if (div > 1 && v % div) {
                if (why) snprintf(why, size, "%s[%d] must be a multiple of %lld, got %lld", what, i, (long long)div,
                                  (long long)v);
                return 0;
            }
        }
        if (li->stride_min[i] != KP_DYN && t->stride[i] < li->stride_min[i]) {
            if (why) snprintf(why, size, "stride[%d] must be at least %lld, got %lld", i, (long long)li->stride_min[i],
                              (long long)t->stride[i]);
            return 0;
        }
    }
    if (li->align > 1 && (uintptr_t)t->data % li->align) {
        if (why) snprintf(why, size, "the data must be %u-byte aligned, got %p (%llu-byte aligned)", li->align,
                          t->data, (unsigned long long)kp_align_of(t->data));
        return 0;
    }
    return 1;
}

/* Dispatch: every tensor of the list fits li (kp_list_valid has run). */
static KP_UNUSED int kp_list_fits(const kp_tensor* xs, int32_t n, const kp_list_info* li) {
    for (int32_t k = 0; k < n; k++)
        if (!kp_list_elem_fits(li, &xs[k], NULL, 0)) return 0;
    return 1;
}

/* A list argument in a no-match message: the count and the first tensors' dtype, shape and alignment. */
static KP_UNUSED void kp_describe_list(kp_sb* sb, const char* name, const kp_tensor* xs, int32_t n) {
    kp_sb_add(sb, "%s: list of %d kp_tensor (", name, (int)n);
    for (int32_t k = 0; k < n && k < 4; k++) {
        const kp_tensor* t = &xs[k];
        kp_sb_add(sb, "%s%s [", k ? ", " : "", kp_dtype_name(t->dtype));
        for (int i = 0; i < t->rank && i < KP_MAX_RANK; i++) kp_sb_add(sb, i ? ", %lld" : "%lld", (long long)t->shape[i]);
        kp_sb_add(sb, "] stride [");
        for (int i = 0; i < t->rank && i < KP_MAX_RANK; i++) kp_sb_add(sb, i ? ", %lld" : "%lld", (long long)t->stride[i]);
        kp_sb_add(sb, "] %llu-byte aligned", (unsigned long long)kp_align_of(t->data));
    }
    kp_sb_add(sb, "%s)", n > 4 ? ", ..." : "");
}

/* A typed entry's list argument: valid, and every tensor fits (else KP_ERROR_INVALID_ARGUMENT naming the tensor). */
static KP_UNUSED kp_status kp_list_check(const kp_ctx* c, uint32_t spec, const kp_list_info* li, const kp_tensor* xs,
                                         int32_t n) {
    kp_status s = kp_list_valid(c->fn, KP_STR(li->arg), xs, n);
    if (s != KP_SUCCESS) return s;
    for (int32_t k = 0; k < n; k++) {
        char why[256];
        if (!kp_list_elem_fits(li, &xs[k], why, sizeof why))
            return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: kernel %s: argument '%s' element %d: %s", c->fn,
                           KP_STR(kp_specs[spec].label), KP_STR(li->arg), (int)k, why);
    }
    return KP_SUCCESS;
}

/* One list argument of a launch: its tensors (checked) and what they must be. */
typedef struct kp_list_arg {
    const kp_tensor* xs;
    int32_t n;
    const kp_list_info* li;
} kp_list_arg;

/* Launch with tensor-list arguments: the descriptors of every list (each list's start 16-byte aligned) are staged in
 * host memory, copied into one allocation made on the launch stream for this launch only (cuMemAllocAsync,
 * cuMemcpyHtoDAsync -- from pageable memory, which the driver has read when the call returns -- the launch, then
 * cuMemFreeAsync), and ptrs[i] (which args point to) gets the device address of list i's descriptors. */
static kp_status kp_run_lists(const kp_ctx* c, uint32_t spec, const kp_launch* l, void** args, const kp_list_arg* la,
                              int nl, uint64_t* ptrs) {
    const char* label = KP_STR(kp_specs[spec].label);
    if (l->grid[0] == 0) return kp_run(c, spec, l, args); /* reports the empty grid */
    size_t words = 0;
    for (int i = 0; i < nl; i++) words = (words + 1) / 2 * 2 + (size_t)la[i].n * (1u + 2u * la[i].li->rank);
    if (kp_cu.MemAllocAsync == NULL || kp_cu.MemFreeAsync == NULL || kp_cu.MemcpyHtoDAsync == NULL)
        return kp_fail(KP_ERROR_DRIVER_TOO_OLD, "%s: kernel %s: its tensor lists are copied to the device per launch "
                       "with cuMemAllocAsync, cuMemcpyHtoDAsync and cuMemFreeAsync, which this CUDA driver does not "
                       "provide (CUDA 11.2+)", c->fn, label);
    int64_t stack[KP_LIST_STACK];
    int64_t* w = words <= KP_LIST_STACK ? stack : (int64_t*)malloc(words * sizeof(int64_t));
    if (w == NULL)
        return kp_fail(KP_ERROR_OUT_OF_MEMORY, "%s: kernel %s: no host memory to stage %zu bytes of tensor-list "
                       "descriptors", c->fn, label, words * sizeof(int64_t));
    size_t at = 0;
    for (int i = 0; i < nl; i++) {
        if (at % 2) w[at++] = 0;
        ptrs[i] = at; /* in words, until the allocation is made */
        for (int32_t k = 0; k < la[i].n; k++) {
            const kp_tensor* t = &la[i].xs[k];
            w[at++] = (int64_t)(uintptr_t)t->data;
            for (int m = 0; m < la[i].li->rank; m++) w[at++] = t->shape[m];
            for (int m = 0; m < la[i].li->rank; m++) w[at++] = t->stride[m];
        }
    }
    kp_CUdeviceptr base = 0;
    kp_status s = KP_SUCCESS;
    kp_CUresult r = kp_cu.MemAllocAsync(&base, words * sizeof(int64_t), (kp_CUstream)l->stream);
    int rebound = r != KP_CUDA_SUCCESS ? kp_rebind(c, l, r, &s) : 0;
    if (rebound > 0) r = kp_cu.MemAllocAsync(&base, words * sizeof(int64_t), (kp_CUstream)l->stream);
    if (r != KP_CUDA_SUCCESS) {
        if (w != stack) free(w);
        return rebound < 0 ? s : kp_cuda_fail(r, c->fn, label, "cuMemAllocAsync (tensor-list descriptors)");
    }
    r = kp_cu.MemcpyHtoDAsync(base, w, words * sizeof(int64_t), (kp_CUstream)l->stream);
    if (w != stack) free(w);
    if (r != KP_CUDA_SUCCESS) {
        s = kp_cuda_fail(r, c->fn, label, "cuMemcpyHtoDAsync (tensor-list descriptors)");
    } else {
        for (int i = 0; i < nl; i++) ptrs[i] = (uint64_t)base + ptrs[i] * sizeof(int64_t);
        s = kp_run(c, spec, l, args);
    }
    r = kp_cu.MemFreeAsync(base, (kp_CUstream)l->stream);
    if (r != KP_CUDA_SUCCESS && s == KP_SUCCESS)
        s = kp_cuda_fail(r, c->fn, label, "cuMemFreeAsync (tensor-list descriptors)");
    return s;
}
#endif
