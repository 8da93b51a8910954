// CUDA C++ whose host code computes its launches (<<<grid, block, smem, stream>>> through the CUDA runtime), as a
// package's own extension does: what `kernelpack capture --native` records on a GPU (tests/native_gpu_script.py).
// Built by `scripts/gpu.py prepare capture_native`: nvcc -shared -cudart static for sm_90a.
#include <cuda_runtime.h>

struct Pair { float a, b; };

template <class T> __global__ void scale(const T* x, T* out, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = T(s * float(x[i]));
}

__global__ void pair_add(Pair p, const float* x, const float* y, float* out, int n) {
    extern __shared__ float stage[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    stage[threadIdx.x] = i < n ? p.a * x[i] + p.b * y[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] += stage[threadIdx.x];
}

extern "C" int native_scale(const float* x, float* out, float s, int n, cudaStream_t stream) {
    int block = n >= 4096 ? 256 : 128;  // the host code chooses the launch
    scale<float><<<(n + block - 1) / block, block, 0, stream>>>(x, out, s, n);
    return (int)cudaGetLastError();
}

extern "C" int native_scale_double(const double* x, double* out, float s, int n, cudaStream_t stream) {
    scale<double><<<(n + 127) / 128, 128, 0, stream>>>(x, out, s, n);
    return (int)cudaGetLastError();
}

extern "C" int native_pair_add(float a, float b, const float* x, const float* y, float* out, int n,
                               cudaStream_t stream) {
    Pair p = {a, b};
    pair_add<<<(n + 63) / 64, 64, 64 * sizeof(float), stream>>>(p, x, y, out, n);
    return (int)cudaGetLastError();
}
