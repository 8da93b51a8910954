// Device memory for the example programs: the NVIDIA driver opened with dlopen (no CUDA headers, no -lcuda, no
// cudart), RAII buffers, and the half/bfloat16 conversions the checks need. Example code, not part of kernelpack:
// a real server allocates with its own allocator and passes raw device pointers to the kernelpack library.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace kpx {

class Driver {
  public:
    Driver() {
        lib_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib_) throw std::runtime_error("libcuda.so.1 not found: these examples need an NVIDIA driver");
        load(init_, "cuInit");
        load(device_get_, "cuDeviceGet");
        load(retain_, "cuDevicePrimaryCtxRetain");
        load(set_current_, "cuCtxSetCurrent");
        load(alloc_, "cuMemAlloc_v2");
        load(free_, "cuMemFree_v2");
        load(htod_, "cuMemcpyHtoD_v2");
        load(dtoh_, "cuMemcpyDtoH_v2");
        load(sync_, "cuCtxSynchronize");
        int dev = 0;
        void* ctx = nullptr;
        check(init_(0), "cuInit");
        check(device_get_(&dev, 0), "cuDeviceGet");
        check(retain_(&ctx, dev), "cuDevicePrimaryCtxRetain");
        check(set_current_(ctx), "cuCtxSetCurrent");  // device 0's primary context, as the CUDA runtime uses
    }
    Driver(const Driver&) = delete;
    Driver& operator=(const Driver&) = delete;

    uint64_t alloc(size_t bytes) {
        uint64_t p = 0;
        check(alloc_(&p, bytes ? bytes : 1), "cuMemAlloc");
        return p;
    }
    void free(uint64_t p) noexcept { free_(p); }
    void upload(uint64_t dst, const void* src, size_t bytes) { check(htod_(dst, src, bytes), "cuMemcpyHtoD"); }
    void download(void* dst, uint64_t src, size_t bytes) { check(dtoh_(dst, src, bytes), "cuMemcpyDtoH"); }
    void sync() { check(sync_(), "cuCtxSynchronize"); }

  private:
    template <class F> void load(F& f, const char* name) {
        f = reinterpret_cast<F>(dlsym(lib_, name));
        if (!f) throw std::runtime_error(std::string("driver lacks ") + name);
    }
    static void check(int r, const char* what) {
        if (r != 0) throw std::runtime_error(std::string(what) + " failed with CUresult " + std::to_string(r));
    }
    void* lib_ = nullptr;
    int (*init_)(unsigned) = nullptr;
    int (*device_get_)(int*, int) = nullptr;
    int (*retain_)(void**, int) = nullptr;
    int (*set_current_)(void*) = nullptr;
    int (*alloc_)(uint64_t*, size_t) = nullptr;
    int (*free_)(uint64_t) = nullptr;
    int (*htod_)(uint64_t, const void*, size_t) = nullptr;
    int (*dtoh_)(void*, uint64_t, size_t) = nullptr;
    int (*sync_)() = nullptr;
};

/// A device array of T that owns its allocation.
template <class T> class Buffer {
  public:
    Buffer(Driver& d, const std::vector<T>& host) : d_(&d), n_(host.size()), ptr_(d.alloc(host.size() * sizeof(T))) {
        d.upload(ptr_, host.data(), host.size() * sizeof(T));
    }
    ~Buffer() { d_->free(ptr_); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    T* get() const noexcept { return reinterpret_cast<T*>(static_cast<uintptr_t>(ptr_)); }
    /// The device pointer: with size(), a Buffer passes wherever a library takes a kp::device_span<T>.
    T* data() const noexcept { return get(); }
    size_t size() const noexcept { return n_; }
    std::vector<T> download() const {
        std::vector<T> out(n_);
        d_->download(out.data(), ptr_, n_ * sizeof(T));
        return out;
    }

  private:
    Driver* d_;
    size_t n_;
    uint64_t ptr_;
};

inline float bits_to_float(uint32_t x) {
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}
inline uint32_t float_to_bits(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    return x;
}
/// bfloat16 <-> float (round to nearest even; inputs here are finite).
inline uint16_t to_bf16(float f) {
    uint32_t x = float_to_bits(f);
    return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float from_bf16(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }
/// IEEE half <-> float for normal values (the examples' data never leaves the normal range).
inline uint16_t to_half(float f) {
    uint32_t x = float_to_bits(f), sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int32_t e = int32_t((x >> 23) & 0xff) - 127 + 15;
    if (e <= 0) return uint16_t(sign);
    if (e >= 31) return uint16_t(sign | 0x7c00u);
    uint32_t h = sign | (uint32_t(e) << 10) | (mant >> 13), rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return uint16_t(h);
}
inline float from_half(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (e == 0) return sign ? -0.0f : 0.0f;  // (subnormals flushed: not produced by these examples)
    return bits_to_float(sign | ((e + 112) << 23) | (mant << 13));
}

}  // namespace kpx
