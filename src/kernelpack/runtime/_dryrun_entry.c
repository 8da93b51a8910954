/* The dry-run driver (_dryrun.c, which includes this part): devices, contexts, libraries and kernels. */

/* ------------------------------------------------------------------ driver entry points: devices and contexts */

static CUresult cuInit(unsigned int flags) {
    ENTER("cuInit");
    logf_("cuInit flags=%u devices=%d", flags, cfg.ndev);
    if (cfg.ndev == 0) return NO_DEVICE;
    initialized = 1;
    return OK;
}

EXPORT CUresult cuDriverGetVersion(int* v) {
    ENTER("cuDriverGetVersion");
    if (v == NULL) return INVALID_VALUE;
    *v = cfg.version;
    return OK;
}

static const struct {
    CUresult code;
    const char *name, *text;
} ERRORS[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in cooperative launch"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {912, "CUDA_ERROR_CLUSTER_SIZE_INVALID", "invalid cluster size"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

/* As the driver: an unknown code is CUDA_ERROR_INVALID_VALUE with *s = NULL. */
static CUresult error_text(CUresult r, const char** s, int name) {
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (ERRORS[i].code == r) {
            *s = name ? ERRORS[i].name : ERRORS[i].text;
            return OK;
        }
    *s = NULL;
    return INVALID_VALUE;
}
static CUresult cuGetErrorName(CUresult r, const char** s) {
    ENTER("cuGetErrorName");
    return error_text(r, s, 1);
}
static CUresult cuGetErrorString(CUresult r, const char** s) {
    ENTER("cuGetErrorString");
    return error_text(r, s, 0);
}

static CUresult cuDeviceGetCount(int* n) {
    ENTER("cuDeviceGetCount");
    NEED_INIT();
    *n = cfg.ndev;
    return OK;
}

static CUresult cuDeviceGet(int* d, int ordinal) {
    ENTER("cuDeviceGet");
    NEED_INIT();
    if (ordinal < 0 || ordinal >= cfg.ndev) return INVALID_DEVICE;
    *d = ordinal;
    return OK;
}

/* The attributes the back ends ask for, with an H100-like device's values; any other valid one reads 0. */
static int attribute(int attr, int dev, int* v) {
    int major = cfg.cc[dev][0];
    switch (attr) {
    case 1: case 2: case 3: *v = 1024; return 1; /* max threads per block, max block x, y */
    case 4: *v = 64; return 1;                   /* max block z */
    case 5: *v = 2147483647; return 1;           /* max grid x */
    case 6: case 7: *v = 65535; return 1;        /* max grid y, z */
    case 8: *v = DEFAULT_SMEM; return 1;         /* shared memory per block */
    case 10: *v = 32; return 1;                  /* warp size */
    case 16: *v = cfg.sms[dev]; return 1;       /* SMs */
    case 75: *v = major; return 1;
    case 76: *v = cfg.cc[dev][1]; return 1;
    case 97: *v = major >= 9 ? 232448 : 166912; return 1; /* shared memory per block, opt-in */
    case 95: *v = major >= 6; return 1;                   /* cooperative launch */
    case 120: *v = major >= 9; return 1;                  /* cluster launch */
    }
    *v = 0;
    return attr > 0 && attr < 150;
}

static CUresult cuDeviceGetAttribute(int* v, int attr, int dev) {
    ENTER("cuDeviceGetAttribute");
    NEED_INIT();
    if (dev < 0 || dev >= cfg.ndev) return INVALID_DEVICE;
    if (!attribute(attr, dev, v)) return INVALID_VALUE;
    logf_("cuDeviceGetAttribute attr=%d dev=%d -> %d", attr, dev, *v);
    return OK;
}

static int ctx_device(void* ctx) {
    int* p = (int*)ctx;
    return p >= ctx_objs && p < ctx_objs + cfg.ndev ? (int)(p - ctx_objs) : -1;
}

static CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) {
    ENTER("cuDevicePrimaryCtxRetain");
    NEED_INIT();
    if (dev < 0 || dev >= cfg.ndev) return INVALID_DEVICE;
    *ctx = &ctx_objs[dev];
    logf_("cuDevicePrimaryCtxRetain dev=%d", dev);
    return OK;
}

static CUresult cuCtxGetCurrent(void** ctx) {
    ENTER("cuCtxGetCurrent");
    NEED_INIT();
    *ctx = cur() < 0 ? NULL : &ctx_objs[cur()];
    return OK;
}

static CUresult cuCtxSetCurrent(void* ctx) {
    ENTER("cuCtxSetCurrent");
    NEED_INIT();
    int dev = ctx_device(ctx);
    if (ctx != NULL && dev < 0) return INVALID_CONTEXT;
    cur();
    t_current = dev;
    logf_("cuCtxSetCurrent dev=%d", dev);
    return OK;
}

static CUresult cuCtxGetDevice(int* d) {
    ENTER("cuCtxGetDevice");
    NEED_INIT();
    logf_("cuCtxGetDevice -> %d", cur());
    if (cur() < 0) return INVALID_CONTEXT;
    *d = cur();
    return OK;
}

/* A fake stream handle 0x1000 * (device + 1) belongs to that device's context; the NULL stream to the current. */
static CUresult cuStreamGetCtx(void* stream, void** ctx) {
    ENTER("cuStreamGetCtx");
    NEED_INIT();
    uintptr_t s = (uintptr_t)stream;
    int dev = s == 0 ? cur() : s % 0x1000 == 0 ? (int)(s / 0x1000) - 1 : -1;
    logf_("cuStreamGetCtx stream=%p -> dev %d", stream, dev);
    if (dev < 0 || dev >= cfg.ndev) return s == 0 ? INVALID_CONTEXT : INVALID_HANDLE;
    *ctx = &ctx_objs[dev];
    return OK;
}

/* ------------------------------------------------------------------ libraries and kernels */

/* The newest PTX ISA (major * 10 + minor) a driver of CUDA version v JIT-compiles: 13.x knows 9.x, 12.8 8.7,
 * 12.9 8.8, 12.y (y <= 7) 8.y (NVIDIA's PTX ISA release notes). */
static int max_ptx_isa(int v) {
    int major = v / 1000, minor = v % 1000 / 10;
    if (major >= 13) return 90 + minor;
    return minor >= 8 ? 79 + minor : 80 + minor;
}

/* The ISA of a PTX image's ".version a.b" as a * 10 + b; 0 without one. */
static int ptx_isa(const char* ptx) {
    const char* v = strstr(ptx, ".version");
    int a = 0, b = 0;
    return v != NULL && sscanf(v + 8, " %d.%d", &a, &b) == 2 ? a * 10 + b : 0;
}

static CUresult cuLibraryLoadData(void** lib, const void* code, void* o1, void** o2, unsigned n1, void* o3,
                                  void** o4, unsigned n2) {
    (void)o1, (void)o2, (void)n1, (void)o3, (void)o4, (void)n2;
    ENTER("cuLibraryLoadData");
    NEED_INIT();
    if (lib == NULL || code == NULL) return INVALID_VALUE;
    if (cfg.load_us > 0) usleep((useconds_t)cfg.load_us);
    const unsigned char* img = (const unsigned char*)code;
    if (memcmp(img, "\x7f" "ELF", 4) != 0 && ptx_isa((const char*)img) > max_ptx_isa(cfg.version)) {
        logf_("cuLibraryLoadData kind=ptx -> CUDA_ERROR_UNSUPPORTED_PTX_VERSION");
        return UNSUPPORTED_PTX_VERSION;
    }
    fk_library* l = (fk_library*)calloc(1, sizeof *l);
    l->is_ptx = memcmp(img, "\x7f" "ELF", 4) != 0;
    l->size = l->is_ptx ? strlen((const char*)img) : elf_size(img);
    l->image = (unsigned char*)malloc(l->size + 1);
    memcpy(l->image, img, l->size);
    l->image[l->size] = 0;
    image_arch(l);
    pthread_mutex_lock(&lock);
    l->id = ++nlibs;
    l->next = libraries;
    libraries = l;
    pthread_mutex_unlock(&lock);
    logf_("cuLibraryLoadData lib=%d kind=%s size=%zu fnv=%016llx", l->id, l->is_ptx ? "ptx" : "cubin", l->size,
          (unsigned long long)fnv1a(l->image, l->size));
    *lib = l;
    return OK;
}

static CUresult cuLibraryGetKernel(void** kernel, void* lib, const char* name) {
    ENTER("cuLibraryGetKernel");
    NEED_INIT();
    fk_library* l = (fk_library*)lib;
    if (l == NULL || kernel == NULL || name == NULL) return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    fk_kernel* k = l->kernels;
    while (k != NULL && strcmp(k->name, name) != 0) k = k->next;
    int found = k != NULL;
    if (!found) {
        k = (fk_kernel*)calloc(1, sizeof *k);
        snprintf(k->name, sizeof k->name, "%s", name);
        k->lib = l;
        if (l->is_ptx) {
            char want[300];
            snprintf(want, sizeof want, ".entry %s(", name);
            found = strstr((const char*)l->image, want) != NULL;
            k->nparams = -1;
        } else {
            found = read_kernel(k, l->image, l->size);
        }
        if (found) {
            k->next = l->kernels;
            l->kernels = k;
        } else {
            free(k);
        }
    }
    pthread_mutex_unlock(&lock);
    logf_("cuLibraryGetKernel lib=%d name=%s -> %s", l->id, name, found ? "ok" : "CUDA_ERROR_NOT_FOUND");
    if (!found) return NOT_FOUND;
    *kernel = k;
    return OK;
}

/* Loads the kernel into the current context: CUDA_ERROR_NO_BINARY_FOR_GPU when its binary does not run on that
 * device. */
static CUresult cuKernelGetFunction(void** f, void* kernel) {
    ENTER("cuKernelGetFunction");
    NEED_INIT();
    if (cur() < 0) return INVALID_CONTEXT;
    const fk_kernel* k = (const fk_kernel*)kernel;
    if (k != NULL && k->lib != NULL && !runs_on(k->lib, cur())) {
        logf_("cuKernelGetFunction kernel=%s binary=%s dev=%d -> CUDA_ERROR_NO_BINARY_FOR_GPU", k->name, k->lib->binary,
              cur());
        return NO_BINARY_FOR_GPU;
    }
    *f = kernel;
    return OK;
}

/* Settable: 8 (max dynamic shared memory, up to the device's opt-in limit), 9 (carveout) and the cluster ones
 * (11-15); the others are read-only. */
static CUresult cuKernelSetAttribute(int attr, int val, void* kernel, int dev) {
    ENTER("cuKernelSetAttribute");
    NEED_INIT();
    fk_kernel* k = (fk_kernel*)kernel;
    logf_("cuKernelSetAttribute attr=%d val=%d kernel=%s dev=%d", attr, val, k->name, dev);
    if (dev < 0 || dev >= cfg.ndev) return INVALID_DEVICE;
    int optin;
    attribute(97, dev, &optin);
    if (attr == 8 && (val < 0 || val > optin)) return INVALID_VALUE;
    if (attr != 8 && attr != 9 && (attr < 11 || attr > 15)) return INVALID_VALUE;
    if (attr == 8) k->max_dyn_smem[dev] = val;
    return OK;
}

/* Parameter `index` of a kernel: its offset and size from the cubin's parameter info (CUDA 12.4); INVALID_VALUE past
 * the last one, NOT_SUPPORTED for a kernel whose parameters the fake cannot know (PTX). */
static CUresult cuKernelGetParamInfo(void* kernel, size_t index, size_t* offset, size_t* size) {
    ENTER("cuKernelGetParamInfo");
    NEED_INIT();
    fk_kernel* k = (fk_kernel*)kernel;
    if (k == NULL || offset == NULL || size == NULL) return INVALID_VALUE;
    if (k->nparams < 0) return NOT_SUPPORTED;
    if (index >= (size_t)k->nparams) return INVALID_VALUE;
    *offset = k->offset[index] + (size_t)cfg.param_base, *size = k->size[index]; /* the H200's driver: 48 for some */
    return OK;
}

/* A function is its kernel here: the same parameter table, and its name. */
static CUresult cuFuncGetParamInfo(void* f, size_t index, size_t* offset, size_t* size) {
    return cuKernelGetParamInfo(f, index, offset, size);
}

static CUresult cuFuncGetName(const char** name, void* f) {
    ENTER("cuFuncGetName");
    NEED_INIT();
    if (name == NULL || f == NULL) return INVALID_VALUE;
    *name = ((const fk_kernel*)f)->name;
    return OK;
}

static CUresult cuPointerGetAttribute(void* data, int attr, uint64_t ptr) {
    (void)attr, (void)ptr;
    ENTER("cuPointerGetAttribute");
    NEED_INIT();
    *(int*)data = 0;
    return OK;
}

