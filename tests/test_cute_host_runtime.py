"""CuTe host programs from Python through ``kernelpack.load`` (no GPU): the library describes its entries in
section ``.kpack_host``; the runtime exposes each program as a callable with a typed signature, checks arguments
as for kernels, fills the entry's tensor descriptors, resolves the stream, makes the tensors' device current, and
turns the entry's ``kp_status`` + ``NAME_last_error()`` into the runtime's exceptions."""

from __future__ import annotations

import ctypes
import inspect
import json
import sys
import textwrap
from pathlib import Path

import pytest

from cute_support import example, host_programs, need_cute
from gpu import driver_present

need_cute()
torch = pytest.importorskip("torch")
import cutlass  # noqa: E402

import kernelpack  # noqa: E402
import kernelpack.cute as kc  # noqa: E402
from fake_cuda import run  # noqa: E402
from kernelpack.bundle import host_manifest as hm  # noqa: E402
from kernelpack.bundle.embedded import read_embedded  # noqa: E402
from kernelpack.clib import Library, read_embedded_bundle  # noqa: E402
from kernelpack.clib.host import build_host_library  # noqa: E402
from kernelpack.core.errors import BundleError, LaunchError  # noqa: E402
from kernelpack.runtime import ArgumentTypeError, ArgumentValueError, DriverError, NoMatchingSpecialization, host
from runtime_support import CudaArray, cpu_tensors_as_cuda  # noqa: E402
from toolchain_support import needs_tools  # noqa: E402

pytestmark = needs_tools("ld", "objcopy")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def programs():
    return host_programs()


@pytest.fixture(scope="module")
def library(programs, tmp_path_factory):
    return build_host_library("kpcute", programs, tmp_path_factory.mktemp("kpcute"))


@pytest.fixture
def mod(library, monkeypatch):
    """The library loaded, with no CUDA driver visible to the runtime (the entries still open libcuda.so.1)."""
    def no_driver():
        raise DriverError("no driver (test)")

    monkeypatch.setattr(host, "get_driver", no_driver)
    return kernelpack.load(library.shared)


class Recorder:
    """Stands in for a C entry: records the ctypes values it receives and returns ``status``."""

    def __init__(self, status: int = 0) -> None:
        self.calls: list[tuple] = []
        self.status = status

    def __call__(self, *args):  # type: ignore[no-untyped-def]
        self.calls.append(args)
        return self.status


def record(fn, symbol: str, status: int = 0) -> Recorder:  # type: ignore[no-untyped-def]
    rec = Recorder(status)
    fn.host_program._fns[symbol] = rec
    return rec


def half(*shape: int, dtype=torch.float16):  # type: ignore[no-untyped-def]
    return torch.zeros(*shape, dtype=dtype)


# ---------------------------------------------------------------- what the library says, what load shows


def test_library_describes_its_entries(library, programs) -> None:
    found = read_embedded(library.shared)
    assert not found.bundles and not found.archive
    assert [(h.label, h.symbol) for h in found.host_programs] == [
        ("ew_add[f32]", "kpcute_ew_add_f32"), ("ew_add[bf16]", "kpcute_ew_add_bf16"),
        ("scale_shift", "kpcute_scale_shift"), ("gemm[f16]", "kpcute_gemm_f16"), ("gemm[bf16]", "kpcute_gemm_bf16")]
    gemm = found.host_programs[3]
    assert gemm.params == programs[3].params and gemm.archs == ("sm_90a",) and gemm.library == "kpcute"
    static = read_embedded(library.static)
    assert static.archive and [h.symbol for h in static.host_programs] == [h.symbol for h in found.host_programs]
    with pytest.raises(BundleError, match="no kernelpack bundle inside"):
        read_embedded_bundle(library.shared)  # unchanged: a bundle reader still wants a bundle


def test_manifest_records_are_framed_and_versioned(programs) -> None:
    raw = hm.record("x", programs[:1])
    assert len(raw) % 8 == 0 and raw.startswith(hm.MAGIC)
    two = hm.parse(b"\0" * 8 + raw + hm.record("y", programs[2:3]), "t")  # several libraries linked together
    assert [(h.library, h.symbol) for h in two] == [("x", "x_ew_add_f32"), ("y", "y_scale_shift")]
    with pytest.raises(BundleError, match="truncated"):
        hm.parse(raw[:40], "t")
    future = json.loads(raw[16:].rstrip(b"\0"))
    future["format"] = 99
    body = json.dumps(future).encode()
    with pytest.raises(BundleError, match="format 99 is not supported"):
        hm.parse(hm.MAGIC + len(body).to_bytes(8, "little") + body, "t")


def test_load_exposes_typed_callables(mod, library) -> None:
    assert mod.__all__ == ["ew_add", "gemm", "scale_shift"]
    sig = inspect.signature(mod.gemm)
    assert list(sig.parameters) == ["a", "b", "c", "stream"]
    assert sig.parameters["stream"].kind is inspect.Parameter.KEYWORD_ONLY and sig.parameters["stream"].default is None
    text = repr(mod.gemm)
    assert text.startswith("<kernelpack host program gemm(a: tensor f16[?, ?] stride [?, 1], 16-byte aligned "
                           "(shape[1] % 8, stride[0] % 8 == 0) | tensor bf16[?, ?]")
    assert text.endswith(" [kpcute_gemm_f16, kpcute_gemm_bf16]>") and len(text) <= 300  # one bounded line
    assert str(sig).endswith(", *, stream=None) -> None")  # the whole signature: inspect, help(), __doc__
    assert "stream" not in inspect.signature(mod.ew_add).parameters  # its CuTe function takes no stream
    assert str(inspect.signature(mod.scale_shift)).startswith(
        "(x: 'tensor f32[?] stride [1], 4-byte aligned', y: 'tensor f32[?] stride [1], 4-byte aligned', n: 'i32', "
        "alpha: 'f32', period: 'i32', affine_offset: 'f32'")
    doc = mod.gemm.__doc__
    assert "gemm[f16]  (C entry kpcute_gemm_f16; sm_90a; zero extents: return without running)" in doc
    assert "CuTe host program" in mod.__doc__ and "gemm(" in mod.__doc__
    assert mod.host_programs["gemm"].name == "gemm"
    with pytest.raises(AttributeError, match="kernels: ew_add, gemm, scale_shift"):
        mod.nothing  # noqa: B018


# ---------------------------------------------------------------- checks before the entry is called


def _never(*args):  # type: ignore[no-untyped-def]
    raise AssertionError("the C entry must not be reached")


A, B, C = (16, 64), (64, 64), (16, 64)


@pytest.mark.parametrize("call, error, message", [
    (lambda m: m.gemm(half(*A), half(*B)), ArgumentTypeError,
     "host program gemm: takes 3 arguments (a, b, c), got 2: missing c"),
    (lambda m: m.gemm(half(*A), half(*B), half(*C), d=1), ArgumentTypeError,
     "unknown keyword argument 'd' (arguments: a, b, c; keyword: stream)"),
    (lambda m: m.gemm(half(*A), half(*B), c=half(*C), a=half(*A)), ArgumentTypeError, "argument 'a' given twice"),
    (lambda m: m.gemm(*(torch.zeros(*s) for s in (A, B, C))), NoMatchingSpecialization,
     "no variant accepts these arguments; gemm[f16]: parameter 0 'a': expected a f16 tensor, got a float32 tensor; "
     "gemm[bf16]: parameter 0 'a': expected a bf16 tensor"),
    (lambda m: m.gemm(half(16, 60), half(64, 60), half(*C)), NoMatchingSpecialization,
     "gemm[f16]: parameter 0 'a': shape[1] = 60 must be a multiple of 8 (the kernel was compiled for it; shape "
     "[16, 60])"),
    (lambda m: m.ew_add(half(8, 8, dtype=torch.float32).t(), *(torch.zeros(8, 8),) * 2), NoMatchingSpecialization,
     "ew_add[f32]: parameter 0 'a': stride[1] must be 1 (fixed when compiled), got 8"),
    (lambda m: m.ew_add(*(torch.zeros(8),) * 3), NoMatchingSpecialization, "expected a tensor of rank 2, got rank 1"),
    (lambda m: m.ew_add(torch.zeros(4, 4), torch.zeros(4, 4), 3), NoMatchingSpecialization,
     "parameter 2 'c': expected a f32 tensor of rank 2, got int 3"),
    (lambda m: m.ew_add(*(torch.zeros(4, 4),) * 3, stream=7), ArgumentTypeError,
     "host program ew_add[f32]: takes no stream"),
    (lambda m: m.scale_shift(torch.zeros(8), torch.zeros(8), 2**40, 1.0, 1, 0.0, -1.0, 1.0), ArgumentValueError,
     "host program scale_shift: parameter 2 'n': 1099511627776 does not fit i32"),
    (lambda m: m.scale_shift(torch.zeros(8), torch.zeros(8), "8", 1.0, 1, 0.0, -1.0, 1.0), ArgumentTypeError,
     "parameter 2 'n': expected an int for i32, got str"),
    (lambda m: m.gemm(half(*A), half(*B), half(*C), stream="s"), ArgumentTypeError, "stream must be None"),
])
def test_arguments_are_checked_before_the_entry(mod, monkeypatch, call, error, message) -> None:
    monkeypatch.setattr(host.SharedLibrary, "function", _never)
    with cpu_tensors_as_cuda(), pytest.raises(error) as e:
        call(mod)
    assert message in str(e.value)
    assert isinstance(e.value, LaunchError)


def test_cpu_tensors_and_mixed_devices_are_refused(mod, monkeypatch) -> None:
    monkeypatch.setattr(host.SharedLibrary, "function", _never)
    with pytest.raises(ArgumentValueError, match="argument 0 'a' is a float16 tensor of shape \\[16, 64\\] on cpu; "
                                                 "host programs need CUDA device memory"):
        mod.gemm(half(*A), half(*B), half(*C))
    arrays = [CudaArray(0x10000, s, "<f2", device=d) for s, d in ((A, 0), (B, 1), (C, 0))]
    with pytest.raises(ArgumentValueError, match="argument 0 'a' is on cuda:0 but argument 1 'b' is on cuda:1"):
        mod.gemm(*arrays)
    lying = [CudaArray(0x10000, (-16, 64), "<f2"), CudaArray(0x10000, B, "<f2"), CudaArray(0x10000, C, "<f2")]
    with pytest.raises(ArgumentValueError, match=r"host program gemm\S*: argument 'a': __cuda_array_interface__: "
                                                 r"shape\[0\] = -16 is negative"):
        mod.gemm(*lying)


# ---------------------------------------------------------------- what reaches the entry


def test_descriptors_scalars_and_stream_reach_the_entry(mod) -> None:
    a, b, c = half(*A), half(*B), half(*C)
    rec = record(mod.gemm, "kpcute_gemm_f16")
    with cpu_tensors_as_cuda(stream=0x5000):
        assert mod.gemm(a, b, c) is None
        mod.gemm(a, b, c, stream=0x77)
        mod.gemm(a=a, b=b, c=c, stream=None)
    (ta, tb, tc, s1), (_, _, _, s2), (*_, s3) = rec.calls
    assert (ta.data, ta.shape0, ta.shape1, ta.stride0) == (a.data_ptr(), 16, 64, 64)
    assert (tb.data, tb.shape0, tb.shape1, tb.stride0) == (b.data_ptr(), 64, 64, 64)
    assert type(ta).__name__ == "kp_tensor_f16_dxd_Dx1" and ctypes.sizeof(ta) == 24
    assert (s1, s2, s3) == (0x5000, 0x77, 0x5000)  # torch's current stream unless one is given
    bf = record(mod.gemm, "kpcute_gemm_bf16")
    with cpu_tensors_as_cuda():
        mod.gemm(half(*A, dtype=torch.bfloat16), half(*B, dtype=torch.bfloat16), half(*C, dtype=torch.bfloat16))
    assert len(bf.calls) == 1 and len(rec.calls) == 3  # dispatched by dtype
    arrays = [CudaArray(0x10000, s, "<f2") for s in (A, B, C)]
    mod.gemm(*arrays)
    assert rec.calls[-1][3] is None  # no torch tensor: the legacy default stream
    ss = record(mod.scale_shift, "kpcute_scale_shift")
    with cpu_tensors_as_cuda():
        mod.scale_shift(torch.zeros(8), torch.zeros(8), 3, 0.5, 2, 0.25, -1.0, 1.0)
    x, y, *scalars = ss.calls[0]
    assert (x.shape0, y.shape0) == (8, 8) and scalars == [3, 0.5, 2, 0.25, -1.0, 1.0]


def test_a_library_published_again_after_load_is_refused_naming_both_builds(programs, library, tmp_path,
                                                                          monkeypatch) -> None:
    """kernelpack.load read the host programs' descriptions from one build's bytes; a build then published another
    build of the library at that path (issue 25 item 5): no entry of the library dlopen gives is called."""
    monkeypatch.setattr(host, "get_driver", lambda: _never())
    other = Library("kpcute", *programs, version="2.0.0").build(tmp_path / "v2")
    so = tmp_path / "lib" / "libkpcute.so"
    so.parent.mkdir()
    so.write_bytes(library.shared.read_bytes())
    mod = kernelpack.load(so)
    (tmp_path / "new.so").write_bytes(other.shared.read_bytes())
    (tmp_path / "new.so").replace(so)
    first, second = (dict(read_embedded(p).build_ids)["kpcute"] for p in (library.shared, other.shared))
    assert first != second == other.build_id
    with pytest.raises(BundleError, match=rf"host program gemm\[f16\]: .*libkpcute.so was read as libkpcute of "
                                          rf"kernelpack build {first}, but the library this process runs from that "
                                          rf"path is build {second}: the file was replaced after it was read"):
        mod.gemm(*[CudaArray(0x10000, s, "<f2") for s in (A, B, C)])


def test_entry_status_becomes_the_runtime_exception(mod, library) -> None:
    """The real entries: an empty tensor returns without host code (no driver needed), anything else reaches the
    shim, which finds no libcuda.so.1 here; the entry's status and message come back as a DriverError."""
    if driver_present():
        pytest.skip("a CUDA driver is installed")
    with cpu_tensors_as_cuda():
        assert mod.gemm(half(0, 64), half(*B), half(0, 64)) is None  # M = 0: CuTe's host code would divide by it
        assert mod.ew_add(*(torch.zeros(5, 0),) * 3) is None
        with pytest.raises(DriverError) as e:
            mod.gemm(half(*A), half(*B), half(*C))
    assert str(e.value).startswith("host program gemm[f16]: kpcute_gemm_f16 returned KP_ERROR_NO_DRIVER: kpcute: "
                                   "gemm[f16]: cannot load the CUDA driver libcuda.so.1")
    rec = record(mod.gemm, "kpcute_gemm_f16", status=7)  # a status from a loaded library: the library's message
    with cpu_tensors_as_cuda(), pytest.raises(ArgumentValueError,
                                              match="kpcute_gemm_f16 returned KP_ERROR_INVALID_ARGUMENT: "):
        mod.gemm(half(*A), half(*B), half(*C))
    assert len(rec.calls) == 1


def test_tensors_device_is_made_current_for_the_call(library, fake) -> None:
    fake.reset((9, 0), (9, 0))
    mod = kernelpack.load(library.shared)
    seen: list[int] = []
    mod.gemm.host_program._fns["kpcute_gemm_f16"] = lambda *a: seen.append(fake.current_device()) or 0
    arrays = [CudaArray(0x10000, s, "<f2", device=1) for s in (A, B, C)]
    fake.set_current(0)
    mod.gemm(*arrays)
    assert seen == [1] and fake.current_device() == 0  # device 1 for the call, the caller's context restored


def test_static_archive_lists_programs_but_refuses_calls(library) -> None:
    mod = kernelpack.load(library.static)
    assert "gemm" in mod.__all__ and "static archive" in mod.gemm.__doc__
    with cpu_tensors_as_cuda(), pytest.raises(LaunchError, match="libkpcute.a is a static archive, which Python "
                                                                 "cannot load; load the shared library"):
        mod.gemm(half(*A), half(*B), half(*C))


# ---------------------------------------------------------------- a kernelpack.Library holding both kinds


@pytest.fixture(scope="module")
def mixed(programs, tmp_path_factory):
    ea = example("elementwise_add")
    kernels = kc.compile(ea.elementwise_add, *ea.example_args(cutlass.Float32), arch=["sm_80", "sm_90a"],
                         name="ew_add", variant="f32")
    host_add = kc.export(ea.elementwise_add, *ea.example_args(cutlass.Float32), arch=["sm_80", "sm_90a"],
                         name="ew_add", variant="host")  # C entry mix_ew_add_host; Python name taken by the kernels
    gemm = [p for p in programs if p.name == "gemm"]
    return Library("kpmixpy", kernels, host_add, *gemm, cflags=["-Werror"]).build(tmp_path_factory.mktemp("mixpy"))


def test_one_library_with_kernels_and_host_programs(mixed, monkeypatch) -> None:
    monkeypatch.setattr(host, "get_driver", lambda: (_ for _ in ()).throw(DriverError("none")))
    mod = kernelpack.load(mixed.shared)
    assert [a.label for a in mod.bundle] == ["ew_add[f32]"]
    assert mod.__all__ == ["ew_add", "gemm"]
    assert mod.ew_add.family.name == "ew_add"  # the kernel family keeps its name
    assert mod.host_programs["ew_add"].calls[0].info.symbol == "kpmixpy_ew_add_host"
    assert repr(mod.gemm).endswith("[kpmixpy_gemm_f16, kpmixpy_gemm_bf16]>")
    with cpu_tensors_as_cuda():
        assert mod.gemm(half(0, 64), half(*B), half(0, 64)) is None


FAKE_SCRIPT = """
import sys, kernelpack
from kernelpack.runtime import DriverError
sys.path.insert(0, {tests!r})
from runtime_support import CudaArray
mod = kernelpack.load({lib!r})
arrays = [CudaArray(0x10000, s, "<f2") for s in (({m}, 64), (64, 64), ({m}, 64))]
try:
    mod.gemm(*arrays, stream=0x99)
    print("ok")
except DriverError as e:
    print(type(e).__name__, e.code, e)
"""


def test_call_path_on_the_fake_driver(mixed, tmp_path, fake_cuda) -> None:
    """Through the C library's fake driver (a separate process sees it as libcuda.so.1): the entry runs CuTe's host
    code over the shim, which loads CuTe's cubin; the fake cannot look up CuTe's kernel, and that failure comes back
    as a DriverError naming the program and its entry. An empty M returns before any of it."""
    env = {"FAKECUDA_CC": "9.0", "FAKECUDA_CURRENT": "0", "PYTHONPATH": str(ROOT / "src")}
    script = tmp_path / "call.py"
    script.write_text(textwrap.dedent(FAKE_SCRIPT.format(tests=str(ROOT / "tests"), lib=str(mixed.shared), m=0)))
    r = run([sys.executable, str(script)], tmp_path, fake_cuda, **env)
    assert r.stdout.strip() == "ok", r.stdout + r.stderr
    assert not r.calls("cuLibraryLoadData")  # nothing loaded, nothing launched
    script.write_text(textwrap.dedent(FAKE_SCRIPT.format(tests=str(ROOT / "tests"), lib=str(mixed.shared), m=128)))
    r = run([sys.executable, str(script)], tmp_path, fake_cuda, **env)
    assert r.stdout.strip() == ("DriverError 500 host program gemm[f16]: kpmixpy_gemm_f16 returned KP_ERROR_CUDA: "
                                "kpmixpy: gemm[f16]: loading the sm_90a object on device 0 failed (CUresult 500)"), \
        r.stdout + r.stderr
    assert r.calls("cuLibraryLoadData") and not r.calls("cuLaunchKernelEx")


def test_load_reads_names_and_builds_each_program_on_first_use(library, monkeypatch) -> None:
    """Loading a library of many host programs (libfa4: 48) parses each distinct parameter type once and builds no
    program's checked entries, docs or signature until that program is used."""
    from kernelpack.bundle import host_manifest

    parsed: list[object] = []
    real = host_manifest.type_from_json
    monkeypatch.setattr(host_manifest, "type_from_json", lambda d: parsed.append(d) or real(d))
    mod = kernelpack.load(library.shared)
    fams = mod.host_programs
    assert len(parsed) < sum(len(i.params) for f in fams.values() for i in f._infos)
    assert not any("calls" in vars(f) for f in fams.values())  # nothing built yet
    assert "<__doc__>" not in vars(mod.gemm)
    assert "gemm[f16]" in mod.gemm.__doc__ and [c.label for c in fams["gemm"].calls] == ["gemm[f16]", "gemm[bf16]"]
    assert "calls" not in vars(fams["ew_add"])
