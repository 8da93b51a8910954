"""Small Triton kernels and their wrappers, written for the capture tests (tests/test_capture.py): a plain kernel
launched with a grid function, an autotuned one, one with heuristics, one made inside a function."""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4),
                          triton.Config({"BLOCK": 256}, num_warps=4)], key=["n"])
@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)


@triton.heuristics(values={"BLOCK": lambda a: triton.next_power_of_2(a["n_cols"])})
@triton.jit
def rows_kernel(x_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    p = x_ptr + row * stride + cols
    tl.store(p, tl.load(p, mask=cols < n_cols) + 1, mask=cols < n_cols)


def add(x: Any, y: Any) -> Any:
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n, BLOCK=256)
    return out


def scale(x: Any) -> Any:
    y = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
    return y


def rows(x: Any) -> Any:
    rows_kernel[(x.shape[0],)](x, x.stride(0), x.shape[1])
    return x


def made_inside() -> Any:
    @triton.jit
    def local_kernel(x_ptr, n):
        tl.store(x_ptr + tl.arange(0, 16), tl.zeros((16,), tl.float32))

    x = torch.empty(16, device="cuda")
    local_kernel[(1,)](x, 16)
    return x


def device_facts() -> dict[str, Any]:
    """What a wrapper asks of the device (answered by the capture's device table when there is no GPU)."""
    x = torch.empty(4, device="cuda")
    props = torch.cuda.get_device_properties(x.device)
    from triton.runtime import driver

    tprops = driver.active.utils.get_device_properties(torch.cuda.current_device())
    return {"available": torch.cuda.is_available(), "device": str(x.device), "is_cuda": x.is_cuda,
            "sms": props.multi_processor_count, "capability": torch.cuda.get_device_capability(x.device),
            "triton_sms": tprops["multiprocessor_count"], "zeros": float(torch.empty(8, device="cuda").abs().sum()),
            "moved": str(torch.ones(2).to("cuda").device), "target": driver.active.get_current_target().arch}


@triton.jit
def dtype_call_kernel(x_ptr, n, BLOCK: tl.constexpr):
    m = tl.float32(0.0)  # calling a dtype: Triton refuses it when compiling (a DSL limit liger's softmax hits too)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + m, mask=offs < n)


def dtype_call(x: Any) -> Any:
    dtype_call_kernel[(1,)](x, x.numel(), BLOCK=128)
    return x
