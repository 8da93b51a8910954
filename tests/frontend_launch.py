"""The smallest launcher that honours everything a Triton/cuTile artifact records (the real one is
kernelpack.runtime): the binary for this device as its own module, the param buffer packed at the cubin's
offsets, dynamic shared memory above 48 KiB opted into, scratch buffers allocated from their recorded per-CTA
sizes, and tensor descriptors encoded with kernelpack.core.tma from the artifact's metadata."""

from __future__ import annotations

import ctypes
from typing import Any

from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.core.packing import pack_params
from kernelpack.core.tma import encode_args, encode_tensor_map
from kernelpack.launch.binaries import runs_on

CU_LAUNCH_PARAM_END, CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE = 0, 1, 2
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


def _check(r: int, what: str) -> None:
    if r != 0:
        raise RuntimeError(f"{what} failed with CUresult {r}")


class Launcher:
    def __init__(self, art: KernelArtifact, torch: Any) -> None:
        self.art, self.torch = art, torch
        self.cu = ctypes.CDLL("libcuda.so.1")
        major, minor = torch.cuda.get_device_capability()
        binary = next(b for b in art.binaries if runs_on(b.arch, major, minor))
        self.ck = binary.cubin.kernel(art.entry)
        self.ls, self.abi = art.launch_for(binary.arch), art.abi_for(binary.arch)  # this arch's facts and params
        self._data = ctypes.create_string_buffer(binary.data, len(binary.data))
        self.module, self.func = ctypes.c_void_p(), ctypes.c_void_p()
        _check(self.cu.cuModuleLoadData(ctypes.byref(self.module), self._data), "cuModuleLoadData")
        _check(self.cu.cuModuleGetFunction(ctypes.byref(self.func), self.module, art.entry.encode()),
               "cuModuleGetFunction")
        smem = self.ls.dynamic_smem or 0
        if smem > 48 * 1024:
            _check(self.cu.cuFuncSetAttribute(self.func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
                   "cuFuncSetAttribute")
        version = ctypes.c_int(0)
        _check(self.cu.cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
        self.driver_version = version.value

    def values(self, grid: tuple[int, int, int], named: dict[str, Any], keep: list[Any]) -> list[Any]:
        """One value per ABI param: named args, encoded tensor descriptors, scratch buffers (kept alive)."""
        vals = dict(named)
        for spec in self.ls.tensor_descs:
            t = vals.pop(spec.arg)
            got = encode_args(spec, t.data_ptr(), tuple(t.shape), tuple(t.stride()),
                              driver_version=self.driver_version, kernel=self.art.label)
            first = encode_tensor_map(got.encode, self.cu) if got.encode is not None else got.values[0]
            vals.update(zip(spec.params, (first, *got.values[1:])))
        ctas = grid[0] * grid[1] * grid[2]
        for role in ("global_scratch", "profile_scratch"):
            size, align = getattr(self.ls, role), getattr(self.ls, role + "_align")
            ptr = 0
            if size:
                buf = self.torch.empty(size * ctas + align, dtype=self.torch.uint8, device="cuda")
                keep.append(buf)
                ptr = -(-buf.data_ptr() // align) * align
            for p in self.abi.params:
                if p.role == role:
                    vals[p.name] = ptr
        return [vals[p.name] for p in self.abi.params]

    def __call__(self, grid: int | tuple[int, ...], *, sync: bool = True, **named: Any) -> None:
        g = (tuple(grid) + (1, 1))[:3] if isinstance(grid, tuple) else (grid, 1, 1)
        keep: list[Any] = []
        buf = pack_params(self.abi, self.values(g, named, keep), base=self.ck.param_base, kernel=self.art.label)
        cbuf = ctypes.create_string_buffer(buf, max(1, len(buf)))
        size = ctypes.c_size_t(len(buf))
        extra = (ctypes.c_void_p * 5)(CU_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(cbuf),
                                      CU_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(size), CU_LAUNCH_PARAM_END)
        block = self.ls.block or self.ck.reqntid or (1, 1, 1)
        assert self.ls.cluster is None, "this launcher does not request clusters"
        u = ctypes.c_uint
        _check(self.cu.cuLaunchKernel(self.func, u(g[0]), u(g[1]), u(g[2]), u(block[0]), u(block[1]), u(block[2]),
                                      u(self.ls.dynamic_smem or 0), None, None, extra),
               f"cuLaunchKernel({self.art.label})")
        if sync:
            _check(self.cu.cuCtxSynchronize(), f"{self.art.label}: cuCtxSynchronize")
