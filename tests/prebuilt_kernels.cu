// Kernels of a "team's own nvcc build", shipped through kernelpack's prebuilt frontend (tests/prebuilt_support.py).
#include <cuda_fp16.h>

struct Pair { float a; int b; };

extern "C" __global__ void add(const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}

extern "C" __global__ void axpy(float a, const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void scale_half(__half s, __half* x, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __hmul(x[i], s);
}

extern "C" __global__ void pair(Pair p, float* out) { out[threadIdx.x] = p.a * (float)(threadIdx.x + 1) + p.b; }

extern "C" __global__ void __launch_bounds__(128) mixed(bool on, unsigned char c, short s, double d, size_t n,
                                                       float* out) {
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = on ? (float)(c + s + d) : 0.0f;
}

template <typename T> __global__ void fill(T* y, int v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = (T)v;
}
template __global__ void fill<float>(float*, int, int);
template __global__ void fill<int>(int*, int, int);
