/* kernelpack's driver launch recorder: a stand-in for libcuda.so.1 that forwards every driver entry point to the real
 * driver and writes down what `kernelpack capture --native` needs from code that launches kernels itself (CUDA C++
 * built with nvcc, NVRTC, any library calling the driver): the images loaded, which function is which kernel, and
 * every launch (grid, block, dynamic shared memory, cluster, the bytes of every parameter).
 *
 * Built by kernelpack.capture.native at capture time, with a generated part (recorder_exports.c) that defines every
 * other function the real driver exports as a jump through a table filled from the real driver when this library is
 * loaded; nothing here is called by hand. KERNELPACK_RECORD_DRIVER names the real driver (a path), and
 * KERNELPACK_RECORD_LOG the log file; both are read when the library is loaded. The log is a sequence of records
 * (u32 kind, u32 payload bytes, payload), each written with one write(2) under a lock:
 *   1 IMAGE   u64 handle, u64 address, u32 api, u32 0, the image's bytes (a cubin, a fatbin, PTX text)
 *   2 FUNC    u64 function (or kernel), u64 module (or library), u32 api, u32 0, the name
 *   3 KFUNC   u64 kernel, u64 function
 *   4 LAUNCH  u64 function, u32 grid[3], block[3], smem, cluster[3], result, api, params, u32 name bytes, the name,
 *             then per parameter: u32 bytes, the bytes (u32 0xFFFFFFFF for a parameter whose size is unknown)
 *   5 NOTE    text
 * The recorder never prints, exits or aborts; what it cannot record it says in a NOTE and passes the call on. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kp_cuda.h"

#define EXPORT __attribute__((visibility("default")))
#define HIDDEN __attribute__((visibility("hidden")))

typedef kp_CUresult CUresult;
typedef void* CUmodule;
typedef void* CUfunction;

enum { R_IMAGE = 1, R_FUNC = 2, R_KFUNC = 3, R_LAUNCH = 4, R_NOTE = 5 };
enum { API_MODULE_DATA = 1, API_MODULE_DATA_EX = 2, API_FATBINARY = 3, API_LIBRARY_DATA = 4 };
enum { API_LAUNCH = 1, API_LAUNCH_EX = 2 };
#define NOT_INITIALIZED 3
#define MAX_PARAMS 1024
#define MAX_PARAM_BYTES 32764

/* the generated part: every other export of the real driver, and the table its jumps go through */
HIDDEN extern const char* const kp_rec_names[];
HIDDEN extern const unsigned kp_rec_count;
HIDDEN extern void* kp_rec_real[];

static void* real_lib;
static int log_fd = -1;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long launches_left = 1000000;

static CUresult missing_entry(void) { return NOT_INITIALIZED; }

/* ------------------------------------------------------------------ the real driver's entry points */

typedef CUresult (*GetProcAddress_t)(const char*, void**, int, uint64_t);
typedef CUresult (*GetProcAddress_v2_t)(const char*, void**, int, uint64_t, int*);
typedef CUresult (*ModuleLoadData_t)(CUmodule*, const void*);
typedef CUresult (*ModuleLoadDataEx_t)(CUmodule*, const void*, unsigned, void*, void**);
typedef CUresult (*ModuleGetFunction_t)(CUfunction*, CUmodule, const char*);
typedef CUresult (*LibraryLoadData_t)(void**, const void*, void*, void**, unsigned, void*, void**, unsigned);
typedef CUresult (*LibraryGetKernel_t)(void**, void*, const char*);
typedef CUresult (*KernelGetFunction_t)(CUfunction*, void*);
typedef CUresult (*LaunchKernel_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   kp_CUstream, void**, void**);
typedef CUresult (*LaunchKernelEx_t)(const kp_CUlaunchConfig*, CUfunction, void**, void**);
typedef CUresult (*FuncGetName_t)(const char**, CUfunction);
typedef CUresult (*FuncGetParamInfo_t)(CUfunction, size_t, size_t*, size_t*);

static struct {
    GetProcAddress_t get_proc_address;
    GetProcAddress_v2_t get_proc_address_v2;
    ModuleLoadData_t module_load_data;
    ModuleLoadDataEx_t module_load_data_ex;
    ModuleLoadData_t module_load_fat_binary;
    ModuleGetFunction_t module_get_function;
    LibraryLoadData_t library_load_data;
    LibraryGetKernel_t library_get_kernel;
    KernelGetFunction_t kernel_get_function;
    LaunchKernel_t launch_kernel, launch_kernel_ptsz;
    LaunchKernelEx_t launch_kernel_ex, launch_kernel_ex_ptsz;
    FuncGetName_t func_get_name, kernel_get_name;
    FuncGetParamInfo_t func_get_param_info, kernel_get_param_info;
} real;

/* ------------------------------------------------------------------ the log */

static void put(unsigned char** p, const void* src, size_t n) {
    memcpy(*p, src, n);
    *p += n;
}

static void put_u32(unsigned char** p, uint32_t v) { put(p, &v, 4); }
static void put_u64(unsigned char** p, uint64_t v) { put(p, &v, 8); }

/* One record: header and payload in one buffer, one write. */
static void emit(uint32_t kind, const unsigned char* payload, size_t n) {
    if (log_fd < 0 || n > 0x7fffffffu) return;
    unsigned char* buf = (unsigned char*)malloc(n + 8);
    if (buf == NULL) return;
    uint32_t head[2] = {kind, (uint32_t)n};
    memcpy(buf, head, 8);
    if (n) memcpy(buf + 8, payload, n);
    pthread_mutex_lock(&log_lock);
    size_t done = 0;
    while (done < n + 8) {
        ssize_t w = write(log_fd, buf + done, n + 8 - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    pthread_mutex_unlock(&log_lock);
    free(buf);
}

static void note(const char* text) { emit(R_NOTE, (const unsigned char*)text, strlen(text)); }

/* ------------------------------------------------------------------ images and names */

/* The bytes of an image the driver was given: a cubin (its ELF tables' end), a fatbin (its header's size), a fatbin
 * wrapper (nvcc's __fatBinC_Wrapper_t: the fatbin it points to), else PTX text (to its NUL). */
static const unsigned char* image_bytes(const void* image, size_t* size) {
    const unsigned char* p = (const unsigned char*)image;
    uint32_t magic;
    memcpy(&magic, p, 4);
    if (magic == 0x466243b1u) { /* { int magic; int version; const unsigned long long* data; void* filename } */
        const unsigned char* data;
        memcpy(&data, p + 8, sizeof data);
        p = data;
        memcpy(&magic, p, 4);
    }
    if (magic == 0xBA55ED50u) {
        uint16_t header;
        uint64_t body;
        memcpy(&header, p + 6, 2);
        memcpy(&body, p + 8, 8);
        *size = (size_t)header + (size_t)body;
    } else if (memcmp(p, "\x7f" "ELF", 4) == 0) {
        uint64_t shoff, phoff;
        uint16_t shentsize, shnum, phentsize, phnum;
        memcpy(&phoff, p + 0x20, 8);
        memcpy(&shoff, p + 0x28, 8);
        memcpy(&phentsize, p + 0x36, 2);
        memcpy(&phnum, p + 0x38, 2);
        memcpy(&shentsize, p + 0x3a, 2);
        memcpy(&shnum, p + 0x3c, 2);
        size_t a = shoff + (size_t)shnum * shentsize, b = phoff + (size_t)phnum * phentsize;
        *size = a > b ? a : b;
    } else {
        *size = strlen((const char*)p) + 1;
    }
    return p;
}

static void record_image(const void* handle, const void* image, uint32_t api) {
    if (image == NULL) return;
    size_t size;
    const unsigned char* bytes = image_bytes(image, &size);
    size_t n = 24 + size;
    unsigned char* buf = (unsigned char*)malloc(n);
    if (buf == NULL) return;
    unsigned char* p = buf;
    put_u64(&p, (uint64_t)(uintptr_t)handle);
    put_u64(&p, (uint64_t)(uintptr_t)bytes);
    put_u32(&p, api);
    put_u32(&p, 0);
    put(&p, bytes, size);
    emit(R_IMAGE, buf, n);
    free(buf);
}

static void record_func(const void* fn, const void* owner, uint32_t api, const char* name) {
    size_t len = name != NULL ? strnlen(name, 4096) : 0;
    unsigned char buf[24 + 4096];
    unsigned char* p = buf;
    put_u64(&p, (uint64_t)(uintptr_t)fn);
    put_u64(&p, (uint64_t)(uintptr_t)owner);
    put_u32(&p, api);
    put_u32(&p, 0);
    put(&p, name, len);
    emit(R_FUNC, buf, (size_t)(p - buf));
}

/* ------------------------------------------------------------------ launches */

typedef struct {
    unsigned grid[3], block[3], smem, cluster[3];
} shape;

#define UNKNOWN_SIZE ((size_t)-1)

/* The sizes of f's parameters as `info` gives them (UNKNOWN_SIZE past MAX_PARAM_BYTES), their known total in
 * `total`; the count, 0 when `info` is missing or does not know f. */
static unsigned param_sizes(FuncGetParamInfo_t info, CUfunction f, size_t* sizes, size_t* total) {
    unsigned count = 0;
    size_t off, sz;
    *total = 0;
    while (info != NULL && count < MAX_PARAMS && info(f, count, &off, &sz) == 0) {
        sizes[count++] = sz <= MAX_PARAM_BYTES ? sz : UNKNOWN_SIZE;
        *total += sz <= MAX_PARAM_BYTES ? sz : 0;
    }
    return count;
}

static void record_launch(CUfunction f, const shape* s, void** params, void** extra, CUresult result, uint32_t api) {
    pthread_mutex_lock(&log_lock);
    int keep = launches_left > 0;
    if (keep) launches_left--;
    pthread_mutex_unlock(&log_lock);
    if (!keep || log_fd < 0) return;
    /* the CUDA runtime launches a CUkernel cast to CUfunction (as the driver allows): asked as a function, then
     * as a kernel */
    const char* name = NULL;
    if ((real.func_get_name == NULL || real.func_get_name(&name, f) != 0) &&
        (real.kernel_get_name == NULL || real.kernel_get_name(&name, f) != 0))
        name = NULL;
    size_t nlen = name != NULL ? strnlen(name, 4096) : 0;
    /* the parameters' sizes, from the driver: as a function, then as a kernel */
    size_t sizes[MAX_PARAMS];
    unsigned count = 0;
    size_t total = 0;
    if (params != NULL) {
        count = param_sizes(real.func_get_param_info, f, sizes, &total);
        if (count == 0) count = param_sizes(real.kernel_get_param_info, f, sizes, &total);
    }
    /* cuLaunchKernel's extra: CU_LAUNCH_PARAM_BUFFER_POINTER (1), _SIZE (2), _END (0): one buffer of every byte */
    const void* buffer = NULL;
    size_t buffer_size = 0;
    if (params == NULL && extra != NULL) {
        for (unsigned i = 0; i < 64 && extra[i] != NULL; i += 2) {
            if (extra[i] == (void*)1) buffer = extra[i + 1];
            if (extra[i] == (void*)2 && extra[i + 1] != NULL) memcpy(&buffer_size, extra[i + 1], sizeof buffer_size);
        }
        if (buffer == NULL || buffer_size > MAX_PARAM_BYTES) buffer = NULL;
        if (buffer != NULL) {
            sizes[0] = buffer_size;
            count = 1;
            total = buffer_size;
        }
    }
    size_t n = 8 + 4 * 16 + nlen + (size_t)count * 4 + total;
    unsigned char* buf = (unsigned char*)malloc(n);
    if (buf == NULL) return;
    unsigned char* p = buf;
    put_u64(&p, (uint64_t)(uintptr_t)f);
    for (int i = 0; i < 3; i++) put_u32(&p, s->grid[i]);
    for (int i = 0; i < 3; i++) put_u32(&p, s->block[i]);
    put_u32(&p, s->smem);
    for (int i = 0; i < 3; i++) put_u32(&p, s->cluster[i]);
    put_u32(&p, (uint32_t)result);
    put_u32(&p, api | (buffer != NULL ? 0x100u : 0u));
    put_u32(&p, count);
    put_u32(&p, (uint32_t)nlen);
    put(&p, name, nlen);
    for (unsigned i = 0; i < count; i++) {
        if (sizes[i] == UNKNOWN_SIZE) {
            put_u32(&p, 0xFFFFFFFFu);
            continue;
        }
        put_u32(&p, (uint32_t)sizes[i]);
        const void* src = buffer != NULL ? buffer : params[i];
        if (src != NULL) put(&p, src, sizes[i]);
        else memset(p, 0, sizes[i]), p += sizes[i];
    }
    emit(R_LAUNCH, buf, (size_t)(p - buf));
    free(buf);
}

static CUresult launch(LaunchKernel_t fn, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned smem, kp_CUstream stream, void** params, void** extra) {
    if (fn == NULL) return NOT_INITIALIZED;
    CUresult r = fn(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra);
    shape s = {{gx, gy, gz}, {bx, by, bz}, smem, {1, 1, 1}};
    record_launch(f, &s, params, extra, r, API_LAUNCH);
    return r;
}

static CUresult launch_ex(LaunchKernelEx_t fn, const kp_CUlaunchConfig* c, CUfunction f, void** params,
                          void** extra) {
    if (fn == NULL) return NOT_INITIALIZED;
    CUresult r = fn(c, f, params, extra);
    if (c != NULL) {
        shape s = {{c->gridDimX, c->gridDimY, c->gridDimZ}, {c->blockDimX, c->blockDimY, c->blockDimZ},
                   c->sharedMemBytes, {1, 1, 1}};
        for (unsigned i = 0; c->attrs != NULL && i < c->numAttrs; i++) {
            if (c->attrs[i].id == 4) { /* CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION */
                s.cluster[0] = c->attrs[i].value.clusterDim.x;
                s.cluster[1] = c->attrs[i].value.clusterDim.y;
                s.cluster[2] = c->attrs[i].value.clusterDim.z;
            }
        }
        record_launch(f, &s, params, extra, r, API_LAUNCH_EX);
    }
    return r;
}

/* ------------------------------------------------------------------ the entry points it stands in for */

EXPORT CUresult cuModuleLoadData(CUmodule* m, const void* image) {
    if (real.module_load_data == NULL) return NOT_INITIALIZED;
    CUresult r = real.module_load_data(m, image);
    if (r == 0 && m != NULL) record_image(*m, image, API_MODULE_DATA);
    return r;
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned n, void* options, void** values) {
    if (real.module_load_data_ex == NULL) return NOT_INITIALIZED;
    CUresult r = real.module_load_data_ex(m, image, n, options, values);
    if (r == 0 && m != NULL) record_image(*m, image, API_MODULE_DATA_EX);
    return r;
}

EXPORT CUresult cuModuleLoadFatBinary(CUmodule* m, const void* image) {
    if (real.module_load_fat_binary == NULL) return NOT_INITIALIZED;
    CUresult r = real.module_load_fat_binary(m, image);
    if (r == 0 && m != NULL) record_image(*m, image, API_FATBINARY);
    return r;
}

EXPORT CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
    if (real.module_get_function == NULL) return NOT_INITIALIZED;
    CUresult r = real.module_get_function(f, m, name);
    if (r == 0 && f != NULL) record_func(*f, m, API_MODULE_DATA, name);
    return r;
}

EXPORT CUresult cuLibraryLoadData(void** lib, const void* code, void* jit_options, void** jit_values,
                                  unsigned njit, void* lib_options, void** lib_values, unsigned nlib) {
    if (real.library_load_data == NULL) return NOT_INITIALIZED;
    CUresult r = real.library_load_data(lib, code, jit_options, jit_values, njit, lib_options, lib_values, nlib);
    if (r == 0 && lib != NULL) record_image(*lib, code, API_LIBRARY_DATA);
    return r;
}

EXPORT CUresult cuLibraryGetKernel(void** kernel, void* lib, const char* name) {
    if (real.library_get_kernel == NULL) return NOT_INITIALIZED;
    CUresult r = real.library_get_kernel(kernel, lib, name);
    if (r == 0 && kernel != NULL) record_func(*kernel, lib, API_LIBRARY_DATA, name);
    return r;
}

EXPORT CUresult cuKernelGetFunction(CUfunction* f, void* kernel) {
    if (real.kernel_get_function == NULL) return NOT_INITIALIZED;
    CUresult r = real.kernel_get_function(f, kernel);
    if (r == 0 && f != NULL) {
        unsigned char buf[16], *p = buf;
        put_u64(&p, (uint64_t)(uintptr_t)kernel);
        put_u64(&p, (uint64_t)(uintptr_t)*f);
        emit(R_KFUNC, buf, sizeof buf);
    }
    return r;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned smem, kp_CUstream stream, void** params, void** extra) {
    return launch(real.launch_kernel, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra);
}

EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned smem, kp_CUstream stream, void** params, void** extra) {
    return launch(real.launch_kernel_ptsz, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra);
}

EXPORT CUresult cuLaunchKernelEx(const kp_CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
    return launch_ex(real.launch_kernel_ex, c, f, params, extra);
}

EXPORT CUresult cuLaunchKernelEx_ptsz(const kp_CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
    return launch_ex(real.launch_kernel_ex_ptsz, c, f, params, extra);
}

/* Every real entry point the recorder calls: the name cuGetProcAddress is asked, the real driver's export (a
 * per-thread-stream variant's own name), where it goes in `real`, and for those it stands in for, its own. */
static const struct entry {
    const char* name;
    const char* export_name;
    size_t field;
    void* mine;
} entries[] = {
#define E(name, export_name, field, mine) {name, export_name, offsetof(__typeof__(real), field), (void*)mine}
    E("cuModuleLoadData", "cuModuleLoadData", module_load_data, cuModuleLoadData),
    E("cuModuleLoadDataEx", "cuModuleLoadDataEx", module_load_data_ex, cuModuleLoadDataEx),
    E("cuModuleLoadFatBinary", "cuModuleLoadFatBinary", module_load_fat_binary, cuModuleLoadFatBinary),
    E("cuModuleGetFunction", "cuModuleGetFunction", module_get_function, cuModuleGetFunction),
    E("cuLibraryLoadData", "cuLibraryLoadData", library_load_data, cuLibraryLoadData),
    E("cuLibraryGetKernel", "cuLibraryGetKernel", library_get_kernel, cuLibraryGetKernel),
    E("cuKernelGetFunction", "cuKernelGetFunction", kernel_get_function, cuKernelGetFunction),
    E("cuLaunchKernel", "cuLaunchKernel", launch_kernel, cuLaunchKernel),
    E("cuLaunchKernel", "cuLaunchKernel_ptsz", launch_kernel_ptsz, cuLaunchKernel_ptsz),
    E("cuLaunchKernelEx", "cuLaunchKernelEx", launch_kernel_ex, cuLaunchKernelEx),
    E("cuLaunchKernelEx", "cuLaunchKernelEx_ptsz", launch_kernel_ex_ptsz, cuLaunchKernelEx_ptsz),
    E("cuFuncGetName", "cuFuncGetName", func_get_name, NULL),
    E("cuFuncGetParamInfo", "cuFuncGetParamInfo", func_get_param_info, NULL),
    E("cuKernelGetName", "cuKernelGetName", kernel_get_name, NULL),
    E("cuKernelGetParamInfo", "cuKernelGetParamInfo", kernel_get_param_info, NULL),
#undef E
};
#define N_ENTRIES (sizeof entries / sizeof entries[0])

static void** slot_of(const struct entry* e) { return (void**)((char*)&real + e->field); }

/* What cuGetProcAddress hands out for `symbol`: for cuGetProcAddress itself, the recorder's; for a name it stands
 * in for, its own entry point for the real one it knows (the legacy-stream or per-thread-stream variant); another
 * (a version it does not know) is passed on unrecorded, and said in a NOTE. */
static void hand_out(const char* symbol, void** pfn, int version);

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, uint64_t flags) {
    if (real.get_proc_address == NULL) return NOT_INITIALIZED;
    CUresult r = real.get_proc_address(symbol, pfn, version, flags);
    if (r == 0) hand_out(symbol, pfn, version);
    return r;
}

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, uint64_t flags, int* status) {
    if (real.get_proc_address_v2 == NULL) return NOT_INITIALIZED;
    CUresult r = real.get_proc_address_v2(symbol, pfn, version, flags, status);
    if (r == 0) hand_out(symbol, pfn, version);
    return r;
}

static void hand_out(const char* symbol, void** pfn, int version) {
    if (symbol == NULL || pfn == NULL || *pfn == NULL) return;
    if (strcmp(symbol, "cuGetProcAddress") == 0) {
        *pfn = version >= 12000 ? (void*)cuGetProcAddress_v2 : (void*)cuGetProcAddress;
        return;
    }
    int named = 0;
    for (size_t i = 0; i < N_ENTRIES; i++) {
        if (entries[i].mine == NULL || strcmp(entries[i].name, symbol) != 0) continue;
        named = 1;
        if (*slot_of(&entries[i]) == *pfn) {
            *pfn = entries[i].mine;
            return;
        }
    }
    if (named) {
        char text[300];
        snprintf(text, sizeof text, "cuGetProcAddress gave an entry point of %s the recorder does not know (another "
                 "version): its launches are not recorded", symbol);
        note(text);
    }
}

/* ------------------------------------------------------------------ loading */

__attribute__((constructor)) static void start(void) {
    const char* path = getenv("KERNELPACK_RECORD_DRIVER");
    const char* log = getenv("KERNELPACK_RECORD_LOG");
    const char* cap = getenv("KERNELPACK_RECORD_MAX_LAUNCHES");
    if (cap != NULL && *cap) launches_left = strtoull(cap, NULL, 10);
    if (log != NULL && *log) log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    real_lib = path != NULL && *path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    for (unsigned i = 0; i < kp_rec_count; i++) {
        void* f = real_lib != NULL ? dlsym(real_lib, kp_rec_names[i]) : NULL;
        kp_rec_real[i] = f != NULL ? f : (void*)missing_entry;
    }
    if (real_lib == NULL) {
        char text[600];
        const char* why = path == NULL || !*path ? "KERNELPACK_RECORD_DRIVER is not set" : dlerror();
        snprintf(text, sizeof text, "the real driver could not be opened: %s", why ? why : "unknown");
        note(text);
        return;
    }
    *(void**)&real.get_proc_address = dlsym(real_lib, "cuGetProcAddress");
    *(void**)&real.get_proc_address_v2 = dlsym(real_lib, "cuGetProcAddress_v2");
    for (size_t i = 0; i < N_ENTRIES; i++) {
        void** slot = slot_of(&entries[i]);
        *slot = dlsym(real_lib, entries[i].export_name);
        /* a driver that gives entry points only through cuGetProcAddress_v2 (as kernelpack's dry-run driver) */
        if (*slot == NULL && real.get_proc_address_v2 != NULL &&
            strcmp(entries[i].name, entries[i].export_name) == 0)
            real.get_proc_address_v2(entries[i].name, slot, 12000, 0, NULL);
    }
}
