// C++17 GPU test of one kernelpack library holding CuTe host programs (the Hopper GEMM), CuTe kernel-level
// artifacts (elementwise add: grid from its recorded formula, launch.grid left 0) and Triton kernels (scale_rows:
// library-allocated global scratch). CPU references; outputs start as NaN.
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kpmix.hpp"

using dptr = unsigned long long;
template <class F> F sym(void* h, const char* name) { return reinterpret_cast<F>(dlsym(h, name)); }
static int (*mem_alloc)(dptr*, size_t);
static int (*htod)(dptr, const void*, size_t);
static int (*dtoh)(void*, dptr, size_t);
static int (*ctx_sync)();

static uint16_t to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int32_t e = int32_t((x >> 23) & 0xff) - 127 + 15;
    if (e <= 0) return uint16_t(sign);
    if (e >= 31) return uint16_t(sign | 0x7c00u);
    uint32_t h = sign | (uint32_t(e) << 10) | (mant >> 13), rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return uint16_t(h);
}
static float from_half(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0) {
        float f = std::ldexp(float(m), -24);
        return sign ? -f : f;
    }
    x = sign | ((e == 31 ? 255u : e - 15 + 127) << 23) | (m << 13);
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}
template <class T> static dptr upload(const std::vector<T>& v) {
    dptr d = 0;
    mem_alloc(&d, v.size() * sizeof(T) + 256);
    htod(d, v.data(), v.size() * sizeof(T));
    return d;
}
template <class T> static std::vector<T> download(dptr d, size_t n) {
    std::vector<T> v(n);
    ctx_sync();
    dtoh(v.data(), d, n * sizeof(T));
    return v;
}
static int failures = 0;
static void report(const char* name, long bad, kp_status s) {
    if (s != KP_SUCCESS) std::printf("FAIL %s: %s (%s)\n", name, kpmix_status_name(s), kpmix_last_error());
    else std::printf("%s %s%s\n", bad ? "FAIL" : "PASS", name, bad ? " (wrong elements)" : "");
    failures += bad != 0 || s != KP_SUCCESS;
}

int main() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return std::printf("FAIL driver\n"), 1;
    mem_alloc = sym<int (*)(dptr*, size_t)>(h, "cuMemAlloc_v2");
    htod = sym<int (*)(dptr, const void*, size_t)>(h, "cuMemcpyHtoD_v2");
    dtoh = sym<int (*)(void*, dptr, size_t)>(h, "cuMemcpyDtoH_v2");
    ctx_sync = sym<int (*)()>(h, "cuCtxSynchronize");
    void* ctx = nullptr;
    if (sym<int (*)(unsigned)>(h, "cuInit")(0) || sym<int (*)(void**, int)>(h, "cuDevicePrimaryCtxRetain")(&ctx, 0) ||
        sym<int (*)(void*)>(h, "cuCtxSetCurrent")(ctx))
        return std::printf("FAIL context\n"), 1;
    std::mt19937 rng(7);
    std::normal_distribution<float> dist;
    const int shapes[][3] = {{128, 128, 64}, {200, 136, 264}, {129, 264, 72}};
    for (const auto& sh : shapes) {  // CuTe host program: C = A B^T, fp16
        const int m = sh[0], n = sh[1], k = sh[2];
        std::vector<uint16_t> a(size_t(m) * k), b(size_t(n) * k), c(size_t(m) * n, 0x7e00u);
        for (auto& v : a) v = to_half(dist(rng));
        for (auto& v : b) v = to_half(dist(rng));
        dptr da = upload(a), db = upload(b), dc = upload(c);
        kpmix_tensor_f16_dxd_Dx1 ta = {(kp_f16*)da, m, k, k}, tb = {(kp_f16*)db, n, k, k}, tc = {(kp_f16*)dc, m, n, n};
        kp_status s = kpmix::gemm_f16(ta, tb, tc, nullptr);
        auto got = download<uint16_t>(dc, c.size());
        long bad = 0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double ref = 0;
                for (int p = 0; p < k; p++) ref += double(from_half(a[size_t(i) * k + p])) * from_half(b[size_t(j) * k + p]);
                float g = from_half(got[size_t(i) * n + j]);
                bad += !(std::fabs(g - ref) <= 2.0 / 1024 * (std::fabs(ref) + std::sqrt(double(k))));
            }
        char name[64];
        std::snprintf(name, sizeof name, "gemm_f16_%dx%dx%d", m, n, k);
        report(name, bad, s);
    }
    {  // CuTe kernel-level family: no grid given, the library computes it from c's shape
        const int m = 77, n = 301;
        std::vector<float> x(size_t(m) * n), y(size_t(m) * n), out(size_t(m) * n, std::nanf(""));
        for (auto& v : x) v = dist(rng);
        for (auto& v : y) v = dist(rng);
        dptr dx = upload(x), dy = upload(y), dout = upload(out);
        auto view = [&](dptr p) {
            kp_tensor t{};
            t.data = reinterpret_cast<void*>(p), t.dtype = KP_F32, t.rank = 2;
            t.shape[0] = m, t.shape[1] = n, t.stride[0] = n, t.stride[1] = 1;
            return t;
        };
        kp_tensor tx = view(dx), ty = view(dy), tout = view(dout);
        kp_launch l{};
        kp_status s = kpmix::ew_add(l, tx, ty, tout);
        auto got = download<float>(dout, out.size());
        long bad = 0;
        for (size_t i = 0; i < out.size(); i++) bad += !(got[i] == x[i] + y[i]);
        report("ew_add_grid_from_formula", bad, s);
        tout.shape[0] = 0;
        report("ew_add_zero_extent_skipped", 0, kpmix::ew_add(l, tx, ty, tout));
    }
    {  // Triton kernel with global scratch, same library
        const int M = 1000, N = 256;
        std::vector<float> x(size_t(M) * N), y(size_t(M) * N, std::nanf(""));
        for (auto& v : x) v = dist(rng);
        dptr dx = upload(x), dy = upload(y);
        kp_status s = kpmix::tr_scale_rows(kp::launch((M + 31) / 32), reinterpret_cast<float*>(dx),
                                           reinterpret_cast<float*>(dy), M, N, 1.75f);
        auto got = download<float>(dy, y.size());
        long bad = 0;
        for (size_t i = 0; i < y.size(); i++) bad += !(std::fabs(got[i] - 1.75 * x[i]) <= 1e-6 + 1e-6 * std::fabs(x[i]));
        report("tr_scale_rows_in_mixed_library", bad, s);
    }
    std::printf(failures ? "FAILED\n" : "ALL PASSED\n");
    return failures != 0;
}
