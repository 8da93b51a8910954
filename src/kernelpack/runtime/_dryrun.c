/* kernelpack's dry-run CUDA driver: a stand-in for libcuda.so.1 that checks every launch as the real driver does and
 * records it, with no GPU (docs/testing.md). KERNELPACK_DRIVER=dryrun (Python) or KERNELPACK_DRIVER=<this library's
 * path> (a C program; `python -m kernelpack.testing path` prints it) makes both back ends use it; kernelpack.testing
 * wraps it for tests. The test suite's fake driver is this source too (tests/fake_cuda.py builds it with
 * KP_DRYRUN_ENV="FAKECUDA_"). One translation unit: this file includes its parts (_dryrun_image.c, _dryrun_entry.c,
 * _dryrun_launch.c), which are never compiled on their own. Entry points are reached only through
 * cuGetProcAddress_v2, as both back ends reach them.
 *
 * Configuration, the same keys both ways: from the environment (KERNELPACK_DRYRUN_<KEY>, read at the first call and
 * again by fk_reset), or in-process with fk_set("<KEY>", value) after fk_reset():
 *   DEVICES  the devices, comma-separated: archs ("sm_90,sm_80") or compute capabilities ("9.0,8.0"); "none" = no
 *            device (default: one sm_90). CC is the same key (its older name)
 *   SMS      SM count per device, comma-separated ("132", "132,108"); devices not named have 132 (default)
 *   VERSION  driver version cuDriverGetVersion reports (default 13000); PTX of a newer ISA than that version's
 *            (13.0: 9.0) fails to load with CUDA_ERROR_UNSUPPORTED_PTX_VERSION, as the real driver's JIT does
 *   RECORD   file to append one JSON line per launch attempt to (the format: docs/testing.md)
 *   CURRENT  device whose primary context is current on every thread from the start (default: none)
 *   FAIL     "cuName:code": that entry point returns code
 *   MISSING  an entry point cuGetProcAddress_v2 does not find
 *   LOAD_US  microseconds cuLibraryLoadData sleeps (widens first-launch races)
 *   PARAM_BASE  added to the offsets cuKernelGetParamInfo reports (the H200's driver starts a kernel taking a
 *            CUtensorMap at 48)
 *   LOG      file to append one line per call to (none = no log)
 *
 * Records, in memory (fk_* below), as JSON lines when RECORD is set and as log lines when LOG is set: every launch
 * attempt (the kernel and specialization kernelpack named with kpDryrunNote just before it, the entry, the binary
 * the device runs, grid, block, shared memory, stream, device of the current context, launch attributes, result,
 * and the parameter bytes laid out at the offsets of the loaded cubin's KPARAM_INFO records, exactly where the real
 * driver puts them; padding is zero), every stream-ordered allocation, every tensor-map encode, and a count of calls
 * per entry point.
 *
 * Driver rules, one implementation each (the measured ones are in DESIGN.md): nothing but cuDriverGetVersion,
 * cuGetErrorName/String and cuGetProcAddress_v2 before a successful cuInit (CUDA_ERROR_NOT_INITIALIZED); cuInit
 * fails with CUDA_ERROR_NO_DEVICE when there is none; a bad ordinal is CUDA_ERROR_INVALID_DEVICE; a kernel runs only
 * on a device its binary runs on (NVIDIA's compatibility rule: SASS of the same major and an equal or older minor,
 * an arch-specific cubin on exactly its arch, PTX on its arch and newer), else CUDA_ERROR_NO_BINARY_FOR_GPU when it
 * is loaded into that device's context or launched there; a launch needs a current context, a block of exactly
 * REQNTID when the cubin has one, a grid that is a multiple of a compile-time (explicit) cluster and no other
 * cluster shape (error 912), block and grid within the device limits, and an opt-in (cuKernelSetAttribute 8) for
 * more than 48 KiB of dynamic shared memory; otherwise CUDA_ERROR_INVALID_VALUE. cuOccupancyMaxActiveClusters holds
 * a configuration to the same rules (a cluster attribute is required) and answers SMs / blocks per cluster: one
 * block per SM, every SM usable. cuOccupancyMaxActiveBlocksPerMultiprocessor answers what an SM of 2048 threads, 32
 * blocks and (sm_90+) 233472 / 167936 bytes of shared memory holds; a cooperative launch (attribute 2) of more
 * blocks than that x SMs fails with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, and a programmatic-serialization launch
 * (attribute 6) below compute capability 9.0 with CUDA_ERROR_NOT_SUPPORTED.
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
    NO_BINARY_FOR_GPU = 209,
    UNSUPPORTED_PTX_VERSION = 222,
    NOT_FOUND = 500,
    COOPERATIVE_LAUNCH_TOO_LARGE = 720,
    NOT_SUPPORTED = 801,
    CLUSTER_SIZE_INVALID = 912,
};
#define EXPORT __attribute__((visibility("default")))
#ifndef KP_DRYRUN_ENV
#define KP_DRYRUN_ENV "KERNELPACK_DRYRUN_" /* the prefix of the configuration's environment variables */
#endif

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
    char fail[64], missing[64], log[4096], record[4096];
} fk_config;

struct fk_library;
typedef struct fk_kernel {
    struct fk_kernel* next;
    const struct fk_library* lib; /* the library it came from: which binary it is */
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
    int major, minor, exact; /* the binary's arch; exact: arch-specific ("a"), runs on that arch alone */
    char binary[32];         /* its name as kernelpack spells it: "sm_90a", "compute_80 PTX" */
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

/* "9.0,8.0" or "sm_90,sm_80" (a device's arch: plain sm_XY) */
static int set_devices(const char* s) {
    int n = 0;
    if (strcmp(s, "none") != 0) {
        while (*s) {
            int ma = 0, mi = 0, sm = 0, used = 0;
            if (n == MAX_DEV) return -1;
            if (sscanf(s, "%d.%d%n", &ma, &mi, &used) == 2) {
                cfg.cc[n][0] = ma, cfg.cc[n][1] = mi;
            } else if (sscanf(s, "sm_%d%n", &sm, &used) == 1 && sm >= 10) {
                cfg.cc[n][0] = sm / 10, cfg.cc[n][1] = sm % 10;
            } else {
                return -1;
            }
            n++;
            s += used;
            if (*s == ',') s++;
            else if (*s) return -1;
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
    if (!strcmp(key, "CC") || !strcmp(key, "DEVICES")) return set_devices(*value ? value : "9.0");
    if (!strcmp(key, "SMS")) return set_sms(value);
    if (!strcmp(key, "VERSION")) cfg.version = *value ? atoi(value) : 13000;
    else if (!strcmp(key, "CURRENT")) cfg.current = *value ? atoi(value) : -1;
    else if (!strcmp(key, "LOAD_US")) cfg.load_us = atoi(value);
    else if (!strcmp(key, "PARAM_BASE")) cfg.param_base = atoi(value);
    else if (!strcmp(key, "MISSING")) snprintf(cfg.missing, sizeof cfg.missing, "%s", value);
    else if (!strcmp(key, "LOG")) snprintf(cfg.log, sizeof cfg.log, "%s", value);
    else if (!strcmp(key, "RECORD")) snprintf(cfg.record, sizeof cfg.record, "%s", value);
    else if (!strcmp(key, "FAIL")) {
        const char* colon = strchr(value, ':');
        if (*value && colon == NULL) return -1;
        snprintf(cfg.fail, sizeof cfg.fail, "%.*s", colon ? (int)(colon - value) : 0, value);
        cfg.fail_code = colon ? atoi(colon + 1) : 0;
    } else return -1;
    return 0;
}

static const char* const KEYS[] = {"CC", "SMS", "VERSION", "CURRENT", "LOAD_US", "MISSING", "LOG", "FAIL",
                                   "PARAM_BASE", "RECORD", "DEVICES"};

/* The defaults, then each key the environment sets (DEVICES after CC: the newer name wins). A malformed value is
 * ignored for its default: the driver cannot report it, and kernelpack.testing checks values before it sets them. */
static void defaults_then_env(void) {
    memset(&cfg, 0, sizeof cfg);
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", KP_DRYRUN_ENV, KEYS[i]);
        const char* v = getenv(name);
        if (!strcmp(KEYS[i], "DEVICES") && (v == NULL || !*v)) continue;
        if (configure(KEYS[i], v ? v : "") != 0) configure(KEYS[i], "");
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


/* ------------------------------------------------------------------ what kernelpack says of the next launch */

/* The label of the specialization the calling thread launches next ("add[f32]"), set by kernelpack's back ends just
 * before each launch through the entry point kpDryrunNote (a real driver has no such entry point: they never call
 * it there), read and cleared by that launch's record. */
static __thread char t_note[256];

static void kpDryrunNote(const char* label) { snprintf(t_note, sizeof t_note, "%s", label ? label : ""); }

#include "_dryrun_image.c"
#include "_dryrun_entry.c"
#include "_dryrun_launch.c"

#ifdef KP_DRYRUN_PYINIT
/* Built by setup.py beside the runtime as if it were an extension module (so a wheel carries it); it is opened with
 * dlopen, never imported: importing it fails (no module is made) rather than pulling the Python API in. */
EXPORT void* KP_DRYRUN_PYINIT(void);
EXPORT void* KP_DRYRUN_PYINIT(void) { return NULL; }
#endif
