// The CuTe DSL example from C++: elementwise add three ways, no CuTe DSL, no cudart, no CuTe runtime.
//  1. the family entry ex_cute::ew_add with kp_tensor views: dispatches on the dtype (bf16 here);
//  2. the typed kernel-level entry ex_cute_ew_add_f32 with the derived tensor struct (the kernel fixes the block,
//     32x8; the grid, ceil(n/32) x ceil(m/8), is the rule the artifact recorded from the @cute.jit function);
//  3. the CuTe host program ex_cute_ew_add_host_f32: CuTe's own host code, linked into the same library with
//     kernelpack's driver shim.
//   g++ -std=c++17 -O2 -Ibuild/include -I../common main.cpp -Lbuild/lib -lex_cute -Wl,-rpath,build/lib -ldl
#include <cstdio>
#include <vector>

#include "ex_cute.hpp"
#include "kp_device.hpp"

static kp_tensor view(void* data, kp_dtype dtype, int m, int n) {
    kp_tensor t{};
    t.data = data;
    t.dtype = dtype;
    t.rank = 2;
    t.shape[0] = m, t.shape[1] = n;
    t.stride[0] = n, t.stride[1] = 1;
    return t;
}

int main() {
    try {
        kpx::Driver driver;
        const int m = 300, n = 257;
        std::vector<float> a(size_t(m) * n), b(a.size());
        for (size_t i = 0; i < a.size(); i++) a[i] = float(i % 53) * 0.25f, b[i] = float(i % 29) - 14.0f;
        std::vector<uint16_t> ha(a.size()), hb(a.size());
        for (size_t i = 0; i < a.size(); i++) ha[i] = kpx::to_bf16(a[i]), hb[i] = kpx::to_bf16(b[i]);

        kpx::Buffer<uint16_t> da16(driver, ha), db16(driver, hb), dc16(driver, std::vector<uint16_t>(a.size()));
        kp_tensor ta = view(da16.get(), KP_BF16, m, n), tb = view(db16.get(), KP_BF16, m, n),
                  tc = view(dc16.get(), KP_BF16, m, n);
        kp_launch launch{};  // block {0,0,0}: the kernel's own block (32x8)
        launch.grid[0] = (n + 31) / 32, launch.grid[1] = (m + 7) / 8, launch.grid[2] = 1;
        ex_cute::check(ex_cute::ew_add(launch, ta, tb, tc));

        kpx::Buffer<float> da(driver, a), db(driver, b), dc(driver, std::vector<float>(a.size())),
            dh(driver, std::vector<float>(a.size()));
        ex_cute_tensor_f32_dxd_Dx1 fa{da.get(), m, n, n}, fb{db.get(), m, n, n}, fc{dc.get(), m, n, n};
        ex_cute::check(ex_cute_ew_add_f32(&launch, fa, fb, fc));

        ex_cute_tensor_f32_dxd_Dx1 fh{dh.get(), m, n, n};
        ex_cute::check(ex_cute_ew_add_host_f32(fa, fb, fh));  // same tensor struct type as the kernel-level entry
        driver.sync();
        std::vector<uint16_t> c16 = dc16.download();
        std::vector<float> c = dc.download(), h = dh.download();
        int bad = 0;
        for (size_t i = 0; i < a.size(); i++) {
            float ref = a[i] + b[i];
            bad += (c[i] != ref) + (h[i] != ref);
            bad += c16[i] != kpx::to_bf16(kpx::from_bf16(ha[i]) + kpx::from_bf16(hb[i]));
        }
        std::printf("ex_cute: ew_add bf16 (family), f32 (typed), f32 (host program) on %dx%d: %s\n", m, n,
                    bad ? "MISMATCH" : "ok");
        return bad ? 1 : 0;
    } catch (const std::exception& e) {
        std::printf("ex_cute: %s\n", e.what());
        return 2;
    }
}
