/* kernelpack C runtime, part 4: launch values derived from the arguments. Pasted after part 3 (kp_launch.c); each
 * half is compiled only into libraries whose kernels need it (KP_GRID, KP_NDESC).
 *
 *   grid formulas (LaunchSpec.grid): kernelpack.core.launchspec.evaluate_grid is the reference: 64-bit signed math
 *     (wrapping instead of undefined on overflow), div truncates (0 for b == 0), ceil_div(a, b) = floor((a+b-1)/b)
 *     and 0 for b <= 0; a dimension <= 0 means nothing to launch.
 *   tensor descriptors (LaunchSpec.tensor_descs): kernelpack.core.tma.encode_args is the reference: the checks, the
 *     cuTensorMapEncodeTiled arguments, the clear_bit21 rule and the values of the params a descriptor fills.
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
