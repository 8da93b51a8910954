"""Lists of tensors (cuTile's list-of-arrays parameters, ``ListConstraint``), with no GPU.

cuTile lowers a list of arrays to two kernel parameters: a pointer to one descriptor per array in global memory --
``1 + 2 * rank`` 64-bit words: the data pointer, every extent, every stride -- and the count (int32). kernelpack
models it as a :class:`~kernelpack.core.abi.TensorList` parameter and its ``list_count`` parameter; a launch checks
every tensor of the caller's list, stages their descriptors, copies them into one stream-ordered allocation of its
own (cuMemAllocAsync, cuMemcpyHtoDAsync, the launch, cuMemFreeAsync on the launch stream) and passes the kernel its
address and the count. Checked here: the frontend against cuTile's own cubins, the ABI's rules, and both back ends
on the fake driver -- the descriptors copied, where the kernel is told they are, the refusals
(tests/test_same_answer.py holds the statuses of both back ends to each other).
"""

from __future__ import annotations

import struct

import pytest

from clib_support import list_abi, reliability_harness, results, session_env
from fake_cuda import environment, run
from kernelpack.core.abi import Abi, DType, Param, Pointer, Scalar, TensorList, TensorSpec
from kernelpack.core.errors import AbiError
from runtime_support import CudaArray, cpu_tensors_as_cuda, python_path

X0, X1, X2, Y0, Y1 = 0x50000, 0x50100, 0x50200, 0x60000, 0x60100  # the reliability harness's list rows
LENS = (8, 12)


def _t(ptr: int, n: int, typestr: str = "<f4") -> CudaArray:
    return CudaArray(ptr, (n,), typestr)


def _words(xs: list[tuple[int, int]]) -> list[int]:
    """The descriptors of rank-1 tensors (address, extent), unit stride: data pointer, extent, stride each."""
    return [w for ptr, n in xs for w in (ptr, n, 1)]


@pytest.fixture(scope="module")
def env(tmp_path_factory):  # type: ignore[no-untyped-def]
    return session_env(tmp_path_factory)


# ------------------------------------------------------------------------------------------------ the ABI


def test_a_tensor_list_is_an_abi_type_with_its_count_right_after_it():
    lst = TensorList(TensorSpec(DType.f16, (None, 64), (None, 1), DType.i32, DType.i32, 16), (8, 1), (8, 1),
                     (0, None))
    abi = Abi((Param("xs", lst), Param("xs_count", Scalar(DType.i32), role="list_count"), Param("n", Scalar("i32"))))
    assert abi.offsets() == (0, 8, 12) and lst.size == lst.align == 8 and lst.words == 5
    assert Abi.from_json(abi.to_json()) == abi
    assert lst.describe() == ("f16[?, 64] stride [?, 1], 16-byte aligned, shape[0] % 8 == 0, stride[0] % 8 == 0, "
                              "stride[0] >= 0")
    count = Param("xs_count", Scalar(DType.i32), role="list_count")
    with pytest.raises(AbiError, match="must be followed by its count"):
        Abi((Param("xs", lst), Param("n", Scalar("i32"))))
    with pytest.raises(AbiError, match="role 'list_count' must follow a tensor list"):
        Abi((Param("p", Pointer(DType.f32)), count))
    with pytest.raises(AbiError, match="fills a 32- or 64-bit integer"):
        Param("xs_count", Scalar(DType.f32), role="list_count")
    with pytest.raises(AbiError, match="rank 1 to 8"):
        TensorList(TensorSpec(DType.f32, (None,) * 9, (None,) * 9, DType.i32, DType.i32))
    with pytest.raises(AbiError, match="share one index type"):
        TensorList(TensorSpec(DType.f32, (None,), (None,), DType.i32, DType.i64))


# ------------------------------------------------------------------------------------------------ the frontend


def test_a_cutile_list_of_arrays_compiles_to_a_descriptor_pointer_and_a_count(module_cache):
    """What the cubins of every arch say: a 64-bit pointer and a 32-bit count per list (checked against each
    cubin's parameter table when the artifact is made); what each array must be comes from the ListConstraint."""
    pytest.importorskip("cuda.tile")
    import kernelpack.cutile as kc
    from cutile_list_kernels import SCALE, group_scale
    from kernelpack.core.verify import verify_abi

    bundle = kc.compile(group_scale, {"f32": SCALE["f32"]}, arch=["sm_80", "sm_90a"], cache=module_cache)
    (art,) = bundle.artifacts
    assert [(p.name, p.type.c_type, p.role) for p in art.abi.params] == [
        ("xs", "kp_tensor_list", "arg"), ("xs_count", "int32_t", "list_count"), ("ys", "kp_tensor_list", "arg"),
        ("ys_count", "int32_t", "list_count"), ("alpha", "float", "arg")]
    lst = art.abi.params[0].type
    assert isinstance(lst, TensorList)
    assert lst.element == TensorSpec(DType.f32, (None,), (None,), DType.i32, DType.i32)
    assert lst.stride_min == (0,)  # the constraint's stride_lower_bound_incl
    for b in art.binaries:
        ck = b.cubin.kernel(art.entry)
        assert [(p.offset, p.size) for p in ck.params] == [(0, 8), (8, 4), (16, 8), (24, 4), (28, 4)]
        verify_abi(art.label, art.abi, ck, b.arch)


def test_example_lists_give_cutiles_own_list_signature(module_cache):
    """A list of (meta) tensors among the example arguments: cuTile's from_kernel_args makes the ListConstraint."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("cuda.tile")
    import kernelpack.cutile as kc
    from cutile_list_kernels import group_scale

    xs = [torch.empty(1000, device="meta"), torch.empty(64, device="meta")]
    art = kc.compile(group_scale, example_args=(xs, xs, 2.0, 256), arch="sm_90a", cache=module_cache).artifacts[0]
    lst = art.abi.params[0].type
    assert isinstance(lst, TensorList) and lst.element.stride == (1,) and lst.element.align == 16


# ------------------------------------------------------------------------------------------------ the back ends


@pytest.mark.parametrize("path", ["c", "python"])
@pytest.mark.parametrize("kind", ["torch", "cuda_array_interface"])
def test_a_launch_copies_the_descriptors_where_it_tells_the_kernel(env, fake, path, kind):
    """Both runtime paths (the C extension reads lists of torch tensors through the torch bridge; other arrays take
    the Python path): one allocation on the launch stream holding both lists' descriptors (the second 16-byte
    aligned), filled by one copy, its addresses and the counts in the kernel's parameters, freed on the same stream
    after the launch."""
    import kernelpack

    torch = pytest.importorskip("torch")
    with python_path() if path == "python" else _null():
        mod = kernelpack.load(env.demo.shared)
    if kind == "torch":
        xs, ys = [torch.zeros(n) for n in (8, 12, 4)], [torch.zeros(n) for n in (8, 12)]
        addr = [t.data_ptr() for t in xs + ys]
    else:
        addr = [X0, X1, X2, Y0, Y1]
        xs, ys = [_t(X0, 8), _t(X1, 12), _t(X2, 4)], [_t(Y0, 8), _t(Y1, 12)]
    with cpu_tensors_as_cuda():
        mod.glist(xs, ys, 2.0, grid=(1, 2), block=128, stream=0x5000)
    assert mod.glist.family.python_calls == (path == "python" or kind != "torch")
    (alloc,) = fake.allocs()
    (copy,) = fake.copies()
    launch = fake.last()
    words = _words(list(zip(addr[:3], (8, 12, 4)))) + [0] + _words(list(zip(addr[3:], (8, 12))))  # ys 16-aligned
    assert struct.unpack(f"<{len(words)}Q", copy["data"]) == tuple(words)
    assert copy["dst"] == alloc["ptr"] and copy["size"] == alloc["size"] == 8 * len(words)
    assert struct.unpack_from("<QiiQif", launch["params"]) == (alloc["ptr"], 3, 0, alloc["ptr"] + 80, 2, 2.0)
    assert copy["stream"] == alloc["stream"] == alloc["free_stream"] == launch["stream"] == 0x5000
    assert alloc["freed"]


def _bad_lists(torch):  # type: ignore[no-untyped-def]
    """(what, xs) pairs glist refuses, of torch tensors, with the status both paths give."""
    f = torch.zeros
    return [
        ("mixed dtypes", [f(8), f(8, dtype=torch.float64)], "NoMatchingSpecialization"),
        ("wrong rank", [f(8), f(2, 4)], "NoMatchingSpecialization"),
        ("static stride", [f(8), f(16)[::2]], "NoMatchingSpecialization"),
        ("misaligned", [f(8), f(13)[1:]], "NoMatchingSpecialization"),
        ("extent divisor", [f(6)], "NoMatchingSpecialization"),
        ("empty", [], "ArgumentValueError"),
        ("not a tensor", [f(8), 3], "ArgumentTypeError"),
        ("not a list", f(8), "ArgumentTypeError"),
    ]


def test_both_runtime_paths_refuse_the_same_lists_of_torch_tensors(env, fake):
    """The C path takes a list only when every tensor fits a specialization; else the Python path decides: the same
    error on both paths, nothing launched, nothing allocated."""
    import kernelpack

    torch = pytest.importorskip("torch")
    c_mod = kernelpack.load(env.demo.shared)
    with python_path():
        py_mod = kernelpack.load(env.demo.shared)
    ys = [torch.zeros(8), torch.zeros(8)]
    with cpu_tensors_as_cuda():
        for what, xs, want in _bad_lists(torch):
            errors = []
            for mod in (c_mod, py_mod):
                with pytest.raises(kernelpack.core.errors.KernelpackError) as info:
                    mod.glist(xs, ys, 2.0, grid=(1, 2), block=128)
                errors.append((type(info.value).__name__, str(info.value)))
            assert errors[0] == errors[1] and errors[0][0] == want, (what, errors)
    assert not fake.launches() and not fake.allocs() and not fake.copies()


@pytest.mark.parametrize("path", ["c", "python"])
def test_a_driver_failure_around_a_list_launch_is_reported_and_nothing_leaks(env, fake, path):
    """cuMemAllocAsync failing: a DriverError naming it, nothing launched; cuMemcpyHtoDAsync failing: the allocation
    freed again on the stream, nothing launched."""
    import kernelpack
    from kernelpack.runtime.errors import DriverError

    torch = pytest.importorskip("torch")
    xs, ys = [torch.zeros(8), torch.zeros(12)], [torch.zeros(8), torch.zeros(12)]
    for call, code, names in (("cuMemAllocAsync", 2, "cuMemAllocAsync.*CUDA_ERROR_OUT_OF_MEMORY"),
                              ("cuMemcpyHtoDAsync", 1, "cuMemcpyHtoDAsync.*CUDA_ERROR_INVALID_VALUE")):
        fake.reset()
        with python_path() if path == "python" else _null():
            mod = kernelpack.load(env.demo.shared)
        mod.glist.family.preload(0)
        fake.fail(call, code)
        with cpu_tensors_as_cuda(), pytest.raises(DriverError, match=names) as info:
            mod.glist(xs, ys, 2.0, grid=(1, 2), block=128)
        assert info.value.status == 4 and not fake.launches()  # KP_ERROR_CUDA
        assert all(a["freed"] for a in fake.allocs())


@pytest.mark.parametrize("path", ["c", "python"])
def test_a_driver_without_the_copy_refuses_a_list_launch_as_too_old(env, fake, path):
    import kernelpack
    from kernelpack.runtime.errors import DriverError

    torch = pytest.importorskip("torch")
    fake.reset(missing="cuMemcpyHtoDAsync")  # before the runtime first asks the driver for its entry points
    with python_path() if path == "python" else _null():
        mod = kernelpack.load(env.demo.shared)
    with cpu_tensors_as_cuda(), pytest.raises(DriverError, match="needs cuMemcpyHtoDAsync") as info:
        mod.glist([torch.zeros(8)], [torch.zeros(8)], 2.0, grid=(1, 1), block=128)
    assert info.value.status == 2 and not fake.launches()  # KP_ERROR_DRIVER_TOO_OLD


def test_a_prepared_list_launch_stages_its_descriptors_at_every_call(env, fake):
    import kernelpack

    torch = pytest.importorskip("torch")
    mod = kernelpack.load(env.demo.shared)
    xs, ys = [torch.zeros(8), torch.zeros(12)], [torch.zeros(8), torch.zeros(12)]
    with cpu_tensors_as_cuda():
        run_it = mod.glist.prepare(xs, ys, 2.0, grid=(1, 2), block=128)
        run_it()
        run_it()
    assert len(fake.launches()) == len(fake.copies()) == len(fake.allocs()) == 2
    assert all(a["freed"] for a in fake.allocs())


def test_the_c_library_copies_the_same_descriptors_as_the_runtime(env, fake, tmp_path):
    """The generated C entry (the reliability harness's ok_list row, the same tensors): the same words, copied in
    stream order before the launch, which reads them, and freed after it."""
    import kernelpack

    r = run(reliability_harness(env), tmp_path, env.fake, "row", "ok_list_odd", **environment(cc="9.0"))
    assert results(r)["ok_list_odd"][0] == "KP_SUCCESS", r.stdout
    names = [line.split(" ", 1)[0] for line in r.log if line.endswith("-> 0")]  # (a first call binds a context)
    order = [n for n in names if n in ("cuMemAllocAsync", "cuMemcpyHtoDAsync", "cuLaunchKernel", "cuMemFreeAsync")]
    assert order == ["cuMemAllocAsync", "cuMemcpyHtoDAsync", "cuLaunchKernel", "cuMemFreeAsync"], order
    (copy,) = r.calls("cuMemcpyHtoDAsync")
    c_words = [int(w, 16) for w in r.field(copy, "words").split(",")]
    (launch,) = r.launches()
    dst = int(r.field(copy, "dst"), 16)
    assert struct.unpack_from("<QiiQi", launch["params"]) == (dst, 3, 0, dst + 80, 2)

    mod = kernelpack.load(env.demo.shared)
    mod.glist([_t(X0, 8), _t(X1, 12), _t(X2, 4)], [_t(Y0, 8), _t(Y1, 12)], 2.0, grid=(1, 2), block=128)
    data = fake.copies()[-1]["data"]
    assert c_words == list(struct.unpack(f"<{len(data) // 8}Q", data))


def test_a_long_list_is_staged_whole(env, tmp_path):
    """Two lists of 400 tensors: 2 x 1200 descriptor words, more than the C library stages on the stack (it takes
    heap memory for them), copied whole."""
    r = run(reliability_harness(env), tmp_path, env.fake, "row", "ok_list_many", **environment(cc="9.0"))
    assert results(r)["ok_list_many"][0] == "KP_SUCCESS", r.stdout
    (copy,) = r.calls("cuMemcpyHtoDAsync")
    assert r.field(copy, "size") == str(2 * 400 * 3 * 8)
    words = [int(w, 16) for w in r.field(copy, "words").split(",")]
    assert words == _words([(0x100000 + 0x100 * k, 4 * (k % 7 + 1)) for k in range(22)])[:64]
    assert len(r.launches()) == 1


def test_a_refused_list_names_the_tensor_and_why(env, fake, tmp_path):
    """Both back ends say which tensor of which list did not fit and why; the C library's typed entry (one
    specialization, no dispatch) refuses with KP_ERROR_INVALID_ARGUMENT."""
    import kernelpack
    from kernelpack.runtime.errors import NoMatchingSpecialization

    r = run(reliability_harness(env), tmp_path, env.fake, "row", "typed_list_mixed_dtype", **environment(cc="9.0"))
    status, msg = results(r)["typed_list_mixed_dtype"]
    assert status == "KP_ERROR_INVALID_ARGUMENT", msg
    assert "kernel glist[f32]: argument 'xs' element 1: expected a f32 tensor, got f64" in msg
    assert not r.launches()
    mod = kernelpack.load(env.demo.shared)
    with pytest.raises(NoMatchingSpecialization, match=r"glist\[f32\]: parameter 0 'xs': element 1: expected a f32 "
                                                       r"tensor, got a f64 tensor"):
        mod.glist([_t(X0, 8), _t(X1, 12, "<f8")], [_t(Y0, 8)], 2.0, grid=(1, 2), block=128)
    r = run(reliability_harness(env), tmp_path, env.fake, "row", "list_misaligned", **environment(cc="9.0"))
    assert "xs: list of 2 kp_tensor (f32 [8] stride [1] 256-byte aligned, f32 [12] stride [1] 4-byte aligned)" in \
        results(r)["list_misaligned"][1]


def test_the_runtime_describes_a_list_argument(env, fake):
    import kernelpack

    mod = kernelpack.load(env.demo.shared)
    assert "xs: list of tensors f32[?] stride [1], 16-byte aligned, shape[0] % 4 == 0, stride[0] >= 0" in \
        mod.glist.__doc__
    assert list_abi(DType.f64).params[0].type.element.dtype == DType.f64  # type: ignore[union-attr]


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False
