/* A fake libcuda.so.1 for GPU-less tests of generated kernelpack libraries.
 *
 * Implements the driver entry points the generated runtime fetches through cuGetProcAddress_v2 and appends one
 * line per call to the file named by FAKECUDA_LOG. Launches lay the kernelParams out exactly as the real driver
 * does, from the KPARAM_INFO records of the loaded cubin's .nv.info.<kernel> section, and log the bytes as hex, so
 * tests see offsets and widths. Like the driver, it refuses a block other than REQNTID, dynamic shared memory
 * above 48 KiB not opted into, and launches with no current context.
 *
 * Environment:
 *   FAKECUDA_LOG      file to append the call log to (none = no log)
 *   FAKECUDA_CC       compute capability per device, comma-separated ("9.0", "8.0,9.0"); "none" = no device
 *   FAKECUDA_VERSION  driver version (default 13000)
 *   FAKECUDA_CURRENT  device whose context is current on every thread from the start (default: none)
 *   FAKECUDA_FAIL     "cuName:code" makes that entry point return code
 *   FAKECUDA_LOAD_US  microseconds cuLibraryLoadData sleeps (widens first-launch races)
 *   FAKECUDA_MISSING  an entry point cuGetProcAddress_v2 does not find
 *
 * cuMemAllocAsync hands out fake addresses from 0xd0000000 (1 MiB apart) and logs size and stream;
 * cuTensorMapEncodeTiled logs every argument and fills the map with word 0 = the address, every other word all ones.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
#define OK 0
#define INVALID_VALUE 1
#define NO_DEVICE 100
#define INVALID_CONTEXT 201
#define NOT_FOUND 500
#define EXPORT __attribute__((visibility("default")))

#define MAX_PARAMS 256
#define MAX_DEVICES 8

typedef struct fake_lib {
    int id;
    unsigned char* image;
    size_t size;
    int is_ptx;
} fake_lib;

typedef struct fake_kernel {
    char name[256];
    int nparams;
    uint32_t offset[MAX_PARAMS], size[MAX_PARAMS];
    uint32_t reqntid[3];
    int max_dyn_smem[MAX_DEVICES];
} fake_kernel;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ndev = -1, cc_major[MAX_DEVICES], cc_minor[MAX_DEVICES];
static int nlibs;
static __thread int current = -2; /* -2: not yet initialised from FAKECUDA_CURRENT; -1: none; else device */

static void logf_(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char* fmt, ...) {
    const char* path = getenv("FAKECUDA_LOG");
    if (path == NULL || !*path) return;
    pthread_mutex_lock(&lock);
    FILE* f = fopen(path, "a");
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

static CUresult injected(const char* fn) {
    const char* spec = getenv("FAKECUDA_FAIL");
    size_t n = strlen(fn);
    if (spec != NULL && strncmp(spec, fn, n) == 0 && spec[n] == ':') return atoi(spec + n + 1);
    return OK;
}
#define FAIL_IF_INJECTED(fn)                 \
    do {                                     \
        CUresult r_ = injected(fn);          \
        if (r_ != OK) {                      \
            logf_("%s -> %d (injected)", fn, r_); \
            return r_;                       \
        }                                    \
    } while (0)

static void devices(void) {
    pthread_mutex_lock(&lock);
    if (ndev < 0) {
        const char* cc = getenv("FAKECUDA_CC");
        if (cc == NULL || !*cc) cc = "9.0";
        ndev = 0;
        if (strcmp(cc, "none") != 0) {
            while (*cc && ndev < MAX_DEVICES) {
                int ma = 0, mi = 0, used = 0;
                if (sscanf(cc, "%d.%d%n", &ma, &mi, &used) < 2) break;
                cc_major[ndev] = ma, cc_minor[ndev] = mi, ndev++;
                cc += used;
                if (*cc == ',') cc++;
            }
        }
    }
    pthread_mutex_unlock(&lock);
}

static int cur(void) {
    if (current == -2) {
        const char* c = getenv("FAKECUDA_CURRENT");
        current = c && *c ? atoi(c) : -1;
    }
    return current;
}

/* ------------------------------------------------------------------ cubin reading */

static const unsigned char* section(const unsigned char* img, size_t size, const char* want, uint64_t* len) {
    if (size < 64) return NULL;
    uint64_t shoff;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, img + 0x28, 8);
    memcpy(&shentsize, img + 0x3a, 2);
    memcpy(&shnum, img + 0x3c, 2);
    memcpy(&shstrndx, img + 0x3e, 2);
    if (shoff + (uint64_t)shnum * shentsize > size) return NULL;
    uint64_t stroff;
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

static int read_params(fake_kernel* k, const unsigned char* img, size_t size) {
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
            }
            p += 4 + v;
        } else {
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

/* ------------------------------------------------------------------ entry points */

static CUresult cuInit(unsigned int flags) {
    FAIL_IF_INJECTED("cuInit");
    devices();
    logf_("cuInit flags=%u devices=%d", flags, ndev);
    return ndev == 0 ? NO_DEVICE : OK;
}

EXPORT CUresult cuDriverGetVersion(int* v) {
    const char* s = getenv("FAKECUDA_VERSION");
    *v = s && *s ? atoi(s) : 13000;
    return OK;
}

static CUresult cuGetErrorName(CUresult r, const char** name) {
    switch (r) {
    case 0: *name = "CUDA_SUCCESS"; return OK;
    case 1: *name = "CUDA_ERROR_INVALID_VALUE"; return OK;
    case 100: *name = "CUDA_ERROR_NO_DEVICE"; return OK;
    case 201: *name = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
    case 209: *name = "CUDA_ERROR_NO_BINARY_FOR_GPU"; return OK;
    case 500: *name = "CUDA_ERROR_NOT_FOUND"; return OK;
    case 700: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; return OK;
    case 912: *name = "CUDA_ERROR_CLUSTER_SIZE_INVALID"; return OK;
    }
    *name = NULL;
    return INVALID_VALUE;
}

static CUresult cuDeviceGetCount(int* n) {
    devices();
    *n = ndev;
    return OK;
}

static CUresult cuDeviceGet(int* d, int ordinal) {
    devices();
    if (ordinal < 0 || ordinal >= ndev) return INVALID_VALUE;
    *d = ordinal;
    return OK;
}

static CUresult cuDeviceGetAttribute(int* v, int attr, int dev) {
    devices();
    if (dev < 0 || dev >= ndev) return INVALID_VALUE;
    if (attr == 75) *v = cc_major[dev];
    else if (attr == 76) *v = cc_minor[dev];
    else if (attr == 97) *v = cc_major[dev] >= 9 ? 232448 : 166912;
    else return INVALID_VALUE;
    logf_("cuDeviceGetAttribute attr=%d dev=%d -> %d", attr, dev, *v);
    return OK;
}

static CUresult cuCtxGetDevice(int* d) {
    FAIL_IF_INJECTED("cuCtxGetDevice");
    logf_("cuCtxGetDevice -> %d", cur());
    if (cur() < 0) return INVALID_CONTEXT;
    *d = cur();
    return OK;
}

static CUresult cuCtxGetCurrent(void** ctx) {
    *ctx = cur() < 0 ? NULL : (void*)(uintptr_t)(cur() + 1);
    return OK;
}

static CUresult cuCtxSetCurrent(void* ctx) {
    current = ctx == NULL ? -1 : (int)(uintptr_t)ctx - 1;
    logf_("cuCtxSetCurrent dev=%d", current);
    return OK;
}

static CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) {
    devices();
    if (dev < 0 || dev >= ndev) return INVALID_VALUE;
    *ctx = (void*)(uintptr_t)(dev + 1);
    logf_("cuDevicePrimaryCtxRetain dev=%d", dev);
    return OK;
}

/* A fake stream handle 0x1000 * (device + 1) belongs to that device's context. */
static CUresult cuStreamGetCtx(void* stream, void** ctx) {
    int dev = (int)((uintptr_t)stream / 0x1000) - 1;
    logf_("cuStreamGetCtx stream=%p -> dev %d", stream, dev);
    if (dev < 0 || dev >= ndev) return INVALID_VALUE;
    *ctx = (void*)(uintptr_t)(dev + 1);
    return OK;
}

static CUresult cuLibraryLoadData(void** lib, const void* code, void* o1, void** o2, unsigned n1, void* o3,
                                  void** o4, unsigned n2) {
    (void)o1, (void)o2, (void)n1, (void)o3, (void)o4, (void)n2;
    FAIL_IF_INJECTED("cuLibraryLoadData");
    const char* us = getenv("FAKECUDA_LOAD_US");
    if (us && *us) usleep((useconds_t)atoi(us));
    const unsigned char* img = (const unsigned char*)code;
    fake_lib* l = (fake_lib*)calloc(1, sizeof *l);
    l->is_ptx = memcmp(img, "\x7f" "ELF", 4) != 0;
    l->size = l->is_ptx ? strlen((const char*)img) : elf_size(img);
    l->image = (unsigned char*)malloc(l->size + 1);
    memcpy(l->image, img, l->size);
    l->image[l->size] = 0;
    pthread_mutex_lock(&lock);
    l->id = ++nlibs;
    pthread_mutex_unlock(&lock);
    logf_("cuLibraryLoadData lib=%d kind=%s size=%zu fnv=%016llx", l->id, l->is_ptx ? "ptx" : "cubin", l->size,
          (unsigned long long)fnv1a(l->image, l->size));
    *lib = l;
    return OK;
}

static CUresult cuLibraryGetKernel(void** kernel, void* lib, const char* name) {
    FAIL_IF_INJECTED("cuLibraryGetKernel");
    fake_lib* l = (fake_lib*)lib;
    fake_kernel* k = (fake_kernel*)calloc(1, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    int found;
    if (l->is_ptx) {
        char want[300];
        snprintf(want, sizeof want, ".entry %s(", name);
        found = strstr((const char*)l->image, want) != NULL;
        k->nparams = -1;
    } else {
        found = read_params(k, l->image, l->size);
    }
    logf_("cuLibraryGetKernel lib=%d name=%s -> %s", l->id, name, found ? "ok" : "CUDA_ERROR_NOT_FOUND");
    if (!found) {
        free(k);
        return NOT_FOUND;
    }
    *kernel = k;
    return OK;
}

static CUresult cuKernelSetAttribute(int attr, int val, void* kernel, int dev) {
    fake_kernel* k = (fake_kernel*)kernel;
    logf_("cuKernelSetAttribute attr=%d val=%d kernel=%s dev=%d", attr, val, k->name, dev);
    if (attr == 8 && dev >= 0 && dev < MAX_DEVICES) k->max_dyn_smem[dev] = val;
    return OK;
}

static void hex_params(const fake_kernel* k, void** params, char* out, size_t cap) {
    unsigned char buf[4096];
    size_t total = 0;
    memset(buf, 0xAA, sizeof buf); /* padding shows as aa */
    for (int i = 0; i < k->nparams; i++) {
        if (k->offset[i] + k->size[i] > sizeof buf) continue;
        memcpy(buf + k->offset[i], params[i], k->size[i]);
        if (k->offset[i] + k->size[i] > total) total = k->offset[i] + k->size[i];
    }
    size_t n = 0;
    for (size_t i = 0; i < total && n + 3 < cap; i++) n += (size_t)snprintf(out + n, cap - n, "%02x", buf[i]);
    out[n] = 0;
}

static CUresult check_launch(const fake_kernel* k, unsigned bx, unsigned by, unsigned bz, unsigned smem) {
    if (cur() < 0) return INVALID_CONTEXT;
    if (k->reqntid[0] && (bx != k->reqntid[0] || by != k->reqntid[1] || bz != k->reqntid[2])) return INVALID_VALUE;
    if (smem > 49152 && (int)smem > k->max_dyn_smem[cur()]) return INVALID_VALUE;
    return OK;
}

static CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, void* stream, void** params, void** extra) {
    FAIL_IF_INJECTED("cuLaunchKernel");
    fake_kernel* k = (fake_kernel*)f;
    char hex[8300];
    hex_params(k, params, hex, sizeof hex);
    CUresult r = check_launch(k, bx, by, bz, smem);
    logf_("cuLaunchKernel kernel=%s grid=%u,%u,%u block=%u,%u,%u smem=%u stream=%p dev=%d extra=%p params=%s -> %d",
          k->name, gx, gy, gz, bx, by, bz, smem, stream, cur(), (void*)extra, hex, r);
    return r;
}

typedef struct {
    unsigned id;
    char pad[4];
    union {
        char raw[64];
        struct {
            unsigned x, y, z;
        } cluster;
    } value;
} attr_t;
typedef struct {
    unsigned gx, gy, gz, bx, by, bz, smem;
    void* stream;
    attr_t* attrs;
    unsigned nattrs;
} config_t;

static CUresult cuLaunchKernelEx(const config_t* c, void* f, void** params, void** extra) {
    FAIL_IF_INJECTED("cuLaunchKernelEx");
    fake_kernel* k = (fake_kernel*)f;
    char hex[8300], attrs[256] = "";
    size_t n = 0;
    hex_params(k, params, hex, sizeof hex);
    for (unsigned i = 0; i < c->nattrs && n < sizeof attrs - 40; i++) {
        if (c->attrs[i].id == 4)
            n += (size_t)snprintf(attrs + n, sizeof attrs - n, "%scluster:%u,%u,%u", i ? ";" : "",
                                  c->attrs[i].value.cluster.x, c->attrs[i].value.cluster.y, c->attrs[i].value.cluster.z);
        else
            n += (size_t)snprintf(attrs + n, sizeof attrs - n, "%sid%u", i ? ";" : "", c->attrs[i].id);
    }
    CUresult r = check_launch(k, c->bx, c->by, c->bz, c->smem);
    logf_("cuLaunchKernelEx kernel=%s grid=%u,%u,%u block=%u,%u,%u smem=%u stream=%p dev=%d attrs=%s extra=%p "
          "params=%s -> %d", k->name, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, c->stream, cur(), attrs,
          (void*)extra, hex, r);
    return r;
}

static CUresult cuMemAllocAsync(unsigned long long* ptr, size_t size, void* stream) {
    static unsigned long long next = 0xd0000000ull;
    FAIL_IF_INJECTED("cuMemAllocAsync");
    if (cur() < 0) {
        logf_("cuMemAllocAsync size=%zu stream=%p dev=%d -> %d", size, stream, cur(), INVALID_CONTEXT);
        return INVALID_CONTEXT;
    }
    pthread_mutex_lock(&lock);
    *ptr = next;
    next += 1ull << 20;
    pthread_mutex_unlock(&lock);
    logf_("cuMemAllocAsync size=%zu stream=%p dev=%d ptr=0x%llx -> 0", size, stream, cur(), *ptr);
    return OK;
}

static CUresult cuMemFreeAsync(unsigned long long ptr, void* stream) {
    FAIL_IF_INJECTED("cuMemFreeAsync");
    logf_("cuMemFreeAsync ptr=0x%llx stream=%p", ptr, stream);
    return OK;
}

static void join_u64(char* out, size_t cap, const uint64_t* v, unsigned n) {
    size_t k = 0;
    out[0] = 0;
    for (unsigned i = 0; i < n && k + 24 < cap; i++) k += (size_t)snprintf(out + k, cap - k, i ? ",%llu" : "%llu",
                                                                         (unsigned long long)v[i]);
}

static CUresult cuTensorMapEncodeTiled(void* map, int dtype, unsigned rank, void* addr, const uint64_t* dims,
                                       const uint64_t* strides, const unsigned* box, const unsigned* estrides,
                                       int interleave, int swizzle, int l2, int oob) {
    FAIL_IF_INJECTED("cuTensorMapEncodeTiled");
    char d[200], s[200], b[200], e[200];
    uint64_t b64[5], e64[5];
    if (rank < 1 || rank > 5 || (uintptr_t)map % 64) return INVALID_VALUE;
    for (unsigned i = 0; i < rank; i++) b64[i] = box[i], e64[i] = estrides[i];
    join_u64(d, sizeof d, dims, rank);
    join_u64(s, sizeof s, strides, rank - 1);
    join_u64(b, sizeof b, b64, rank);
    join_u64(e, sizeof e, e64, rank);
    logf_("cuTensorMapEncodeTiled dtype=%d rank=%u addr=%p dims=%s strides=%s box=%s estrides=%s interleave=%d "
          "swizzle=%d l2=%d oob=%d", dtype, rank, addr, d, rank > 1 ? s : "-", b, e, interleave, swizzle, l2, oob);
    uint64_t words[16];
    for (int i = 0; i < 16; i++) words[i] = ~0ull;
    words[0] = (uint64_t)(uintptr_t)addr;
    memcpy(map, words, sizeof words);
    return OK;
}

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, uint64_t flags, int* status) {
    static const struct {
        const char* name;
        void* fn;
    } table[] = {
#define E(name) {#name, (void*)name}
        E(cuInit), E(cuDriverGetVersion), E(cuGetErrorName), E(cuDeviceGet), E(cuDeviceGetCount),
        E(cuDeviceGetAttribute), E(cuCtxGetDevice), E(cuCtxSetCurrent), E(cuDevicePrimaryCtxRetain),
        E(cuStreamGetCtx), E(cuLibraryLoadData), E(cuLibraryGetKernel), E(cuKernelSetAttribute), E(cuLaunchKernel),
        E(cuLaunchKernelEx), E(cuCtxGetCurrent), E(cuMemAllocAsync), E(cuMemFreeAsync), E(cuTensorMapEncodeTiled),
#undef E
    };
    const char* missing = getenv("FAKECUDA_MISSING");
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i].name, symbol) == 0 && !(missing && strcmp(missing, symbol) == 0)) {
            *pfn = table[i].fn;
            if (status) *status = 0;
            logf_("cuGetProcAddress_v2 %s version=%d flags=%llu", symbol, version, (unsigned long long)flags);
            return OK;
        }
    }
    *pfn = NULL;
    if (status) *status = 1;
    logf_("cuGetProcAddress_v2 %s version=%d -> not found", symbol, version);
    return NOT_FOUND;
}
