// Kernels of tests/test_per_arch.py: parameters filled from the launch device, and specializations built for a
// device's SM count (kernelpack.launch.device).
#include <stdint.h>

// A persistent loop over n items with one block per SM: num_sms is filled with the device's SM count.
extern "C" __global__ void persist(float* out, int32_t n, int32_t num_sms) {
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += num_sms * blockDim.x) out[i] = (float)i;
}

// The same loop with the SM count fixed when compiled (liger's rows_per_program = ceil(n_rows / sm_count)).
template <int SMS>
__global__ void rows(float* out, int32_t n) {
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += SMS * blockDim.x) out[i] = (float)SMS;
}
template __global__ void rows<132>(float*, int32_t);
template __global__ void rows<108>(float*, int32_t);

// A persistent cluster loop: max_clusters is filled with how many clusters of 2 blocks fit at once.
extern "C" __global__ void clustered(float* out, int32_t n, int32_t max_clusters) {
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += 2 * max_clusters * blockDim.x)
        out[i] = (float)max_clusters;
}
