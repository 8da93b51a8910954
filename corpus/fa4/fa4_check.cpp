// FlashAttention-4 forward and backward from C++ through libfa4 (CuTe's host launchers + kernelpack's driver shim; no
// cudart, no CuTe runtime, no Python). Only this harness uses the driver API itself, to allocate and copy.
//
//   fa4_check DIR B S H D CAUSAL TILE_M HEAD_DIM_PADDED
//
// reads DIR/{q,k,v,do}.bin (bf16, (B, S, H, D) contiguous), runs the forward (fa4_fwd_d<D>[_causal]_bf16, or
// fa4_fwd_sm100_... on SM100) and the backward (bwd_pre, bwd, bwd_post: the fp32 buffers padded to TILE_M rows and
// HEAD_DIM_PADDED columns), writes DIR/{o,lse,dq,dk,dv}.bin. Every output buffer starts as NaN (all bits set), so a
// caller can check every element was written. tests/test_fa4_gpu.py compares them with torch in float32.
//
//   g++ -std=c++17 -O2 -Ibuild/include -I/usr/local/cuda/include fa4_check.cpp build/lib/libfa4.so -lcuda
#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fa4.h"

#define CHECK_CU(call)                                                   \
    do {                                                                 \
        CUresult r_ = (call);                                            \
        if (r_ != CUDA_SUCCESS) {                                        \
            std::fprintf(stderr, "%s failed: %d\n", #call, int(r_));     \
            return 1;                                                    \
        }                                                                \
    } while (0)

#define CHECK_KP(name, call)                                                                       \
    do {                                                                                           \
        kp_status s_ = (call);                                                                     \
        if (s_ != KP_SUCCESS) {                                                                    \
            std::fprintf(stderr, "%s: status %d: %s\n", name, int(s_), fa4_last_error());          \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

typedef fa4_tensor_bf16_dxdxdxd_DxDxDx1 T4;  // (B, S, H, D) bf16, 16-byte aligned
typedef fa4_tensor_f32_dxdxd_DxDx1 F3;       // (B, H, N) f32: the LSE (4-byte aligned)
typedef fa4_tensor_f32_dxdxd_DxDx1_2 F3B;    // (B, H, N) f32: the backward's buffers (16-byte aligned)

typedef kp_status (*fwd_fn)(T4, T4, T4, T4, F3, float, void*);
typedef kp_status (*fwd100_fn)(T4, T4, T4, T4, F3, float, int32_t, void*);
typedef kp_status (*pre_fn)(T4, T4, F3B, F3, F3B, F3B, float, void*);
typedef kp_status (*bwd_fn)(T4, T4, T4, T4, F3B, F3B, F3B, T4, T4, float, void*);
typedef kp_status (*post_fn)(F3B, T4, float, void*);

struct Entries {
    fwd_fn fwd;
    fwd100_fn fwd100;
    pre_fn pre;
    bwd_fn bwd;
    post_fn post;
};

static bool entries(int d, bool causal, Entries* e) {
#define PICK(D, C, SUF)                                                                                      \
    if (d == D && causal == C) {                                                                             \
        *e = {fa4_fwd_d##D##SUF##_bf16, fa4_fwd_sm100_d##D##SUF##_bf16, fa4_bwd_pre_d##D##SUF##_bf16,         \
              fa4_bwd_d##D##SUF##_bf16, fa4_bwd_post_d##D##SUF##_bf16};                                      \
        return true;                                                                                         \
    }
    PICK(64, false, )
    PICK(64, true, _causal)
    PICK(128, false, )
    PICK(128, true, _causal)
#undef PICK
    return false;
}

static std::vector<char> read_file(const std::string& path, size_t bytes) {
    std::vector<char> out(bytes);
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f || std::fread(out.data(), 1, bytes, f) != bytes) out.clear();
    if (f) std::fclose(f);
    return out;
}

static bool write_file(const std::string& path, const std::vector<char>& data) {
    FILE* f = std::fopen(path.c_str(), "wb");
    bool ok = f && std::fwrite(data.data(), 1, data.size(), f) == data.size();
    if (f) std::fclose(f);
    return ok;
}

int main(int argc, char** argv) {
    if (argc != 9) {
        std::fprintf(stderr, "usage: %s DIR B S H D CAUSAL TILE_M HEAD_DIM_PADDED\n", argv[0]);
        return 2;
    }
    std::string dir = argv[1];
    int b = std::atoi(argv[2]), s = std::atoi(argv[3]), h = std::atoi(argv[4]), d = std::atoi(argv[5]);
    bool causal = std::atoi(argv[6]) != 0;
    int tile_m = std::atoi(argv[7]), hd_pad = std::atoi(argv[8]);
    Entries e;
    if (!entries(d, causal, &e)) {
        std::fprintf(stderr, "no entries for head dim %d\n", d);
        return 2;
    }
    CHECK_CU(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK_CU(cuCtxSetCurrent(ctx));
    int major = 0;
    CHECK_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));

    const size_t n4 = size_t(b) * s * h * d, s_r = size_t((s + tile_m - 1) / tile_m) * tile_m;
    const char* inputs[] = {"q", "k", "v", "do"};
    CUdeviceptr in[4];
    for (int i = 0; i < 4; i++) {
        std::vector<char> host = read_file(dir + "/" + inputs[i] + ".bin", n4 * 2);
        if (host.empty()) {
            std::fprintf(stderr, "cannot read %s/%s.bin\n", dir.c_str(), inputs[i]);
            return 2;
        }
        CHECK_CU(cuMemAlloc(&in[i], n4 * 2));
        CHECK_CU(cuMemcpyHtoD(in[i], host.data(), host.size()));
    }
    // outputs and the backward's fp32 buffers, all NaN to start with
    const char* outputs[] = {"o", "lse", "dq", "dk", "dv"};
    size_t out_bytes[] = {n4 * 2, size_t(b) * h * s * 4, n4 * 2, n4 * 2, n4 * 2};
    CUdeviceptr out[5], dpsum, lse_log2, dq_accum;
    for (int i = 0; i < 5; i++) {
        CHECK_CU(cuMemAlloc(&out[i], out_bytes[i]));
        CHECK_CU(cuMemsetD8(out[i], 0xff, out_bytes[i]));
    }
    CHECK_CU(cuMemAlloc(&dpsum, size_t(b) * h * s_r * 4));
    CHECK_CU(cuMemAlloc(&lse_log2, size_t(b) * h * s_r * 4));
    CHECK_CU(cuMemAlloc(&dq_accum, size_t(b) * h * s_r * hd_pad * 4));

    auto t4 = [&](CUdeviceptr p) {
        return T4{(kp_bf16*)p, b, s, h, d, int64_t(s) * h * d, int64_t(h) * d, int64_t(d)};
    };
    auto f3 = [&](CUdeviceptr p, int64_t n) { return F3{(float*)p, b, h, int32_t(n), int64_t(h) * n, n}; };
    auto f3b = [&](CUdeviceptr p, int64_t n) { return F3B{(float*)p, b, h, int32_t(n), int64_t(h) * n, n}; };
    const float scale = 1.0f / std::sqrt(float(d));
    T4 q = t4(in[0]), k = t4(in[1]), v = t4(in[2]), dO = t4(in[3]), o = t4(out[0]);
    F3 lse = f3(out[1], s);
    if (major == 10)
        CHECK_KP("fwd_sm100", e.fwd100(q, k, v, o, lse, scale, s, nullptr));
    else
        CHECK_KP("fwd", e.fwd(q, k, v, o, lse, scale, nullptr));
    F3B dps = f3b(dpsum, int64_t(s_r)), ll2 = f3b(lse_log2, int64_t(s_r)), acc = f3b(dq_accum, int64_t(s_r) * hd_pad);
    CHECK_KP("bwd_pre", e.pre(o, dO, dps, lse, ll2, acc, 1.0f, nullptr));
    CHECK_KP("bwd", e.bwd(q, k, v, dO, ll2, dps, acc, t4(out[3]), t4(out[4]), scale, nullptr));
    CHECK_KP("bwd_post", e.post(acc, t4(out[2]), scale, nullptr));
    CHECK_CU(cuCtxSynchronize());

    for (int i = 0; i < 5; i++) {
        std::vector<char> host(out_bytes[i]);
        CHECK_CU(cuMemcpyDtoH(host.data(), out[i], host.size()));
        if (!write_file(dir + "/" + outputs[i] + ".bin", host)) {
            std::fprintf(stderr, "cannot write %s/%s.bin\n", dir.c_str(), outputs[i]);
            return 2;
        }
    }
    std::printf("fa4_check: fwd+bwd d=%d causal=%d on sm_%d: done\n", d, int(causal), major * 10);
    return 0;
}
