// Kernels for the runtime tests (compiled with no GPU; launched only on the fake driver or, in
// test_runtime_gpu.py, on a real GPU).
#include <cuda_fp16.h>

extern "C" __global__ void add(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

// The same computation under another name: the "aligned" specialization of the vadd test family.
extern "C" __global__ void add16(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

template <typename T>
__global__ void scale(const T* x, T* out, float factor, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (T)((float)x[i] * factor);
}

extern "C" __global__ void scalars(signed char a, short b, int c, long long d, unsigned char e, unsigned short f,
                                   unsigned g, unsigned long long h, float i, double j, __half k, bool l,
                                   float* out) {
    out[0] = a + b + c + d + e + f + g + h + i + j + __half2float(k) + l;
}

struct Affine { float scale; float shift; int clamp; };
extern "C" __global__ void affine(const float* x, float* y, Affine p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * p.scale + p.shift;
}

// A tensor descriptor {data, shape0, stride0} for a [?, 64] float tensor with unit inner stride.
struct Rows { float* data; int shape0; long long stride0; };
extern "C" __global__ void row_sums(Rows t, float* out) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < t.shape0) {
        float acc = 0.f;
        for (int c = 0; c < 64; c++) acc += t.data[r * t.stride0 + c];
        out[r] = acc;
    }
}

extern "C" __global__ void with_scratch(float* x, int n, void* global_scratch, void* profile_scratch) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && global_scratch == 0 && profile_scratch == 0) x[i] += 1.f;
}

extern "C" __global__ void big_smem(float* x, int n) {
    extern __shared__ float buf[];
    int i = threadIdx.x;
    buf[i] = i < n ? x[i] : 0.f;
    __syncthreads();
    if (i < n) x[i] = buf[blockDim.x - 1 - i];
}

extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
