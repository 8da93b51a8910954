/* kernelpack C runtime: the CUDA driver types it uses, declared without cuda.h, and the opening of the driver.
 *
 * Shared by the C library's runtime (pasted into every generated translation unit) and the CuTe host shim
 * (cute_host/shim.c): the one place kernelpack's C code declares driver types and resolves driver entry points.
 * Layouts are those of CUDA 12/13's cuda.h, locked with static asserts (the test suite checks them against the
 * real header). Everything is a type, a macro or static.
 */
#ifndef KP_CUDA_H
#define KP_CUDA_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp_model.h"

#define KP_CUDA_ASSERT(cond, tag) typedef char kp_cuda_assert_##tag[(cond) ? 1 : -1]

typedef int kp_CUresult;
typedef int kp_CUdevice;
typedef struct kp_CUctx_st* kp_CUcontext;
typedef struct kp_CUlib_st* kp_CUlibrary;
typedef struct kp_CUkern_st* kp_CUkernel;
typedef struct kp_CUfunc_st* kp_CUfunction;
typedef struct kp_CUstream_st* kp_CUstream;
typedef unsigned long long kp_CUdeviceptr;

typedef union kp_CUlaunchAttributeValue {
    char pad[64];
    struct {
        unsigned int x, y, z;
    } clusterDim;
    int i; /* cooperative, programmaticStreamSerializationAllowed */
} kp_CUlaunchAttributeValue;

typedef struct kp_CUlaunchAttribute {
    unsigned int id;
    char pad[8 - sizeof(unsigned int)];
    kp_CUlaunchAttributeValue value;
} kp_CUlaunchAttribute;

typedef struct kp_CUlaunchConfig {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    kp_CUstream hStream;
    kp_CUlaunchAttribute* attrs;
    unsigned int numAttrs;
} kp_CUlaunchConfig;

KP_CUDA_ASSERT(sizeof(kp_CUlaunchAttributeValue) == 64, attr_value_size);
KP_CUDA_ASSERT(sizeof(kp_CUlaunchAttribute) == 72, attr_size);
KP_CUDA_ASSERT(offsetof(kp_CUlaunchAttribute, value) == 8, attr_value_offset);
KP_CUDA_ASSERT(sizeof(kp_CUlaunchConfig) == 56, config_size);
KP_CUDA_ASSERT(offsetof(kp_CUlaunchConfig, hStream) == 32, config_stream_offset);
KP_CUDA_ASSERT(offsetof(kp_CUlaunchConfig, attrs) == 40, config_attrs_offset);
KP_CUDA_ASSERT(offsetof(kp_CUlaunchConfig, numAttrs) == 48, config_nattrs_offset);

/* ------------------------------------------------------------------ opening the driver */

typedef kp_CUresult (*kp_GetProcAddress_v2)(const char*, void**, int, uint64_t, int*);

/* One driver entry point to resolve: "cuName", where its pointer goes in the caller's table, and whether the
 * caller cannot work without it. */
typedef struct kp_driver_sym {
    const char* name;
    size_t offset;
    int required;
} kp_driver_sym;
#define KP_DRIVER_SYM(table, field, required) {"cu" #field, offsetof(table, field), required}

enum { KP_DRIVER_READY = 0, KP_DRIVER_MISSING = 1, KP_DRIVER_TOO_OLD = 2 };

/* Open the driver -- libcuda.so.1, or the library the environment variable KERNELPACK_DRIVER names by its path
 * (kernelpack's dry-run driver, for tests on machines without a GPU: docs/testing.md) -- and fill `table` with the
 * entry points `syms` names, each requested at KP_CUDA_API_VERSION through cuGetProcAddress_v2 (absent optional ones
 * stay NULL). Returns KP_DRIVER_READY, or KP_DRIVER_MISSING / KP_DRIVER_TOO_OLD with msg saying why; *version is the
 * driver's CUDA version (cuDriverGetVersion). */
static inline int kp_driver_resolve(const kp_driver_sym* syms, size_t n, void* table, int* version, char* msg,
                                    size_t cap) {
    *version = 0;
    const char* path = getenv("KERNELPACK_DRIVER");
    if (path == NULL || path[0] == 0) path = "libcuda.so.1";
    if (strcmp(path, "dryrun") == 0) {
        snprintf(msg, cap, "KERNELPACK_DRIVER=dryrun names kernelpack's dry-run driver as Python finds it; a program "
                 "opens it by its path: KERNELPACK_DRIVER=$(python -m kernelpack.testing path)");
        return KP_DRIVER_MISSING;
    }
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char* why = dlerror();
        snprintf(msg, cap, "cannot load the CUDA driver %s (%s)", path, why ? why : "not found");
        return KP_DRIVER_MISSING;
    }
    kp_GetProcAddress_v2 gpa = (kp_GetProcAddress_v2)(uintptr_t)dlsym(h, "cuGetProcAddress_v2");
    kp_CUresult (*get_version)(int*) = (kp_CUresult(*)(int*))(uintptr_t)dlsym(h, "cuDriverGetVersion");
    int v = 0;
    if (get_version != NULL && get_version(&v) != KP_CUDA_SUCCESS) v = 0;
    *version = v;
    if (gpa == NULL || v < KP_CUDA_API_VERSION) {
        snprintf(msg, cap, "the CUDA driver supports CUDA %d.%d; this library needs CUDA %d.%d or newer "
                 "(cuGetProcAddress_v2, cuLibraryLoadData)", v / 1000, v % 1000 / 10, KP_CUDA_API_VERSION / 1000,
                 KP_CUDA_API_VERSION % 1000 / 10);
        return KP_DRIVER_TOO_OLD;
    }
    for (size_t i = 0; i < n; i++) {
        void* fn = NULL;
        int found = -1;
        kp_CUresult r = gpa(syms[i].name, &fn, KP_CUDA_API_VERSION, 0, &found);
        if (r != KP_CUDA_SUCCESS || found != 0 || fn == NULL) fn = NULL;
        if (fn == NULL && syms[i].required) {
            snprintf(msg, cap, "the CUDA driver (CUDA %d.%d) has no %s for CUDA %d.%d (cuGetProcAddress: result %d, "
                     "status %d)", v / 1000, v % 1000 / 10, syms[i].name, KP_CUDA_API_VERSION / 1000,
                     KP_CUDA_API_VERSION % 1000 / 10, (int)r, found);
            return KP_DRIVER_TOO_OLD;
        }
        memcpy((char*)table + syms[i].offset, &fn, sizeof fn);
    }
    msg[0] = 0;
    return KP_DRIVER_READY;
}

#endif /* KP_CUDA_H */
