// The Triton example from C++: add (dispatching on alignment) and axpy (an fp32 scalar) through libex_triton.
// Triton fixes the block (32 x num_warps), so the launch gives only the grid.
//   g++ -std=c++17 -O2 -Ibuild/include -I../common main.cpp -Lbuild/lib -lex_triton -Wl,-rpath,build/lib -ldl
#include <cstdio>
#include <vector>

#include "ex_triton.hpp"
#include "kp_device.hpp"

int main() {
    try {
        kpx::Driver driver;
        const int n = 100000;  // a multiple of 16: the aligned specialization is chosen
        std::vector<float> x(n), y(n);
        for (int i = 0; i < n; i++) x[i] = float(i % 101) * 0.5f, y[i] = float(i % 7) - 3.0f;
        kpx::Buffer<float> dx(driver, x), dy(driver, y), dout(driver, std::vector<float>(n, 0.0f));
        const unsigned grid = (n + 1023) / 1024;
        ex_triton::check(ex_triton::add(kp::launch(grid), dx.get(), dy.get(), dout.get(), n));
        ex_triton::check(ex_triton::axpy(kp::launch(grid), 0.731f, dx.get(), dy.get(), n));
        driver.sync();
        std::vector<float> sum = dout.download(), ax = dy.download();
        int bad = 0;
        for (int i = 0; i < n; i++) {
            if (sum[i] != x[i] + y[i]) bad++;
            float ref = 0.731f * x[i] + y[i];
            if (ax[i] - ref > 1e-4f * (1 + (ref < 0 ? -ref : ref)) || ref - ax[i] > 1e-4f * (1 + (ref < 0 ? -ref : ref)))
                bad++;
        }
        std::printf("ex_triton: add + axpy on %d elements: %s\n", n, bad ? "MISMATCH" : "ok");
        return bad ? 1 : 0;
    } catch (const std::exception& e) {
        std::printf("ex_triton: %s\n", e.what());
        return 2;
    }
}
