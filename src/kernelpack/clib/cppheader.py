"""NAME.hpp: the header-only C++17 layer over NAME.h.

Shared by every library (guarded, so several libraries' headers can be included together): ``kp::Error``,
``kp::dtype_of``, ``kp::launch``, ``kp::device_span<T>`` (a pointer + count, implicit from ``T*``, ``{T*, n}`` or
anything with ``.data()``/``.size()``) and ``kp::tensor_view<T, Rank>`` (converts to ``kp_tensor``). Per library, in
``namespace NAME``: ``Library`` (an RAII handle that preloads a device's kernels, reporting failure by exception or
status), ``check``, converters from views to the library's tensor structs, and ``[[nodiscard]]`` overloads of every
family entry and typed specialization entry, taking raw pointers or views.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.abi import Pointer, Struct
from ..core.names import c_name, cpp_namespace
from ..core.version import __version__
from ..launch.codes import DTYPES, DTYPES_V1
from .buildid import cpp_check, cpp_check_build
from .cdecl import dtype_enum, entry_name, param_decl, renamed_params, wrapper_name
from .launchgen import LAUNCH, CallerArg, DescArg, ListArg

if TYPE_CHECKING:
    from ..bundle.host_program import HostProgram
    from .cdecl import TypeNames
    from .family import Family
    from .generate import _Gen as Gen

CPP_TYPES = [(d, d.c_type) for d in DTYPES[:DTYPES_V1]]  # the C spelling of each kp_dtype (kernelpack.core.abi)
# the fp8 kp_dtypes: uint8_t in C (taken by KP_U8), cuda_fp8.h's types in C++ where the includer has that header
CPP_FP8_TYPES = {"f8e4m3": "__nv_fp8_e4m3", "f8e5m2": "__nv_fp8_e5m2"}

# what the C++ layer declares in a library's namespace itself: an entry so named gets a trailing _ in C++
LAYER_NAMES = frozenset(("Library", "check", "last_error", "status_name", "preload", "check_build"))


def cpp_name(name: str) -> str:
    """A user's name (family, specialization, host program, library) as spelled in the C++ layer."""
    c = c_name(name)
    return c + "_" if c in LAYER_NAMES else c


def cpp_names(g: Gen) -> list[tuple[str, str]]:
    """(C++ name, what) of everything the library's namespace declares, for the generator's collision check."""
    out = [(n, "the C++ layer") for n in LAYER_NAMES]
    out += [(cpp_name(f.name), f"family {f.name}") for f in g.families]
    out += [(cpp_name(wrapper_name(g.lib, a)[len(g.lib) + 1:]), f"specialization {a.label}") for a in g.arts]
    out += [(cpp_name(p.symbol), f"CuTe host program {p.label}") for p in g.programs]
    out += [(f"to_{g.names.c_type(t)[len(g.lib) + 1:]}", f"the converter of {t.name}") for t in g.names.structs()
            if t.tensor is not None]
    return out

_COMMON_V1 = """#ifndef KP_CPP_COMMON_V1
#define KP_CPP_COMMON_V1
/// Types shared by the C++ layers of every kernelpack library.
namespace kp {

/// A failed kernelpack call: its status and the library's message.
class Error : public std::runtime_error {
  public:
    /// An error for `status` carrying `message`.
    Error(kp_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
    /// The status the call returned.
    kp_status status() const noexcept { return status_; }

  private:
    kp_status status_;
};

/// The kp_dtype of a C++ element type (specialized for every kp_dtype; const types map as their plain type).
template <class T> struct dtype_of;
DTYPES

/// A launch of `grid_x` blocks of `block_x` threads (0 = the kernel's fixed block) with `dynamic_smem` bytes of
/// dynamic shared memory on `stream` (a CUstream or cudaStream_t; nullptr = the legacy default stream).
inline kp_launch launch(uint32_t grid_x, uint32_t block_x = 0, uint32_t dynamic_smem = 0, void* stream = nullptr) {
    kp_launch l{};
    l.grid[0] = grid_x;
    l.block[0] = block_x;
    l.dynamic_smem = dynamic_smem;
    l.stream = stream;
    return l;
}

}  // namespace kp
#endif  // KP_CPP_COMMON_V1
"""

_FP8_V1 = """#ifndef KP_CPP_FP8_V1
#define KP_CPP_FP8_V1
#ifdef __CUDA_FP8_TYPES_EXIST__
/// The fp8 kp_dtypes of cuda_fp8.h's types, when that header was included before this one (a host compiler without
/// the CUDA toolkit has no fp8 type; pass such data as uint8_t or void* with the kp_dtype named explicitly).
namespace kp {
@FP8_DTYPES@
}  // namespace kp
#endif
#endif  // KP_CPP_FP8_V1
"""

_COMMON_V2 = """#ifndef KP_CPP_COMMON_V2
#define KP_CPP_COMMON_V2
/// Views of device memory shared by the C++ layers of every kernelpack library.
namespace kp {

/// const T has the kp_dtype of T.
template <class T> struct dtype_of<const T> : dtype_of<T> {};

/// A view of `size()` elements of T in device memory: a pointer and a count (C++17; no <span> needed).
///
/// Implicit from a `T*` (count 0: unknown), from `{T*, count}`, and from anything whose `.data()` converts to `T*` and
/// that has `.size()` (a device buffer class, a `device_span<U>` with `U*` convertible to `T*`, ...). The caller
/// vouches that the memory is on the device: a host container converts just as well.
template <class T> class device_span {
  public:
    /// The element type.
    using element_type = T;
    /// An empty view (nullptr, no elements).
    constexpr device_span() noexcept = default;
    /// `size` elements at `data`.
    constexpr device_span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
    /// The elements at `data`, count unknown (0): a raw pointer goes wherever a view is taken.
    constexpr device_span(T* data) noexcept : data_(data) {}  // NOLINT(google-explicit-constructor)
    /// The elements of `c`: anything whose `.data()` converts to `T*` and that has `.size()`.
    template <class C, class = std::enable_if_t<
                           !std::is_pointer<std::decay_t<C>>::value &&
                           std::is_convertible<decltype(std::declval<C&>().data()), T*>::value &&
                           std::is_convertible<decltype(std::declval<C&>().size()), std::size_t>::value>>
    constexpr device_span(C&& c) noexcept(noexcept(c.data()) && noexcept(c.size()))  // NOLINT
        : data_(c.data()), size_(static_cast<std::size_t>(c.size())) {}
    /// The device pointer.
    constexpr T* data() const noexcept { return data_; }
    /// The number of elements (0 when made from a bare pointer).
    constexpr std::size_t size() const noexcept { return size_; }
    /// The number of bytes.
    constexpr std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
    /// Whether the view holds no elements.
    constexpr bool empty() const noexcept { return size_ == 0; }

  private:
    T* data_ = nullptr;
    std::size_t size_ = 0;
};

/// A strided view of a rank-`Rank` tensor of T in device memory: extents and strides (in elements) per mode,
/// outermost first. Converts to kp_tensor (family entries) and, through `NAME::to_STRUCT`, to a library's tensor
/// structs (typed entries take it directly).
template <class T, std::size_t Rank> class tensor_view {
    static_assert(Rank >= 1 && Rank <= KP_MAX_RANK, "kp::tensor_view: Rank must be in [1, KP_MAX_RANK]");

  public:
    /// The element type.
    using element_type = T;
    /// The number of modes.
    static constexpr std::size_t rank = Rank;
    /// An empty view (nullptr, all extents 0).
    constexpr tensor_view() noexcept = default;
    /// A compact row-major tensor of extents `shape` at `data` (the last mode has stride 1).
    tensor_view(T* data, const int64_t (&shape)[Rank]) noexcept : data_(data) {
        int64_t step = 1;
        for (std::size_t i = Rank; i-- > 0;) shape_[i] = shape[i], stride_[i] = step, step *= shape[i];
    }
    /// A tensor of extents `shape` and strides `stride` (in elements) at `data`.
    tensor_view(T* data, const int64_t (&shape)[Rank], const int64_t (&stride)[Rank]) noexcept : data_(data) {
        for (std::size_t i = 0; i < Rank; i++) shape_[i] = shape[i], stride_[i] = stride[i];
    }
    /// A view of another element type whose pointer converts to `T*` (e.g. T to const T).
    template <class U, class = std::enable_if_t<std::is_convertible<U*, T*>::value>>
    tensor_view(const tensor_view<U, Rank>& other) noexcept : data_(other.data()) {  // NOLINT
        for (std::size_t i = 0; i < Rank; i++) shape_[i] = other.shape(i), stride_[i] = other.stride(i);
    }
    /// The device pointer to element [0, ..., 0].
    constexpr T* data() const noexcept { return data_; }
    /// The extent of mode `i`.
    constexpr int64_t shape(std::size_t i) const noexcept { return shape_[i]; }
    /// The stride of mode `i`, in elements.
    constexpr int64_t stride(std::size_t i) const noexcept { return stride_[i]; }
    /// The number of elements.
    int64_t numel() const noexcept {
        int64_t n = 1;
        for (std::size_t i = 0; i < Rank; i++) n *= shape_[i];
        return n;
    }
    /// The view as a kp_tensor (its dtype from kp::dtype_of<T>).
    operator kp_tensor() const noexcept {  // NOLINT(google-explicit-constructor)
        kp_tensor t{};
        t.data = const_cast<void*>(static_cast<const void*>(data_));
        t.dtype = dtype_of<T>::value;
        t.rank = static_cast<int32_t>(Rank);
        for (std::size_t i = 0; i < Rank; i++) t.shape[i] = shape_[i], t.stride[i] = stride_[i];
        return t;
    }

  private:
    T* data_ = nullptr;
    int64_t shape_[Rank] = {};
    int64_t stride_[Rank] = {};
};

}  // namespace kp
#endif  // KP_CPP_COMMON_V2
"""


def _library_class(lib: str) -> str:
    return f"""/// A handle on lib{lib}'s kernels for a device: constructing it loads every kernel's binary for that
/// device now ({lib}_preload) instead of on first launch, and reports a failure by exception or, given std::nothrow,
/// by status.
/// Loaded kernels belong to the process: every handle and every entry share them, and destroying a handle unloads
/// nothing, so launches from other threads stay valid.
class Library {{
  public:
    /// Loads every kernel for `device` (-1 = every device); throws kp::Error on failure.
    explicit Library(int device = -1) : Library(device, std::nothrow) {{ check(); }}
    /// Loads every kernel for `device` (-1 = every device); a failure is kept in status() and message().
    Library(int device, const std::nothrow_t&) : device_(device), status_({lib}_preload(device)) {{
        if (status_ != KP_SUCCESS) message_ = {lib}_last_error();
    }}
    /// The device the handle loaded for (-1 = every device).
    int device() const noexcept {{ return device_; }}
    /// How loading went.
    kp_status status() const noexcept {{ return status_; }}
    /// Whether every kernel loaded.
    bool ok() const noexcept {{ return status_ == KP_SUCCESS; }}
    /// Whether every kernel loaded.
    explicit operator bool() const noexcept {{ return ok(); }}
    /// The library's message when loading failed, else empty.
    const std::string& message() const noexcept {{ return message_; }}
    /// Throws kp::Error when loading failed.
    void check() const {{
        if (status_ != KP_SUCCESS) throw kp::Error(status_, message_);
    }}

  private:
    int device_;
    kp_status status_;
    std::string message_;
}};"""


def _span_type(p: Pointer) -> str | None:
    if p.pointee is None:
        return None
    return f"kp::device_span<{'const ' if p.const else ''}{p.pointee.c_type}>"


class _Overloads:
    """The C++ overloads of one library, deduplicated by signature."""

    def __init__(self, g: Gen) -> None:
        self.g = g
        self.out: list[str] = []
        self.seen: set[tuple[str, str]] = set()

    def add(self, name: str, doc: str, params: list[str], call: str, guard: str = "") -> None:
        sig = ", ".join([f"const kp_launch& {LAUNCH}", *params])
        if (name, sig) in self.seen:
            return
        self.seen.add((name, sig))
        text = f"/// {doc}\n[[nodiscard]] inline kp_status {name}({sig}) {{\n    return {call};\n}}"
        self.out.append(f"#ifdef {guard}\n{text}\n#endif" if guard else text)

    def family(self, f: Family) -> None:
        lib = self.g.lib
        for s in f.specs:
            for views in (False, True):
                params, call, guard = [], [f"&{LAUNCH}"], ""
                for fa, p in zip(f.args, self.g.plan(s.artifact).args, strict=True):
                    v = fa.cname
                    if fa.kind in ("tensor", "desc"):
                        params.append(f"const kp_tensor& {v}")
                        call.append(f"&{v}")
                        continue
                    if fa.kind == "list":
                        decl, arg = _list_arg(v, views)
                        params.append(decl)
                        call.append(arg)
                        continue
                    if fa.kind == "ptr":
                        assert not isinstance(p, (DescArg, ListArg)) and isinstance(p.type, Pointer)
                        t = Pointer(p.type.pointee, fa.const) if fa.varying else p.type
                        span = _span_type(t) if views else None
                        if fa.varying and t.pointee is not None and t.pointee.is_fp8:
                            # uint8_t* would not tell e4m3 from e5m2 (or u8): the overload takes cuda_fp8.h's
                            # type, and exists only where the includer has that header
                            elem = f"{'const ' if t.const else ''}{CPP_FP8_TYPES[t.pointee.value]}"
                            span = f"kp::device_span<{elem}>" if views else None
                            params.append(f"{span} {v}" if span else f"{elem}* {v}")
                            call.append(f"{v}.data()" if span else v)
                            call.append(dtype_enum(t.pointee))
                            guard = "__CUDA_FP8_TYPES_EXIST__"
                            continue
                        params.append(f"{span} {v}" if span else f"{t.c_type} {v}")
                        call.append(f"{v}.data()" if span else v)
                        if fa.varying:
                            call.append(dtype_enum(t.pointee))
                        continue
                    assert fa.type is not None
                    params.append(param_decl(self.g.names, fa.type, v))
                    call.append(v)
                elems = ", ".join(sorted({p.type.pointee.value for p in self.g.plan(s.artifact).params
                                          if isinstance(p.type, Pointer) and p.type.pointee is not None}))
                what = f"{elems} elements, " if len(f.specs) > 1 and elems else ""
                fn = entry_name(lib, f.name)
                doc = (f"Family `{f.name}`: {what}{'device views' if views else 'pointers'} (see {fn}; "
                       f"dispatches over its specializations){_renamed(f.name, [fa.name for fa in f.args])}.")
                self.add(cpp_name(f.name), doc, params, f"{fn}({', '.join(call)})", guard)

    def typed(self, index: int) -> None:
        g = self.g
        a = g.arts[index]
        fn = wrapper_name(g.lib, a)
        short = fn[len(g.lib) + 1:]
        for views in (False, True):
            params, call = [], [f"&{LAUNCH}"]
            for p in g.plan(a).args:
                decl, arg = self._typed_arg(p, views)
                params.append(decl)
                call.append(arg)
            self.add(cpp_name(short), f"Specialization {a.label} with {'device views' if views else 'C types'}"
                     f" (see {fn}){_renamed(short, [p.name for p in g.plan(a).args])}.", params,
                     f"{fn}({', '.join(call)})")

    def _typed_arg(self, p: CallerArg, views: bool) -> tuple[str, str]:
        names, v = self.g.names, c_name(p.name)
        if isinstance(p, DescArg):
            return f"const kp_tensor& {v}", f"&{v}"
        if isinstance(p, ListArg):
            return _list_arg(v, views)
        t = p.type
        if views and isinstance(t, Pointer) and (span := _span_type(t)):
            return f"{span} {v}", f"{v}.data()"
        if views and isinstance(t, Struct) and t.tensor is not None:
            assert isinstance(t.fields[0].type, Pointer) and t.fields[0].type.pointee is not None
            view = f"kp::tensor_view<{t.fields[0].type.pointee.c_type}, {t.tensor.rank}>"
            return f"const {view}& {v}", f"to_{names.c_type(t)[len(self.g.lib) + 1:]}({v})"
        return param_decl(names, t, v), v


def _list_arg(v: str, views: bool) -> tuple[str, str]:
    """A tensor list: a kp_tensor array and its count, or one view of the array (a std::vector<kp_tensor>, ...; a
    count beyond int32_t is passed as -1, which the entry refuses)."""
    if views:
        return (f"kp::device_span<const kp_tensor> {v}",
                f"{v}.data(), ({v}.size() > INT32_MAX ? -1 : static_cast<int32_t>({v}.size()))")
    return f"const kp_tensor* {v}, int32_t {v}_count", f"{v}, {v}_count"


def _renamed(name: str, params: list[str]) -> str:
    """A doc note listing what the C++ layer spells differently from the user's names."""
    note = renamed_params([name, *params]).removeprefix("; ")
    return f" ({note})" if note else ""


def _converters(g: Gen | _HostOnly) -> list[str]:
    """to_STRUCT(view) for each tensor struct of the library."""
    out = []
    for t in g.names.structs():
        if t.tensor is None:
            continue
        c = g.names.c_type(t)
        elem = t.fields[0].type
        assert isinstance(elem, Pointer) and elem.pointee is not None
        ts = t.tensor
        dims = ", ".join("?" if d is None else str(d) for d in ts.shape)
        strides = ", ".join("?" if d is None else str(d) for d in ts.stride)
        sets = "".join(
            f"    s.{f.name} = static_cast<{f.type.c_type}>(v.{'shape' if f.name.startswith('shape') else 'stride'}"
            f"({f.name.removeprefix('shape').removeprefix('stride')}));\n" for f in t.fields[1:])
        out.append(f"/// {c} from a view: its pointer and the modes passed at run time (shape [{dims}], stride "
                   f"[{strides}]; ? = passed). The static modes are the caller's promise: they are not checked here.\n"
                   f"inline {c} to_{c[len(g.lib) + 1:]}(const kp::tensor_view<{elem.pointee.c_type}, {ts.rank}>& v) "
                   f"noexcept {{\n    {c} s{{}};\n    s.data = v.data();\n{sets}    return s;\n}}")
    return out


def _host_cpp(g: Gen | _HostOnly) -> list[str]:
    from .host.entry import call_args, params_decl

    return [f"/// CuTe host program {p.label} (see {entry_name(g.lib, p.symbol)}).\n[[nodiscard]] inline kp_status "
            f"{cpp_name(p.symbol)}({params_decl(g.names, p).removesuffix('void')}) {{\n    return "
            f"{entry_name(g.lib, p.symbol)}({call_args(p)});\n}}"
            for p in g.programs]


def _fp8_dtypes() -> str:
    return "\n".join(f"/// {c} is {dtype_enum(d)}.\ntemplate <> struct dtype_of<{c}> {{ static constexpr kp_dtype "
                     f"value = {dtype_enum(d)}; }};" for d in DTYPES[DTYPES_V1:] for c in [CPP_FP8_TYPES[d.value]])


def cpp_header(g: Gen) -> str:
    lib, ns = g.lib, cpp_namespace(g.lib)
    dtypes = "\n".join(f"/// {c} is {dtype_enum(d)}.\ntemplate <> struct dtype_of<{c}> {{ static constexpr kp_dtype "
                       f"value = {dtype_enum(d)}; }};" for d, c in CPP_TYPES)
    ov = _Overloads(g)
    for f in g.families:
        ov.family(f)
    for i in range(len(g.arts)):
        ov.typed(i)
    return f"""/// @file {lib}.hpp
/// Generated by kernelpack {__version__}: the C++17 interface to lib{lib} (header-only, over {lib}.h). Do not edit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "{lib}.h"
{cpp_check(lib)}
{_COMMON_V1.replace("DTYPES", dtypes)}
{_FP8_V1.replace("@FP8_DTYPES@", _fp8_dtypes())}
{_COMMON_V2}
/// The kernels of lib{lib}: an RAII handle, error helpers, view converters and overloads of every entry of {lib}.h.
namespace {ns} {{

/// Throws kp::Error carrying {lib}_last_error() unless `status` is KP_SUCCESS.
inline void check(kp_status status) {{
    if (status != KP_SUCCESS) throw kp::Error(status, {lib}_last_error());
}}

/// This thread's message for its last failed call.
inline const char* last_error() noexcept {{ return {lib}_last_error(); }}

{cpp_check_build(lib)}
/// The name of a status, e.g. "KP_ERROR_NO_DRIVER".
inline const char* status_name(kp_status status) noexcept {{ return {lib}_status_name(status); }}

/// Loads every kernel for a device now (-1 = every device).
[[nodiscard]] inline kp_status preload(int device = -1) noexcept {{ return {lib}_preload(device); }}

{_library_class(lib)}

{chr(10).join([*_converters(g), *ov.out, *_host_cpp(g)])}

}}  // namespace {ns}
"""


@dataclass(frozen=True)
class _HostOnly:
    """What the converters and host overloads read from a library of CuTe host programs alone."""

    lib: str
    names: TypeNames
    programs: Sequence[HostProgram]


def host_cpp_header(lib: str, programs: Sequence[HostProgram], names: TypeNames) -> str:
    """NAME.hpp of a library of CuTe host programs alone (``cute_host.build``): the shared C++ types, ``check``,
    ``last_error``, view converters and an overload of every entry, over the NAME.h that ``names`` rendered."""
    g = _HostOnly(lib, names, tuple(programs))
    ns = cpp_namespace(lib)
    dtypes = "\n".join(f"/// {c} is {dtype_enum(d)}.\ntemplate <> struct dtype_of<{c}> {{ static constexpr kp_dtype "
                       f"value = {dtype_enum(d)}; }};" for d, c in CPP_TYPES)
    return f"""/// @file {lib}.hpp
/// Generated by kernelpack {__version__}: the C++17 interface to lib{lib} (header-only, over {lib}.h). Do not edit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "{lib}.h"
{cpp_check(lib)}
{_COMMON_V1.replace("DTYPES", dtypes)}
{_FP8_V1.replace("@FP8_DTYPES@", _fp8_dtypes())}
{_COMMON_V2}
/// The CuTe host programs of lib{lib}: error helpers, view converters and overloads of every entry of {lib}.h.
namespace {ns} {{

/// Throws kp::Error carrying {lib}_last_error() unless `status` is KP_SUCCESS.
inline void check(kp_status status) {{
    if (status != KP_SUCCESS) throw kp::Error(status, {lib}_last_error());
}}

/// This thread's message for its last failed call.
inline const char* last_error() noexcept {{ return {lib}_last_error(); }}

{cpp_check_build(lib)}
{chr(10).join([*_converters(g), *_host_cpp(g)])}

}}  // namespace {ns}
"""
