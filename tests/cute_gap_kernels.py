"""Minimal CuTe DSL kernels for tests/test_cute_build_gaps.py (CuTe needs kernel source in a real .py file): one per
gap a CuTe package meets when built ahead of time by kernelpack."""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32
from cutlass.base_dsl import BaseDSL
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream


@cute.kernel
def fill_kernel(out: cute.Tensor, value: Float32):
    out[cute.arch.block_idx()[0] * 128 + cute.arch.thread_idx()[0]] = value


@cute.jit
def fill(out: cute.Tensor, value: Float32, stream):
    """Item 1: launched on a stream the TVM-FFI ABI takes from the environment."""
    fill_kernel(out, value).launch(grid=[cute.ceil_div(out.shape[0], 128), 1, 1], block=[128, 1, 1], stream=stream)


def fill_args() -> tuple:
    return (make_fake_compact_tensor(Float32, (cute.sym_int(),), assumed_align=16), Float32(1.0),
            make_fake_stream(use_tvm_ffi_env_stream=True))


@cute.kernel
def scaled_fill_kernel(out: cute.Tensor, n: Int32, x: Float32, flag: cutlass.Boolean):
    i = cute.arch.thread_idx()[0]
    if flag:
        out[i] = Float32(n) * x


@cute.jit
def scaled_fill(out: cute.Tensor, n, x: float, flag: Int32 | int | bool | None = None):
    """Item 2: plain Python scalars (unannotated, ``float``, a union with ``int``)."""
    scaled_fill_kernel(out, n, x, flag).launch(grid=[1, 1, 1], block=[32, 1, 1])


def dsl_arch() -> object:
    return BaseDSL._get_dsl().get_arch_enum()


def check_same_arch(built: object) -> None:
    if built != dsl_arch():
        raise RuntimeError(f"constructed for {built}, compiled for {dsl_arch()}")


class ArchReader:
    """Item 3: reads the DSL's arch when constructed (as kernel classes do) and relies on it when traced."""

    def __init__(self) -> None:
        self.arch = dsl_arch()

    @cute.jit
    def __call__(self, out: cute.Tensor):
        check_same_arch(self.arch)
        fill_kernel(out, Float32(1.0)).launch(grid=[1, 1, 1], block=[128, 1, 1])


def arch_reader_args() -> tuple:
    return (make_fake_compact_tensor(Float32, (128,)),)


@cute.kernel
def stage_kernel(src: cute.Tensor, dst: cute.Tensor):
    """Item 4: cp.async from global memory into shared memory (needs a global-memory source)."""
    tid = cute.arch.thread_idx()[0]
    s = cutlass.memory.SmemAllocator().allocate_tensor(src.element_type, cute.make_layout(128), 16)
    atom = cute.make_copy_atom(cpasync.CopyG2SOp(), src.element_type, num_bits_per_copy=32)
    cute.copy(atom, cute.local_tile(src, (128,), (cute.arch.block_idx()[0],)), s)
    cute.arch.cp_async_commit_group()
    cute.arch.cp_async_wait_group(0)
    cute.arch.sync_threads()
    dst[cute.arch.block_idx()[0] * 128 + tid] = s[tid]


@cute.jit
def stage(src: cute.Tensor, dst: cute.Tensor):
    stage_kernel(src, dst).launch(grid=[cute.ceil_div(src.shape[0], 128), 1, 1], block=[128, 1, 1], smem=1024)


def package_interface(n: int) -> object:
    """What a CuTe package's Python interface does: build fake arguments, compile with its own options, call."""
    out = make_fake_compact_tensor(Float32, (cute.sym_int(),), assumed_align=16)
    compiled = cute.compile(fill, out, Float32(float(n)), make_fake_stream(use_tvm_ffi_env_stream=True),
                            options="--enable-tvm-ffi")
    return compiled


def package_interface_bracketed(n: int) -> object:
    """The same compile in the DSL's other spelling: ``cute.compile[options](fn, ...)``."""
    out = make_fake_compact_tensor(Float32, (cute.sym_int(),), assumed_align=16)
    return cute.compile["--enable-tvm-ffi"](fill, out, Float32(float(n)),
                                            make_fake_stream(use_tvm_ffi_env_stream=True))


def captured_fill(n: int = 3) -> object:
    """A [[cute]] capture factory: the call package_interface makes."""
    import kernelpack.cute as kc

    (call,) = kc.capture_compiles(lambda: package_interface(n))
    return call


@cute.kernel
def per_sm_kernel(out: cute.Tensor):
    out[cute.arch.block_idx()[0]] = Float32(1.0)


@cute.jit
def per_sm(out: cute.Tensor):
    """A persistent-style grid sized from the device's SM count while traced (cutlass.utils.HardwareInfo)."""
    sms = cutlass.utils.HardwareInfo().get_device_multiprocessor_count()
    per_sm_kernel(out).launch(grid=[sms, 1, 1], block=[1, 1, 1])


def per_sm_args() -> tuple:
    return (make_fake_compact_tensor(Float32, (cute.sym_int(),)),)
