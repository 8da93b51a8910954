"""Bundle kernels as ``torch.library`` custom ops, so ``torch.compile(fullgraph=True)`` captures them.

    add = kernelpack.torch.custom_op(kernels.add, "mylib::add", grid=lambda a, b, out, n: (n + 255) // 256,
                                     block=256, outputs={"out": lambda a, b, n: torch.empty_like(a)})
    c = add(a, b, a.numel())          # eager: one kernelpack launch; under torch.compile: one graph node

Tensor parameters (pointers and tensor descriptors) become ``Tensor`` arguments, integer scalars ``int``, floating
scalars ``float``, ``bool`` scalars ``bool``. ``outputs`` names parameters the op allocates and returns (with an
allocator called on the other arguments; the same allocator, run on fake tensors, is the op's fake/meta
implementation); ``mutates_args`` names tensor parameters the kernel writes in place. ``grid``, ``block``, ``smem``
and ``cluster`` are values or callables of the kernel's arguments (in kernel order).

This module imports torch (absolute import: ``import torch`` here is the real torch).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from .core.abi import DType, Pointer, Scalar, Struct
from .core.errors import KernelpackError

_LIBRARIES: dict[str, Any] = {}


def _schema_type(t: Any, pname: str, kernel: str) -> str:
    if isinstance(t, Pointer) or (isinstance(t, Struct) and t.tensor is not None):
        return "Tensor"
    if isinstance(t, Scalar):
        if t.dtype is DType.bool:
            return "bool"
        return "float" if t.dtype.is_float else "int"
    raise KernelpackError(f"kernel {kernel}: parameter '{pname}' ({t.c_type}) has no torch schema type; only tensors, "
                          f"ints, floats and bools can cross a custom op")


def _resolve(value: Any, args: Sequence[Any]) -> Any:
    return value(*args) if callable(value) else value


def custom_op(kernel: Any, name: str, *, grid: Any, block: Any = None, smem: Any = None, cluster: Any = None,
              outputs: Mapping[str, Callable[..., torch.Tensor]] | None = None,
              mutates_args: Sequence[str] = (), device_types: str | Sequence[str] = "cuda") -> Callable[..., Any]:
    """Register ``kernel`` (an attribute of a module from :func:`kernelpack.load`) as the op ``namespace::name``
    and return a callable for it (``torch.ops.namespace.name``)."""
    family = kernel.family
    if "::" not in name:
        raise KernelpackError(f"custom op name {name!r} must be 'namespace::name'")
    namespace, opname = name.split("::", 1)
    outputs = dict(outputs or {})
    arg_names = list(family.arg_names)
    params = {s.name: s.param for s in family.specs[0].plan.args}
    for n in list(outputs) + list(mutates_args):
        if n not in params:
            raise KernelpackError(f"kernel {family.name} has no parameter {n!r} (parameters: {', '.join(arg_names)})")
    inputs = [n for n in arg_names if n not in outputs]
    decl = []
    for n in inputs:
        ty = _schema_type(params[n].type, n, family.name)
        if n in mutates_args:
            if ty != "Tensor":
                raise KernelpackError(f"kernel {family.name}: mutated parameter {n!r} is not a tensor")
            ty = f"Tensor({chr(ord('a') + list(mutates_args).index(n))}!)"
        decl.append(f"{ty} {n}")
    for n in outputs:
        _schema_type(params[n].type, n, family.name)
    ret = "()" if not outputs else "Tensor" if len(outputs) == 1 else "(" + ", ".join(["Tensor"] * len(outputs)) + ")"
    schema = f"({', '.join(decl)}) -> {ret}"

    def allocate(bound: dict[str, Any]) -> dict[str, torch.Tensor]:
        return {n: alloc(*(bound[i] for i in inputs)) for n, alloc in outputs.items()}

    def result(outs: dict[str, torch.Tensor]) -> Any:
        if not outs:
            return None
        vals = tuple(outs.values())
        return vals[0] if len(vals) == 1 else vals

    def impl(*values: Any) -> Any:
        bound = dict(zip(inputs, values))
        outs = allocate(bound)
        bound.update(outs)
        full = [bound[n] for n in arg_names]
        kernel(*full, grid=_resolve(grid, full), block=_resolve(block, full), smem=_resolve(smem, full),
               cluster=_resolve(cluster, full))
        return result(outs)

    def fake(*values: Any) -> Any:
        return result(allocate(dict(zip(inputs, values))))

    sig = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in inputs])
    impl.__signature__ = fake.__signature__ = sig  # type: ignore[attr-defined]
    lib = _LIBRARIES.get(namespace)
    if lib is None:
        lib = _LIBRARIES[namespace] = torch.library.Library(namespace, "FRAGMENT")
    lib.define(f"{opname}{schema}")
    for dt in [device_types] if isinstance(device_types, str) else device_types:
        lib.impl(opname, impl, dt.upper() if dt in ("cuda", "cpu") else dt)
    torch.library.register_fake(name, fake, lib=lib)
    return getattr(getattr(torch.ops, namespace), opname)
