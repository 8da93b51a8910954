// Test kernels for the C library generator (compiled per arch by tests/clib_support.py).
#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KP_CLUSTER2 __cluster_dims__(2, 1, 1)
#else
#define KP_CLUSTER2
#endif

struct Tensor2f {  // {data; shape0; shape1; stride0} with stride1 == 1 static
    float* data;
    int32_t shape0;
    int32_t shape1;
    int64_t stride0;
};

extern "C" __global__ void add_f32(const float* x, const float* y, float* out, int32_t n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}

extern "C" __global__ void add_f32_vec4(const float* x, const float* y, float* out, int32_t n) {
    int i = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) {
        float4 a = *reinterpret_cast<const float4*>(x + i), b = *reinterpret_cast<const float4*>(y + i);
        *reinterpret_cast<float4*>(out + i) = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
}

extern "C" __global__ void add_f64(const double* x, const double* y, double* out, int32_t n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}

extern "C" __global__ void pack(int8_t a, int16_t b, int32_t c, int64_t d, float e, double f, bool g,
                                unsigned short h, uint8_t i, uint64_t j, float* out) {
    out[0] = a + b + c + d + e + f + g + h + i + j;
}

extern "C" __global__ void tsum(Tensor2f t, float* out) {
    int r = blockIdx.x, c = threadIdx.x;
    if (r < t.shape0 && c < t.shape1) out[r * t.shape1 + c] = 2.0f * t.data[r * t.stride0 + c];
}

extern "C" __global__ void big_smem(const float* x, float* out, int32_t n) {
    extern __shared__ float buf[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = x[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[n - 1 - i];
}

extern "C" __global__ void KP_CLUSTER2 cluster2(float* out) {
    out[blockIdx.x * blockDim.x + threadIdx.x] = (float)blockIdx.x;
}

extern "C" __global__ void fixed_block(float* out) {  // gets .reqntid 128,1,1 in its PTX
    out[blockIdx.x * blockDim.x + threadIdx.x] = (float)threadIdx.x;
}

extern "C" __global__ void hidden(float* out, int32_t n, void* global_scratch, void* profile_scratch) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = global_scratch == 0 && profile_scratch == 0 ? 1.0f : -1.0f;
}

extern "C" __global__ void noargs() {}

struct __align__(64) Map128 {  // a CUtensorMap-shaped parameter
    unsigned char bytes[128];
};

extern "C" __global__ void tma2d(const __grid_constant__ Map128 m, int32_t m_shape0, int32_t m_shape1,
                                 int64_t m_stride0, int64_t m_stride1, int32_t k, float* out) {
    out[0] = m.bytes[threadIdx.x] + m_shape0 + m_shape1 + m_stride0 + m_stride1 + k;
}

extern "C" __global__ void desc_dec(const float* p, int64_t p_s0, int64_t p_s1, int64_t p_t0, int64_t p_t1, bool p_f0,
                                    bool p_f1, int32_t p_u0, int32_t p_u1, int64_t p_v0, int64_t p_v1, float* out) {
    out[0] = p[0] + p_s0 + p_s1 + p_t0 + p_t1 + p_f0 + p_f1 + p_u0 + p_u1 + p_v0 + p_v1;
}

// a grouped kernel taking two lists of tensors as cuTile passes them (kernelpack.core.abi.TensorList): a pointer to
// one descriptor per tensor (data pointer, extents, strides: 64-bit words) and a count, each
extern "C" __global__ void glist(const long long* xs, int32_t nx, const long long* ys, int32_t ny, float alpha) {
    int g = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
    if (g < nx && g < ny && i < xs[3 * g + 1]) ((float*)ys[3 * g])[i] = alpha * ((const float*)xs[3 * g])[i];
}
