// The CUDA C++ example from C++: saxpy and the relu family (overloaded on the element type) through libex_cuda.
//   g++ -std=c++17 -O2 -Ibuild/include -I../common main.cpp -Lbuild/lib -lex_cuda -Wl,-rpath,build/lib -ldl
#include <cmath>
#include <cstdio>
#include <vector>

#include "ex_cuda.hpp"
#include "kp_device.hpp"

int main() {
    try {
        kpx::Driver driver;
        ex_cuda::Library kernels(0);  // loads every kernel for device 0 now (throws kp::Error on failure)
        const int n = 100003;
        std::vector<float> x(n), y(n);
        std::vector<double> z(n);
        for (int i = 0; i < n; i++) x[i] = float(i % 97) - 48.0f, y[i] = 0.5f * float(i % 13), z[i] = x[i] * 0.25;
        kpx::Buffer<float> dx(driver, x), dy(driver, y);
        kpx::Buffer<double> dz(driver, z), dr(driver, std::vector<double>(n, -1.0));
        const unsigned grid = (n + 255) / 256;
        ex_cuda::check(ex_cuda::saxpy(kp::launch(grid, 256), 2.0f, dx, dy, n));  // buffers pass as device views
        ex_cuda::check(ex_cuda::relu(kp::launch(grid, 256), dz, dr, n));         // picks relu[double]
        driver.sync();
        std::vector<float> got = dy.download();
        std::vector<double> rel = dr.download();
        int bad = 0;
        for (int i = 0; i < n; i++) {
            if (got[i] != 2.0f * x[i] + y[i]) bad++;
            if (rel[i] != (z[i] > 0 ? z[i] : 0.0)) bad++;
        }
        std::printf("ex_cuda: saxpy + relu<double> on %d elements: %s\n", n, bad ? "MISMATCH" : "ok");
        return bad ? 1 : 0;
    } catch (const std::exception& e) {
        std::printf("ex_cuda: %s\n", e.what());
        return 2;
    }
}
