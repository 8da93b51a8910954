"""How the C launch path reads its arguments, on the fake driver (no GPU): the torch bridge reads the arguments that
may be tensors in one call per launch, and each slot reads its own int or float as it packs it. What reaches
cuLaunchKernel must be what the pure-Python path passes (``Tensor.data_ptr()``, the reference packer) -- for
copy-on-write, empty, offset and subclassed tensors, and for long mixed argument lists -- and those launches stay on
the C path.

torch CPU tensors stand in for CUDA tensors (``cpu_tensors_as_cuda``); the fake never touches memory.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

import kernelpack
from kernelpack.core.packing import pack_params
from kernelpack.runtime import ArgumentTypeError
from runtime_support import assert_singletons_intact, cpu_tensors_as_cuda, python_path

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _singleton_canary():
    yield
    assert_singletons_intact()


@pytest.fixture(params=["c", "python"])
def path(request):
    return request.param


def _load(bundle, path):
    if path == "python":
        with python_path():
            return kernelpack.load(bundle)
    return kernelpack.load(bundle)


@pytest.fixture
def mod(path, fake, runtime_bundle):
    m = _load(runtime_bundle, path)
    assert path == "python" or m.add.family.fast is not None, "the C extension is not built"
    with cpu_tensors_as_cuda():
        t = torch.zeros(8)
        m.add(t, t, t, 8, grid=1, block=32)  # the first launch loads the device (Python); the tests' launches follow
        yield m


def _reference(bundle, label, values):
    a = next(a for a in bundle if a.label == label)
    return pack_params(a.abi, values, base=a.cubin_kernel("sm_90a").param_base, kernel=a.label)


def test_copy_on_write_tensors_are_materialized_before_the_launch(mod, fake, runtime_bundle, path):
    src = torch.arange(1000, dtype=torch.float32)
    lazy = torch._lazy_clone(src)  # src and lazy share one copy-on-write storage
    assert torch._C._is_cow_tensor(lazy) and torch._C._is_cow_tensor(src)
    before = mod.add.family.python_calls
    mod.add(src, src, lazy, 1000, grid=4, block=256)
    assert mod.add.family.python_calls == before + (path == "python")
    # as Tensor.data_ptr() does: a kernel may write what it is given, so the shared storage is copied first
    assert not torch._C._is_cow_tensor(lazy) and not torch._C._is_cow_tensor(src)
    assert lazy.data_ptr() != src.data_ptr()
    assert fake.last()["params"] == _reference(runtime_bundle, "add",
                                               [src.data_ptr(), src.data_ptr(), lazy.data_ptr(), 1000])
    assert torch.equal(lazy, torch.arange(1000, dtype=torch.float32))


def test_empty_and_offset_tensors_pass_their_data_ptr(mod, fake, runtime_bundle, path):
    fam = mod.add.family
    before = fam.python_calls
    empty = torch.zeros(0)
    mod.add(empty, empty, empty, 0, grid=1, block=32)
    assert fake.last()["params"] == _reference(runtime_bundle, "add", [0, 0, 0, 0])
    base = torch.zeros(1003)
    a, b, c = base[3:], base[1:1001], base[2:]
    mod.add(a, b, c, 1000, grid=4, block=256)
    assert fake.last()["params"] == _reference(runtime_bundle, "add", [a.data_ptr(), b.data_ptr(), c.data_ptr(), 1000])
    assert a.data_ptr() == base.data_ptr() + 12
    assert fam.python_calls == before + 2 * (path == "python")


class _Sub(torch.Tensor):
    pass


def test_parameters_and_tensor_subclasses_are_read_in_c(mod, fake, runtime_bundle, path):
    p = torch.nn.Parameter(torch.zeros(1000), requires_grad=False)
    s = torch.zeros(1000).as_subclass(_Sub)
    c = torch.zeros(1000)
    fam = mod.add.family
    before = fam.python_calls
    mod.add(p, s, c, 1000, grid=4, block=256)
    assert fake.last()["params"] == _reference(runtime_bundle, "add", [p.data_ptr(), s.data_ptr(), c.data_ptr(), 1000])
    assert fam.python_calls == before + (path == "python")


# ------------------------------------------------------------------ long argument lists (bench/argcount.py's kernels)


def _argcount() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kp_bench_argcount", ROOT / "bench" / "argcount.py")
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@pytest.fixture(scope="module")
def argcount_bundle(tmp_path_factory):
    from kernelpack.bundle.kpack import Bundle
    from kernelpack.core.cache import CompileCache
    from kernelpack.frontends.cuda import compile as cuda

    ac = _argcount()
    work = tmp_path_factory.mktemp("argcount")
    (work / "argcount.cu").write_text(ac.source())
    arts = cuda.compile(work / "argcount.cu", [f"args{n}" for n in (4, 19, 64)], arch=["sm_90a"],
                        cache=CompileCache(work / "cache"))
    return Bundle.of(arts)


@pytest.mark.parametrize("n", [4, 19, 64])
def test_long_mixed_argument_lists_pack_as_the_python_path_and_stay_in_c(fake, argcount_bundle, n):
    ac = _argcount()
    args = ac.arguments(n, torch, "cpu")
    # every third pointer as a raw int address instead of a tensor: both read in the same pass
    mixed = [x.data_ptr() if isinstance(x, torch.Tensor) and i % 3 == 2 else x for i, x in enumerate(args)]
    expected = _reference(argcount_bundle, f"args{n}",
                          [x.data_ptr() if isinstance(x, torch.Tensor) else x for x in args])
    with cpu_tensors_as_cuda():
        py = getattr(_load(argcount_bundle, "python"), f"args{n}")
        py(*mixed, grid=1, block=32, stream=0x77)
        assert fake.last()["params"] == expected
        k = getattr(_load(argcount_bundle, "c"), f"args{n}")
        k(*mixed, grid=1, block=32, stream=0x77)  # loads the device tables
        before = k.family.python_calls
        for call_args in (args, mixed):
            k(*call_args, grid=1, block=32, stream=0x77)
            assert fake.last()["params"] == expected
        assert k.family.python_calls == before, "every launch on the C path"


@pytest.mark.parametrize("path", ["c", "python"])
def test_a_tensor_for_a_scalar_in_a_long_list_is_refused_by_name(fake, argcount_bundle, path):
    ac = _argcount()
    args = ac.arguments(64, torch, "cpu")
    k = _load(argcount_bundle, path).args64
    with cpu_tensors_as_cuda():
        k(*args, grid=1, block=32, stream=0x77)
        n = fake.count()
        bad = list(args)
        bad[62] = torch.zeros(4)  # p62: an int
        with pytest.raises(ArgumentTypeError, match=r"parameter 62 'p62'"):
            k(*bad, grid=1, block=32, stream=0x77)
        assert fake.count() == n
