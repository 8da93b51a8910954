"""On a real GPU: kernels compiled on a GPU-less machine, loaded with kernelpack.load and launched from Python
(the C path and the pure-Python path), compute the right numbers; launch checks, streams, CUDA graphs, clusters,
big shared memory, several GPUs, torch.compile.

Kernels come from ``$KERNELPACK_GPU_ARTIFACTS/runtime/tests.kpack`` when present (compiled elsewhere and carried),
else they are compiled here (needs nvcc).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

import kernelpack
from gpu import cuda_torch, gpu_count, requires_gpu
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.errors import LaunchError
from kernelpack.runtime import ArgumentTypeError, ArgumentValueError
from runtime_support import build_test_bundle, python_path


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Bundle:
    carried = Path(os.environ.get("KERNELPACK_GPU_ARTIFACTS", ".gpu")) / "runtime" / "tests.kpack"
    if carried.is_file():
        return Bundle.read(carried)
    return build_test_bundle(tmp_path_factory.mktemp("rt"), compiler="nvcc")


@pytest.fixture(scope="module")
def torch():
    return cuda_torch(current=False)


@pytest.fixture(params=["c", "python"])
def mod(request, bundle, torch):
    if request.param == "python":
        with python_path():
            return kernelpack.load(bundle)
    m = kernelpack.load(bundle)
    assert kernelpack.runtime.fast_path()["extension"]
    return m


@requires_gpu
def test_add_is_right_and_takes_the_c_path(mod, torch):
    n = 10_000
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    mod.add(a, b, out, n, grid=(n + 255) // 256, block=256)
    torch.testing.assert_close(out, a + b)
    fam = mod.add.family
    before = fam.python_calls
    for _ in range(3):
        mod.add(a, b, out, n, grid=(n + 255) // 256, block=256)
    if fam.fast is not None:
        assert fam.python_calls == before, "a plain torch launch should stay on the C path"
        assert kernelpack.runtime.fast_path()["torch_bridge"]


@requires_gpu
def test_a_prepared_launch_is_right_on_streams_and_after_its_tensors_move(mod, torch):
    n = 10_000
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    tol = {"rtol": 1e-6, "atol": 1e-6}  # float32 sums against float64 ones
    run = mod.add.prepare(a, b, out, n, grid=(n + 255) // 256, block=256)
    run()
    torch.testing.assert_close(out.double(), a.double() + b.double(), **tol)
    s = torch.cuda.Stream()
    a.copy_(torch.randn(n, device="cuda"))  # new values, same memory: the prepared launch reads them
    out.fill_(float("nan"))
    s.wait_stream(torch.cuda.current_stream())
    run(stream=s)
    s.synchronize()
    torch.testing.assert_close(out.double(), a.double() + b.double(), **tol)
    out.set_(torch.full((n,), float("nan"), device="cuda"))  # the output tensor now lives elsewhere
    run()
    torch.cuda.synchronize()
    assert not out.isnan().any(), "every element of the moved output was written"
    torch.testing.assert_close(out.double(), a.double() + b.double(), **tol)


@requires_gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_scale_dispatches_on_dtype(mod, torch, dtype):
    dt = getattr(torch, dtype)
    n = 5000
    x = torch.randn(n, device="cuda").to(dt)
    out = torch.empty_like(x)
    mod.scale(x, out, 1.5, n, grid=(n + 127) // 128, block=128)
    torch.testing.assert_close(out, (x.float() * 1.5).to(dt))


@requires_gpu
def test_every_scalar_width(mod, torch):
    out = torch.zeros(1, device="cuda")
    vals = (-3, -300, -70000, -(2**40), 200, 60000, 4_000_000_000, 2**60, 0.5, 0.25, 1.5, True)
    mod.scalars(*vals, out, grid=1, block=1)
    torch.cuda.synchronize()
    expected = sum(float(v) for v in vals)
    assert out.item() == pytest.approx(expected, rel=1e-6)


@requires_gpu
def test_struct_by_value_as_bytes(mod, torch):
    n = 1000
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    mod.affine(x, y, struct.pack("<ffi", 2.0, 1.0, 0), n, grid=4, block=256)
    torch.testing.assert_close(y, x * 2 + 1)


@requires_gpu
def test_tensor_descriptor_takes_shape_and_stride_from_the_tensor(mod, torch):
    wide = torch.randn(300, 128, device="cuda")
    t = wide[:, :64]  # stride (128, 1): the kernel reads it through the descriptor
    out = torch.empty(300, device="cuda")
    mod.row_sums(t, out, grid=3, block=128)
    torch.testing.assert_close(out, t.sum(dim=1), rtol=1e-4, atol=1e-4)
    with pytest.raises(ArgumentValueError, match=r"shape\[1\] must be 64"):
        mod.row_sums(wide, out, grid=3, block=128)


@requires_gpu
def test_hidden_scratch_params_are_null(mod, torch):
    x = torch.zeros(100, device="cuda")
    mod.with_scratch(x, 100, grid=1, block=128)
    torch.testing.assert_close(x, torch.ones_like(x))


@requires_gpu
def test_dynamic_shared_memory_above_48k(mod, torch):
    n = 1024
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    mod.smem_kernel(x, n, grid=1, block=n, smem=96 * 1024)
    torch.testing.assert_close(x, torch.arange(n, device="cuda", dtype=torch.float32).flip(0))


@requires_gpu
def test_reqntid_is_the_default_block_and_enforced(mod, torch):
    n = 1000
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.zeros(n, device="cuda")
    mod.reqntid(a, b, out, n, grid=8)
    torch.testing.assert_close(out, a + b)
    with pytest.raises(LaunchError, match="REQNTID"):
        mod.reqntid(a, b, out, n, grid=4, block=256)


@requires_gpu
def test_clusters(mod, torch):
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("clusters need sm_90")
    x = torch.ones(512, device="cuda")
    mod.clustered(x, 512, grid=4, block=128)
    torch.testing.assert_close(x, torch.full_like(x, 2.0))
    with pytest.raises(LaunchError, match="not a multiple of the cluster"):
        mod.clustered(x, 512, grid=3, block=128)
    a, b = torch.randn(512, device="cuda"), torch.randn(512, device="cuda")
    out = torch.zeros(512, device="cuda")
    mod.spec_cluster(a, b, out, 512, grid=4, block=128)
    torch.testing.assert_close(out, a + b)


@requires_gpu
def test_checks_refuse_before_launch(mod, torch):
    n = 100
    a, b, out = (torch.zeros(n, device="cuda") for _ in range(3))
    with pytest.raises(ArgumentValueError, match="cpu"):
        mod.add(a.cpu(), b, out, n, grid=1, block=128)
    with pytest.raises(ArgumentValueError, match="expected a f32 tensor, got a float16"):
        mod.add(a.half(), b, out, n, grid=1, block=128)
    with pytest.raises(LaunchError, match=r"grid\[0\] is 0"):
        mod.add(a, b, out, n, grid=0, block=128)
    with pytest.raises(ArgumentTypeError, match="takes 4 arguments"):
        mod.add(a, b, out, grid=1, block=128)
    with pytest.raises(LaunchError, match="shared memory"):
        mod.add(a, b, out, n, grid=1, block=128, smem=10**7)


@requires_gpu
def test_alignment_dispatch_picks_the_generic_specialization_for_odd_views(mod, torch):
    n = 1001
    base = torch.randn(n + 1, device="cuda")
    a, b = base[1:], torch.randn(n, device="cuda")
    out = torch.zeros(n, device="cuda")
    mod.vadd(a, b, out, n, grid=(n + 127) // 128, block=128)
    torch.testing.assert_close(out, a + b)


@requires_gpu
def test_current_stream_and_cuda_graph_capture(mod, torch):
    n = 4096
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.zeros(n, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        mod.add(a, b, out, n, grid=16, block=256)
    s.synchronize()
    torch.testing.assert_close(out, a + b)
    mod.add(a, b, out, n, grid=16, block=256)  # warm up outside capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        mod.add(a, b, out, n, grid=16, block=256)
    a.copy_(torch.full_like(a, 2.0))
    b.copy_(torch.full_like(b, 3.0))
    out.zero_()
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.full_like(out, 5.0))


@requires_gpu
@pytest.mark.parametrize("how", ["with torch.cuda.stream(s)", "torch.cuda.set_stream(s)"])
def test_stream_none_launches_on_the_stream_torch_made_current(mod, torch, how):
    """stream=None goes to the stream torch made current, read at each launch: captured into a graph begun on s
    (a launch to any other stream would not be in the graph, and in global capture mode would fail), on the C path
    after the first launch."""
    n = 4096
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.zeros(n, device="cuda")
    mod.add(a, b, out, n, grid=16, block=256)  # loads the kernel outside the capture
    torch.cuda.synchronize()
    fam = mod.add.family
    before = fam.python_calls
    s = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    prev = torch.cuda.current_stream()
    if how.startswith("with"):
        with torch.cuda.stream(s):
            assert torch.cuda.current_stream() == s
            g.capture_begin()
            mod.add(a, b, out, n, grid=16, block=256)
            g.capture_end()
    else:
        torch.cuda.set_stream(s)
        try:
            g.capture_begin()
            mod.add(a, b, out, n, grid=16, block=256)
            g.capture_end()
        finally:
            torch.cuda.set_stream(prev)
    assert torch.cuda.current_stream() == prev
    torch.cuda.synchronize()
    a.fill_(2.0)
    b.fill_(3.0)
    out.zero_()
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.full_like(out, 5.0))
    if fam.fast is not None:
        assert fam.python_calls == before, "the launch on torch's current stream stayed on the C path"
    out.zero_()
    mod.add(a, b, out, n, grid=16, block=256)  # back on the previous current stream
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.full_like(out, 5.0))


@requires_gpu
def test_explicit_stream_objects(mod, torch):
    n = 1000
    a, b, out = torch.randn(n, device="cuda"), torch.randn(n, device="cuda"), torch.zeros(n, device="cuda")
    s = torch.cuda.Stream()
    mod.add(a, b, out, n, grid=4, block=256, stream=s)
    s.synchronize()
    torch.testing.assert_close(out, a + b)
    out.zero_()
    torch.cuda.synchronize()
    mod.add(a, b, out, n, grid=4, block=256, stream=s.cuda_stream)
    s.synchronize()
    torch.testing.assert_close(out, a + b)


@requires_gpu
def test_cupy_arrays(mod, torch):
    cp = pytest.importorskip("cupy")
    n = 1000
    a, b = cp.arange(n, dtype=cp.float32), cp.ones(n, dtype=cp.float32)
    out = cp.zeros(n, dtype=cp.float32)
    mod.add(a, b, out, n, grid=4, block=256)
    cp.cuda.runtime.deviceSynchronize()
    assert cp.allclose(out, a + b)


@requires_gpu
def test_other_gpus(mod, torch):
    if gpu_count() < 2:
        pytest.skip("needs 2 GPUs")
    n = 1000
    a, b = torch.randn(n, device="cuda:1"), torch.randn(n, device="cuda:1")
    out = torch.zeros(n, device="cuda:1")
    mod.add(a, b, out, n, grid=4, block=256)
    torch.testing.assert_close(out, a + b)
    assert torch.cuda.current_device() == 0
    with pytest.raises(ArgumentValueError, match="one device"):
        mod.add(a, b.to("cuda:0"), out, n, grid=4, block=256)


@requires_gpu
def test_launches_alternating_between_two_gpus_take_the_c_path(mod, torch):
    """The tensors' device picks the context on every launch, in the C extension too (no Python fallback), with
    torch's current stream of that device or a stream given for it; int pointers follow the current context."""
    if gpu_count() < 2:
        pytest.skip("needs 2 GPUs")
    n = 4099
    xs = {d: (torch.randn(n, device=f"cuda:{d}"), torch.randn(n, device=f"cuda:{d}")) for d in (0, 1)}
    outs = {d: torch.full((n,), float("nan"), device=f"cuda:{d}") for d in (0, 1)}
    side = torch.cuda.Stream(device="cuda:1")
    for d in (0, 1):  # first launches: load the kernel on each device
        mod.add(*xs[d], outs[d], n, grid=(n + 255) // 256, block=256)
    fast = mod.add.family.fast is not None  # the C launcher (the "python" parameter runs without it)
    before = mod.add.family.python_calls
    for i in range(50):
        d = i % 2
        outs[d].fill_(float("nan"))
        if d == 1 and i % 4 == 1:
            side.wait_stream(torch.cuda.current_stream("cuda:1"))
            mod.add(*xs[1], outs[1], n, grid=(n + 255) // 256, block=256, stream=side)
            torch.cuda.current_stream("cuda:1").wait_stream(side)
        else:
            mod.add(*xs[d], outs[d], n, grid=(n + 255) // 256, block=256)
        torch.testing.assert_close(outs[d], xs[d][0] + xs[d][1])
    with torch.cuda.device(1):  # raw pointers: the current context's device
        outs[1].fill_(float("nan"))
        torch.cuda.synchronize(1)
        a, b = xs[1]
        mod.add(a.data_ptr(), b.data_ptr(), outs[1].data_ptr(), n, grid=(n + 255) // 256, block=256,
                stream=torch.cuda.current_stream(1).cuda_stream)
        torch.testing.assert_close(outs[1], a + b)
    assert torch.cuda.current_device() == 0
    if fast:
        assert mod.add.family.python_calls == before, "a two-GPU launch fell back to the Python path"


@requires_gpu
def test_torch_compile_fullgraph(bundle, torch):
    import kernelpack.torch as kt

    m = kernelpack.load(bundle)
    op = kt.custom_op(m.add, "kpgputest::add", grid=lambda a, b, out, n: (n + 255) // 256, block=256,
                      outputs={"out": lambda a, b, n: torch.empty_like(a)})

    def f(x, y):
        return op(x * 2, y, x.numel()) + 1

    x, y = torch.randn(3000, device="cuda"), torch.randn(3000, device="cuda")
    cf = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(cf(x, y), x * 2 + y + 1)
