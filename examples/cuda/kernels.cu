// CUDA C++ kernels for the example library ex_cuda: an extern "C" kernel and a template instantiated twice.
#include "activations.cuh"

extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

template <class T> __global__ void relu(const T* __restrict__ x, T* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = relu_of(x[i]);
}
