/* kernelpack C runtime, part 2: driver loading, per-device lazy loading, thread-local errors, the launch path.
 *
 * Pasted into every generated translation unit after the generated tables (kp_specs, KP_NSPEC, KP_NBIN, KP_LIBNAME)
 * and the declarations of the data object's (kp_bins, kp_blobs, kp_bundle). All functions are static.
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
    /* optional: only kernels that need them fail without them */
    kp_CUresult (*MemAllocAsync)(kp_CUdeviceptr*, size_t, kp_CUstream);
    kp_CUresult (*MemFreeAsync)(kp_CUdeviceptr, kp_CUstream);
    kp_CUresult (*MemcpyHtoDAsync)(kp_CUdeviceptr, const void*, size_t, kp_CUstream);
    kp_CUresult (*TensorMapEncodeTiled)(void*, int, unsigned int, void*, const uint64_t*, const uint64_t*,
                                        const unsigned int*, const unsigned int*, int, int, int, int);
    kp_CUresult (*OccupancyMaxActiveClusters)(int*, kp_CUfunction, const kp_CUlaunchConfig*);
    kp_CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int*, kp_CUfunction, int, size_t);
} kp_driver;


/* Per-device state: the binary chosen for each specialization, the dynamic smem already allowed, the device
 * properties a launch reads (kernelpack.launch.device). */
typedef struct kp_device {
    kp_CUdevice dev;
    int ordinal, major, minor, smem_optin, sm_count;
    int cluster_ok; /* CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: thread block clusters can be launched */
    int coop_ok;    /* CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: cooperative launches are possible */
    int32_t sel[KP_NSPEC];    /* binary index, -1 = none for this arch or a device requirement unmet */
    int32_t quality[KP_NSPEC]; /* how well the specialization fits (0 = not at all): launch/device.py */
    uint32_t smem_raised[KP_NSPEC];
    int32_t mac[KP_NSPEC]; /* its max_active_clusters value, once asked for (0 = not yet) */
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
static int kp_driver_version; /* cuDriverGetVersion */
static int kp_one_device;     /* exactly one device (kp_dev0): launches skip the context query */
static kp_CUdevice kp_dev0;   /* the device of ordinal 0 */
static char kp_driver_msg[512];
static kp_device* kp_devices[KP_MAX_DEVICES];
static kp_CUlibrary kp_libraries[KP_NBIN]; /* by blob; blobs <= binaries (a blob is a deduplicated binary) */
static kp_CUkernel kp_kernels[KP_NBIN];

#define KP_LOAD(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#define KP_STORE(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)
#define KP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define KP_LIKELY(x) __builtin_expect(!!(x), 1)
#define KP_UNUSED __attribute__((unused)) /* helpers only some libraries call */

/* ------------------------------------------------------------------ errors */

static const char* kp_cuda_name(kp_CUresult r) {
    const char* name = NULL;
    if (kp_cu.GetErrorName == NULL || kp_cu.GetErrorName(r, &name) != KP_CUDA_SUCCESS || name == NULL)
        return "CUDA_ERROR_UNKNOWN";
    return name;
}

static kp_status kp_cuda_fail(kp_CUresult r, const char* fn, const char* label, const char* call) {
    return kp_fail_cuda(KP_ERROR_CUDA, (int)r, "%s: %s%s%s%s failed with %s (%d)", fn, label ? "kernel " : "",
                        label ? label : "", label ? ": " : "", call, kp_cuda_name(r), (int)r);
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
    static const kp_driver_sym syms[] = {
        KP_DRIVER_SYM(kp_driver, Init, 1), KP_DRIVER_SYM(kp_driver, DriverGetVersion, 1),
        KP_DRIVER_SYM(kp_driver, GetErrorName, 1), KP_DRIVER_SYM(kp_driver, DeviceGet, 1),
        KP_DRIVER_SYM(kp_driver, DeviceGetCount, 1), KP_DRIVER_SYM(kp_driver, DeviceGetAttribute, 1),
        KP_DRIVER_SYM(kp_driver, CtxGetDevice, 1), KP_DRIVER_SYM(kp_driver, CtxSetCurrent, 1),
        KP_DRIVER_SYM(kp_driver, DevicePrimaryCtxRetain, 1), KP_DRIVER_SYM(kp_driver, StreamGetCtx, 1),
        KP_DRIVER_SYM(kp_driver, LibraryLoadData, 1), KP_DRIVER_SYM(kp_driver, LibraryGetKernel, 1),
        KP_DRIVER_SYM(kp_driver, KernelSetAttribute, 1), KP_DRIVER_SYM(kp_driver, LaunchKernel, 1),
        KP_DRIVER_SYM(kp_driver, LaunchKernelEx, 1), KP_DRIVER_SYM(kp_driver, MemAllocAsync, 0),
        KP_DRIVER_SYM(kp_driver, MemFreeAsync, 0), KP_DRIVER_SYM(kp_driver, MemcpyHtoDAsync, 0),
        KP_DRIVER_SYM(kp_driver, TensorMapEncodeTiled, 0),
        KP_DRIVER_SYM(kp_driver, OccupancyMaxActiveClusters, 0),
        KP_DRIVER_SYM(kp_driver, OccupancyMaxActiveBlocksPerMultiprocessor, 0),
    };
    char why[384];
    int v = 0;
    int got = kp_driver_resolve(syms, sizeof syms / sizeof syms[0], &kp_cu, &v, why, sizeof why);
    if (got != KP_DRIVER_READY)
        return kp_driver_fail(got == KP_DRIVER_MISSING ? KP_ERROR_NO_DRIVER : KP_ERROR_DRIVER_TOO_OLD, "%s: %s",
                              KP_LIBNAME, why);
    kp_CUresult r = kp_cu.Init(0);
    if (r == KP_CUDA_ERROR_NO_DEVICE)
        return kp_driver_fail(KP_ERROR_NO_DEVICE, "%s: cuInit found no CUDA device (CUDA_ERROR_NO_DEVICE)",
                              KP_LIBNAME);
    if (r != KP_CUDA_SUCCESS)
        return kp_driver_fail(KP_ERROR_CUDA, "%s: cuInit failed with %s (%d)", KP_LIBNAME, kp_cuda_name(r), (int)r);
    kp_driver_version = v;
    int count = 0;
    if ((r = kp_cu.DeviceGetCount(&count)) != KP_CUDA_SUCCESS || (r = kp_cu.DeviceGet(&kp_dev0, 0)) != KP_CUDA_SUCCESS)
        return kp_driver_fail(KP_ERROR_CUDA, "%s: listing devices failed with %s (%d)", KP_LIBNAME, kp_cuda_name(r),
                              (int)r);
    kp_one_device = count == 1 && kp_dev0 >= 0 && kp_dev0 < KP_MAX_DEVICES;
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

/* How well binary b fits compute capability major.minor (0 = cannot run): the launch model's rule (kp_model.h). */
static int32_t kp_bin_quality(const kp_bin_info* b, int major, int minor) {
    return kp_bin_rule_quality(b->is_ptx, b->major, b->minor, b->suffix, major, minor);
}

/* A device-wide property of d (KP_DP_*) a requirement or a device-derived parameter reads. */
static KP_UNUSED int64_t kp_device_prop(const kp_device* d, uint32_t prop) {
    return prop == KP_DP_SM_COUNT ? d->sm_count : prop == KP_DP_MAX_DYNAMIC_SMEM ? d->smem_optin : -1;
}

/* The index of the first device requirement of spec that d breaks; -1 when d meets them all. */
static int64_t kp_unmet(const kp_device* d, uint32_t spec) {
#if KP_NREQ
    for (uint32_t i = kp_specs[spec].first_req; i < kp_specs[spec].first_req + kp_specs[spec].nreq; i++)
        if (kp_device_prop(d, kp_requires[i].prop) != kp_requires[i].value) return (int64_t)i;
#else
    (void)d, (void)spec;
#endif
    return -1;
}

static kp_status kp_device_create(const char* fn, kp_CUdevice dev, kp_device** out) {
    kp_device* d = (kp_device*)calloc(1, sizeof *d);
    if (d == NULL) return kp_fail(KP_ERROR_OUT_OF_MEMORY, "%s: out of memory for device %d state", fn, (int)dev);
    d->dev = dev;
    d->ordinal = (int)dev;
    kp_CUresult r = kp_cu.DeviceGetAttribute(&d->major, KP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    if (r == KP_CUDA_SUCCESS) r = kp_cu.DeviceGetAttribute(&d->minor, KP_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    if (r == KP_CUDA_SUCCESS) r = kp_cu.DeviceGetAttribute(&d->smem_optin, KP_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev);
    if (r == KP_CUDA_SUCCESS) r = kp_cu.DeviceGetAttribute(&d->cluster_ok, KP_CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, dev);
    if (r == KP_CUDA_SUCCESS) r = kp_cu.DeviceGetAttribute(&d->sm_count, KP_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    if (r == KP_CUDA_SUCCESS) r = kp_cu.DeviceGetAttribute(&d->coop_ok, KP_CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, dev);
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
        if (best >= 0 && kp_unmet(d, s) >= 0) best = -1, best_q = 0; /* kp_no_binary says which requirement */
        d->sel[s] = best;
        d->quality[s] = best < 0 ? 0 : best_q + KP_REQUIRES_BONUS * (int32_t)kp_specs[s].nreq;
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

/* Every launching entry starts here: driver ready, the device of the current context, its state.
 *
 * With one device in the process every context is on it, so the device needs no driver call; a thread without
 * a current context is then noticed by the launch itself (CUDA_ERROR_INVALID_CONTEXT), which binds one and retries
 * (kp_rebind). With several devices the current context's device is asked for on every launch. */
static kp_status kp_enter(const char* fn, const kp_launch* l, kp_ctx* c) {
    c->fn = fn;
    if (KP_UNLIKELY(l == NULL)) return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: the launch argument is NULL", fn);
    kp_status s = kp_driver_ready();
    if (KP_UNLIKELY(s != KP_SUCCESS)) return s;
    if (KP_LIKELY(kp_one_device)) {
        c->dev = kp_dev0;
        c->d = KP_LOAD(kp_devices[kp_dev0]);
        return KP_LIKELY(c->d != NULL) ? KP_SUCCESS : kp_device_get(fn, kp_dev0, &c->d);
    }
    kp_CUresult r = kp_cu.CtxGetDevice(&c->dev);
    if (KP_UNLIKELY(r != KP_CUDA_SUCCESS)) {
        if (r != KP_CUDA_ERROR_INVALID_CONTEXT) return kp_cuda_fail(r, fn, NULL, "cuCtxGetDevice");
        s = kp_bind_context(fn, l->stream, &c->dev);
        if (s != KP_SUCCESS) return s;
    }
    return kp_device_get(fn, c->dev, &c->d);
}

/* A driver call failed with r: when it is CUDA_ERROR_INVALID_CONTEXT on the one-device path (kp_enter asked for
 * no context), bind one to this thread. 1: bound, retry once; 0: not that case; -1: binding failed (*s says why). */
static int kp_rebind(const kp_ctx* c, const kp_launch* l, kp_CUresult r, kp_status* s) {
    kp_CUdevice dev;
    if (r != KP_CUDA_ERROR_INVALID_CONTEXT || !kp_one_device) return 0;
    *s = kp_bind_context(c->fn, l->stream, &dev);
    return *s == KP_SUCCESS ? 1 : -1;
}

/* ------------------------------------------------------------------ loading */

/* The PTX ISA version of a PTX image (".version 9.5") into out, "?" without one; reads at most its first 4 KiB. */
static void kp_ptx_isa(const char* ptx, char* out, size_t size) {
    snprintf(out, size, "?");
    for (size_t i = 0; i < 4096 && ptx[i] != 0; i++) {
        if (strncmp(ptx + i, ".version", 8) == 0 && (ptx[i + 8] == ' ' || ptx[i + 8] == '\t')) {
            size_t j = i + 8, n = 0;
            while (ptx[j] == ' ' || ptx[j] == '\t') j++;
            while (n + 1 < size && ((ptx[j + n] >= '0' && ptx[j + n] <= '9') || ptx[j + n] == '.')) n++;
            if (n > 0) memcpy(out, ptx + j, n), out[n] = 0;
            return;
        }
    }
}

static kp_status kp_load_library(const char* fn, const char* label, uint32_t blob) {
    const kp_blob_info* bl = &kp_blobs[blob];
    if ((uint64_t)bl->offset + bl->size > KP_BUNDLE_SIZE) /* the generator checked it (clib/dataobj.py): never read past */
        return kp_fail(KP_ERROR_CORRUPT_LIBRARY, "%s: kernel %s: its binary (blob %u, bytes %u..%llu) lies past the "
                       "embedded bundle's %llu bytes: the library is damaged", fn, label, (unsigned)blob,
                       (unsigned)bl->offset, (unsigned long long)bl->offset + bl->size,
                       (unsigned long long)KP_BUNDLE_SIZE);
    const unsigned char* image = kp_bundle + bl->offset;
    unsigned char* copy = NULL;
    if (bl->raw_size != 0 || bl->is_ptx) { /* a zlib stream to expand, or PTX to NUL-terminate */
        size_t n = bl->raw_size != 0 ? bl->raw_size : bl->size;
        copy = (unsigned char*)malloc(n + 1);
        if (copy == NULL)
            return kp_fail(KP_ERROR_OUT_OF_MEMORY, "%s: kernel %s: out of memory for its %zu-byte binary", fn, label, n);
        if (bl->raw_size == 0) {
            memcpy(copy, image, n);
        } else if (kp_inflate(image, bl->size, copy, n) != 0) {
            free(copy);
            return kp_fail(KP_ERROR_CORRUPT_LIBRARY, "%s: kernel %s: its compressed binary (blob %u) does not expand to %zu "
                           "bytes: the library is damaged", fn, label, (unsigned)blob, n);
        }
        copy[n] = 0;
        image = copy;
    }
    kp_CUlibrary lib = NULL; /* the driver copies the image: ours can go right after */
    kp_CUresult r = kp_cu.LibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0);
    if (r == KP_CUDA_ERROR_UNSUPPORTED_PTX_VERSION && bl->is_ptx) {
        char isa[16];
        kp_ptx_isa((const char*)image, isa, sizeof isa);
        free(copy);
        return kp_fail_cuda(KP_ERROR_CUDA, (int)r, "%s: kernel %s: cuLibraryLoadData failed with "
                            "CUDA_ERROR_UNSUPPORTED_PTX_VERSION (%d): the driver (CUDA %d.%d) cannot JIT-compile PTX "
                            "ISA %s, which a newer toolkit wrote: update the driver, or build the PTX with a toolkit no "
                            "newer than the driver (e.g. compiler='nvcc' of that CUDA version), or ship SASS for this "
                            "GPU", fn, label, (int)r, kp_driver_version / 1000, kp_driver_version % 1000 / 10, isa);
    }
    free(copy);
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
#if KP_NREQ
    int runs = 0;
    for (uint32_t i = kp_specs[spec].first_bin; i < kp_specs[spec].first_bin + kp_specs[spec].nbin; i++)
        runs |= kp_bin_quality(&kp_bins[i], c->d->major, c->d->minor) > 0;
    int64_t u = kp_unmet(c->d, spec);
    if (runs && u >= 0)
        return kp_fail(KP_ERROR_NO_BINARY_FOR_ARCH, "%s: kernel %s is built for devices with %s; device %d (sm_%d%d) "
                       "does not fit: its %s is %lld", c->fn, KP_STR(kp_specs[spec].label),
                       KP_STR(kp_specs[spec].requires), c->d->ordinal, c->d->major, c->d->minor,
                       KP_STR(kp_requires[u].name), (long long)kp_device_prop(c->d, kp_requires[u].prop));
#endif
    return kp_fail(KP_ERROR_NO_BINARY_FOR_ARCH, "%s: kernel %s has no binary for device %d (sm_%d%d): it carries %s",
                   c->fn, KP_STR(kp_specs[spec].label), c->d->ordinal, c->d->major, c->d->minor, KP_STR(kp_specs[spec].archs));
}

/* The binary spec runs on a device of compute capability major.minor (the launch model's rule, as kp_device_create
 * applies it): its index, -1 when none fits. */
static int64_t kp_binary_of(uint32_t spec, int major, int minor) {
    int64_t best = -1;
    int32_t best_q = 0;
    for (uint32_t i = kp_specs[spec].first_bin; i < kp_specs[spec].first_bin + kp_specs[spec].nbin; i++) {
        int32_t q = kp_bin_quality(&kp_bins[i], major, minor);
        if (q > best_q) best = (int64_t)i, best_q = q;
    }
    return best;
}

/* "sm_90a" or "compute_80 PTX" for binary b (launch/binaries.py binary_name); "no binary" for -1. */
static void kp_binary_text(int64_t b, char* out, size_t size) {
    if (b < 0) {
        snprintf(out, size, "no binary");
        return;
    }
    const kp_bin_info* bi = &kp_bins[b];
    char suffix[2] = {bi->suffix, 0};
    snprintf(out, size, "%s_%d%d%s%s", bi->is_ptx ? "compute" : "sm", (int)bi->major, (int)bi->minor, suffix,
             bi->is_ptx ? " PTX" : "");
}

/* Does spec answer to kernel: its label, or the family name before its "[variant]". */
static int kp_names_spec(uint32_t spec, const char* kernel, int family) {
    const char* label = KP_STR(kp_specs[spec].label);
    size_t len = strlen(kernel);
    return family ? strncmp(label, kernel, len) == 0 && label[len] == '[' : strcmp(label, kernel) == 0;
}

/* NAME_binary_for_device: which binary kernel (a specialization's label "scale[f32]", or a family's name when all its
 * specializations get the same binary) runs on a device of compute capability major.minor; no driver needed, so it
 * answers for devices that are not here. The rule of kernelpack.launch.binaries.family_choice. */
static kp_status kp_binary_for_device(const char* kernel, int major, int minor, char* buf, size_t size) {
    const char* fn = KP_LIBNAME "_binary_for_device";
    if (kernel == NULL || buf == NULL || size == 0)
        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: kernel, buf and size must be given (got %s, %s, %zu)", fn,
                       kernel ? "a name" : "NULL", buf ? "a buffer" : "NULL", size);
    buf[0] = 0;
    if (major < 1 || major > 99 || minor < 0 || minor > 9)
        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: kernel %s: %d.%d is not a compute capability (e.g. 9.0, 12.0)",
                       fn, kernel, major, minor);
    int64_t first = -1, answer = -1;
    uint32_t nspec = 0;
    int same = 1;
    for (uint32_t s = 0; s < KP_NSPEC && nspec == 0; s++)
        if (kp_names_spec(s, kernel, 0)) first = s, nspec = 1, answer = kp_binary_of(s, major, minor);
    for (uint32_t s = 0; s < KP_NSPEC && first < 0; s++) { /* no such label: a family's name */
        if (!kp_names_spec(s, kernel, 1)) continue;
        int64_t b = kp_binary_of(s, major, minor);
        char t1[32], t2[32];
        kp_binary_text(b, t1, sizeof t1);
        kp_binary_text(answer, t2, sizeof t2);
        if (nspec++ == 0) answer = b;
        else if (strcmp(t1, t2) != 0) same = 0;
    }
    if (first < 0 && nspec > 0) /* the family's first specialization, for the NO_BINARY message */
        for (uint32_t s = 0; s < KP_NSPEC && first < 0; s++)
            if (kp_names_spec(s, kernel, 1)) first = s;
    if (nspec == 0) return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: no kernel %s in this library", fn, kernel);
    if (!same) {
        char list[512];
        size_t n = 0;
        list[0] = 0;
        for (uint32_t s = 0; s < KP_NSPEC && n < sizeof list; s++) {
            if (!kp_names_spec(s, kernel, 1)) continue;
            char t[32];
            kp_binary_text(kp_binary_of(s, major, minor), t, sizeof t);
            int w = snprintf(list + n, sizeof list - n, "%s%s: %s", n ? ", " : "", KP_STR(kp_specs[s].label), t);
            if (w < 0) break;
            n += (size_t)w;
        }
        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: kernel %s: its specializations get different binaries on "
                       "sm_%d%d (%s); name one", fn, kernel, major, minor, list);
    }
    if (answer < 0)
        return kp_fail(KP_ERROR_NO_BINARY_FOR_ARCH, "%s: kernel %s has no binary for sm_%d%d: it carries %s", fn,
                       KP_STR(kp_specs[first].label), major, minor, KP_STR(kp_specs[first].archs));
    char text[32];
    kp_binary_text(answer, text, sizeof text);
    if (strlen(text) >= size)
        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "%s: kernel %s: a buffer of %zu bytes cannot hold \"%s\" and its "
                       "NUL", fn, kernel, size, text);
    memcpy(buf, text, strlen(text) + 1);
    return KP_SUCCESS;
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
