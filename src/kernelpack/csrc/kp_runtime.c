/* kernelpack C runtime, part 2: driver loading, per-device lazy loading, thread-local errors, the launch path.
 *
 * Pasted into every generated translation unit after the generated tables (kp_specs, kp_bins, kp_blobs,
 * kp_bundle, KP_NSPEC, KP_NBIN, KP_NBLOB, KP_LIBNAME). All functions are static.
 *
 * Threading: the fast path reads published pointers with acquire loads; everything that loads or allocates runs
 * under one mutex and publishes with release stores, so many threads launching a kernel for the first time load
 * it exactly once. Nothing here prints, exits or aborts: every failure is a kp_status plus a thread-local message.
 */

typedef struct kp_driver {
    kp_CUresult (*Init)(unsigned int);
    kp_CUresult (*DriverGetVersion)(int*);
    kp_CUresult (*GetErrorName)(kp_CUresult, const char**);
    kp_CUresult (*DeviceGet)(kp_CUdevice*, int);
    kp_CUresult (*DeviceGetCount)(int*);
    kp_CUresult (*DeviceGetAttribute)(int*, int, kp_CUdevice);
    kp_CUresult (*CtxGetDevice)(kp_CUdevice*);
    kp_CUresult (*CtxSetCurrent)(kp_CUcontext);
    kp_CUresult (*DevicePrimaryCtxRetain)(kp_CUcontext*, kp_CUdevice);
    kp_CUresult (*StreamGetCtx)(kp_CUstream, kp_CUcontext*);
    kp_CUresult (*LibraryLoadData)(kp_CUlibrary*, const void*, void*, void**, unsigned int, void*, void**,
                                   unsigned int);
    kp_CUresult (*LibraryGetKernel)(kp_CUkernel*, kp_CUlibrary, const char*);
    kp_CUresult (*KernelSetAttribute)(int, int, kp_CUkernel, kp_CUdevice);
    kp_CUresult (*LaunchKernel)(kp_CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                                unsigned int, unsigned int, unsigned int, kp_CUstream, void**, void**);
    kp_CUresult (*LaunchKernelEx)(const kp_CUlaunchConfig*, kp_CUfunction, void**, void**);
} kp_driver;

typedef kp_CUresult (*kp_GetProcAddress_v2)(const char*, void**, int, uint64_t, int*);

/* Per-device state: the binary chosen for each specialization and the dynamic smem already allowed. */
typedef struct kp_device {
    kp_CUdevice dev;
    int ordinal, major, minor, smem_optin;
    int32_t sel[KP_NSPEC];    /* binary index, -1 = none for this arch */
    int32_t quality[KP_NSPEC]; /* how specific that binary is (0 = none) */
    uint32_t smem_raised[KP_NSPEC];
} kp_device;

/* What an entry point resolved before launching: the device of the current context and its state. */
typedef struct kp_ctx {
    const char* fn;
    kp_CUdevice dev;
    kp_device* d;
} kp_ctx;

static kp_driver kp_cu;
static pthread_mutex_t kp_lock = PTHREAD_MUTEX_INITIALIZER;
static int kp_driver_state; /* 0 untried, 1 ready, -1 failed (kp_driver_status/msg say why) */
static kp_status kp_driver_status;
static char kp_driver_msg[512];
static kp_device* kp_devices[KP_MAX_DEVICES];
static kp_CUlibrary kp_libraries[KP_NBLOB];
static kp_CUkernel kp_kernels[KP_NBIN];
static __thread char kp_tls_msg[2048];
static __thread int kp_tls_cuerr;

#define KP_LOAD(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#define KP_STORE(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)
#define KP_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ------------------------------------------------------------------ errors */

static kp_status kp_fail(kp_status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static kp_status kp_fail(kp_status status, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kp_tls_msg, sizeof kp_tls_msg, fmt, ap);
    va_end(ap);
    if (status != KP_ERROR_CUDA) kp_tls_cuerr = 0;
    return status;
}

static const char* kp_cuda_name(kp_CUresult r) {
    const char* name = NULL;
    if (kp_cu.GetErrorName == NULL || kp_cu.GetErrorName(r, &name) != KP_CUDA_SUCCESS || name == NULL)
        return "CUDA_ERROR_UNKNOWN";
    return name;
}

static kp_status kp_cuda_fail(kp_CUresult r, const char* fn, const char* label, const char* call) {
    kp_status s = kp_fail(KP_ERROR_CUDA, "%s: %s%s%s%s failed with %s (%d)", fn, label ? "kernel " : "",
                          label ? label : "", label ? ": " : "", call, kp_cuda_name(r), (int)r);
    kp_tls_cuerr = (int)r;
    return s;
}

static const char* kp_status_name(kp_status s) {
    switch (s) {
    case KP_SUCCESS: return "KP_SUCCESS";
    case KP_ERROR_NO_DRIVER: return "KP_ERROR_NO_DRIVER";
    case KP_ERROR_DRIVER_TOO_OLD: return "KP_ERROR_DRIVER_TOO_OLD";
    case KP_ERROR_NO_DEVICE: return "KP_ERROR_NO_DEVICE";
    case KP_ERROR_CUDA: return "KP_ERROR_CUDA";
    case KP_ERROR_NO_BINARY_FOR_ARCH: return "KP_ERROR_NO_BINARY_FOR_ARCH";
    case KP_ERROR_NO_MATCHING_SPECIALIZATION: return "KP_ERROR_NO_MATCHING_SPECIALIZATION";
    case KP_ERROR_INVALID_ARGUMENT: return "KP_ERROR_INVALID_ARGUMENT";
    case KP_ERROR_INVALID_LAUNCH: return "KP_ERROR_INVALID_LAUNCH";
    case KP_ERROR_OUT_OF_MEMORY: return "KP_ERROR_OUT_OF_MEMORY";
    }
    return "KP_ERROR_UNKNOWN";
}

/* ------------------------------------------------------------------ driver */

static kp_status kp_driver_fail(kp_status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static kp_status kp_driver_fail(kp_status status, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kp_driver_msg, sizeof kp_driver_msg, fmt, ap);
    va_end(ap);
    kp_driver_status = status;
    return status;
}

static kp_status kp_driver_open(void) {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char* why = dlerror();
        return kp_driver_fail(KP_ERROR_NO_DRIVER, "%s: cannot load the CUDA driver libcuda.so.1 (%s)", KP_LIBNAME,
                              why ? why : "not found");
    }
    kp_GetProcAddress_v2 gpa = (kp_GetProcAddress_v2)(uintptr_t)dlsym(h, "cuGetProcAddress_v2");
    kp_CUresult (*version)(int*) = (kp_CUresult(*)(int*))(uintptr_t)dlsym(h, "cuDriverGetVersion");
    int v = 0;
    if (version != NULL && version(&v) != KP_CUDA_SUCCESS) v = 0;
    if (gpa == NULL || v < KP_CUDA_API_VERSION)
        return kp_driver_fail(KP_ERROR_DRIVER_TOO_OLD,
                              "%s: the CUDA driver supports CUDA %d.%d; this library needs CUDA 12.0 or newer "
                              "(cuGetProcAddress_v2, cuLibraryLoadData)", KP_LIBNAME, v / 1000, v % 1000 / 10);
    static const struct {
        const char* name;
        size_t offset;
    } syms[] = {
#define KP_SYM(name) {"cu" #name, offsetof(kp_driver, name)}
        KP_SYM(Init), KP_SYM(DriverGetVersion), KP_SYM(GetErrorName), KP_SYM(DeviceGet), KP_SYM(DeviceGetCount),
        KP_SYM(DeviceGetAttribute), KP_SYM(CtxGetDevice), KP_SYM(CtxSetCurrent), KP_SYM(DevicePrimaryCtxRetain),
        KP_SYM(StreamGetCtx), KP_SYM(LibraryLoadData), KP_SYM(LibraryGetKernel), KP_SYM(KernelSetAttribute),
        KP_SYM(LaunchKernel), KP_SYM(LaunchKernelEx),
#undef KP_SYM
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void* fn = NULL;
        int found = -1;
        kp_CUresult r = gpa(syms[i].name, &fn, KP_CUDA_API_VERSION, 0, &found);
        if (r != KP_CUDA_SUCCESS || found != 0 || fn == NULL)
            return kp_driver_fail(KP_ERROR_DRIVER_TOO_OLD,
                                  "%s: the CUDA driver (CUDA %d.%d) has no %s for CUDA 12.0 (cuGetProcAddress: "
                                  "result %d, status %d)", KP_LIBNAME, v / 1000, v % 1000 / 10, syms[i].name, (int)r,
                                  found);
        memcpy((char*)&kp_cu + syms[i].offset, &fn, sizeof fn);
    }
    kp_CUresult r = kp_cu.Init(0);
    if (r == KP_CUDA_ERROR_NO_DEVICE)
        return kp_driver_fail(KP_ERROR_NO_DEVICE, "%s: cuInit found no CUDA device (CUDA_ERROR_NO_DEVICE)",
                              KP_LIBNAME);
    if (r != KP_CUDA_SUCCESS)
        return kp_driver_fail(KP_ERROR_CUDA, "%s: cuInit failed with %s (%d)", KP_LIBNAME, kp_cuda_name(r), (int)r);
    return KP_SUCCESS;
}

/* The driver is opened once per process; a failure is remembered and reported again on every call. */
static kp_status kp_driver_ready(void) {
    int state = KP_LOAD(kp_driver_state);
    if (KP_UNLIKELY(state != 1)) {
        pthread_mutex_lock(&kp_lock);
        if (kp_driver_state == 0) KP_STORE(kp_driver_state, kp_driver_open() == KP_SUCCESS ? 1 : -1);
        state = kp_driver_state;
        pthread_mutex_unlock(&kp_lock);
        if (state != 1) return kp_fail(kp_driver_status, "%s", kp_driver_msg);
    }
    return KP_SUCCESS;
}

/* ------------------------------------------------------------------ arch selection */

/* How well binary b fits compute capability major.minor: 0 = cannot run; exact arch-specific SASS beats plain
 * SASS (higher minor first), which beats PTX (higher arch first). */
static int32_t kp_bin_quality(const kp_bin_info* b, int major, int minor) {
    int exact = b->major == major && b->minor == minor;
    if (b->is_ptx) {
        if (b->suffix == 'a') return exact ? 1000 + b->major * 10 + b->minor : 0;
        return b->major * 10 + b->minor <= major * 10 + minor ? 1000 + b->major * 10 + b->minor : 0;
    }
    if (b->suffix == 'a') return exact ? 3000 : 0;
    return b->major == major && b->minor <= minor ? 2000 + b->minor : 0;
}

static kp_status kp_device_create(const char* fn, kp_CUdevice dev, kp_device** out) {
    kp_device* d = (kp_device*)calloc(1, sizeof *d);
    if (d == NULL) return kp_fail(KP_ERROR_OUT_OF_MEMORY, "%s: out of memory for device %d state", fn, (int)dev);
    d->dev = dev;
    d->ordinal = (int)dev;
    kp_CUresult r = kp_cu.DeviceGetAttribute(&d->major, KP_CU_DEVICE_ATTRIBUTE_CC_MAJOR, dev);
    if (r == KP_CUDA_SUCCESS) r = kp_cu.DeviceGetAttribute(&d->minor, KP_CU_DEVICE_ATTRIBUTE_CC_MINOR, dev);
    if (r == KP_CUDA_SUCCESS) r = kp_cu.DeviceGetAttribute(&d->smem_optin, KP_CU_DEVICE_ATTRIBUTE_MAX_SMEM_OPTIN, dev);
    if (r != KP_CUDA_SUCCESS) {
        free(d);
        return kp_cuda_fail(r, fn, NULL, "cuDeviceGetAttribute");
    }
    for (uint32_t s = 0; s < KP_NSPEC; s++) {
        int32_t best = -1, best_q = 0;
        for (uint32_t i = kp_specs[s].first_bin; i < kp_specs[s].first_bin + kp_specs[s].nbin; i++) {
            int32_t q = kp_bin_quality(&kp_bins[i], d->major, d->minor);
            if (q > best_q) best = (int32_t)i, best_q = q;
        }
        d->sel[s] = best;
        d->quality[s] = best_q;
    }
    *out = d;
    return KP_SUCCESS;
}

/* The state of device dev, created on first use. */
static kp_status kp_device_get(const char* fn, kp_CUdevice dev, kp_device** out) {
    if (KP_UNLIKELY(dev < 0 || dev >= KP_MAX_DEVICES))
        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: device %d is out of range (this library handles devices "
                       "0..%d)", fn, (int)dev, KP_MAX_DEVICES - 1);
    kp_device* d = KP_LOAD(kp_devices[dev]);
    if (KP_UNLIKELY(d == NULL)) {
        kp_status s = KP_SUCCESS;
        pthread_mutex_lock(&kp_lock);
        d = kp_devices[dev];
        if (d == NULL) {
            s = kp_device_create(fn, dev, &d);
            if (s == KP_SUCCESS) KP_STORE(kp_devices[dev], d);
        }
        pthread_mutex_unlock(&kp_lock);
        if (s != KP_SUCCESS) return s;
    }
    *out = d;
    return KP_SUCCESS;
}

/* Bind a context to a thread that has none: the stream's context when a stream is given, else the primary
 * context of device 0 (what the CUDA runtime does). The context stays current on this thread. */
static kp_status kp_bind_context(const char* fn, void* stream, kp_CUdevice* dev) {
    kp_CUcontext ctx = NULL;
    kp_CUresult r;
    const char* call;
    if (stream != NULL) {
        call = "cuStreamGetCtx";
        r = kp_cu.StreamGetCtx((kp_CUstream)stream, &ctx);
    } else {
        call = "cuDevicePrimaryCtxRetain(device 0)";
        r = kp_cu.DevicePrimaryCtxRetain(&ctx, 0);
    }
    if (r == KP_CUDA_SUCCESS) call = "cuCtxSetCurrent", r = kp_cu.CtxSetCurrent(ctx);
    if (r == KP_CUDA_SUCCESS) call = "cuCtxGetDevice", r = kp_cu.CtxGetDevice(dev);
    if (r != KP_CUDA_SUCCESS) return kp_cuda_fail(r, fn, NULL, call);
    return KP_SUCCESS;
}

/* Every launching entry starts here: driver ready, the device of the current context, its state. */
static kp_status kp_enter(const char* fn, const kp_launch* l, kp_ctx* c) {
    c->fn = fn;
    if (KP_UNLIKELY(l == NULL)) return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: the launch argument is NULL", fn);
    kp_status s = kp_driver_ready();
    if (KP_UNLIKELY(s != KP_SUCCESS)) return s;
    kp_CUresult r = kp_cu.CtxGetDevice(&c->dev);
    if (KP_UNLIKELY(r != KP_CUDA_SUCCESS)) {
        if (r != KP_CUDA_ERROR_INVALID_CONTEXT) return kp_cuda_fail(r, fn, NULL, "cuCtxGetDevice");
        s = kp_bind_context(fn, l->stream, &c->dev);
        if (s != KP_SUCCESS) return s;
    }
    return kp_device_get(fn, c->dev, &c->d);
}

/* ------------------------------------------------------------------ loading */

static kp_status kp_load_library(const char* fn, const char* label, uint32_t blob) {
    const kp_blob_info* bl = &kp_blobs[blob];
    const unsigned char* image = kp_bundle + bl->offset;
    char* text = NULL;
    if (bl->is_ptx) { /* PTX must be NUL-terminated; the bundle stores it as is */
        text = (char*)malloc(bl->size + 1);
        if (text == NULL) return kp_fail(KP_ERROR_OUT_OF_MEMORY, "%s: kernel %s: out of memory for PTX", fn, label);
        memcpy(text, image, bl->size);
        text[bl->size] = 0;
        image = (const unsigned char*)text;
    }
    kp_CUlibrary lib = NULL;
    kp_CUresult r = kp_cu.LibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0);
    free(text);
    if (r != KP_CUDA_SUCCESS) return kp_cuda_fail(r, fn, label, "cuLibraryLoadData");
    KP_STORE(kp_libraries[blob], lib);
    return KP_SUCCESS;
}

/* The kernel handle of binary b, loading its library on first use (once, whatever the number of threads). */
static kp_status kp_kernel_get(const char* fn, uint32_t spec, uint32_t b, kp_CUkernel* out) {
    kp_CUkernel k = KP_LOAD(kp_kernels[b]);
    if (KP_UNLIKELY(k == NULL)) {
        kp_status s = KP_SUCCESS;
        pthread_mutex_lock(&kp_lock);
        k = kp_kernels[b];
        if (k == NULL) {
            if (kp_libraries[kp_bins[b].blob] == NULL) s = kp_load_library(fn, KP_STR(kp_specs[spec].label), kp_bins[b].blob);
            if (s == KP_SUCCESS) {
                kp_CUresult r = kp_cu.LibraryGetKernel(&k, kp_libraries[kp_bins[b].blob], KP_STR(kp_specs[spec].entry));
                if (r == KP_CUDA_SUCCESS) KP_STORE(kp_kernels[b], k);
                else s = kp_cuda_fail(r, fn, KP_STR(kp_specs[spec].label), "cuLibraryGetKernel");
            }
        }
        pthread_mutex_unlock(&kp_lock);
        if (s != KP_SUCCESS) return s;
    }
    *out = k;
    return KP_SUCCESS;
}

static kp_status kp_no_binary(const kp_ctx* c, uint32_t spec) {
    return kp_fail(KP_ERROR_NO_BINARY_FOR_ARCH, "%s: kernel %s has no binary for device %d (sm_%d%d): it carries %s",
                   c->fn, KP_STR(kp_specs[spec].label), c->d->ordinal, c->d->major, c->d->minor, KP_STR(kp_specs[spec].archs));
}

static kp_status kp_preload(int ordinal) {
    const char* fn = KP_LIBNAME "_preload";
    kp_status s = kp_driver_ready();
    if (s != KP_SUCCESS) return s;
    int count = 0;
    kp_CUresult r = kp_cu.DeviceGetCount(&count);
    if (r != KP_CUDA_SUCCESS) return kp_cuda_fail(r, fn, NULL, "cuDeviceGetCount");
    if (ordinal < -1 || ordinal >= count)
        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: device %d does not exist (%d device(s); -1 = all)", fn,
                       ordinal, count);
    for (int o = ordinal < 0 ? 0 : ordinal; o < (ordinal < 0 ? count : ordinal + 1); o++) {
        kp_CUdevice dev;
        kp_device* d;
        r = kp_cu.DeviceGet(&dev, o);
        if (r != KP_CUDA_SUCCESS) return kp_cuda_fail(r, fn, NULL, "cuDeviceGet");
        if ((s = kp_device_get(fn, dev, &d)) != KP_SUCCESS) return s;
        for (uint32_t spec = 0; spec < KP_NSPEC; spec++) {
            kp_CUkernel k;
            if (d->sel[spec] >= 0 && (s = kp_kernel_get(fn, spec, (uint32_t)d->sel[spec], &k)) != KP_SUCCESS)
                return s;
        }
    }
    return KP_SUCCESS;
}

/* ------------------------------------------------------------------ launch */

static int kp_dims_zero(const uint32_t v[3]) { return v[0] == 0 && v[1] == 0 && v[2] == 0; }
static void kp_dims_norm(const uint32_t in[3], uint32_t out[3]) {
    out[0] = in[0] ? in[0] : 1, out[1] = in[1] ? in[1] : 1, out[2] = in[2] ? in[2] : 1;
}
static int kp_dims_eq(const uint32_t a[3], const uint32_t b[3]) { return a[0] == b[0] && a[1] == b[1] && a[2] == b[2]; }

/* Block shape: the caller's, checked against what the kernel requires; or the kernel's fixed one. */
static kp_status kp_block(const kp_ctx* c, uint32_t spec, const kp_bin_info* bi, const kp_launch* l,
                          uint32_t block[3]) {
    const kp_spec_info* sp = &kp_specs[spec];
    const uint32_t* fixed = sp->block[0] ? sp->block : bi->reqntid[0] ? bi->reqntid : NULL;
    if (kp_dims_zero(l->block)) {
        if (fixed == NULL)
            return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.block is {0,0,0} and the kernel fixes no "
                           "block shape; set launch.block", c->fn, KP_STR(sp->label));
        block[0] = fixed[0], block[1] = fixed[1], block[2] = fixed[2];
        return KP_SUCCESS;
    }
    kp_dims_norm(l->block, block);
    if (bi->reqntid[0] && !kp_dims_eq(block, bi->reqntid))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s (sm_%d%d%s): launch.block {%u,%u,%u} differs from the "
                       "block the kernel requires (REQNTID) {%u,%u,%u}; pass {0,0,0} to use it", c->fn, KP_STR(sp->label),
                       bi->major, bi->minor, bi->suffix == 'a' ? "a" : "", block[0], block[1], block[2],
                       bi->reqntid[0], bi->reqntid[1], bi->reqntid[2]);
    if (sp->block[0] && !kp_dims_eq(block, sp->block))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.block {%u,%u,%u} differs from the kernel's "
                       "fixed block {%u,%u,%u}; pass {0,0,0} to use it", c->fn, KP_STR(sp->label), block[0], block[1],
                       block[2], sp->block[0], sp->block[1], sp->block[2]);
    uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
    if (bi->max_threads && threads > bi->max_threads)
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.block {%u,%u,%u} has %llu threads, the "
                       "kernel allows at most %u (__launch_bounds__)", c->fn, KP_STR(sp->label), block[0], block[1], block[2],
                       (unsigned long long)threads, (unsigned)bi->max_threads);
    return KP_SUCCESS;
}

/* Cluster shape to request (out all 0 = no cluster attribute): the cubin's explicit one is implied. */
static kp_status kp_cluster(const kp_ctx* c, uint32_t spec, const kp_bin_info* bi, const kp_launch* l,
                            const uint32_t grid[3], uint32_t out[3]) {
    const kp_spec_info* sp = &kp_specs[spec];
    uint32_t want[3] = {0, 0, 0}, check[3];
    if (!kp_dims_zero(l->cluster)) kp_dims_norm(l->cluster, want);
    uint32_t bin_cluster[3] = {bi->cluster[0], bi->cluster[1], bi->cluster[2]};
    const uint32_t* fixed = bi->cluster[0] ? bin_cluster : sp->cluster[0] ? sp->cluster : NULL;
    if (fixed != NULL && want[0] && !kp_dims_eq(want, fixed))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.cluster {%u,%u,%u} differs from the kernel's "
                       "%s cluster {%u,%u,%u}; pass {0,0,0} to use it", c->fn, KP_STR(sp->label), want[0], want[1], want[2],
                       bi->cluster[0] ? "compile-time" : "fixed", fixed[0], fixed[1], fixed[2]);
    if (fixed != NULL) memcpy(want, fixed, sizeof want);
    memset(out, 0, 3 * sizeof(uint32_t));
    if (want[0] == 0) return KP_SUCCESS;
    kp_dims_norm(want, check);
    if (grid[0] % check[0] || grid[1] % check[1] || grid[2] % check[2])
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.grid {%u,%u,%u} is not a multiple of the "
                       "cluster {%u,%u,%u}", c->fn, KP_STR(sp->label), grid[0], grid[1], grid[2], check[0], check[1],
                       check[2]);
    if (!bi->cluster[0]) memcpy(out, check, sizeof check); /* explicit clusters must not be requested again */
    return KP_SUCCESS;
}

/* Raise the dynamic shared memory limit of a kernel on a device above 48 KiB, once per new maximum. */
static kp_status kp_smem(const kp_ctx* c, uint32_t spec, const kp_bin_info* bi, kp_CUkernel k, uint32_t smem) {
    if (smem <= KP_SMEM_DEFAULT_LIMIT || smem <= KP_LOAD(c->d->smem_raised[spec])) return KP_SUCCESS;
    const char* label = KP_STR(kp_specs[spec].label);
    if ((uint64_t)smem + bi->static_smem > (uint64_t)c->d->smem_optin)
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.dynamic_smem %u + static %u bytes exceed the "
                       "%d bytes of shared memory per block device %d allows", c->fn, label, smem, bi->static_smem,
                       c->d->smem_optin, c->d->ordinal);
    kp_CUresult r = kp_cu.KernelSetAttribute(KP_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem, k, c->dev);
    if (r != KP_CUDA_SUCCESS) return kp_cuda_fail(r, c->fn, label, "cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE)");
    uint32_t old = KP_LOAD(c->d->smem_raised[spec]);
    while (old < smem && !__atomic_compare_exchange_n(&c->d->smem_raised[spec], &old, smem, 1, __ATOMIC_RELEASE,
                                                      __ATOMIC_ACQUIRE)) {
    }
    return KP_SUCCESS;
}

/* Launch specialization spec on the resolved device with its packed parameter pointers. */
static kp_status kp_run(const kp_ctx* c, uint32_t spec, const kp_launch* l, void** args) {
    int32_t b = c->d->sel[spec];
    if (KP_UNLIKELY(b < 0)) return kp_no_binary(c, spec);
    const kp_bin_info* bi = &kp_bins[b];
    const kp_spec_info* sp = &kp_specs[spec];
    kp_CUkernel k;
    kp_status s = kp_kernel_get(c->fn, spec, (uint32_t)b, &k);
    if (KP_UNLIKELY(s != KP_SUCCESS)) return s;
    uint32_t grid[3], block[3] = {0, 0, 0}, cluster[3] = {0, 0, 0};
    if (KP_UNLIKELY(l->grid[0] == 0))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.grid[0] is 0", c->fn, KP_STR(sp->label));
    kp_dims_norm(l->grid, grid);
    if (KP_UNLIKELY((s = kp_block(c, spec, bi, l, block)) != KP_SUCCESS)) return s;
    uint32_t smem = l->dynamic_smem ? l->dynamic_smem : sp->dyn_smem;
    if (KP_UNLIKELY(smem < sp->dyn_smem))
        return kp_fail(KP_ERROR_INVALID_LAUNCH, "%s: kernel %s: launch.dynamic_smem %u is less than the %u bytes the "
                       "kernel needs; pass 0 to use that", c->fn, KP_STR(sp->label), smem, sp->dyn_smem);
    if (KP_UNLIKELY((s = kp_smem(c, spec, bi, k, smem)) != KP_SUCCESS)) return s;
    kp_CUresult r;
    const char* call;
    if (KP_UNLIKELY(bi->cluster[0] || sp->cluster[0] || !kp_dims_zero(l->cluster))) {
        if ((s = kp_cluster(c, spec, bi, l, grid, cluster)) != KP_SUCCESS) return s;
    } else {
        cluster[0] = 0;
    }
    if (cluster[0] == 0) {
        call = "cuLaunchKernel";
        r = kp_cu.LaunchKernel((kp_CUfunction)k, grid[0], grid[1], grid[2], block[0], block[1], block[2], smem,
                               (kp_CUstream)l->stream, args, NULL);
    } else {
        kp_CUlaunchAttribute attr;
        kp_CUlaunchConfig cfg;
        memset(&attr, 0, sizeof attr);
        attr.id = KP_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr.value.clusterDim.x = cluster[0], attr.value.clusterDim.y = cluster[1], attr.value.clusterDim.z = cluster[2];
        cfg.gridDimX = grid[0], cfg.gridDimY = grid[1], cfg.gridDimZ = grid[2];
        cfg.blockDimX = block[0], cfg.blockDimY = block[1], cfg.blockDimZ = block[2];
        cfg.sharedMemBytes = smem;
        cfg.hStream = (kp_CUstream)l->stream;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        call = "cuLaunchKernelEx";
        r = kp_cu.LaunchKernelEx(&cfg, (kp_CUfunction)k, args, NULL);
    }
    if (KP_UNLIKELY(r != KP_CUDA_SUCCESS)) return kp_cuda_fail(r, c->fn, KP_STR(sp->label), call);
    return KP_SUCCESS;
}

/* ------------------------------------------------------------------ dispatch helpers */

static const char* const kp_dtype_names[] = {"any", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
                                             "f16", "bf16", "f32", "f64", "bool"};
static const char* kp_dtype_name(int dt) {
    return dt >= 0 && dt < (int)(sizeof kp_dtype_names / sizeof kp_dtype_names[0]) ? kp_dtype_names[dt] : "invalid";
}

static uint64_t kp_align_of(const void* p) {
    uintptr_t a = (uintptr_t)p;
    return a == 0 ? 256 : (uint64_t)(a & (~a + 1)) > 256 ? 256 : (uint64_t)(a & (~a + 1));
}

/* Does tensor t fit a specialization's tensor spec: dtype, rank, static modes, alignment, index ranges? */
static int kp_tensor_fits(const kp_tensor* t, int dtype, int rank, const int64_t* shape, const int64_t* stride,
                          uint64_t align, int64_t shape_min, int64_t shape_max, int64_t stride_min,
                          int64_t stride_max) {
    if ((int)t->dtype != dtype || t->rank != rank || (uintptr_t)t->data % align) return 0;
    for (int i = 0; i < rank; i++) {
        if (shape[i] == KP_DYN ? t->shape[i] < shape_min || t->shape[i] > shape_max : t->shape[i] != shape[i])
            return 0;
        if (stride[i] == KP_DYN ? t->stride[i] < stride_min || t->stride[i] > stride_max : t->stride[i] != stride[i])
            return 0;
    }
    return 1;
}

/* A bounded string builder for dispatch messages. */
typedef struct kp_sb {
    char* buf;
    size_t cap, len;
} kp_sb;

static void kp_sb_add(kp_sb* sb, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void kp_sb_add(kp_sb* sb, const char* fmt, ...) {
    if (sb->len + 1 >= sb->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(sb->buf + sb->len, sb->cap - sb->len, fmt, ap);
    va_end(ap);
    if (n > 0) sb->len = sb->len + (size_t)n < sb->cap ? sb->len + (size_t)n : sb->cap - 1;
}

static void kp_describe_ptr(kp_sb* sb, const char* name, const void* p, int dtype) {
    kp_sb_add(sb, "%s: %s%s%p (%llu-byte aligned)", name, dtype >= 0 ? kp_dtype_name(dtype) : "",
              dtype >= 0 ? " pointer " : "pointer ", p, (unsigned long long)kp_align_of(p));
}

static void kp_describe_int(kp_sb* sb, const char* name, long long v) {
    long long d = 1;
    while (d < 256 && v != 0 && v % (d * 2) == 0) d *= 2;
    kp_sb_add(sb, "%s = %lld (divisible by %lld)", name, v, v == 0 ? 256LL : d);
}

static void kp_describe_tensor(kp_sb* sb, const char* name, const kp_tensor* t) {
    if (t == NULL) {
        kp_sb_add(sb, "%s: NULL", name);
        return;
    }
    kp_sb_add(sb, "%s: %s tensor rank %d shape [", name, kp_dtype_name(t->dtype), t->rank);
    for (int i = 0; i < t->rank && i < KP_MAX_RANK; i++) kp_sb_add(sb, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    kp_sb_add(sb, "] stride [");
    for (int i = 0; i < t->rank && i < KP_MAX_RANK; i++) kp_sb_add(sb, i ? ", %lld" : "%lld", (long long)t->stride[i]);
    kp_sb_add(sb, "] data %p (%llu-byte aligned)", t->data, (unsigned long long)kp_align_of(t->data));
}

/* The end of a failed dispatch: no specialization fits (or one fits but carries no binary for the device). */
static kp_status kp_no_match(const kp_ctx* c, kp_sb* sb, int constraint_match, const char* carried) {
    kp_sb_add(sb, ") on device %d (sm_%d%d); specializations: %s", c->d->ordinal, c->d->major, c->d->minor, carried);
    return kp_fail(constraint_match ? KP_ERROR_NO_BINARY_FOR_ARCH : KP_ERROR_NO_MATCHING_SPECIALIZATION, "%s",
                   sb->buf);
}
