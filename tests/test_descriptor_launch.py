"""Tensor-descriptor launches on the C path (``_launch.c``): a TMA descriptor's CUtensorMap encoded in C and kept in
the family's cache, a decomposed descriptor packed in C, on the fake driver.

The reference is the pure-Python path (``KernelFamily.call``: ``kernelpack.core.tma.encode_args`` and the driver's
``cuTensorMapEncodeTiled`` per launch): both paths must hand the driver the same parameter bytes, refuse the same
tensors with the same error, and the cache must re-encode whenever anything the map depends on changes.
"""

from __future__ import annotations

import dataclasses
import struct
import subprocess
from pathlib import Path

import pytest

import kernelpack
from clib_support import DEC_ABI, DEC_SPEC, KERNELS_CU, TMA_ABI, TMA_SPEC
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.binary import Binary
from kernelpack.core.launchspec import LaunchSpec
from kernelpack.core.tma import encode_args
from kernelpack.runtime.errors import DescriptorArgumentError
from runtime_support import cpu_tensors_as_cuda, python_path
from toolchain_support import require_nvcc

torch = pytest.importorskip("torch")

CACHE_SIZE = 16  # KP_TMAP_CACHE in _launch.h
FP8_SPEC = dataclasses.replace(TMA_SPEC, dtype="fp8e4nv", elem_size=1, elem_type=0)  # CU_TENSOR_MAP_DATA_TYPE_UINT8


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    out = tmp_path_factory.mktemp("desc")
    cubin = Path(out / "k.cubin")
    subprocess.run([require_nvcc(), "-cubin", "-arch=sm_90a", str(KERNELS_CU), "-o", str(cubin)], check=True)
    b = [Binary("sm_90a", cubin.read_bytes())]
    return Bundle.of([
        KernelArtifact("tma2d", "tma2d", TMA_ABI, b, launch=LaunchSpec(tensor_descs=(TMA_SPEC,))),
        KernelArtifact("desc_dec", "desc_dec", DEC_ABI, b, launch=LaunchSpec(tensor_descs=(DEC_SPEC,))),
        KernelArtifact("tma_fp8", "tma2d", TMA_ABI, b, launch=LaunchSpec(tensor_descs=(FP8_SPEC,))),
    ])


@pytest.fixture
def c_mod(fake, bundle):
    m = kernelpack.load(bundle)
    if not hasattr(m.tma2d, "_set_device"):
        pytest.skip("the launch extension is not built")
    _preload(m)
    with cpu_tensors_as_cuda():
        yield m


@pytest.fixture
def py_mod(fake, bundle):
    with python_path():
        m = kernelpack.load(bundle)
    with cpu_tensors_as_cuda():
        yield m


def _preload(m) -> None:
    """Load device 0 for both kernels, so the first launch already takes the C path."""
    m.tma2d.family.preload(0)
    m.desc_dec.family.preload(0)
    m.tma_fp8.family.preload(0)


@pytest.fixture(params=["c", "python"])
def either(request, c_mod, py_mod):
    """Each path in turn: both keep the maps they encoded (the Python path in KernelFamily, by the same rule)."""
    return c_mod if request.param == "c" else py_mod


def _half(*shape: int) -> torch.Tensor:
    return torch.zeros(*shape, dtype=torch.float16)


OUT = torch.zeros(16)


def _tma(m, t) -> None:
    m.tma2d(t, 7, OUT, grid=2, block=128)


def _params_both_ways(fake, c_mod, py_mod, launch, *args):
    before = c_mod.tma2d.family.python_calls + c_mod.desc_dec.family.python_calls
    launch(c_mod, *args)
    assert c_mod.tma2d.family.python_calls + c_mod.desc_dec.family.python_calls == before, "took the Python path"
    c_params = fake.last()["params"]
    launch(py_mod, *args)
    return c_params, fake.last()["params"]


@pytest.mark.parametrize("shape, view", [((128, 64), None), ((64, 256), (slice(None), slice(64, 192))),
                                         ((300, 40), (slice(3, 300), slice(None))), ((4, 8), None)])
def test_tma_launch_in_c_passes_the_bytes_the_python_path_passes(fake, c_mod, py_mod, shape, view):
    t = _half(*shape)
    if view is not None:
        t = t[view]
    c_params, py_params = _params_both_ways(fake, c_mod, py_mod, _tma, t)
    assert c_params == py_params
    want = encode_args(TMA_SPEC, t.data_ptr(), t.shape, t.stride(), driver_version=13000, kernel="tma2d")
    assert fake.encodes()[0] == {f: getattr(want.encode, f) for f in fake.encodes()[0]}


def test_fp8_tma_launch_in_c_passes_the_bytes_the_python_path_passes(fake, c_mod, py_mod):
    t = torch.zeros(128, 96, dtype=torch.float8_e4m3fn)[:, 16:80]

    def launch(m, t):
        m.tma_fp8(t, 7, OUT, grid=2, block=128)

    before = c_mod.tma_fp8.family.python_calls
    c_params, py_params = _params_both_ways(fake, c_mod, py_mod, launch, t)
    assert c_mod.tma_fp8.family.python_calls == before and c_params == py_params
    want = encode_args(FP8_SPEC, t.data_ptr(), t.shape, t.stride(), driver_version=13000)
    assert fake.encodes()[0] == {f: getattr(want.encode, f) for f in fake.encodes()[0]}


def test_decomposed_launch_in_c_passes_the_bytes_the_python_path_passes(fake, c_mod, py_mod):
    t = torch.zeros(40, 64)[:, 8:56]

    def launch(m, t):
        m.desc_dec(t, OUT, grid=1, block=32)

    c_params, py_params = _params_both_ways(fake, c_mod, py_mod, launch, t)
    assert c_params == py_params and fake.encodes() == []


def test_an_unchanged_tensor_is_encoded_once(fake, either):
    t = _half(128, 64)
    for _ in range(5):
        _tma(either, t)
    assert fake.calls("cuTensorMapEncodeTiled") == 1 and fake.count() == 5
    first = fake.launches()[0]["params"]
    assert all(x["params"] == first for x in fake.launches())


def _encodes(fake) -> int:
    return fake.calls("cuTensorMapEncodeTiled")


def test_a_changed_pointer_shape_or_stride_is_encoded_again(fake, c_mod, py_mod, either):
    base = _half(256, 128)
    # one address: the outer extent, the inner extent, the stride changed; then another address
    variants = [base[:128, :64], base[:64, :64], base[:128, :32], base.view(512, 64)[:128, :64], base[1:129, :64]]
    assert len({x.data_ptr() for x in variants[:4]}) == 1
    for i, t in enumerate(variants):
        n = _encodes(fake)
        _tma(either, t)
        assert _encodes(fake) == n + 1, f"variant {i} reused another tensor's map"
        c_params = fake.last()["params"]
        _tma(py_mod if either is c_mod else c_mod, t)  # the other path: the same bytes
        assert fake.last()["params"] == c_params, i
        n = _encodes(fake)
        for earlier in variants[:i + 1]:
            _tma(either, earlier)
        assert _encodes(fake) == n, "a tensor seen before was encoded again"
        assert fake.last()["params"] == c_params


def test_the_cache_keeps_the_most_recently_used_maps(fake, either):
    base = _half(CACHE_SIZE + 1, 64, 64)
    tensors = [base[i] for i in range(CACHE_SIZE + 1)]  # one shape, distinct addresses
    for t in tensors[:CACHE_SIZE]:
        _tma(either, t)
    n = _encodes(fake)
    assert n == CACHE_SIZE
    _tma(either, tensors[0])  # kept; now the most recently used
    assert _encodes(fake) == n
    _tma(either, tensors[CACHE_SIZE])  # one more: replaces tensors[1], the least recently used
    assert _encodes(fake) == n + 1
    _tma(either, tensors[0])
    assert _encodes(fake) == n + 1
    _tma(either, tensors[1])
    assert _encodes(fake) == n + 2


REFUSED = {
    "misaligned base": lambda: _half(64, 72)[:, 1:65],
    "inner stride 2": lambda: _half(64, 128)[:, ::2],
    "row stride not a multiple of 16 bytes": lambda: _half(64, 68)[:, :64],
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_descriptor_refusals_are_the_python_paths(fake, c_mod, py_mod, case):
    t = REFUSED[case]()
    messages = []
    for m in (c_mod, py_mod):
        with pytest.raises(DescriptorArgumentError) as err:
            _tma(m, t)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert fake.count() == 0 and _encodes(fake) == 0


def test_a_tensor_of_another_dtype_is_refused_as_before(fake, c_mod, py_mod):
    t = torch.zeros(64, 64)
    errors = []
    for m in (c_mod, py_mod):
        with pytest.raises(kernelpack.runtime.ArgumentValueError) as err:
            _tma(m, t)
        errors.append((type(err.value), str(err.value)))
    assert errors[0] == errors[1] and fake.count() == 0


@pytest.mark.parametrize("version", [12080, 13010, 13020])
def test_the_old_driver_fixup_is_the_python_paths(fake, bundle, version):
    """Drivers up to 13.1 get bit 21 of a small tensor's map cleared (kernelpack.core.tma.encode_args), on both
    paths."""
    map_at = next(a for a in bundle if a.name == "tma2d").cubin_kernel("sm_90a").params[0].offset
    fake.reset(version=version)
    with fake.installed():
        c_mod = kernelpack.load(bundle)
        _preload(c_mod)
        with python_path():
            py_mod = kernelpack.load(bundle)
        with cpu_tensors_as_cuda():
            for t in (_half(64, 64), _half(1024, 128)):  # 8 KiB, 256 KiB
                c_params, py_params = _params_both_ways(fake, c_mod, py_mod, _tma, t)
                assert c_params == py_params
                want = encode_args(TMA_SPEC, t.data_ptr(), t.shape, t.stride(), driver_version=version)
                assert want.encode is not None
                assert want.encode.clear_bit21 == (version <= 13010 and t.numel() * 2 < 128 * 1024)
                word1 = struct.unpack_from("<Q", c_params, map_at + 8)[0]
                assert bool(word1 >> 21 & 1) != want.encode.clear_bit21


def test_a_driver_without_cutensormapencodetiled_leaves_the_python_path_to_say_so(fake, bundle):
    fake.reset(missing="cuTensorMapEncodeTiled")
    with fake.installed():
        m = kernelpack.load(bundle)
        _preload(m)
        with cpu_tensors_as_cuda():
            before = m.tma2d.family.python_calls
            with pytest.raises(kernelpack.runtime.DriverError, match="cuTensorMapEncodeTiled"):
                _tma(m, _half(64, 64))
            assert m.tma2d.family.python_calls == before + 1 and fake.count() == 0
