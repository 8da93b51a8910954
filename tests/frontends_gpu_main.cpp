// C++17 GPU test of a library generated from the Triton and cuTile bundles: random inputs, NaN-filled outputs,
// CPU references. The TMA matmul takes kp_tensor views: the library encodes the CUtensorMaps itself; the
// scale-rows kernel needs Triton global scratch, which the library allocates per launch.
#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kpfront.hpp"

using dptr = unsigned long long;
template <class F> F sym(void* h, const char* name) { return reinterpret_cast<F>(dlsym(h, name)); }

static uint16_t to_half(float f) {  // round to nearest even, enough for test data (no NaN inputs)
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t e = int32_t((x >> 23) & 0xff) - 127 + 15;
    uint32_t m = x & 0x7fffffu;
    if (e >= 31) return uint16_t(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10) return uint16_t(sign);
        m |= 0x800000u;
        uint32_t shift = uint32_t(14 - e), half = m >> shift, rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return uint16_t(sign | half);
    }
    uint32_t h = sign | (uint32_t(e) << 10) | (m >> 13), rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return uint16_t(h);
}

static float from_half(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu, x;
    if (e == 0) {
        if (m == 0) x = sign;
        else {
            e = 113;
            while (!(m & 0x400u)) m <<= 1, e--;
            x = sign | (e << 23) | ((m & 0x3ffu) << 13);
        }
    } else if (e == 31) x = sign | 0x7f800000u | (m << 13);
    else x = sign | ((e + 112) << 23) | (m << 13);
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

struct Driver {
    int (*alloc)(dptr*, size_t);
    int (*htod)(dptr, const void*, size_t);
    int (*dtoh)(void*, dptr, size_t);
    int (*sync)();
    template <class T> dptr upload(const std::vector<T>& v) {
        dptr d = 0;
        alloc(&d, v.size() * sizeof(T) + 256);
        htod(d, v.data(), v.size() * sizeof(T));
        return d;
    }
    template <class T> std::vector<T> download(dptr d, size_t n) {
        std::vector<T> v(n);
        sync();
        dtoh(v.data(), d, n * sizeof(T));
        return v;
    }
};

static int failures = 0;
static void report(const char* name, long bad, kp_status s) {
    if (s != KP_SUCCESS) std::printf("FAIL %s: %s (%s)\n", name, kpfront_status_name(s), kpfront_last_error());
    else std::printf("%s %s%s\n", bad ? "FAIL" : "PASS", name, bad ? " (wrong elements)" : "");
    failures += bad != 0 || s != KP_SUCCESS;
}
static bool near(double got, double ref, double rtol, double atol) {
    return std::isfinite(got) && std::fabs(got - ref) <= atol + rtol * std::fabs(ref);
}

int main() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return std::printf("FAIL driver\n"), 1;
    auto cuInit = sym<int (*)(unsigned)>(h, "cuInit");
    auto retain = sym<int (*)(void**, int)>(h, "cuDevicePrimaryCtxRetain");
    auto set = sym<int (*)(void*)>(h, "cuCtxSetCurrent");
    Driver d{sym<int (*)(dptr*, size_t)>(h, "cuMemAlloc_v2"), sym<int (*)(dptr, const void*, size_t)>(h, "cuMemcpyHtoD_v2"),
             sym<int (*)(void*, dptr, size_t)>(h, "cuMemcpyDtoH_v2"), sym<int (*)()>(h, "cuCtxSynchronize")};
    void* ctx = nullptr;
    if (cuInit(0) || retain(&ctx, 0) || set(ctx)) return std::printf("FAIL context\n"), 1;
    std::mt19937 rng(std::random_device{}());
    std::normal_distribution<float> dist(0.f, 1.f);
    const float nanf_ = std::nanf("");

    // tr_add: the family picks the aligned specialization for aligned pointers and n % 16 == 0, else the general one
    for (int misaligned = 0; misaligned < 2; misaligned++) {
        const int n = (1 << 20) + (misaligned ? 37 : 0);
        std::vector<float> x(n + 1), y(n + 1), out(n + 1, nanf_);
        for (auto& v : x) v = dist(rng);
        for (auto& v : y) v = dist(rng);
        dptr dx = d.upload(x), dy = d.upload(y), dout = d.upload(out);
        size_t off = misaligned ? 1 : 0;
        auto s = kpfront::tr_add(kp::launch((n + 1023) / 1024), reinterpret_cast<float*>(dx) + off,
                                 reinterpret_cast<float*>(dy) + off, reinterpret_cast<float*>(dout) + off, n);
        auto got = d.download<float>(dout, n + 1);
        long bad = 0;
        for (int i = 0; i < n; i++) bad += !(got[i + off] == x[i + off] + y[i + off]);
        report(misaligned ? "tr_add_f32_general" : "tr_add_f32_aligned", bad, s);
    }
    {
        const int n = 500001;
        std::vector<uint16_t> x(n), y(n), out(n, 0x7e00u);
        for (auto& v : x) v = to_half(dist(rng));
        for (auto& v : y) v = to_half(dist(rng));
        dptr dx = d.upload(x), dy = d.upload(y), dout = d.upload(out);
        auto s = kpfront::tr_add(kp::launch((n + 1023) / 1024), reinterpret_cast<kp_f16*>(dx),
                                 reinterpret_cast<kp_f16*>(dy), reinterpret_cast<kp_f16*>(dout), n);
        auto got = d.download<uint16_t>(dout, n);
        long bad = 0;
        for (int i = 0; i < n; i++) bad += !near(from_half(got[i]), from_half(x[i]) + from_half(y[i]), 1e-3, 1e-3);
        report("tr_add_f16", bad, s);
    }
    {  // fp32 alpha: passed as a 4-byte float
        const int n = 300001;
        const float alpha = 0.731f;
        std::vector<float> x(n), y(n);
        for (auto& v : x) v = dist(rng);
        for (auto& v : y) v = dist(rng);
        dptr dx = d.upload(x), dy = d.upload(y);
        auto s = kpfront::tr_axpy(kp::launch((n + 1023) / 1024), alpha, reinterpret_cast<float*>(dx),
                                  reinterpret_cast<float*>(dy), n);
        auto got = d.download<float>(dy, n);
        long bad = 0;
        for (int i = 0; i < n; i++) bad += !near(got[i], double(alpha) * x[i] + y[i], 1e-6, 1e-6);
        report("tr_axpy", bad, s);
    }
    for (int odd = 0; odd < 2; odd++) {  // tr_matmul: m128 for aligned shapes, m64 otherwise
        const int M = odd ? 200 : 256, N = odd ? 136 : 384, K = odd ? 72 : 512;
        std::vector<uint16_t> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N, 0x7e00u);
        for (auto& v : a) v = to_half(dist(rng));
        for (auto& v : b) v = to_half(dist(rng));
        dptr da = d.upload(a), db = d.upload(b), dc = d.upload(c);
        kp_launch l{};
        l.grid[0] = (M + 63) / 64, l.grid[1] = (N + 63) / 64;  // enough for either tile config
        auto s = kpfront::tr_matmul(l, reinterpret_cast<kp_f16*>(da), reinterpret_cast<kp_f16*>(db),
                                    reinterpret_cast<kp_f16*>(dc), M, N, K, K, 1, N, 1, N, 1);
        auto got = d.download<uint16_t>(dc, c.size());
        long bad = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double ref = 0;
                for (int k = 0; k < K; k++) ref += double(from_half(a[size_t(i) * K + k])) * from_half(b[size_t(k) * N + j]);
                bad += !near(from_half(got[size_t(i) * N + j]), ref, 2e-2, 0.1);
            }
        report(odd ? "tr_matmul_odd" : "tr_matmul_aligned", bad, s);
    }
    for (int shape = 0; shape < 2; shape++) {  // TMA matmul: the library encodes the maps from kp_tensor views
        const int M = shape ? 384 : 256, N = shape ? 128 : 384, K = shape ? 64 : 512;
        std::vector<uint16_t> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N, 0x7e00u);
        for (auto& v : a) v = to_half(dist(rng));
        for (auto& v : b) v = to_half(dist(rng));
        dptr ptrs[3] = {d.upload(a), d.upload(b), d.upload(c)};
        auto view = [](dptr p, int64_t rows, int64_t cols) {
            kp_tensor t{};
            t.data = reinterpret_cast<void*>(p), t.dtype = KP_F16, t.rank = 2;
            t.shape[0] = rows, t.shape[1] = cols, t.stride[0] = cols, t.stride[1] = 1;
            return t;
        };
        kp_tensor ta = view(ptrs[0], M, K), tb = view(ptrs[1], K, N), tc = view(ptrs[2], M, N);
        kp_launch l{};
        l.grid[0] = M / 128, l.grid[1] = N / 128;
        auto s = kpfront::tr_tma_matmul(l, ta, tb, tc, K);
        auto got = d.download<uint16_t>(ptrs[2], c.size());
        long bad = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double ref = 0;
                for (int k = 0; k < K; k++) ref += double(from_half(a[size_t(i) * K + k])) * from_half(b[size_t(k) * N + j]);
                bad += !near(from_half(got[size_t(i) * N + j]), ref, 2e-2, 0.1);
            }
        report(shape ? "tr_tma_matmul_384x128x64" : "tr_tma_matmul", bad, s);
        if (shape == 0) {  // a misaligned view is refused with the kernel and parameter named
            kp_tensor bad_view = view(ptrs[0] + 2, M, K);
            kp_status e = kpfront::tr_tma_matmul(l, bad_view, tb, tc, K);
            bool ok = e == KP_ERROR_INVALID_ARGUMENT && std::strstr(kpfront_last_error(), "a_desc") &&
                      std::strstr(kpfront_last_error(), "16-byte aligned");
            std::printf("%s tr_tma_misaligned_refused (%s)\n", ok ? "PASS" : "FAIL", kpfront_last_error());
            failures += !ok;
        }
    }
    {  // Triton scratch: tr_scale_rows builds its descriptors on the device in global scratch
        const int M = 1000, N = 256;
        const float factor = 1.75f;
        std::vector<float> x(size_t(M) * N), y(size_t(M) * N, nanf_);
        for (auto& v : x) v = dist(rng);
        dptr dx = d.upload(x), dy = d.upload(y);
        auto s = kpfront::tr_scale_rows(kp::launch((M + 31) / 32), reinterpret_cast<float*>(dx),
                                        reinterpret_cast<float*>(dy), M, N, factor);
        auto got = d.download<float>(dy, y.size());
        long bad = 0;
        for (size_t i = 0; i < y.size(); i++) bad += !near(got[i], double(factor) * x[i], 1e-6, 1e-6);
        report("tr_scale_rows_scratch", bad, s);
    }
    {  // cuTile vector add: arrays are pointer + shape + stride
        const int n = 100003;
        std::vector<float> x(n), y(n), out(n, nanf_);
        for (auto& v : x) v = dist(rng);
        for (auto& v : y) v = dist(rng);
        dptr dx = d.upload(x), dy = d.upload(y), dout = d.upload(out);
        auto s = kpfront::ct_vadd(kp::launch((n + 1023) / 1024), reinterpret_cast<float*>(dx), n, 1,
                                  reinterpret_cast<float*>(dy), n, 1, reinterpret_cast<float*>(dout), n, 1);
        auto got = d.download<float>(dout, n);
        long bad = 0;
        for (int i = 0; i < n; i++) bad += !(got[i] == x[i] + y[i]);
        report("ct_vadd_f32", bad, s);
    }
    {  // cuTile matmul with an fp32 alpha
        const int M = 200, N = 136, K = 96;
        const float alpha = 0.5f;
        std::vector<uint16_t> a(size_t(M) * K), b(size_t(K) * N);
        std::vector<float> c(size_t(M) * N, nanf_);
        for (auto& v : a) v = to_half(dist(rng));
        for (auto& v : b) v = to_half(dist(rng));
        dptr da = d.upload(a), db = d.upload(b), dc = d.upload(c);
        kp_launch l{};
        l.grid[0] = (M + 63) / 64, l.grid[1] = (N + 63) / 64;
        auto s = kpfront::ct_matmul(l, reinterpret_cast<kp_f16*>(da), M, K, K, 1, reinterpret_cast<kp_f16*>(db), K, N,
                                    N, 1, reinterpret_cast<float*>(dc), M, N, N, 1, alpha);
        auto got = d.download<float>(dc, c.size());
        long bad = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double ref = 0;
                for (int k = 0; k < K; k++) ref += double(from_half(a[size_t(i) * K + k])) * from_half(b[size_t(k) * N + j]);
                bad += !near(got[size_t(i) * N + j], alpha * ref, 1e-3, 1e-2);
            }
        report("ct_matmul", bad, s);
    }
    std::printf(failures ? "FAILED\n" : "ALL PASSED\n");
    return failures != 0;
}
