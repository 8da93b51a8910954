/* A fake CUDA driver for GPU-less tests of kernelpack.runtime, loaded in-process and driven through ctypes.
 *
 * Built by the tests as libkpfakecuda.so (its own soname, so a real libcuda.so.1 loaded later in the same process
 * is never shadowed). Entry points are reached only through cuGetProcAddress_v2, as the runtime reaches them.
 * Launches are recorded: kernel, grid, block, smem, stream, cluster, the device of the current context, and the
 * parameter bytes laid out at the offsets the test registered for the kernel (read from its cubin), exactly as
 * the real driver would place them. Like the driver it refuses launches with no current context, a block other
 * than REQNTID, and more than 48 KiB of dynamic shared memory not opted into.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_DEV 8
#define MAX_KERNELS 64
#define MAX_PARAMS 64
#define MAX_LAUNCHES 4096
#define PARAM_BYTES 4096

typedef int CUresult;
enum { OK = 0, INVALID_VALUE = 1, NOT_INITIALIZED = 3, INVALID_DEVICE = 101, INVALID_CONTEXT = 201,
       NOT_FOUND = 500 };

typedef struct {
    char name[128];
    int nparams;
    uint32_t offset[MAX_PARAMS], size[MAX_PARAMS];
    uint32_t reqntid[3];
    int max_dyn_smem[MAX_DEV];
} fk_kernel;

typedef struct {
    char kernel[128];
    uint32_t grid[3], block[3], smem, cluster[3];
    uint64_t stream;
    int device, ex;
    uint32_t nbytes;
    unsigned char params[PARAM_BYTES];
} fk_launch;

typedef struct {
    unsigned int id;
    char pad[4];
    union {
        char bytes[64];
        struct {
            unsigned int x, y, z;
        } cluster;
    } value;
} cu_attr;
typedef struct {
    unsigned int grid[3], block[3], smem;
    void* stream;
    cu_attr* attrs;
    unsigned int nattrs;
} cu_config;

typedef struct { /* one cuMemAllocAsync */
    uint64_t ptr, size, stream;
    int device, freed;
    uint64_t free_stream;
} fk_alloc;

typedef struct { /* the arguments of one cuTensorMapEncodeTiled */
    int dtype;
    unsigned rank;
    uint64_t addr, dims[5], strides[5];
    uint32_t box[5], estrides[5];
    int interleave, swizzle, l2, oob;
} fk_encode;

#define MAX_ALLOCS 256
#define MAX_ENCODES 64
static fk_alloc allocs[MAX_ALLOCS];
static fk_encode encodes[MAX_ENCODES];
static int nallocs, nencodes;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ndev = 1, cc[MAX_DEV][2] = {{9, 0}}, initialized;
static int ctx_objs[MAX_DEV];
static __thread int* current;
static fk_kernel kernels[MAX_KERNELS];
static int nkernels, nlibs;
static fk_launch launches[MAX_LAUNCHES];
static int nlaunches;
static char fail_name[64];
static int fail_code;
static int calls_load, calls_get_kernel, calls_get_function, calls_set_attr, calls_retain, calls_ctx_get,
    calls_ctx_set;

static CUresult injected(const char* fn) {
    return fail_name[0] && strcmp(fail_name, fn) == 0 ? fail_code : OK;
}

static int cur_dev(void) { return current ? (int)(current - ctx_objs) : -1; }

/* ------------------------------------------------------------------ control, for the tests */

EXPORT void fk_reset(int n, const int* ccs) {
    pthread_mutex_lock(&lock);
    ndev = n > MAX_DEV ? MAX_DEV : n;
    for (int i = 0; i < ndev; i++) cc[i][0] = ccs[2 * i], cc[i][1] = ccs[2 * i + 1];
    nkernels = nlibs = nlaunches = nallocs = nencodes = 0;
    fail_name[0] = 0;
    calls_load = calls_get_kernel = calls_get_function = calls_set_attr = calls_retain = 0;
    calls_ctx_get = calls_ctx_set = 0;
    memset(kernels, 0, sizeof kernels);
    pthread_mutex_unlock(&lock);
    current = NULL;
}

EXPORT void fk_register_kernel(const char* name, int n, const uint32_t* offsets, const uint32_t* sizes,
                               const uint32_t* reqntid) {
    pthread_mutex_lock(&lock);
    fk_kernel* k = &kernels[nkernels++];
    memset(k, 0, sizeof *k);
    strncpy(k->name, name, sizeof k->name - 1);
    k->nparams = n;
    memcpy(k->offset, offsets, sizeof(uint32_t) * (size_t)n);
    memcpy(k->size, sizes, sizeof(uint32_t) * (size_t)n);
    if (reqntid) memcpy(k->reqntid, reqntid, sizeof k->reqntid);
    pthread_mutex_unlock(&lock);
}

EXPORT void fk_fail(const char* name, int code) {
    strncpy(fail_name, name, sizeof fail_name - 1);
    fail_code = code;
}

EXPORT int fk_launch_count(void) { return nlaunches; }
EXPORT const fk_launch* fk_get_launch(int i) { return i >= 0 && i < nlaunches ? &launches[i] : NULL; }
EXPORT int fk_calls(const char* what) {
    if (!strcmp(what, "load")) return calls_load;
    if (!strcmp(what, "get_kernel")) return calls_get_kernel;
    if (!strcmp(what, "get_function")) return calls_get_function;
    if (!strcmp(what, "set_attr")) return calls_set_attr;
    if (!strcmp(what, "retain")) return calls_retain;
    if (!strcmp(what, "ctx_get")) return calls_ctx_get;
    if (!strcmp(what, "ctx_set")) return calls_ctx_set;
    return -1;
}
EXPORT int fk_alloc_count(void) { return nallocs; }
EXPORT const fk_alloc* fk_get_alloc(int i) { return i >= 0 && i < nallocs ? &allocs[i] : NULL; }
EXPORT int fk_encode_count(void) { return nencodes; }
EXPORT const fk_encode* fk_get_encode(int i) { return i >= 0 && i < nencodes ? &encodes[i] : NULL; }
EXPORT int fk_current_device(void) { return cur_dev(); }
EXPORT void fk_set_current_device(int dev) { current = dev < 0 ? NULL : &ctx_objs[dev]; }

/* ------------------------------------------------------------------ driver entry points */

static CUresult cuInit(unsigned f) {
    (void)f;
    initialized = 1;
    return injected("cuInit");
}
EXPORT CUresult cuDriverGetVersion(int* v) {
    *v = 13000;
    return OK;
}
static CUresult cuGetErrorName(CUresult r, const char** s) {
    switch (r) {
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
    case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
    case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return OK;
    case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
    case 700: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return OK;
    }
    *s = "CUDA_ERROR_UNKNOWN";
    return OK;
}
static CUresult cuGetErrorString(CUresult r, const char** s) {
    *s = r == INVALID_VALUE ? "invalid argument" : "fake driver error";
    return OK;
}
static CUresult cuDeviceGetCount(int* n) {
    *n = ndev;
    return OK;
}
static CUresult cuDeviceGet(int* d, int o) {
    if (o < 0 || o >= ndev) return INVALID_DEVICE;
    *d = o;
    return OK;
}
static CUresult cuDeviceGetAttribute(int* v, int attr, int d) {
    if (d < 0 || d >= ndev) return INVALID_DEVICE;
    switch (attr) {
    case 1: *v = 1024; break;                            /* max threads per block */
    case 2: case 3: *v = 1024; break;                    /* max block x, y */
    case 4: *v = 64; break;                              /* max block z */
    case 5: *v = 2147483647; break;                      /* max grid x */
    case 6: case 7: *v = 65535; break;                   /* max grid y, z */
    case 16: *v = 132; break;                            /* SMs */
    case 75: *v = cc[d][0]; break;
    case 76: *v = cc[d][1]; break;
    case 97: *v = cc[d][0] >= 9 ? 232448 : 166912; break; /* smem optin */
    case 120: *v = cc[d][0] >= 9; break;                 /* cluster launch */
    default: *v = 0;
    }
    return OK;
}
static CUresult cuDevicePrimaryCtxRetain(void** ctx, int d) {
    if (d < 0 || d >= ndev) return INVALID_DEVICE;
    calls_retain++;
    *ctx = &ctx_objs[d];
    return OK;
}
static CUresult cuCtxGetCurrent(void** ctx) {
    calls_ctx_get++;
    *ctx = current;
    return OK;
}
static CUresult cuCtxSetCurrent(void* ctx) {
    calls_ctx_set++;
    CUresult r = injected("cuCtxSetCurrent");
    if (r) return r;
    current = (int*)ctx;
    return OK;
}
static CUresult cuCtxGetDevice(int* d) {
    if (!current) return INVALID_CONTEXT;
    *d = cur_dev();
    return OK;
}
static CUresult cuLibraryLoadData(void** lib, const void* image, void* a, void* b, unsigned c, void* d, void* e,
                                  unsigned f) {
    (void)image, (void)a, (void)b, (void)c, (void)d, (void)e, (void)f;
    CUresult r = injected("cuLibraryLoadData");
    if (r) return r;
    pthread_mutex_lock(&lock);
    calls_load++;
    *lib = (void*)(uintptr_t)(0x1000 + ++nlibs);
    pthread_mutex_unlock(&lock);
    return OK;
}
static CUresult cuLibraryGetKernel(void** k, void* lib, const char* name) {
    (void)lib;
    calls_get_kernel++;
    for (int i = 0; i < nkernels; i++)
        if (!strcmp(kernels[i].name, name)) {
            *k = &kernels[i];
            return OK;
        }
    return NOT_FOUND;
}
static CUresult cuKernelGetFunction(void** f, void* k) {
    if (!current) return INVALID_CONTEXT;
    calls_get_function++;
    *f = k;
    return OK;
}
static CUresult cuKernelSetAttribute(int attr, int value, void* k, int dev) {
    calls_set_attr++;
    if (attr != 8 || dev < 0 || dev >= ndev) return INVALID_VALUE;
    ((fk_kernel*)k)->max_dyn_smem[dev] = value;
    return OK;
}
static CUresult cuPointerGetAttribute(void* data, int attr, uint64_t ptr) {
    (void)attr, (void)ptr;
    *(int*)data = 0;
    return OK;
}

static CUresult cuMemAllocAsync(uint64_t* p, size_t size, void* stream) {
    if (!current) return INVALID_CONTEXT;
    CUresult r = injected("cuMemAllocAsync");
    if (r) return r;
    pthread_mutex_lock(&lock);
    if (nallocs >= MAX_ALLOCS) nallocs = 0;
    fk_alloc* a = &allocs[nallocs++];
    memset(a, 0, sizeof *a);
    a->ptr = 0x7f0000000000ull + (uint64_t)nallocs * 0x10000000ull + 0x100; /* 256-byte aligned, as the pools */
    a->size = size, a->stream = (uint64_t)(uintptr_t)stream, a->device = cur_dev();
    *p = a->ptr;
    pthread_mutex_unlock(&lock);
    return OK;
}
static CUresult cuMemFreeAsync(uint64_t p, void* stream) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].ptr == p && !allocs[i].freed) {
            allocs[i].freed = 1, allocs[i].free_stream = (uint64_t)(uintptr_t)stream;
            pthread_mutex_unlock(&lock);
            return OK;
        }
    pthread_mutex_unlock(&lock);
    return INVALID_VALUE;
}
/* Records the arguments; the map holds the address, then all-ones words (so a cleared bit shows), then dims. */
static CUresult cuTensorMapEncodeTiled(void* map, int dtype, unsigned rank, void* addr, const uint64_t* dims,
                                       const uint64_t* strides, const uint32_t* box, const uint32_t* estrides,
                                       int interleave, int swizzle, int l2, int oob) {
    CUresult r = injected("cuTensorMapEncodeTiled");
    if (r) return r;
    if (rank < 1 || rank > 5 || ((uintptr_t)map % 64)) return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (nencodes >= MAX_ENCODES) nencodes = 0;
    fk_encode* e = &encodes[nencodes++];
    memset(e, 0, sizeof *e);
    e->dtype = dtype, e->rank = rank, e->addr = (uint64_t)(uintptr_t)addr;
    for (unsigned i = 0; i < rank; i++) e->dims[i] = dims[i], e->box[i] = box[i], e->estrides[i] = estrides[i];
    for (unsigned i = 0; i + 1 < rank; i++) e->strides[i] = strides[i];
    e->interleave = interleave, e->swizzle = swizzle, e->l2 = l2, e->oob = oob;
    pthread_mutex_unlock(&lock);
    uint64_t w[16];
    memset(w, 0xff, sizeof w);
    w[0] = (uint64_t)(uintptr_t)addr;
    for (unsigned i = 0; i < rank; i++) w[2 + i] = dims[i];
    memcpy(map, w, sizeof w);
    return OK;
}

static CUresult record(void* f, const unsigned g[3], const unsigned b[3], unsigned smem, void* stream, void** params,
                       void** extra, const unsigned cl[3], int ex) {
    if (!current) return INVALID_CONTEXT;
    CUresult r = injected(ex ? "cuLaunchKernelEx" : "cuLaunchKernel");
    if (r) return r;
    fk_kernel* k = (fk_kernel*)f;
    int dev = cur_dev();
    if (extra != NULL || params == NULL) return INVALID_VALUE;
    if (k->reqntid[0] && (b[0] != k->reqntid[0] || b[1] != k->reqntid[1] || b[2] != k->reqntid[2]))
        return INVALID_VALUE;
    if (smem > 49152 && (int)smem > k->max_dyn_smem[dev]) return INVALID_VALUE;
    if (g[0] == 0 || g[1] == 0 || g[2] == 0 || b[0] == 0 || b[1] == 0 || b[2] == 0) return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (nlaunches >= MAX_LAUNCHES) nlaunches = 0;
    fk_launch* l = &launches[nlaunches++];
    memset(l, 0, sizeof *l);
    strncpy(l->kernel, k->name, sizeof l->kernel - 1);
    memcpy(l->grid, g, sizeof l->grid), memcpy(l->block, b, sizeof l->block);
    if (cl) memcpy(l->cluster, cl, sizeof l->cluster);
    l->smem = smem, l->stream = (uint64_t)(uintptr_t)stream, l->device = dev, l->ex = ex;
    for (int i = 0; i < k->nparams; i++) {
        if (k->offset[i] + k->size[i] > PARAM_BYTES) continue;
        memcpy(l->params + k->offset[i], params[i], k->size[i]);
        if (k->offset[i] + k->size[i] > l->nbytes) l->nbytes = k->offset[i] + k->size[i];
    }
    pthread_mutex_unlock(&lock);
    return OK;
}

static CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned smem, void* stream, void** params, void** extra) {
    unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    return record(f, g, b, smem, stream, params, extra, NULL, 0);
}

static CUresult cuLaunchKernelEx(const cu_config* c, void* f, void** params, void** extra) {
    unsigned cl[3] = {0, 0, 0};
    for (unsigned i = 0; i < c->nattrs; i++)
        if (c->attrs[i].id == 4)
            cl[0] = c->attrs[i].value.cluster.x, cl[1] = c->attrs[i].value.cluster.y,
            cl[2] = c->attrs[i].value.cluster.z;
    return record(f, c->grid, c->block, c->smem, c->stream, params, extra, cl, 1);
}

#define ENTRY(name) {#name, (void*)name}
static const struct {
    const char* name;
    void* fn;
} table[] = {
    ENTRY(cuInit), ENTRY(cuDriverGetVersion), ENTRY(cuGetErrorName), ENTRY(cuGetErrorString),
    ENTRY(cuDeviceGetCount), ENTRY(cuDeviceGet), ENTRY(cuDeviceGetAttribute), ENTRY(cuDevicePrimaryCtxRetain),
    ENTRY(cuCtxGetCurrent), ENTRY(cuCtxSetCurrent), ENTRY(cuCtxGetDevice), ENTRY(cuLibraryLoadData),
    ENTRY(cuLibraryGetKernel), ENTRY(cuKernelGetFunction), ENTRY(cuKernelSetAttribute), ENTRY(cuLaunchKernel),
    ENTRY(cuLaunchKernelEx), ENTRY(cuPointerGetAttribute), ENTRY(cuMemAllocAsync), ENTRY(cuMemFreeAsync),
    ENTRY(cuTensorMapEncodeTiled),
};

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, uint64_t flags, int* status) {
    (void)version, (void)flags;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, symbol)) {
            *pfn = table[i].fn;
            if (status) *status = 0;
            return OK;
        }
    *pfn = NULL;
    if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return NOT_FOUND;
}
