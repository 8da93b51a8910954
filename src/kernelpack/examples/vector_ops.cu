// Example CUDA C++ kernels compiled by `kernelpack demo`.
#include <cuda_fp16.h>

// extern "C": parameter types are derived by kernelpack from a compiler probe, names from this declaration.
extern "C" __global__ void axpy(float alpha, const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i] + y[i];
}

// A template: each instantiation becomes one variant of the `scale` family (dispatched by dtype).
template <typename T>
__global__ void scale(const T* __restrict__ x, T* __restrict__ out, float factor, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (T)((float)x[i] * factor);
}

// Fixed block shape (REQNTID): the cubin itself says the launch must use 256 threads.
extern "C" __global__ void __launch_bounds__(256)
row_sum(const float* __restrict__ m, float* __restrict__ sums, unsigned rows, unsigned cols) {
    __shared__ float partial[256];
    unsigned row = blockIdx.x;
    float acc = 0.f;
    for (unsigned c = threadIdx.x; c < cols; c += blockDim.x) acc += m[(size_t)row * cols + c];
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0 && row < rows) sums[row] = partial[0];
}

// A by-value struct parameter: passed as opaque bytes of the size the cubin records.
struct Affine { float scale; float shift; int clamp; };
extern "C" __global__ void affine(const float* __restrict__ x, float* __restrict__ y, Affine p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i] * p.scale + p.shift;
        y[i] = p.clamp ? fminf(fmaxf(v, 0.f), 1.f) : v;
    }
}
