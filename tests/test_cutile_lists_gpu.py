"""On the H200: cuTile kernels taking lists of arrays, compiled here by kernelpack (cuTile + tileiras, no GPU) and
carried over (``scripts/gpu.py prepare cutile_lists``; the GPU machine has no cuTile). Each list is passed as cuTile
lowers it -- the device address of one descriptor per array (data pointer, extents, strides) and the count -- which
kernelpack builds and copies to the device for each launch. From Python (``kernelpack.load`` of the bundle, a list
of torch tensors) and from C (``tests/cutile_lists_gpu_main.c`` against the carried library: an array of
``kp_tensor`` and a count): every element of every group checked against torch / a float64 reference on fresh random
inputs, every output element written and nothing past the arrays' ends."""

from __future__ import annotations

import subprocess

import pytest

from clib_support import HERE
from gpu import cuda_torch, require_carried, requires_gpu
from toolchain_support import CC


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    return cuda_torch()


@pytest.fixture(scope="module")
def mod():  # type: ignore[no-untyped-def]
    import kernelpack

    return kernelpack.load(require_carried("cutile_lists/lists.kpack", "cutile_lists"))


GUARD = 300  # elements after each output, which must keep their sentinel


def _outputs(torch, shapes, dtype):  # type: ignore[no-untyped-def]
    """NaN-filled outputs of ``shapes``, each the front of a buffer whose tail holds the sentinel 7."""
    bufs = [torch.full((int(torch.tensor(s).prod()) + GUARD,), 7.0, device="cuda", dtype=dtype) for s in shapes]
    outs = [b[:-GUARD].view(*s) for b, s in zip(bufs, shapes)]
    for o in outs:
        o.fill_(float("nan"))
    return bufs, outs


@requires_gpu
@pytest.mark.parametrize("dtype_name", ["float32", "float16"])
def test_group_scale_from_python_scales_every_group(mod, torch, dtype_name):
    dtype = getattr(torch, dtype_name)
    lengths = [1000, 70_001, 33, 4099]  # none a multiple of the tile (256)
    xs = [torch.randn(n, device="cuda").to(dtype) for n in lengths]
    bufs, ys = _outputs(torch, [(n,) for n in lengths], dtype)
    alpha = float(torch.randn(()).item()) * 4
    mod.group_scale(xs, ys, alpha, grid=((max(lengths) + 255) // 256, len(lengths)))
    torch.cuda.synchronize()
    for g, (x, y, b) in enumerate(zip(xs, ys, bufs)):
        want = (x.double() * alpha).to(dtype)
        half = dtype == torch.float16  # the product may be rounded twice (in fp16, then stored): one ulp apart
        torch.testing.assert_close(y, want, rtol=2e-3 if half else 1e-6, atol=1e-4 if half else 0,
                                   msg=lambda m, g=g: f"group {g}: {m}")
        assert bool((b[-GUARD:] == 7.0).all()), f"group {g}: written past the array's end"


@requires_gpu
def test_grouped_gemm_from_python_multiplies_every_group(mod, torch):
    shapes = [(200, 136, 96), (64, 64, 32), (129, 70, 160), (256, 256, 512)]
    As = [torch.randn(m, k, device="cuda").half() for m, _, k in shapes]
    Bs = [torch.randn(k, n, device="cuda").half() for _, n, k in shapes]
    bufs, Cs = _outputs(torch, [(m, n) for m, n, _ in shapes], torch.float32)
    grid = (max((m + 63) // 64 for m, _, _ in shapes), max((n + 63) // 64 for _, n, _ in shapes), len(shapes))
    mod.group_matmul(As, Bs, Cs, grid=grid)
    torch.cuda.synchronize()
    for g, (a, b, c, buf) in enumerate(zip(As, Bs, Cs, bufs)):
        want = (a.double() @ b.double()).float()
        assert not bool(c.isnan().any()), f"group {g}: elements left unwritten"
        torch.testing.assert_close(c, want, rtol=1e-3, atol=2e-2, msg=lambda m, g=g: f"group {g}: {m}")
        assert bool((buf[-GUARD:] == 7.0).all()), f"group {g}: written past the array's end"


@requires_gpu
def test_list_launches_are_stream_ordered(mod, torch):
    """100 launches queued on a side stream, each reading what the one before wrote, with lists that alternate
    (a -> b, b -> a): each launch's descriptors are its own stream-ordered allocation, freed after it on the same
    stream; were one freed (and reused for the next launch's, which differ) before its kernel ran, the chain would
    break. The result is the product of every alpha."""
    x = torch.randn(5000, device="cuda")
    a, b = x.clone(), torch.empty_like(x)
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    torch.cuda._sleep(50_000_000)  # the GPU busy for a while: every launch below is queued before any runs
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(50):
            mod.group_scale([a], [b], 1.25, grid=(20, 1))
            mod.group_scale([b], [a], 0.8, grid=(20, 1))
    side.synchronize()
    torch.testing.assert_close(a, x * (1.25 * 0.8) ** 50, rtol=1e-4, atol=1e-6)


@requires_gpu
def test_the_c_library_runs_the_grouped_kernels(tmp_path):
    lib = require_carried("cutile_lists/kplists", "cutile_lists", holding="include/kplists.h")
    exe = tmp_path / "cutile_lists_gpu"
    subprocess.run([CC, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{lib / 'include'}",
                    str(HERE / "cutile_lists_gpu_main.c"), "-o", str(exe), f"-L{lib / 'lib'}", "-lkplists",
                    f"-Wl,-rpath,{lib / 'lib'}", "-ldl", "-lm"], check=True)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "ALL PASSED" in proc.stdout, proc.stdout + proc.stderr
    for check in ("group_scale_f32", "group_matmul", "mixed_dtypes_refused"):
        assert f"PASS {check}\n" in proc.stdout, proc.stdout
