/* The fake CUDA driver of the GPU-less tests: one source for the generated C library and the Python runtime.
 *
 * Built once per session (tests/fake_cuda.py) as two files of the same code: libcuda.so.1 (soname libcuda.so.1),
 * which C programs find through LD_LIBRARY_PATH, and libkpfakecuda.so (its own soname, so a real libcuda.so.1
 * opened later in the same process is never shadowed), which the Python runtime loads in-process through
 * kernelpack.runtime.driver.use_library(). Entry points are reached only through cuGetProcAddress_v2, as both back
 * ends reach them.
 *
 * Configuration, the same keys both ways: from the environment (FAKECUDA_<KEY>, read at the first call and again
 * by fk_reset), or in-process with fk_set("<KEY>", value) after fk_reset():
 *   CC       compute capability per device, comma-separated ("9.0", "8.0,9.0"); "none" = no device (default 9.0)
 *   SMS      SM count per device, comma-separated ("132", "132,108"); devices not named have 132 (default)
 *   VERSION  driver version cuDriverGetVersion reports (default 13000); PTX of a newer ISA than that version's
 *            (13.0: 9.0) fails to load with CUDA_ERROR_UNSUPPORTED_PTX_VERSION, as the real driver's JIT does
 *   CURRENT  device whose primary context is current on every thread from the start (default: none)
 *   FAIL     "cuName:code": that entry point returns code
 *   MISSING  an entry point cuGetProcAddress_v2 does not find
 *   LOAD_US  microseconds cuLibraryLoadData sleeps (widens first-launch races)
 *   PARAM_BASE  added to the offsets cuKernelGetParamInfo reports (the H200's driver starts a kernel taking a
 *            CUtensorMap at 48)
 *   LOG      file to append one line per call to (none = no log)
 *
 * Records, in memory (fk_* below) and, when LOG is set, as log lines: every launch attempt (kernel, grid, block,
 * shared memory, stream, device of the current context, launch attributes, result, and the parameter bytes laid
 * out at the offsets of the loaded cubin's KPARAM_INFO records, exactly where the real driver puts them; padding
 * is zero), every stream-ordered allocation, every tensor-map encode, and a count of calls per entry point.
 *
 * Driver rules, one implementation each (the measured ones are in DESIGN.md): nothing but cuDriverGetVersion,
 * cuGetErrorName/String and cuGetProcAddress_v2 before a successful cuInit (CUDA_ERROR_NOT_INITIALIZED); cuInit
 * fails with CUDA_ERROR_NO_DEVICE when there is none; a bad ordinal is CUDA_ERROR_INVALID_DEVICE; a launch needs
 * a current context, a block of exactly REQNTID when the cubin has one, a grid that is a multiple of a compile-time
 * (explicit) cluster and no other cluster shape (error 912), block and grid within the device limits, and an
 * opt-in (cuKernelSetAttribute 8) for more than 48 KiB of dynamic shared memory; otherwise CUDA_ERROR_INVALID_VALUE.
 * cuOccupancyMaxActiveClusters holds a configuration to the same rules (a cluster attribute is required) and answers
 * SMs / blocks per cluster: one block per SM, every SM usable. cuOccupancyMaxActiveBlocksPerMultiprocessor answers
 * what an SM of 2048 threads, 32 blocks and (sm_90+) 233472 / 167936 bytes of shared memory holds; a cooperative
 * launch (attribute 2) of more blocks than that x SMs fails with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, and a
 * programmatic-serialization launch (attribute 6) below compute capability 9.0 with CUDA_ERROR_NOT_SUPPORTED.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
enum {
    OK = 0,
    INVALID_VALUE = 1,
    NOT_INITIALIZED = 3,
    NO_DEVICE = 100,
    INVALID_DEVICE = 101,
    INVALID_CONTEXT = 201,
    INVALID_HANDLE = 400,
    UNSUPPORTED_PTX_VERSION = 222,
    NOT_FOUND = 500,
    COOPERATIVE_LAUNCH_TOO_LARGE = 720,
    NOT_SUPPORTED = 801,
    CLUSTER_SIZE_INVALID = 912,
};
#define EXPORT __attribute__((visibility("default")))

#define MAX_DEV 8
#define MAX_PARAMS 256
#define PARAM_BYTES 4096
#define MAX_ATTRS 8
#define MAX_LAUNCHES 4096
#define MAX_ALLOCS 4096
#define MAX_ENCODES 256
#define MAX_COPIES 256
#define COPY_BYTES 4096
#define MAX_ENTRIES 40
#define DEFAULT_SMEM 49152

/* ------------------------------------------------------------------ records (the layouts tests/fake_cuda.py reads) */

typedef struct {
    uint32_t id, value[3]; /* a cluster attribute (id 4) holds x, y, z; any other attribute its first 12 bytes */
} fk_attr;

typedef struct {
    char kernel[256];
    uint32_t grid[3], block[3], smem;
    uint64_t stream;
    int32_t device, ex, result;
    uint32_t nattrs;
    fk_attr attrs[MAX_ATTRS];
    uint32_t nbytes;
    unsigned char params[PARAM_BYTES];
} fk_launch;

typedef struct {
    uint64_t ptr, size, stream;
    int32_t device, freed;
    uint64_t free_stream;
} fk_alloc;

typedef struct {
    uint64_t dst, size, stream;
    int32_t result;
    uint32_t nbytes; /* the first COPY_BYTES bytes copied */
    unsigned char data[COPY_BYTES];
} fk_copy;

typedef struct {
    int32_t dtype;
    uint32_t rank;
    uint64_t addr, dims[5], strides[5];
    uint32_t box[5], estrides[5];
    int32_t interleave, swizzle, l2, oob;
} fk_encode;

/* ------------------------------------------------------------------ state */

typedef struct {
    int ndev, cc[MAX_DEV][2], sms[MAX_DEV], version, current, fail_code, load_us, param_base;
    char fail[64], missing[64], log[4096];
} fk_config;

typedef struct fk_kernel {
    struct fk_kernel* next;
    char name[256];
    int nparams; /* -1: unknown (PTX) */
    uint32_t offset[MAX_PARAMS], size[MAX_PARAMS];
    uint32_t reqntid[3], cluster[3];
    int explicit_cluster;
    int max_dyn_smem[MAX_DEV];
} fk_kernel;

typedef struct fk_library {
    struct fk_library* next;
    int id, is_ptx;
    unsigned char* image;
    size_t size;
    fk_kernel* kernels;
} fk_library;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static fk_config cfg;
static int initialized, generation = 1, ctx_objs[MAX_DEV];
static fk_library* libraries; /* never freed: the caller may hold handles across fk_reset */
static int nlibs;
static uint64_t alloc_seq;
static fk_launch launches[MAX_LAUNCHES];
static fk_alloc allocs[MAX_ALLOCS];
static fk_encode encodes[MAX_ENCODES];
static fk_copy copies[MAX_COPIES];
static int nlaunches, nallocs, nencodes, ncopies;
static struct {
    const char* name;
    int count;
} counts[MAX_ENTRIES];
static __thread int t_current = -1, t_generation;

static int set_devices(const char* s) {
    int n = 0;
    if (strcmp(s, "none") != 0) {
        while (*s) {
            int ma = 0, mi = 0, used = 0;
            if (n == MAX_DEV || sscanf(s, "%d.%d%n", &ma, &mi, &used) < 2) return -1;
            cfg.cc[n][0] = ma, cfg.cc[n][1] = mi, n++;
            s += used;
            if (*s == ',') s++;
        }
    }
    cfg.ndev = n;
    return 0;
}

static int set_sms(const char* s) {
    for (int i = 0; i < MAX_DEV; i++) cfg.sms[i] = 132;
    for (int n = 0; *s; n++) {
        int v = 0, used = 0;
        if (n == MAX_DEV || sscanf(s, "%d%n", &v, &used) < 1 || v < 1) return -1;
        cfg.sms[n] = v;
        s += used;
        if (*s == ',') s++;
    }
    return 0;
}

static int configure(const char* key, const char* value) {
    if (!strcmp(key, "CC")) return set_devices(*value ? value : "9.0");
    if (!strcmp(key, "SMS")) return set_sms(value);
    if (!strcmp(key, "VERSION")) cfg.version = *value ? atoi(value) : 13000;
    else if (!strcmp(key, "CURRENT")) cfg.current = *value ? atoi(value) : -1;
    else if (!strcmp(key, "LOAD_US")) cfg.load_us = atoi(value);
    else if (!strcmp(key, "PARAM_BASE")) cfg.param_base = atoi(value);
    else if (!strcmp(key, "MISSING")) snprintf(cfg.missing, sizeof cfg.missing, "%s", value);
    else if (!strcmp(key, "LOG")) snprintf(cfg.log, sizeof cfg.log, "%s", value);
    else if (!strcmp(key, "FAIL")) {
        const char* colon = strchr(value, ':');
        if (*value && colon == NULL) return -1;
        snprintf(cfg.fail, sizeof cfg.fail, "%.*s", colon ? (int)(colon - value) : 0, value);
        cfg.fail_code = colon ? atoi(colon + 1) : 0;
    } else return -1;
    return 0;
}

static const char* const KEYS[] = {"CC", "SMS", "VERSION", "CURRENT", "LOAD_US", "MISSING", "LOG", "FAIL",
                                   "PARAM_BASE"};

static void defaults_then_env(void) {
    memset(&cfg, 0, sizeof cfg);
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "FAKECUDA_%s", KEYS[i]);
        const char* v = getenv(name);
        configure(KEYS[i], v ? v : "");
    }
}

static void start(void) { defaults_then_env(); }
static void ready(void) { pthread_once(&once, start); }

static int cur(void) { /* the device of this thread's current context, -1 for none */
    if (t_generation != __atomic_load_n(&generation, __ATOMIC_ACQUIRE)) {
        t_generation = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
        t_current = cfg.current >= 0 && cfg.current < cfg.ndev ? cfg.current : -1;
    }
    return t_current;
}

static void logf_(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char* fmt, ...) {
    if (!cfg.log[0]) return;
    pthread_mutex_lock(&lock);
    FILE* f = fopen(cfg.log, "a");
    if (f != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vfprintf(f, fmt, ap);
        va_end(ap);
        fputc('\n', f);
        fclose(f);
    }
    pthread_mutex_unlock(&lock);
}

/* Counts the call and returns the injected result for it (OK when none). */
static CUresult enter(const char* fn) {
    ready();
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ENTRIES; i++) {
        if (counts[i].name == NULL) counts[i].name = fn;
        if (counts[i].name == fn || !strcmp(counts[i].name, fn)) {
            counts[i].count++;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return cfg.fail[0] && !strcmp(cfg.fail, fn) ? cfg.fail_code : OK;
}
#define ENTER(fn)                                      \
    do {                                               \
        CUresult r_ = enter(fn);                       \
        if (r_ != OK) {                                \
            logf_("%s -> %d (injected)", fn, r_);      \
            return r_;                                 \
        }                                              \
    } while (0)
#define NEED_INIT()                                    \
    do {                                               \
        if (!initialized) return NOT_INITIALIZED;      \
    } while (0)

/* ------------------------------------------------------------------ control, for the tests */

/* Forget every record and count, drop every thread's current context, and configure afresh from the defaults and
 * the environment (then fk_set). Loaded libraries stay valid (the driver under test may still hold them); the
 * initialisation (cuInit) stays done, as in a real process. */
EXPORT void fk_reset(void) {
    ready();
    pthread_mutex_lock(&lock);
    defaults_then_env();
    nlaunches = nallocs = nencodes = ncopies = 0;
    memset(counts, 0, sizeof counts);
    __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
}

/* Set one configuration key (see the top of the file); 0, or -1 for an unknown key or a malformed value. */
EXPORT int fk_set(const char* key, const char* value) {
    ready();
    pthread_mutex_lock(&lock);
    int r = configure(key, value);
    if (!strcmp(key, "CURRENT")) __atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT int fk_calls(const char* fn) {
    for (int i = 0; i < MAX_ENTRIES && counts[i].name; i++)
        if (!strcmp(counts[i].name, fn)) return counts[i].count;
    return 0;
}
EXPORT int fk_launch_count(void) { return nlaunches; }
EXPORT const fk_launch* fk_get_launch(int i) { return i >= 0 && i < nlaunches ? &launches[i] : NULL; }
EXPORT int fk_alloc_count(void) { return nallocs; }
EXPORT const fk_alloc* fk_get_alloc(int i) { return i >= 0 && i < nallocs ? &allocs[i] : NULL; }
EXPORT int fk_copy_count(void) { return ncopies; }
EXPORT const fk_copy* fk_get_copy(int i) { return i >= 0 && i < ncopies ? &copies[i] : NULL; }
EXPORT int fk_encode_count(void) { return nencodes; }
EXPORT const fk_encode* fk_get_encode(int i) { return i >= 0 && i < nencodes ? &encodes[i] : NULL; }
EXPORT int fk_current_device(void) { return cur(); }
EXPORT void fk_set_current_device(int dev) {
    cur();
    t_current = dev >= 0 && dev < cfg.ndev ? dev : -1;
}

/* ------------------------------------------------------------------ cubin reading */

static const unsigned char* section(const unsigned char* img, size_t size, const char* want, uint64_t* len) {
    if (size < 64) return NULL;
    uint64_t shoff, stroff;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, img + 0x28, 8);
    memcpy(&shentsize, img + 0x3a, 2);
    memcpy(&shnum, img + 0x3c, 2);
    memcpy(&shstrndx, img + 0x3e, 2);
    if (shoff + (uint64_t)shnum * shentsize > size) return NULL;
    memcpy(&stroff, img + shoff + (uint64_t)shstrndx * shentsize + 0x18, 8);
    for (int i = 0; i < shnum; i++) {
        const unsigned char* h = img + shoff + (uint64_t)i * shentsize;
        uint32_t name;
        uint64_t off, sz;
        memcpy(&name, h, 4);
        memcpy(&off, h + 0x18, 8);
        memcpy(&sz, h + 0x20, 8);
        if (strcmp((const char*)img + stroff + name, want) == 0 && off + sz <= size) {
            *len = sz;
            return img + off;
        }
    }
    return NULL;
}

static size_t elf_size(const unsigned char* img) {
    uint64_t shoff, phoff;
    uint16_t shentsize, shnum, phentsize, phnum;
    memcpy(&phoff, img + 0x20, 8);
    memcpy(&shoff, img + 0x28, 8);
    memcpy(&phentsize, img + 0x36, 2);
    memcpy(&phnum, img + 0x38, 2);
    memcpy(&shentsize, img + 0x3a, 2);
    memcpy(&shnum, img + 0x3c, 2);
    size_t a = shoff + (size_t)shnum * shentsize, b = phoff + (size_t)phnum * phentsize;
    return a > b ? a : b;
}

/* The launch facts of .nv.info.<kernel> (DESIGN.md): KPARAM_INFO (v1, v2), REQNTID, CTA_PER_CLUSTER and
 * EXPLICIT_CLUSTER. 0 when the cubin has no such kernel. */
static int read_kernel(fk_kernel* k, const unsigned char* img, size_t size) {
    char want[300];
    uint64_t len = 0;
    snprintf(want, sizeof want, ".nv.info.%s", k->name);
    const unsigned char* p = section(img, size, want, &len);
    if (p == NULL) return 0;
    const unsigned char* end = p + len;
    while (p + 4 <= end) {
        unsigned fmt = p[0], id = p[1];
        uint16_t v;
        memcpy(&v, p + 2, 2);
        if (fmt == 4) { /* u16 length + payload */
            const unsigned char* d = p + 4;
            if ((id == 0x17 || id == 0x45) && v >= 12) {
                uint16_t ordinal, offset;
                uint32_t flags;
                memcpy(&ordinal, d + 4, 2);
                memcpy(&offset, d + 6, 2);
                memcpy(&flags, d + 8, 4);
                if (ordinal < MAX_PARAMS) {
                    k->offset[ordinal] = offset;
                    k->size[ordinal] = id == 0x17 ? flags >> 18 : flags & 0xffff;
                    if (ordinal + 1 > k->nparams) k->nparams = ordinal + 1;
                }
            } else if (id == 0x10 && v >= 12) {
                memcpy(k->reqntid, d, 12);
            } else if (id == 0x3d && v >= 12) {
                memcpy(k->cluster, d, 12);
            }
            p += 4 + v;
        } else {
            if (fmt == 1 && id == 0x3e) k->explicit_cluster = 1;
            p += 4;
        }
    }
    return 1;
}

static uint64_t fnv1a(const unsigned char* p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

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

static CUresult cuKernelGetFunction(void** f, void* kernel) {
    ENTER("cuKernelGetFunction");
    NEED_INIT();
    if (cur() < 0) return INVALID_CONTEXT;
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

static CUresult cuPointerGetAttribute(void* data, int attr, uint64_t ptr) {
    (void)attr, (void)ptr;
    ENTER("cuPointerGetAttribute");
    NEED_INIT();
    *(int*)data = 0;
    return OK;
}

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
