// The C++ layer of a generated library (demo.hpp) on the fake driver: the RAII handle, device views, overloads.
#include <cstdio>
#include <cstring>
#include <new>
#include <type_traits>

#include "demo.hpp"

// A device buffer as an application might have one: data() and size().
template <class T> struct DeviceBuffer {
    T* ptr;
    std::size_t n;
    T* data() const noexcept { return ptr; }
    std::size_t size() const noexcept { return n; }
};

static_assert(std::is_convertible<float*, kp::device_span<const float>>::value, "pointer to view");
static_assert(std::is_convertible<DeviceBuffer<float>&, kp::device_span<const float>>::value, "buffer to view");
static_assert(std::is_convertible<kp::device_span<float>, kp::device_span<const float>>::value, "add const");
static_assert(!std::is_convertible<DeviceBuffer<double>&, kp::device_span<const float>>::value, "wrong type");
static_assert(!std::is_convertible<kp::device_span<const float>, kp::device_span<float>>::value, "drop const");
static_assert(!std::is_convertible<kp::tensor_view<float, 2>, demo_Tensor2f>::value, "struct only via to_");
static_assert(kp::dtype_of<const float>::value == KP_F32, "const dtype");
static_assert(kp::tensor_view<float, 3>::rank == 3, "rank");

template <class T> static T* at(std::uintptr_t a) { return reinterpret_cast<T*>(a); }

int main() {
    demo::Library lib;  // every device, throws on failure
    std::printf("library ok=%d device=%d status=%s\n", lib.ok() ? 1 : 0, lib.device(), demo::status_name(lib.status()));
    demo::Library dev0(0, std::nothrow);
    std::printf("device0 ok=%d\n", static_cast<bool>(dev0) ? 1 : 0);
    try {
        demo::Library bad(7);
        std::printf("unexpected\n");
    } catch (const kp::Error& e) {
        std::printf("error %s %s\n", demo::status_name(e.status()), e.what());
    }
    demo::Library quiet(7, std::nothrow);
    std::printf("quiet ok=%d status=%s message=%s\n", quiet.ok() ? 1 : 0, demo::status_name(quiet.status()),
                quiet.message().c_str());

    DeviceBuffer<float> x{at<float>(0x10000), 1024}, y{at<float>(0x20000), 1024}, out{at<float>(0x30000), 1024};
    kp::device_span<float> o = out;
    std::printf("span size=%zu bytes=%zu empty=%d\n", o.size(), o.size_bytes(), o.empty() ? 1 : 0);
    demo::check(demo::add(kp::launch(8, 128), x, y, out, 1024));  // views of buffers: the vec4 specialization
    demo::check(demo::add(kp::launch(8, 128), kp::device_span<const double>{at<double>(0x10000), 1024},
                          at<double>(0x20000), at<double>(0x30000), 1024));  // a view and raw pointers mixed
    demo::check(demo::add(kp::launch(8, 128), at<float>(0x10004), at<float>(0x20000), at<float>(0x30000), 1024));
    demo::check(demo::add_f32(kp::launch(8, 128), x, y, o, 1024));  // typed entry with views

    kp::tensor_view<float, 2> t(at<float>(0x40000), {64, 32});
    kp::tensor_view<const float, 2> ct = t;
    kp_tensor kt = t;
    std::printf("kp_tensor dtype=%d rank=%d shape=%lld,%lld stride=%lld,%lld numel=%lld const_data=%p\n",
                static_cast<int>(kt.dtype), static_cast<int>(kt.rank), static_cast<long long>(kt.shape[0]),
                static_cast<long long>(kt.shape[1]), static_cast<long long>(kt.stride[0]),
                static_cast<long long>(kt.stride[1]), static_cast<long long>(t.numel()),
                static_cast<const void*>(ct.data()));
    demo_Tensor2f s = demo::to_Tensor2f(t);
    std::printf("struct shape=%d,%d stride0=%lld\n", static_cast<int>(s.shape0), static_cast<int>(s.shape1),
                static_cast<long long>(s.stride0));
    demo::check(demo::tsum(kp::launch(1, 32), t, out));          // family: the view as a kp_tensor
    demo::check(demo::tsum_default(kp::launch(1, 32), t, out));  // typed: the view as demo_Tensor2f
    kp::tensor_view<float, 2> strided(at<float>(0x40000), {64, 32}, {40, 1});
    demo::check(demo::tsum(kp::launch(1, 32), strided, out));
    kp::tensor_view<float, 2> transposed(at<float>(0x40000), {64, 32}, {1, 64});
    kp_status st = demo::tsum(kp::launch(1, 32), transposed, out);  // stride [?, 1] required: no match
    std::printf("transposed %s\n", demo::status_name(st));
    st = demo::fixed_block(kp::launch(1, 64), out);
    std::printf("fixed_block %s\n", demo::status_name(st));
    std::printf("ok\n");
    return 0;
}
