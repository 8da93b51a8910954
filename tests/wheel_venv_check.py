"""Run inside a venv that holds kernelpack-built wheels (and nothing else): import each package and call each of its
kernels once, through the runtime the package carries. Prints one JSON object on stdout.

    python wheel_venv_check.py PACKAGE... [--gpu]

Without --gpu the kernels launch on whatever ``libcuda.so.1`` the loader finds (the fake driver in the GPU-less
tests): arguments are stand-in ``__cuda_array_interface__`` objects and raw addresses. With --gpu each kernel gets
torch tensors (where torch is importable) and the results are checked against torch in tests/test_wheel_install.py's
GPU test, which passes its own calls; here only imports and the argument-less checks happen.
"""

from __future__ import annotations

import importlib
import json
import sys

HEAVY = ("torch", "triton", "cutlass", "cuda.tile", "cuda.bindings", "cuda.core", "numpy", "cupy")
TYPESTR = {"i8": "<i1", "i16": "<i2", "i32": "<i4", "i64": "<i8", "u8": "|u1", "u16": "<u2", "u32": "<u4",
           "u64": "<u8", "f16": "<f2", "f32": "<f4", "f64": "<f8", "bool": "|b1"}


class Array:
    """A stand-in device array: ``__cuda_array_interface__`` only (device memory is never touched on the fake)."""

    def __init__(self, shape: tuple[int, ...], typestr: str) -> None:
        self.__cuda_array_interface__ = {"data": (0x100000, False), "shape": shape, "typestr": typestr,
                                         "strides": None, "version": 3}
        self.__dlpack_device__ = lambda: (2, 0)


def heavy_loaded() -> list[str]:
    return sorted(m for m in HEAVY if m in sys.modules)


def arguments(spec, runtime: str) -> tuple[list, dict] | None:  # noqa: ANN001
    """Stand-in arguments for one specialization (None when one cannot be expressed, e.g. bfloat16); ``runtime`` is
    the package of the runtime that loaded it (its own abi module describes the parameters)."""
    abi = importlib.import_module(f"{runtime}.core.abi")
    Pointer, Scalar, Struct = abi.Pointer, abi.Scalar, abi.Struct  # noqa: N806

    art = spec.artifact
    args: list = []
    for p in art.abi.args:
        t = p.type
        if isinstance(t, Pointer):
            d = t.pointee
            if d is None:
                args.append(0x100000)
                continue
            ts = TYPESTR.get(d.value)
            if ts is None:
                return None
            args.append(Array((256,), ts))
        elif isinstance(t, Struct) and t.tensor is not None:
            ts = TYPESTR.get(t.tensor.dtype.value)
            if ts is None:
                return None
            args.append(Array(tuple(16 if s is None else s for s in t.tensor.shape), ts))
        elif isinstance(t, Struct):
            args.append(bytes(t.size))
        elif isinstance(t, Scalar):
            args.append(True if t.dtype.value == "bool" else 1.0 if t.dtype.is_float else 16)
        else:
            args.append(bytes(t.size))
    opts = {} if art.launch.grid is not None else {"grid": 1}
    if art.launch.block is None and not any(getattr(c, "reqntid", None) for c in _cubins(art)):
        opts["block"] = 128
    return args, opts


def _cubins(art):  # noqa: ANN001, ANN202
    return [art.cubin_kernel(b.arch) for b in art.binaries if b.kind == "cubin"]


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("--")]
    out: dict = {"before_import": heavy_loaded(), "packages": {}}
    for name in names:
        pkg = importlib.import_module(name)
        runtime = pkg.__kernelpack_runtime__.__name__
        entry: dict = {"file": pkg.__file__, "all": list(pkg.__all__), "version": pkg.__version__,
                       "runtime": runtime, "heavy_after_import": heavy_loaded(), "launched": [], "skipped": []}
        for attr in pkg.__all__:
            fn = getattr(pkg, attr)
            family = getattr(fn, "family", None)
            if family is None:  # a CuTe host program: its own arguments
                entry["skipped"].append(attr)
                continue
            for spec in family.specs:
                made = arguments(spec, runtime)
                if made is not None:
                    fn(*made[0], **made[1])
                    entry["launched"].append(attr)
                    break
            else:
                entry["skipped"].append(attr)
        entry["heavy_after_launch"] = heavy_loaded()
        entry["kernelpack_modules"] = sorted(m for m in sys.modules if m.split(".")[0] == "kernelpack")
        out["packages"][name] = entry
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
