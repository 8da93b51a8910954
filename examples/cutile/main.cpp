// The cuTile example from C++ through libex_cutile. A cuTile array is (pointer, shape, stride) in C; the block is
// fixed by the compiler (REQNTID), so the launch gives only the grid: one block per 1024-element tile.
//   g++ -std=c++17 -O2 -Ibuild/include -I../common main.cpp -Lbuild/lib -lex_cutile -Wl,-rpath,build/lib -ldl
#include <cstdio>
#include <vector>

#include "ex_cutile.hpp"
#include "kp_device.hpp"

int main() {
    try {
        kpx::Driver driver;
        const int n = 70001;
        std::vector<float> a(n), b(n);
        for (int i = 0; i < n; i++) a[i] = float(i % 31), b[i] = 0.25f * float(i % 17);
        kpx::Buffer<float> da(driver, a), db(driver, b), dc(driver, std::vector<float>(n, -1.0f)),
            ds(driver, std::vector<float>(n, -1.0f));
        const unsigned grid = (n + 1023) / 1024;
        ex_cutile::check(ex_cutile::vadd(kp::launch(grid), da.get(), n, 1, db.get(), n, 1, dc.get(), n, 1));
        ex_cutile::check(ex_cutile::scale(kp::launch(grid), da.get(), n, 1, ds.get(), n, 1, 1.5f));
        driver.sync();
        std::vector<float> c = dc.download(), s = ds.download();
        int bad = 0;
        for (int i = 0; i < n; i++) bad += (c[i] != a[i] + b[i]) + (s[i] != 1.5f * a[i]);
        std::printf("ex_cutile: vadd + scale on %d elements: %s\n", n, bad ? "MISMATCH" : "ok");
        return bad ? 1 : 0;
    } catch (const std::exception& e) {
        std::printf("ex_cutile: %s\n", e.what());
        return 2;
    }
}
