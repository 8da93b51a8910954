// Kernels of the fp8 GPU test (tests/test_fp8_gpu.py), compiled with NVRTC on the build machine by
// scripts/gpu_prepare_fp8.py into .gpu/fp8/fp8.kpack.
//
// widen<T>: y[i] = float(x[i]) for T = __nv_fp8_e4m3 / __nv_fp8_e5m2 (one family, dispatched on the pointer's fp8
// dtype); widen_e4m3: the same for e4m3 only, an extern "C" kernel typed through kernelpack's probe.
#include <cuda_fp8.h>

template <class T> __global__ void widen(const T* __restrict__ x, float* __restrict__ y, unsigned n) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = float(x[i]);
}

extern "C" __global__ void widen_e4m3(const __nv_fp8_e4m3* __restrict__ x, float* __restrict__ y, unsigned n) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = float(x[i]);
}
