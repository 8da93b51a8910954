"""CuTe DSL host functions launching one kernel in each form the DSL accepts (tests/test_cute_capture.py), and
kernels that fail to compile in each way the DSL reports (kernelpack's message must carry the DSL's own line).

Every host function takes ``(x, y, n, stream)`` like liger-kernel's launchers (``stream: cuda.CUstream = None``)
and launches ``scale`` with ``grid=[ceil_div(n, 128)]``.
"""

from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op

THREADS = 128


@cute.kernel
def scale(x: cute.Tensor, y: cute.Tensor, n: Int32):
    tx, _, _ = cute.arch.thread_idx()
    bx, _, _ = cute.arch.block_idx()
    i = bx * THREADS + tx
    if i < n:
        y[i] = x[i] * Float32(2.0)


@cute.jit
def keyword_stream(x: cute.Tensor, y: cute.Tensor, n: Int32, stream: cuda.CUstream = None):
    scale(x, y, n).launch(grid=[cute.ceil_div(n, THREADS), 1, 1], block=[THREADS, 1, 1], stream=stream)


@cute.jit
def async_deps(x: cute.Tensor, y: cute.Tensor, n: Int32, stream: cuda.CUstream = None):
    scale(x, y, n).launch(grid=[cute.ceil_div(n, THREADS), 1, 1], block=[THREADS, 1, 1], async_deps=[stream])


@cute.jit
def call_form(x: cute.Tensor, y: cute.Tensor, n: Int32, stream: cuda.CUstream = None):
    scale(x, y, n)(grid=(cute.ceil_div(n, THREADS),), block=THREADS, stream=stream)


@cute.jit
def positional_fields(x: cute.Tensor, y: cute.Tensor, n: Int32, stream: cuda.CUstream = None):
    # LaunchConfig's own field order: cluster, fallback_cluster, grid, block
    scale(x, y, n).launch(None, None, [cute.ceil_div(n, THREADS), 1, 1], [THREADS, 1, 1], stream=stream)


@cute.jit
def smem_and_cluster(x: cute.Tensor, y: cute.Tensor, n: Int32, stream: cuda.CUstream = None):
    scale(x, y, n).launch(grid=[cute.ceil_div(n, THREADS) * 2, 1, 1], block=[THREADS, 1, 1], cluster=[2, 1, 1],
                          smem=1024, stream=stream)


@cute.jit
def pdl(x: cute.Tensor, y: cute.Tensor, n: Int32, stream: cuda.CUstream = None):
    scale(x, y, n).launch(grid=[cute.ceil_div(n, THREADS), 1, 1], block=[THREADS, 1, 1], use_pdl=True,
                          stream=stream)


@cute.jit
def cooperative(x: cute.Tensor, y: cute.Tensor, n: Int32, stream: cuda.CUstream = None):
    scale(x, y, n).launch(grid=[cute.ceil_div(n, THREADS), 1, 1], block=[THREADS, 1, 1], cooperative=True,
                          stream=stream)


@cute.kernel
def scale_tiled(x: cute.Tensor, y: cute.Tensor, n: Int32, tiler):
    tx, _, _ = cute.arch.thread_idx()
    bx, _, _ = cute.arch.block_idx()
    i = bx * tiler[0] + tx
    if i < n:
        y[i] = x[i] * Float32(2.0)


@cute.jit
def python_ints_into_kernel(x: cute.Tensor, y: cute.Tensor, n: Int32, stream: cuda.CUstream = None):
    # a tuple of Python ints handed to the kernel (liger's tiler_mn): the DSL bakes it, the kernel has no parameter
    scale_tiled(x, y, n, (THREADS, 1)).launch(grid=[cute.ceil_div(n, THREADS), 1, 1], block=[THREADS, 1, 1],
                                              stream=stream)


@cute.jit
def bad_block(x: cute.Tensor, y: cute.Tensor, n: Int32, stream: cuda.CUstream = None):
    scale(x, y, n).launch(grid=[1, 1, 1], block=[THREADS, 1, 1, 1], stream=stream)


@cute.kernel
def uses_undefined(x: cute.Tensor):
    tx, _, _ = cute.arch.thread_idx()
    x[tx] = undefined_value  # noqa: F821 - the error under test


@cute.jit
def undefined_name(x: cute.Tensor, y: cute.Tensor, n: Int32, stream: cuda.CUstream = None):
    uses_undefined(x).launch(grid=[1, 1, 1], block=[32, 1, 1], stream=stream)


@dsl_user_op
def _bogus_ptx(a, *, loc=None, ip=None):  # type: ignore[no-untyped-def]
    return Float32(llvm.inline_asm(T.f32(), [Float32(a).ir_value(loc=loc, ip=ip)], "bogus.instruction.f32 $0, $1;",
                                   "=f,f", has_side_effects=True, is_align_stack=False,
                                   asm_dialect=llvm.AsmDialect.AD_ATT))


@cute.kernel
def rejected_by_ptxas(x: cute.Tensor):
    tx, _, _ = cute.arch.thread_idx()
    x[tx] = _bogus_ptx(x[tx])


@cute.jit
def ptxas_error(x: cute.Tensor, y: cute.Tensor, n: Int32, stream: cuda.CUstream = None):
    rejected_by_ptxas(x).launch(grid=[1, 1, 1], block=[32, 1, 1], stream=stream)


def example_args(dtype: type[cutlass.Numeric] = Float32) -> tuple:
    """Two dynamic 1-D tensors, the count and a stream, as a liger-kernel launcher is called."""
    from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
    from cutlass.cute.typing import SymInt

    m = SymInt()
    return (make_fake_compact_tensor(dtype, (m,)), make_fake_compact_tensor(dtype, (m,)), Int32(1),
            make_fake_stream())


@cute.kernel
def bounded(x: cute.Tensor, y: cute.Tensor, coords: cute.Tensor, threads: cute.Layout):
    tx, _, _ = cute.arch.thread_idx()
    bx, _, _ = cute.arch.block_idx()
    i = bx * cute.size(threads) + tx
    if cute.elem_less(coords[i], x.shape):
        y[i] = x[i] * Float32(2.0)


@cute.jit
def identity_and_layout(x: cute.Tensor, y: cute.Tensor, n: Int32, stream: cuda.CUstream = None):
    """liger-kernel's swiglu pattern: a coordinate (identity) tensor with a dynamic shape and a static layout go to
    the kernel; the first lowers to a struct of its dynamic shape, the second to nothing."""
    bounded(x, y, cute.make_identity_tensor(x.shape), cute.make_layout(THREADS)).launch(
        grid=[cute.ceil_div(n, THREADS), 1, 1], block=[THREADS, 1, 1], stream=stream)
