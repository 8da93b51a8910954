/* The dry-run driver (_dryrun.c, which includes this part): launches, their records, memory, tensor maps and
 * the one exported lookup. */

/* ------------------------------------------------------------------ launches */

typedef struct {
    uint32_t id;
    char pad[4];
    union {
        char raw[64];
        struct {
            uint32_t x, y, z;
        } cluster;
    } value;
} cu_attr;
typedef struct {
    uint32_t grid[3], block[3], smem;
    void* stream;
    cu_attr* attrs;
    uint32_t nattrs;
} cu_config;

static CUresult check_config(const fk_kernel* k, const fk_launch* l);

/* Blocks of `threads` threads and `smem` bytes of dynamic shared memory one SM of device dev holds at once. */
static int blocks_per_sm(int dev, uint32_t threads, uint32_t smem) {
    uint32_t smem_sm = cfg.cc[dev][0] >= 9 ? 233472u : 167936u;
    int n = threads ? (int)(2048u / threads) : 0;
    if (n > 32) n = 32;
    if (smem && (int)(smem_sm / smem) < n) n = (int)(smem_sm / smem);
    return n;
}

static CUresult check_launch(const fk_kernel* k, const fk_launch* l, void** params, void** extra) {
    if (l->device < 0) return INVALID_CONTEXT;
    if (k->lib != NULL && !runs_on(k->lib, l->device)) return NO_BINARY_FOR_GPU; /* loaded into the context now */
    if (extra != NULL || (params == NULL && k->nparams > 0)) return INVALID_VALUE; /* kernelParams only */
    return check_config(k, l);
}

/* The launch configuration's rules (the top of the file), for a launch and for an occupancy question alike. */
static CUresult check_config(const fk_kernel* k, const fk_launch* l) {
    int dev = l->device;
    const uint32_t *g = l->grid, *b = l->block;
    if (dev < 0) return INVALID_CONTEXT;
    if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2]) return INVALID_VALUE;
    if ((uint64_t)b[0] * b[1] * b[2] > 1024 || b[0] > 1024 || b[1] > 1024 || b[2] > 64) return INVALID_VALUE;
    if (g[1] > 65535 || g[2] > 65535) return INVALID_VALUE;
    if (k->reqntid[0] && memcmp(b, k->reqntid, sizeof k->reqntid) != 0) return INVALID_VALUE;
    if (l->smem > DEFAULT_SMEM && (int)l->smem > k->max_dyn_smem[dev]) return INVALID_VALUE;
    for (uint32_t i = 0; i < l->nattrs; i++) {
        if (l->attrs[i].id == 6 && l->attrs[i].value[0] && cfg.cc[dev][0] < 9) return NOT_SUPPORTED;
        if (l->attrs[i].id == 2 && l->attrs[i].value[0] &&
            (uint64_t)g[0] * g[1] * g[2] > (uint64_t)blocks_per_sm(dev, b[0] * b[1] * b[2], l->smem) * cfg.sms[dev])
            return COOPERATIVE_LAUNCH_TOO_LARGE;
    }
    if (k->explicit_cluster && k->cluster[0]) {
        for (uint32_t i = 0; i < l->nattrs; i++)
            if (l->attrs[i].id == 4 && memcmp(l->attrs[i].value, k->cluster, sizeof k->cluster) != 0)
                return CLUSTER_SIZE_INVALID;
        for (int i = 0; i < 3; i++)
            if (g[i] % k->cluster[i]) return CLUSTER_SIZE_INVALID;
    }
    return OK;
}

static void hex(const unsigned char* p, size_t n, char* out, size_t cap) {
    static const char digits[] = "0123456789abcdef";
    size_t w = 0;
    for (size_t i = 0; i < n && w + 3 <= cap; i++) out[w++] = digits[p[i] >> 4], out[w++] = digits[p[i] & 15];
    out[w] = 0;
}

static void attrs_text(const fk_launch* l, char* out, size_t cap) {
    size_t w = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < l->nattrs && w + 64 < cap; i++) {
        const fk_attr* a = &l->attrs[i];
        if (a->id == 4)
            w += (size_t)snprintf(out + w, cap - w, "%scluster:%u,%u,%u", i ? ";" : "", a->value[0], a->value[1],
                                  a->value[2]);
        else
            w += (size_t)snprintf(out + w, cap - w, "%sid%u:%u,%u,%u", i ? ";" : "", a->id, a->value[0], a->value[1],
                                  a->value[2]);
    }
}

/* A JSON string of s (quotes, backslashes and control characters escaped) at out; the bytes written. */
static size_t json_string(char* out, size_t cap, const char* s) {
    size_t w = 0;
    if (cap < 3) return 0;
    out[w++] = '"';
    for (; *s && w + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') out[w++] = '\\', out[w++] = (char)c;
        else if (c < 0x20) w += (size_t)snprintf(out + w, cap - w, "\\u%04x", c);
        else out[w++] = (char)c;
    }
    out[w++] = '"';
    out[w] = 0;
    return w;
}

/* One JSON line per launch attempt, appended to RECORD (the format: docs/testing.md). `label`: the specialization
 * kernelpack named (kpDryrunNote), "" when none did. */
static void record(const char* fn, const fk_kernel* k, const fk_launch* l, const char* label) {
    /* an attempt refused for want of a current context is not recorded: both back ends answer it by making the
     * device's primary context current and launching again (the launch that counts) */
    if (!cfg.record[0] || l->result == INVALID_CONTEXT) return;
    char name[300], entry[600], spec[600], binary[64], hexed[2 * PARAM_BYTES + 1], error[64];
    const char* err = NULL;
    if (label[0]) snprintf(name, sizeof name, "%.*s", (int)strcspn(label, "["), label); /* "add[f32]" -> "add" */
    else snprintf(name, sizeof name, "%s", k->name);
    json_string(entry, sizeof entry, k->name);
    char family[600];
    json_string(family, sizeof family, name);
    if (label[0]) json_string(spec, sizeof spec, label);
    else snprintf(spec, sizeof spec, "null");
    if (k->lib != NULL) json_string(binary, sizeof binary, k->lib->binary);
    else snprintf(binary, sizeof binary, "null");
    hex(l->params, l->nbytes, hexed, sizeof hexed);
    if (l->result != OK && error_text(l->result, &err, 1) == OK) snprintf(error, sizeof error, "\"%s\"", err);
    else snprintf(error, sizeof error, l->result == OK ? "null" : "\"CUDA_ERROR_%d\"", l->result);
    uint32_t cluster[3] = {0, 0, 0};
    int pdl = 0, coop = 0;
    for (uint32_t i = 0; i < l->nattrs; i++) {
        if (l->attrs[i].id == 4) memcpy(cluster, l->attrs[i].value, sizeof cluster);
        if (l->attrs[i].id == 6 && l->attrs[i].value[0]) pdl = 1;
        if (l->attrs[i].id == 2 && l->attrs[i].value[0]) coop = 1;
    }
    char arch[16] = "null";
    if (l->device >= 0 && l->device < cfg.ndev)
        snprintf(arch, sizeof arch, "\"sm_%d%d\"", cfg.cc[l->device][0], cfg.cc[l->device][1]);
    pthread_mutex_lock(&lock);
    FILE* f = fopen(cfg.record, "a");
    if (f != NULL) {
        fprintf(f, "{\"kernel\": %s, \"specialization\": %s, \"entry\": %s, \"binary\": %s, \"device\": %d, "
                   "\"device_arch\": %s, \"grid\": [%u, %u, %u], \"block\": [%u, %u, %u], \"smem\": %u, "
                   "\"cluster\": [%u, %u, %u], \"pdl\": %s, \"cooperative\": %s, \"stream\": %llu, \"call\": \"%s\", "
                   "\"params\": \"%s\", \"result\": %d, \"error\": %s}\n",
                family, spec, entry, binary, l->device, arch, l->grid[0], l->grid[1], l->grid[2], l->block[0],
                l->block[1], l->block[2], l->smem, cluster[0], cluster[1], cluster[2], pdl ? "true" : "false",
                coop ? "true" : "false", (unsigned long long)l->stream, fn, hexed, l->result, error);
        fclose(f);
    }
    pthread_mutex_unlock(&lock);
}

/* One launch attempt: checked, recorded whatever the result, logged. */
static CUresult launch(const char* fn, void* f, const uint32_t g[3], const uint32_t b[3], uint32_t smem, void* stream,
                       void** params, void** extra, const cu_config* c) {
    ENTER(fn);
    NEED_INIT();
    const fk_kernel* k = (const fk_kernel*)f;
    if (k == NULL) return INVALID_HANDLE;
    fk_launch l;
    memset(&l, 0, offsetof(fk_launch, params));
    for (int i = 0; params != NULL && i < k->nparams; i++)
        if (k->offset[i] + k->size[i] <= PARAM_BYTES && k->offset[i] + k->size[i] > l.nbytes)
            l.nbytes = k->offset[i] + k->size[i];
    memset(l.params, 0, l.nbytes);
    snprintf(l.kernel, sizeof l.kernel, "%s", k->name);
    memcpy(l.grid, g, sizeof l.grid), memcpy(l.block, b, sizeof l.block);
    l.smem = smem, l.stream = (uint64_t)(uintptr_t)stream, l.device = cur(), l.ex = c != NULL;
    for (uint32_t i = 0; c != NULL && i < c->nattrs && i < MAX_ATTRS; i++) {
        l.attrs[i].id = c->attrs[i].id;
        memcpy(l.attrs[i].value, c->attrs[i].value.raw, sizeof l.attrs[i].value);
        l.nattrs = i + 1;
    }
    for (int i = 0; params != NULL && i < k->nparams; i++)
        if (k->offset[i] + k->size[i] <= PARAM_BYTES) memcpy(l.params + k->offset[i], params[i], k->size[i]);
    l.result = check_launch(k, &l, params, extra);
    pthread_mutex_lock(&lock);
    if (nlaunches >= MAX_LAUNCHES) nlaunches = 0;
    memcpy(&launches[nlaunches++], &l, offsetof(fk_launch, params) + l.nbytes);
    pthread_mutex_unlock(&lock);
    record(fn, k, &l, t_note);
    if (l.result != INVALID_CONTEXT) t_note[0] = 0; /* a note names one launch (both back ends retry one refused for
                                                      * want of a context: the note stays for the retry) */
    if (!cfg.log[0]) return l.result;
    char hexed[2 * PARAM_BYTES + 1], attrs[MAX_ATTRS * 64];
    hex(l.params, l.nbytes, hexed, sizeof hexed);
    attrs_text(&l, attrs, sizeof attrs);
    logf_("%s kernel=%s grid=%u,%u,%u block=%u,%u,%u smem=%u stream=%p dev=%d attrs=%s extra=%p params=%s -> %d", fn,
          l.kernel, g[0], g[1], g[2], b[0], b[1], b[2], smem, stream, l.device, attrs, (void*)extra, hexed, l.result);
    return l.result;
}

static CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned smem, void* stream, void** params, void** extra) {
    uint32_t g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    return launch("cuLaunchKernel", f, g, b, smem, stream, params, extra, NULL);
}

static CUresult cuLaunchKernelEx(const cu_config* c, void* f, void** params, void** extra) {
    return launch("cuLaunchKernelEx", f, c->grid, c->block, c->smem, c->stream, params, extra, c);
}

/* The context is the stream's (a fake stream handle names its device) or the current one for the NULL stream. */
static CUresult cuOccupancyMaxActiveClusters(int* n, void* f, const cu_config* c) {
    ENTER("cuOccupancyMaxActiveClusters");
    NEED_INIT();
    const fk_kernel* k = (const fk_kernel*)f;
    if (n == NULL || k == NULL || c == NULL) return INVALID_VALUE;
    uintptr_t s = (uintptr_t)c->stream;
    fk_launch l;
    memset(&l, 0, sizeof l);
    l.device = s == 0 ? cur() : s % 0x1000 == 0 ? (int)(s / 0x1000) - 1 : -1;
    memcpy(l.grid, c->grid, sizeof l.grid), memcpy(l.block, c->block, sizeof l.block);
    l.smem = c->smem;
    uint32_t size = 0;
    for (uint32_t i = 0; i < c->nattrs && i < MAX_ATTRS; i++) {
        l.attrs[i].id = c->attrs[i].id;
        memcpy(l.attrs[i].value, c->attrs[i].value.raw, sizeof l.attrs[i].value);
        l.nattrs = i + 1;
        if (c->attrs[i].id == 4) size = c->attrs[i].value.cluster.x * c->attrs[i].value.cluster.y *
                                         c->attrs[i].value.cluster.z;
    }
    if (k->explicit_cluster && k->cluster[0] && size == 0) size = k->cluster[0] * k->cluster[1] * k->cluster[2];
    CUresult r = l.device < 0 || l.device >= cfg.ndev ? INVALID_CONTEXT : check_config(k, &l);
    if (r == OK && (size == 0 || size > 8)) r = CLUSTER_SIZE_INVALID;
    if (r == OK) *n = cfg.sms[l.device] / (int)size;
    logf_("cuOccupancyMaxActiveClusters kernel=%s grid=%u,%u,%u block=%u,%u,%u smem=%u cluster=%u dev=%d -> %d (%d)",
          k->name, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.smem, size, l.device, r,
          r == OK ? *n : 0);
    return r;
}

static CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* n, void* f, int threads, size_t smem) {
    ENTER("cuOccupancyMaxActiveBlocksPerMultiprocessor");
    NEED_INIT();
    const fk_kernel* k = (const fk_kernel*)f;
    int dev = cur();
    if (n == NULL || k == NULL || threads <= 0 || threads > 1024) return INVALID_VALUE;
    if (dev < 0) return INVALID_CONTEXT;
    *n = blocks_per_sm(dev, (uint32_t)threads, (uint32_t)smem);
    logf_("cuOccupancyMaxActiveBlocksPerMultiprocessor kernel=%s threads=%d smem=%zu dev=%d -> 0 (%d)", k->name,
          threads, smem, dev, *n);
    return OK;
}

/* ------------------------------------------------------------------ memory and tensor maps */

static CUresult cuMemAllocAsync(uint64_t* ptr, size_t size, void* stream) {
    ENTER("cuMemAllocAsync");
    NEED_INIT();
    if (cur() < 0) {
        logf_("cuMemAllocAsync size=%zu stream=%p dev=%d -> %d", size, stream, cur(), INVALID_CONTEXT);
        return INVALID_CONTEXT;
    }
    pthread_mutex_lock(&lock);
    if (nallocs >= MAX_ALLOCS) nallocs = 0;
    fk_alloc* a = &allocs[nallocs++];
    memset(a, 0, sizeof *a);
    /* 256-byte aligned, as the driver promises, and no more: a caller that needs 512 must align itself */
    a->ptr = 0x7f0000000000ull + ++alloc_seq * 0x10000000ull + 0x100;
    a->size = size, a->stream = (uint64_t)(uintptr_t)stream, a->device = cur();
    *ptr = a->ptr;
    pthread_mutex_unlock(&lock);
    logf_("cuMemAllocAsync size=%zu stream=%p dev=%d ptr=0x%llx -> 0", size, stream, cur(), (unsigned long long)*ptr);
    return OK;
}

static CUresult cuMemFreeAsync(uint64_t ptr, void* stream) {
    ENTER("cuMemFreeAsync");
    NEED_INIT();
    CUresult r = INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].ptr == ptr && !allocs[i].freed) {
            allocs[i].freed = 1, allocs[i].free_stream = (uint64_t)(uintptr_t)stream;
            r = OK;
            break;
        }
    pthread_mutex_unlock(&lock);
    logf_("cuMemFreeAsync ptr=0x%llx stream=%p -> %d", (unsigned long long)ptr, stream, r);
    return r;
}

/* A host-to-device copy lands in memory cuMemAllocAsync gave and nobody freed yet (else CUDA_ERROR_INVALID_VALUE);
 * the bytes are recorded (fk_get_copy) and logged as 64-bit words (hex, the first 64). */
static CUresult cuMemcpyHtoDAsync(uint64_t dst, const void* src, size_t size, void* stream) {
    ENTER("cuMemcpyHtoDAsync");
    NEED_INIT();
    CUresult r = INVALID_VALUE;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nallocs && src != NULL; i++)
        if (!allocs[i].freed && dst >= allocs[i].ptr && dst + size <= allocs[i].ptr + allocs[i].size) r = OK;
    if (cur() < 0) r = INVALID_CONTEXT;
    if (ncopies >= MAX_COPIES) ncopies = 0;
    fk_copy* c = &copies[ncopies++];
    c->dst = dst, c->size = size, c->stream = (uint64_t)(uintptr_t)stream, c->result = r;
    c->nbytes = src == NULL ? 0 : size < COPY_BYTES ? (uint32_t)size : COPY_BYTES;
    if (c->nbytes) memcpy(c->data, src, c->nbytes);
    pthread_mutex_unlock(&lock);
    char words[64 * 17 + 1];
    size_t w = 0;
    words[0] = 0;
    for (uint32_t i = 0; i + 8 <= c->nbytes && i < 64 * 8; i += 8) {
        uint64_t v;
        memcpy(&v, c->data + i, 8);
        w += (size_t)snprintf(words + w, sizeof words - w, i ? ",%llx" : "%llx", (unsigned long long)v);
    }
    logf_("cuMemcpyHtoDAsync dst=0x%llx size=%zu stream=%p words=%s -> %d", (unsigned long long)dst, size, stream,
          w ? words : "-", r);
    return r;
}

static void join_u64(char* out, size_t cap, const uint64_t* v, unsigned n) {
    size_t w = 0;
    out[0] = 0;
    for (unsigned i = 0; i < n && w + 24 < cap; i++)
        w += (size_t)snprintf(out + w, cap - w, i ? ",%llu" : "%llu", (unsigned long long)v[i]);
}

/* The documented argument rules; the map holds the address in word 0 and all-ones elsewhere (a cleared bit
 * shows). */
static CUresult encode_check(const fk_encode* e, const void* map) {
    if (e->rank < 1 || e->rank > 5 || (uintptr_t)map % 64 || e->addr % 16) return INVALID_VALUE;
    for (unsigned i = 0; i < e->rank; i++) {
        if (e->dims[i] == 0 || e->dims[i] > (1ull << 32)) return INVALID_VALUE;
        if (e->box[i] == 0 || e->box[i] > 256 || e->estrides[i] == 0 || e->estrides[i] > 8) return INVALID_VALUE;
        if (i + 1 < e->rank && (e->strides[i] % 16 || e->strides[i] >= (1ull << 40))) return INVALID_VALUE;
    }
    return OK;
}

static CUresult cuTensorMapEncodeTiled(void* map, int dtype, unsigned rank, void* addr, const uint64_t* dims,
                                       const uint64_t* strides, const uint32_t* box, const uint32_t* estrides,
                                       int interleave, int swizzle, int l2, int oob) {
    ENTER("cuTensorMapEncodeTiled");
    fk_encode e;
    memset(&e, 0, sizeof e);
    e.dtype = dtype, e.rank = rank, e.addr = (uint64_t)(uintptr_t)addr;
    for (unsigned i = 0; i < rank && i < 5; i++) e.dims[i] = dims[i], e.box[i] = box[i], e.estrides[i] = estrides[i];
    for (unsigned i = 0; i + 1 < rank && i < 5; i++) e.strides[i] = strides[i];
    e.interleave = interleave, e.swizzle = swizzle, e.l2 = l2, e.oob = oob;
    CUresult r = encode_check(&e, map);
    char d[200], s[200], bx[200], es[200];
    uint64_t b64[5], e64[5];
    unsigned n = rank <= 5 ? rank : 5;
    for (unsigned i = 0; i < n; i++) b64[i] = e.box[i], e64[i] = e.estrides[i];
    join_u64(d, sizeof d, e.dims, n);
    join_u64(s, sizeof s, e.strides, n ? n - 1 : 0);
    join_u64(bx, sizeof bx, b64, n);
    join_u64(es, sizeof es, e64, n);
    logf_("cuTensorMapEncodeTiled dtype=%d rank=%u addr=%p dims=%s strides=%s box=%s estrides=%s interleave=%d "
          "swizzle=%d l2=%d oob=%d -> %d", dtype, rank, addr, d, n > 1 ? s : "-", bx, es, interleave, swizzle, l2, oob,
          r);
    if (r != OK) return r;
    pthread_mutex_lock(&lock);
    if (nencodes >= MAX_ENCODES) nencodes = 0;
    encodes[nencodes++] = e;
    pthread_mutex_unlock(&lock);
    uint64_t words[16];
    memset(words, 0xff, sizeof words);
    words[0] = e.addr;
    memcpy(map, words, sizeof words);
    return OK;
}

/* ------------------------------------------------------------------ the one exported lookup */

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, uint64_t flags, int* status) {
    static const struct {
        const char* name;
        void* fn;
    } table[] = {
#define E(name) {#name, (void*)name}
        E(cuInit), E(cuDriverGetVersion), E(cuGetErrorName), E(cuGetErrorString), E(cuDeviceGet),
        E(cuDeviceGetCount), E(cuDeviceGetAttribute), E(cuDevicePrimaryCtxRetain), E(cuCtxGetCurrent),
        E(cuCtxSetCurrent), E(cuCtxGetDevice), E(cuStreamGetCtx), E(cuLibraryLoadData), E(cuLibraryGetKernel),
        E(cuKernelGetFunction), E(cuKernelSetAttribute), E(cuPointerGetAttribute), E(cuLaunchKernel),
        E(cuLaunchKernelEx), E(cuMemAllocAsync), E(cuMemFreeAsync), E(cuMemcpyHtoDAsync), E(cuTensorMapEncodeTiled),
        E(cuOccupancyMaxActiveClusters), E(cuOccupancyMaxActiveBlocksPerMultiprocessor), E(cuKernelGetParamInfo),
        E(cuFuncGetParamInfo), E(cuFuncGetName), E(kpDryrunNote),
#undef E
    };
    ready();
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i].name, symbol) == 0 && strcmp(cfg.missing, symbol) != 0) {
            *pfn = table[i].fn;
            if (status) *status = 0;
            logf_("cuGetProcAddress_v2 %s version=%d flags=%llu", symbol, version, (unsigned long long)flags);
            return OK;
        }
    }
    *pfn = NULL;
    if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    logf_("cuGetProcAddress_v2 %s version=%d -> not found", symbol, version);
    return NOT_FOUND;
}
