// C++17 GPU test of the generated demo.hpp: dtype overloads and kp::Error, on real memory.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "demo.hpp"

using dptr = unsigned long long;
template <class F> F sym(void* h, const char* name) { return reinterpret_cast<F>(dlsym(h, name)); }

int main() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) return std::printf("FAIL driver\n"), 1;
    auto cuInit = sym<int (*)(unsigned)>(h, "cuInit");
    auto retain = sym<int (*)(void**, int)>(h, "cuDevicePrimaryCtxRetain");
    auto set = sym<int (*)(void*)>(h, "cuCtxSetCurrent");
    auto sync = sym<int (*)()>(h, "cuCtxSynchronize");
    auto alloc = sym<int (*)(dptr*, size_t)>(h, "cuMemAlloc_v2");
    auto htod = sym<int (*)(dptr, const void*, size_t)>(h, "cuMemcpyHtoD_v2");
    auto dtoh = sym<int (*)(void*, dptr, size_t)>(h, "cuMemcpyDtoH_v2");
    void* ctx = nullptr;
    if (cuInit(0) || retain(&ctx, 0) || set(ctx)) return std::printf("FAIL context\n"), 1;
    std::mt19937 rng(std::random_device{}());
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    int failures = 0;
    auto run = [&](auto zero) {
        using T = decltype(zero);
        const int n = 123457;
        std::vector<T> x(n), y(n), out(n, T(-7));
        for (int i = 0; i < n; i++) x[i] = T(dist(rng)), y[i] = T(dist(rng));
        dptr dx, dy, dout;
        alloc(&dx, n * sizeof(T)), alloc(&dy, n * sizeof(T)), alloc(&dout, n * sizeof(T));
        htod(dx, x.data(), n * sizeof(T)), htod(dy, y.data(), n * sizeof(T)), htod(dout, out.data(), n * sizeof(T));
        demo::check(demo::add(kp::launch((n + 255) / 256, 256), reinterpret_cast<const T*>(dx),
                              reinterpret_cast<const T*>(dy), reinterpret_cast<T*>(dout), n));
        sync();
        dtoh(out.data(), dout, n * sizeof(T));
        int bad = 0;
        for (int i = 0; i < n; i++) bad += !(out[i] == x[i] + y[i]);
        std::printf("%s add_%zu\n", bad ? "FAIL" : "PASS", sizeof(T));
        failures += bad != 0;
    };
    run(0.0f);
    run(0.0);
    try {
        demo::check(demo::fixed_block(kp::launch(1, 64), nullptr));
        std::printf("FAIL no exception\n"), failures++;
    } catch (const kp::Error& e) {
        std::printf("PASS error %d %s\n", static_cast<int>(e.status()), e.what());
    }
    std::printf(failures ? "FAILED\n" : "ALL PASSED\n");
    return failures != 0;
}
