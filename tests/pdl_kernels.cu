// Kernels of the launch-flag GPU tests (tests/test_launch_flags_gpu.py), compiled on the build machine by
// scripts/gpu_prepare_pdl.py into .gpu/pdl/pdl.kpack.
//
// A PDL pair: pdl_primary writes y = 2 x, lets its dependents launch early (griddepcontrol.launch_dependents), then
// keeps its SMs busy for `spin` cycles; pdl_secondary spends `spin` cycles on work that needs nothing of the primary,
// waits for it (griddepcontrol.wait: the primary grid complete and its writes visible), then writes z = y + 1. Launched
// with programmatic stream serialization, the secondary's first half overlaps the primary's tail.
//
// grid_center: out = x - mean(x) across the whole grid, with a hand-written grid barrier between the block sums and
// their use: correct only when every block is resident at once (a cooperative launch).

__device__ __forceinline__ void spin_for(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

extern "C" __global__ void pdl_primary(const float* x, float* y, int n, long long spin) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = 2.0f * x[i];
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    spin_for(spin);
}

extern "C" __global__ void pdl_secondary(const float* y, float* z, int n, long long spin) {
    spin_for(spin);
    asm volatile("griddepcontrol.wait;" ::: "memory");
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) z[i] = y[i] + 1.0f;
}

// bar[0]: arrivals, bar[1]: generation; both zero before the launch.
__device__ void grid_barrier(unsigned* bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned* gen = bar + 1;
        unsigned g = *gen;
        __threadfence();
        if (atomicAdd(bar, 1u) == gridDim.x * gridDim.y * gridDim.z - 1) {
            bar[0] = 0;
            __threadfence();
            atomicAdd(bar + 1, 1u);
        } else {
            while (*gen == g) {
            }
        }
        __threadfence();
    }
    __syncthreads();
}

extern "C" __global__ void grid_center(const float* x, float* partial, float* out, int n, unsigned* bar) {
    __shared__ float s[256];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += x[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
    grid_barrier(bar);
    __shared__ float mean;
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (unsigned b = 0; b < gridDim.x; b++) total += ((volatile float*)partial)[b];
        mean = total / (float)n;
    }
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = x[i] - mean;
}
