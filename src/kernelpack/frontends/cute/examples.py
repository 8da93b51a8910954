"""Example arguments made ready for a GPU build: host-memory tensors become global-memory fake tensors.

A kernelpack build compiles for the GPU, but example tensors often live on the build machine: ``from_dlpack`` of a
torch CPU tensor (or numpy array) is a tensor in the *generic* address space, and kernels that ``cute.copy`` from
global memory (cp.async, TMA) refuse it ("expects global based memref"); torch ``meta`` tensors cannot be converted
at all. So every example tensor that is not already a global-memory tensor becomes a ``make_fake_tensor`` in global
memory with the same element type, shape, strides, assumed alignment and dynamic marks (each dynamic mode keeps its
width and divisibility). The conversion is checked: the new tensor's type must be the old one's with ``gmem`` for the
address space, else the build fails naming the parameter.

* a DLPack-backed DSL tensor (``cute.runtime.from_dlpack``) outside global memory: converted as marked;
* a framework tensor (torch on any device, ``meta`` included; numpy) passed as it is: ``cute.compile`` itself
  converts it as ``from_dlpack(t).mark_layout_dynamic()`` (its ``TensorAdapter``), so kernelpack marks it the same
  way, then converts;
* fake tensors, pointers, numerics, streams: unchanged (a fake tensor asked for another address space keeps it);
* tuples, lists, NamedTuples and dataclasses are walked (rebuilt only where something changed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ...core.errors import CompileError
from .types import Mode, mlir_ir, parse_modes, split_layout


def to_global(args: Sequence[Any], kwargs: dict[str, Any], what: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args``/``kwargs`` with every host or framework tensor replaced by a global-memory fake tensor."""
    return (tuple(_convert(a, f"{what}: argument {i}") for i, a in enumerate(args)),
            {k: _convert(v, f"{what}: argument {k!r}") for k, v in kwargs.items()})


def _convert(obj: Any, where: str) -> Any:
    if obj is None or isinstance(obj, (bool, int, float, str, type)):
        return obj
    if _is_framework_tensor(obj):
        return _from_dlpack_tensor(_framework_to_dlpack(obj, where), where)
    if _is_dlpack_tensor(obj):
        return _from_dlpack_tensor(obj, where)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # NamedTuple
        new = [_convert(getattr(obj, f), f"{where}.{f}") for f in obj._fields]
        return obj if all(n is getattr(obj, f) for n, f in zip(new, obj._fields)) else type(obj)(*new)
    if isinstance(obj, (tuple, list)):
        items = [_convert(x, f"{where}[{i}]") for i, x in enumerate(obj)]
        return obj if all(n is o for n, o in zip(items, obj)) else type(obj)(items)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changed = {}
        for f in dataclasses.fields(obj):
            if not f.init:
                continue
            value = getattr(obj, f.name)
            new = _convert(value, f"{where}.{f.name}")
            if new is not value:
                changed[f.name] = new
        return dataclasses.replace(obj, **changed) if changed else obj
    return obj


def _is_framework_tensor(obj: Any) -> bool:
    mod = type(obj).__module__.split(".")[0]
    return (mod == "torch" and type(obj).__name__ in ("Tensor", "Parameter")) or \
        (mod == "numpy" and type(obj).__name__ == "ndarray")


def _is_dlpack_tensor(obj: Any) -> bool:
    from cutlass.cute.runtime import _Tensor

    return type(obj) is _Tensor


def _framework_to_dlpack(t: Any, where: str) -> Any:
    """What ``cute.compile`` makes of a framework tensor (``TensorAdapter``): ``from_dlpack(t)`` with its layout
    marked dynamic. A torch meta tensor has no data to export: an uninitialized CPU tensor of the same layout stands
    in (only its description is read)."""
    from cutlass.cute.runtime import from_dlpack

    if type(t).__module__.split(".")[0] == "torch" and t.device.type not in ("cpu", "cuda"):
        import torch

        t = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="cpu")
    try:
        return from_dlpack(t).mark_layout_dynamic()
    except Exception as e:  # noqa: BLE001 - the DSL's own refusal (an unsupported dtype, an ambiguous layout)
        raise CompileError(f"{where}: cannot describe {type(t).__name__} as a CuTe tensor: {e}") from e


def _type_text(obj: Any) -> str:
    ir = mlir_ir()
    with ir.Context(), ir.Location.unknown():
        return str(obj.mlir_type)


def _from_dlpack_tensor(t: Any, where: str) -> Any:
    """A DLPack-backed DSL tensor as a global-memory fake tensor of the same type (itself when already global)."""
    from cutlass.cute.runtime import AddressSpace, make_fake_tensor

    if t.memspace == AddressSpace.gmem:
        return t
    before = _type_text(t)
    layout = before[before.index('"') + 1:before.rindex('"')]
    shape_text, stride_text = split_layout(layout)
    shape = _modes(t.shape, parse_modes(shape_text), where, before)
    stride = _modes(t.stride, parse_modes(stride_text), where, before)
    fake = make_fake_tensor(t.element_type, shape, stride, assumed_align=t._assumed_align)
    after = _type_text(fake)
    want = before.replace(", generic", ", gmem", 1)
    if after != want:
        raise CompileError(f"{where}: the example tensor {before} has no global-memory twin kernelpack can build (got "
                           f"{after}); pass cute.runtime.make_fake_tensor(...) in global memory instead")
    return fake


def _modes(values: Any, modes: tuple[Mode, ...], where: str, type_text: str) -> tuple[Any, ...]:
    import cutlass.cute as cute

    flat = list(_flatten(values))
    if len(flat) != len(modes):
        raise CompileError(f"{where}: the example tensor {type_text} has a nested layout kernelpack cannot rebuild; "
                           f"pass cute.runtime.make_fake_tensor(...) in global memory instead")
    return tuple(md.static if md.static is not None else
                 cute.sym_int(64 if md.width == 64 else 32, divisibility=md.divisibility) for md in modes)


def _flatten(values: Any) -> Any:
    if isinstance(values, (tuple, list)):
        for v in values:
            yield from _flatten(v)
    else:
        yield values
