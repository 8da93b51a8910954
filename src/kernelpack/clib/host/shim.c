/* kernelpack CuTe host shim: the CUDA-runtime-shaped symbols a CuTe DSL `export_to_c` object imports, implemented
 * over the CUDA driver API opened with dlopen. No cudart, no CuTe runtime library.
 *
 * The object calls `_cudaX` with the signature of the CUDA runtime's `cudaX` (in CuTe's own runtime each is a bare
 * jump to it). Every function here:
 *   - opens libcuda.so.1 and calls cuInit once (pthread_once);
 *   - makes a context current on entry when the thread has none (the primary context of the device chosen by
 *     kp_shim_set_device, default 0), the launch path included: the object launches without asking for a device,
 *     and a fresh thread has no context;
 *   - returns the driver's CUresult (0 = success), which the object passes through to the entry's caller.
 * Every symbol is hidden: two kernelpack libraries in one process never share one. The build additionally
 * localizes everything but the library's own entry points.
 *
 * Compile with -DKP_SHIM_CHECK_HEADERS -I<cuda>/include to static-assert the layouts and enum values used here
 * against the real cuda.h and driver_types.h (the test suite does).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kp_cuda.h" /* the driver types and kp_driver_resolve, shared with the C library's runtime */

#define KP_HIDDEN __attribute__((visibility("hidden")))
#define KP_STATIC_ASSERT(cond, tag) typedef char kp_shim_assert_##tag[(cond) ? 1 : -1]

/* cudaLaunchConfig_t: dim3 grid, dim3 block, size_t dynamicSmemBytes, stream, attrs, numAttrs. */
typedef struct kp_cuda_launch_config {
    unsigned int grid[3];
    unsigned int block[3];
    size_t dynamic_smem;
    kp_CUstream stream;
    kp_CUlaunchAttribute* attrs;
    unsigned int num_attrs;
} kp_cuda_launch_config;

KP_STATIC_ASSERT(sizeof(kp_cuda_launch_config) == 56, rt_config_size);
KP_STATIC_ASSERT(offsetof(kp_cuda_launch_config, dynamic_smem) == 24, rt_config_smem);
KP_STATIC_ASSERT(offsetof(kp_cuda_launch_config, stream) == 32, rt_config_stream);
KP_STATIC_ASSERT(offsetof(kp_cuda_launch_config, attrs) == 40, rt_config_attrs);
KP_STATIC_ASSERT(offsetof(kp_cuda_launch_config, num_attrs) == 48, rt_config_nattrs);

#ifdef KP_SHIM_CHECK_HEADERS
#include <cuda.h>
#include <driver_types.h>
KP_STATIC_ASSERT(sizeof(cudaLaunchConfig_t) == sizeof(kp_cuda_launch_config), hdr_rt_config);
KP_STATIC_ASSERT(offsetof(cudaLaunchConfig_t, dynamicSmemBytes) == offsetof(kp_cuda_launch_config, dynamic_smem),
                 hdr_rt_smem);
KP_STATIC_ASSERT(offsetof(cudaLaunchConfig_t, stream) == offsetof(kp_cuda_launch_config, stream), hdr_rt_stream);
KP_STATIC_ASSERT(offsetof(cudaLaunchConfig_t, attrs) == offsetof(kp_cuda_launch_config, attrs), hdr_rt_attrs);
KP_STATIC_ASSERT(offsetof(cudaLaunchConfig_t, numAttrs) == offsetof(kp_cuda_launch_config, num_attrs), hdr_rt_n);
KP_STATIC_ASSERT(sizeof(CUlaunchConfig) == sizeof(kp_CUlaunchConfig), hdr_cu_config);
KP_STATIC_ASSERT(offsetof(CUlaunchConfig, sharedMemBytes) == offsetof(kp_CUlaunchConfig, sharedMemBytes),
                 hdr_cu_smem);
KP_STATIC_ASSERT(offsetof(CUlaunchConfig, hStream) == offsetof(kp_CUlaunchConfig, hStream), hdr_cu_stream);
KP_STATIC_ASSERT(offsetof(CUlaunchConfig, attrs) == offsetof(kp_CUlaunchConfig, attrs), hdr_cu_attrs);
KP_STATIC_ASSERT(offsetof(CUlaunchConfig, numAttrs) == offsetof(kp_CUlaunchConfig, numAttrs), hdr_cu_n);
KP_STATIC_ASSERT(sizeof(cudaLaunchAttribute) == sizeof(kp_CUlaunchAttribute), hdr_rt_attr);
KP_STATIC_ASSERT(sizeof(CUlaunchAttribute) == sizeof(kp_CUlaunchAttribute), hdr_cu_attr);
KP_STATIC_ASSERT(offsetof(cudaLaunchAttribute, val) == offsetof(CUlaunchAttribute, value), hdr_attr_value);
KP_STATIC_ASSERT((int)cudaLaunchAttributeClusterDimension == (int)CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, hdr_a_cl);
KP_STATIC_ASSERT((int)cudaLaunchAttributeCooperative == (int)CU_LAUNCH_ATTRIBUTE_COOPERATIVE, hdr_a_coop);
KP_STATIC_ASSERT((int)cudaLaunchAttributeProgrammaticStreamSerialization ==
                     (int)CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, hdr_a_pdl);
KP_STATIC_ASSERT((int)cudaLaunchAttributeClusterSchedulingPolicyPreference ==
                     (int)CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, hdr_a_sched);
KP_STATIC_ASSERT((int)cudaFuncAttributeMaxDynamicSharedMemorySize ==
                     (int)CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, hdr_f_smem);
KP_STATIC_ASSERT((int)cudaFuncAttributeNonPortableClusterSizeAllowed ==
                     (int)CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, hdr_f_np);
KP_STATIC_ASSERT((int)cudaFuncAttributeRequiredClusterWidth == (int)CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
                 hdr_f_cw);
KP_STATIC_ASSERT((int)cudaFuncAttributeClusterSchedulingPolicyPreference ==
                     (int)CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, hdr_f_sched);
KP_STATIC_ASSERT((int)cudaDevAttrMaxSharedMemoryPerBlockOptin ==
                     (int)CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, hdr_d_optin);
KP_STATIC_ASSERT((int)cudaDevAttrMultiProcessorCount == (int)CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, hdr_d_sms);
KP_STATIC_ASSERT((int)cudaDevAttrComputeCapabilityMajor == (int)CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                 hdr_d_major);
KP_STATIC_ASSERT(sizeof(CUtensorMap) == 128, hdr_tmap);
#endif

/* ------------------------------------------------------------------ the driver, opened once */

typedef struct kp_shim_driver {
    kp_CUresult (*Init)(unsigned int);
    kp_CUresult (*CtxGetCurrent)(kp_CUcontext*);
    kp_CUresult (*CtxSetCurrent)(kp_CUcontext);
    kp_CUresult (*CtxGetDevice)(int*);
    kp_CUresult (*DevicePrimaryCtxRetain)(kp_CUcontext*, int);
    kp_CUresult (*DeviceGetAttribute)(int*, int, int);
    kp_CUresult (*LibraryLoadData)(kp_CUlibrary*, const void*, void*, void**, unsigned int, void*, void**,
                                   unsigned int);
    kp_CUresult (*LibraryGetKernel)(kp_CUkernel*, kp_CUlibrary, const char*);
    kp_CUresult (*KernelSetAttribute)(int, int, kp_CUkernel, int);
    kp_CUresult (*KernelGetAttribute)(int*, int, kp_CUkernel, int);          /* optional */
    kp_CUresult (*KernelGetFunction)(kp_CUfunction*, kp_CUkernel);            /* optional */
    kp_CUresult (*LaunchKernel)(kp_CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                                unsigned int, unsigned int, unsigned int, kp_CUstream, void**, void**);
    kp_CUresult (*LaunchKernelEx)(const kp_CUlaunchConfig*, kp_CUfunction, void**, void**);
    kp_CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int*, kp_CUfunction, int, size_t); /* optional */
    kp_CUresult (*TensorMapEncodeTiled)(void*, int, unsigned int, void*, const uint64_t*, const uint64_t*,
                                        const unsigned int*, const unsigned int*, int, int, int, int); /* optional */
} kp_shim_driver;
static kp_shim_driver kp_cu;

static pthread_once_t kp_once = PTHREAD_ONCE_INIT;
static kp_CUresult kp_open_status = KP_CUDA_ERROR_NOT_INITIALIZED;
static char kp_open_msg[384] = "the CUDA driver was not opened yet";
static int kp_default_device = 0;

static void kp_open(void) {
    static const kp_driver_sym syms[] = {
        KP_DRIVER_SYM(kp_shim_driver, Init, 1), KP_DRIVER_SYM(kp_shim_driver, CtxGetCurrent, 1),
        KP_DRIVER_SYM(kp_shim_driver, CtxSetCurrent, 1), KP_DRIVER_SYM(kp_shim_driver, CtxGetDevice, 1),
        KP_DRIVER_SYM(kp_shim_driver, DevicePrimaryCtxRetain, 1), KP_DRIVER_SYM(kp_shim_driver, DeviceGetAttribute, 1),
        KP_DRIVER_SYM(kp_shim_driver, LibraryLoadData, 1), KP_DRIVER_SYM(kp_shim_driver, LibraryGetKernel, 1),
        KP_DRIVER_SYM(kp_shim_driver, KernelSetAttribute, 1), KP_DRIVER_SYM(kp_shim_driver, KernelGetAttribute, 0),
        KP_DRIVER_SYM(kp_shim_driver, KernelGetFunction, 0), KP_DRIVER_SYM(kp_shim_driver, LaunchKernel, 1),
        KP_DRIVER_SYM(kp_shim_driver, LaunchKernelEx, 1),
        KP_DRIVER_SYM(kp_shim_driver, OccupancyMaxActiveBlocksPerMultiprocessor, 0),
        KP_DRIVER_SYM(kp_shim_driver, TensorMapEncodeTiled, 0),
    };
    int version = 0;
    if (kp_driver_resolve(syms, sizeof syms / sizeof syms[0], &kp_cu, &version, kp_open_msg, sizeof kp_open_msg) !=
        KP_DRIVER_READY)
        return;
    kp_open_status = kp_cu.Init(0);
    if (kp_open_status != KP_CUDA_SUCCESS)
        snprintf(kp_open_msg, sizeof kp_open_msg, "cuInit failed (CUresult %d)", kp_open_status);
    else
        kp_open_msg[0] = 0;
}

/* Open the driver once and make sure this thread has a current context. */
KP_HIDDEN kp_CUresult kp_shim_enter(void) {
    pthread_once(&kp_once, kp_open);
    if (kp_open_status != KP_CUDA_SUCCESS) return kp_open_status;
    kp_CUcontext ctx = NULL;
    kp_CUresult r = kp_cu.CtxGetCurrent(&ctx);
    if (r != KP_CUDA_SUCCESS || ctx != NULL) return r;
    r = kp_cu.DevicePrimaryCtxRetain(&ctx, kp_default_device);
    return r != KP_CUDA_SUCCESS ? r : kp_cu.CtxSetCurrent(ctx);
}

/* Why the driver could not be opened ("" once it was). */
KP_HIDDEN const char* kp_shim_open_error(void) { return kp_open_msg; }

/* The device whose primary context is made current on threads that have none (default 0). */
KP_HIDDEN void kp_shim_set_default_device(int device) { kp_default_device = device; }

KP_HIDDEN kp_CUresult kp_shim_current_device(int* device) {
    kp_CUresult r = kp_shim_enter();
    return r != KP_CUDA_SUCCESS ? r : kp_cu.CtxGetDevice(device);
}

KP_HIDDEN kp_CUresult kp_shim_device_attribute(int* value, int attr, int device) {
    kp_CUresult r = kp_shim_enter();
    return r != KP_CUDA_SUCCESS ? r : kp_cu.DeviceGetAttribute(value, attr, device);
}

/* ------------------------------------------------------------------ what the CuTe object imports */

KP_HIDDEN int _cudaGetDevice(int* device) { return kp_shim_current_device(device); }

KP_HIDDEN int _cudaDeviceGetAttribute(int* value, int attr, int device) {
    return kp_shim_device_attribute(value, attr, device);
}

KP_HIDDEN int _cudaLibraryLoadData(kp_CUlibrary* library, const void* code, void* jit_options, void** jit_values,
                                   unsigned int num_jit, void* lib_options, void** lib_values, unsigned int num_lib) {
    kp_CUresult r = kp_shim_enter();
    if (r != KP_CUDA_SUCCESS) return r;
    /* cudaJitOption/cudaLibraryOption values equal CUjit_option/CUlibraryOption ones; CuTe passes none. */
    return kp_cu.LibraryLoadData(library, code, jit_options, jit_values, num_jit, lib_options, lib_values, num_lib);
}

KP_HIDDEN int _cudaLibraryGetKernel(kp_CUkernel* kernel, kp_CUlibrary library, const char* name) {
    kp_CUresult r = kp_shim_enter();
    return r != KP_CUDA_SUCCESS ? r : kp_cu.LibraryGetKernel(kernel, library, name);
}

KP_HIDDEN int _cudaKernelSetAttributeForDevice(kp_CUkernel kernel, int attr, int value, int device) {
    kp_CUresult r = kp_shim_enter();
    return r != KP_CUDA_SUCCESS ? r : kp_cu.KernelSetAttribute(attr, value, kernel, device);
}

/* cudaFuncSetAttribute(func, attr, value) with func a cudaKernel_t (what CuTe passes): set it for the current
 * device, as the runtime does. cudaFuncAttribute values equal CUfunction_attribute ones (static asserts). */
KP_HIDDEN int _cudaFuncSetAttribute(const void* func, int attr, int value) {
    int device = 0;
    kp_CUresult r = kp_shim_current_device(&device);
    return r != KP_CUDA_SUCCESS ? r : kp_cu.KernelSetAttribute(attr, value, (kp_CUkernel)(uintptr_t)func, device);
}

KP_HIDDEN int _cuKernelGetAttribute(int* value, int attr, kp_CUkernel kernel, int device) {
    kp_CUresult r = kp_shim_enter();
    if (r != KP_CUDA_SUCCESS) return r;
    return kp_cu.KernelGetAttribute ? kp_cu.KernelGetAttribute(value, attr, kernel, device) : KP_CUDA_ERROR_NOT_SUPPORTED;
}

KP_HIDDEN int _cudaLaunchKernelEx(const kp_cuda_launch_config* config, const void* func, void** args) {
    kp_CUresult r = kp_shim_enter();
    if (r != KP_CUDA_SUCCESS) return r;
    if (config == NULL || config->dynamic_smem > 0xffffffffu) return KP_CUDA_ERROR_INVALID_VALUE;
    kp_CUlaunchConfig c;
    c.gridDimX = config->grid[0], c.gridDimY = config->grid[1], c.gridDimZ = config->grid[2];
    c.blockDimX = config->block[0], c.blockDimY = config->block[1], c.blockDimZ = config->block[2];
    c.sharedMemBytes = (unsigned int)config->dynamic_smem;
    c.hStream = config->stream;
    c.attrs = config->attrs; /* cudaLaunchAttribute == CUlaunchAttribute: same layout and ids */
    c.numAttrs = config->num_attrs;
    /* A CUkernel may stand for the CUfunction of the current context in cuLaunchKernel(Ex). */
    return kp_cu.LaunchKernelEx(&c, (kp_CUfunction)(uintptr_t)func, args, NULL);
}

KP_HIDDEN int _cudaLaunchKernel(const void* func, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz, void** args, size_t smem, kp_CUstream stream) {
    kp_CUresult r = kp_shim_enter();
    if (r != KP_CUDA_SUCCESS) return r;
    if (smem > 0xffffffffu) return KP_CUDA_ERROR_INVALID_VALUE;
    return kp_cu.LaunchKernel((kp_CUfunction)(uintptr_t)func, gx, gy, gz, bx, by, bz, (unsigned int)smem, stream,
                              args, NULL);
}

KP_HIDDEN int _cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* func, int block_size,
                                                             size_t smem) {
    kp_CUresult r = kp_shim_enter();
    if (r != KP_CUDA_SUCCESS) return r;
    if (!kp_cu.OccupancyMaxActiveBlocksPerMultiprocessor || !kp_cu.KernelGetFunction) return KP_CUDA_ERROR_NOT_SUPPORTED;
    kp_CUfunction f = NULL;
    r = kp_cu.KernelGetFunction(&f, (kp_CUkernel)(uintptr_t)func);
    return r != KP_CUDA_SUCCESS ? r : kp_cu.OccupancyMaxActiveBlocksPerMultiprocessor(blocks, f, block_size, smem);
}

KP_HIDDEN int _cuTensorMapEncodeTiled(void* map, int dtype, unsigned int rank, void* address, const uint64_t* dims,
                                      const uint64_t* strides, const unsigned int* box, const unsigned int* elem_strides,
                                      int interleave, int swizzle, int l2, int oob) {
    kp_CUresult r = kp_shim_enter();
    if (r != KP_CUDA_SUCCESS) return r;
    if (!kp_cu.TensorMapEncodeTiled) return KP_CUDA_ERROR_NOT_SUPPORTED;
    return kp_cu.TensorMapEncodeTiled(map, dtype, rank, address, dims, strides, box, elem_strides, interleave,
                                      swizzle, l2, oob);
}
