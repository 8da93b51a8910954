// Calls the CuTe DSL Hopper GEMM from C++ through the kernelpack library (libkpcute.a: CuTe's host launcher +
// kernelpack's driver shim; no cudart, no CuTe runtime). Only this demo uses the driver API directly, to
// allocate and copy. Checks every output element against a CPU reference.
//
//   g++ -std=c++17 -O2 -I.gpu/cute/kpcute/include -I/usr/local/cuda/include gemm_demo.cpp
//       .gpu/cute/kpcute/lib/libkpcute.a -lcuda -ldl -lpthread -o gemm_demo && ./gemm_demo
#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kpcute.h"

static uint16_t to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
    if (exp <= 0) return uint16_t(sign);  // demo inputs never underflow
    if (exp >= 31) return uint16_t(sign | 0x7c00u);
    uint32_t h = sign | (uint32_t(exp) << 10) | (mant >> 13), rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;  // round to nearest even
    return uint16_t(h);
}

static float from_half(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
    if (exp == 0) {
        float f = std::ldexp(float(mant), -24);
        return sign ? -f : f;
    }
    x = sign | ((exp == 31 ? 255u : exp - 15 + 127) << 23) | (mant << 13);
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

#define CHECK_CU(call)                                                                   \
    do {                                                                                 \
        CUresult r_ = (call);                                                            \
        if (r_ != CUDA_SUCCESS) {                                                        \
            std::printf("%s failed: %d\n", #call, int(r_));                              \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

static int run(int m, int n, int k, std::mt19937& rng) {
    std::normal_distribution<float> dist;
    std::vector<uint16_t> a(size_t(m) * k), b(size_t(n) * k), c(size_t(m) * n, 0x7e00u /* NaN */);
    for (auto& v : a) v = to_half(dist(rng));
    for (auto& v : b) v = to_half(dist(rng));
    CUdeviceptr da = 0, db = 0, dc = 0;
    CHECK_CU(cuMemAlloc(&da, a.size() * 2 + 16));
    CHECK_CU(cuMemAlloc(&db, b.size() * 2 + 16));
    CHECK_CU(cuMemAlloc(&dc, c.size() * 2 + 16));
    CHECK_CU(cuMemcpyHtoD(da, a.data(), a.size() * 2));
    CHECK_CU(cuMemcpyHtoD(db, b.data(), b.size() * 2));
    CHECK_CU(cuMemcpyHtoD(dc, c.data(), c.size() * 2));
    kpcute_tensor_f16_dxd_Dx1 ta = {(kp_f16*)da, m, k, k}, tb = {(kp_f16*)db, n, k, k}, tc = {(kp_f16*)dc, m, n, n};
    kp_status s = kpcute_gemm_f16(ta, tb, tc, nullptr);
    if (s != KP_SUCCESS) {
        std::printf("gemm %dx%dx%d: status %d: %s\n", m, n, k, int(s), kpcute_last_error());
        return 1;
    }
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH(c.data(), dc, c.size() * 2));
    int bad = 0;
    const float eps = 1.0f / 1024;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double ref = 0;
            for (int p = 0; p < k; p++) ref += double(from_half(a[size_t(i) * k + p])) * from_half(b[size_t(j) * k + p]);
            float got = from_half(c[size_t(i) * n + j]);
            if (!(std::fabs(got - ref) <= 2 * eps * (std::fabs(ref) + std::sqrt(double(k))))) {
                if (bad++ < 5) std::printf("  C[%d,%d] = %g, expected %g\n", i, j, got, ref);
            }
        }
    cuMemFree(da);
    cuMemFree(db);
    cuMemFree(dc);
    std::printf("gemm %4dx%4dx%4d: %s\n", m, n, k, bad ? "MISMATCH" : "ok");
    return bad != 0;
}

int main() {
    CHECK_CU(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK_CU(cuCtxSetCurrent(ctx));
    std::mt19937 rng(1234);
    const int shapes[][3] = {{128, 128, 64}, {200, 136, 264}, {1, 8, 8}, {129, 264, 72}, {300, 200, 520}};
    int failed = 0;
    for (const auto& s : shapes) failed += run(s[0], s[1], s[2], rng);
    kpcute_tensor_f16_dxd_Dx1 empty = {nullptr, 0, 64, 64};
    failed += kpcute_gemm_f16(empty, empty, empty, nullptr) != KP_SUCCESS;  // M = 0: returns without running
    if (failed) return 1;
    std::printf("all shapes match\n");
    return 0;
}
