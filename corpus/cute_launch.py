"""CuTe launches in a replayable form: recorded on the build machine, rebuilt on the GPU machine (no CuTe DSL there).

Build side (:func:`describe_value`, :func:`host_values`, :func:`describe_launch`): the wrapper's call of the compiled
launcher is captured (``kernelpack.capture``: what ``cute.compile`` returned is called with the run-time arguments --
CuTe tensors from DLPack, or torch tensors on TVM-FFI paths -- and constexpr parameters are absent there). Each
argument is kept as ``{"dtype", "shape", "stride"}`` (a tensor, strides in elements), ``{"value": v}`` (a scalar)
or ``{"stream": true}``, by the launcher's parameter name. The manifest entry of a CuTe spec then says:

* kernel-level families: per artifact, one record per ABI parameter, taken from the launcher argument of the same
  name when that argument is what the kernel receives (same dtype, rank and static modes -- the launcher passes it
  through), and the grid, evaluated from the artifact's grid formula on those records. A kernel parameter the
  launcher derives in DSL code (a tiled view ``zipped_divide(mA, ...)``, a coordinate tensor) has no record: the
  entry says which, and the GPU run lists the family as not launched with that reason.
* host programs: one record per host parameter (the launcher's own arguments; ``stream`` is the call's stream).

GPU side (:func:`rebuild`): a record becomes a fresh CUDA tensor of that dtype, shape and strides (random floats,
zero integers: valid indices), or the scalar.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

# CuTe DSL element type names -> torch dtype names
_CUTE_DTYPES = {"BFloat16": "bfloat16", "Float16": "float16", "Float32": "float32", "Float64": "float64",
                "Int8": "int8", "Int16": "int16", "Int32": "int32", "Int64": "int64", "Uint8": "uint8",
                "Boolean": "bool"}
# kernelpack DType values -> torch dtype names
_KP_DTYPES = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16",
              "u32": "uint32", "u64": "uint64", "f16": "float16", "bf16": "bfloat16", "f32": "float32",
              "f64": "float64", "bool": "bool"}


def describe_value(v: Any) -> dict[str, Any]:
    """One run-time argument of a CuTe launcher as a record (see the module doc)."""
    if v is None or isinstance(v, (bool, int, float)):
        return {"value": v}
    name = type(v).__name__
    if name in ("CUstream", "FakeStream") or "Stream" in name:
        return {"stream": True}
    try:
        import torch

        if isinstance(v, torch.Tensor):
            return {"dtype": str(v.dtype).removeprefix("torch."), "shape": list(v.shape), "stride": list(v.stride())}
    except ImportError:  # pragma: no cover - torch is always there in the corpus
        pass
    try:
        et = getattr(v, "element_type", None)
        if et is not None:
            shape, stride = v.shape, v.stride
    except Exception as e:  # noqa: BLE001 - a DLPack view whose capsule is gone: the compile-time record stands
        return {"opaque": f"{name} that cannot be read back ({type(e).__name__})"}
    if et is not None:
        dtype = _CUTE_DTYPES.get(getattr(et, "__name__", str(et)), str(et))
        if all(isinstance(x, int) for x in (*shape, *stride)):
            return {"dtype": dtype, "shape": list(shape), "stride": list(stride)}
        return {"opaque": f"{dtype} tensor without concrete extents ({name})"}
    if hasattr(v, "value") and isinstance(v.value, (bool, int, float)):  # cutlass.Int32(1), Float32(..)
        return {"value": v.value}
    return {"opaque": name}


def runtime_params(fn: Any) -> list[str]:
    """The launcher's parameters a call of the compiled function takes, in order (``cutlass.Constexpr`` ones are
    baked at compile time and absent from the call)."""
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__ if callable(fn) else fn
    try:
        params = [p for n, p in inspect.signature(target).parameters.items() if n != "self"]
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if "Constexpr" not in str(p.annotation)]


def describe_call(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[list[dict[str, Any]],
                                                                          dict[str, dict[str, Any]]]:
    """A call of the compiled launcher as records (kept instead of the tensors themselves)."""
    return [describe_value(a) for a in args], {k: describe_value(v) for k, v in kwargs.items()}


def host_values(fn: Any, compile_args: Sequence[Any], compile_names: Sequence[str],
                call: tuple[Sequence[dict[str, Any]], Mapping[str, dict[str, Any]]] | None
                ) -> dict[str, dict[str, Any]]:
    """Every launcher argument as a record, by name: the compile-time example arguments, overridden by the
    run-time call (:func:`describe_call`; concrete tensors where the compile used fake ones)."""
    out = {n: describe_value(a) for n, a in zip(compile_names, compile_args)}
    if call is not None:
        args, kwargs = call
        names = runtime_params(fn)
        if len(args) > len(names):  # not the signature we think: keep the example arguments only
            names = list(compile_names)
        for n, rec in [*zip(names, args), *kwargs.items()]:
            if "opaque" not in rec or n not in out:
                out[n] = dict(rec)
    return out


def _tensor_spec(ptype: Any) -> Any:
    return getattr(ptype, "tensor", None)


def match_param(pname: str, ptype: Any, host: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, Any] | None, str]:
    """(the record of kernel parameter ``pname`` from the launcher's arguments, '') or (None, why not)."""
    rec = host.get(pname)
    if rec is None:
        return None, f"{pname} is built by the launcher's DSL code (no launcher argument of that name)"
    spec = _tensor_spec(ptype)
    if spec is None:
        if "value" not in rec:
            return None, f"{pname} is a scalar of the kernel but the launcher's {pname} is {_what(rec)}"
        return {"value": rec["value"]}, ""
    if "dtype" not in rec:
        return None, f"{pname} is a tensor of the kernel but the launcher's {pname} is {_what(rec)}"
    want = _KP_DTYPES.get(spec.dtype.value, spec.dtype.value)
    if rec["dtype"] != want or len(rec["shape"]) != spec.rank:
        return None, (f"{pname}: the kernel takes {want} rank {spec.rank}, the launcher's {pname} is {rec['dtype']} "
                      f"rank {len(rec['shape'])} (the launcher derives the kernel's view)")
    for kind, modes in (("shape", spec.shape), ("stride", spec.stride)):
        for i, m in enumerate(modes):
            if m is not None and rec[kind][i] != m and not (kind == "stride" and rec["shape"][i] == 1):
                return None, (f"{pname}: the kernel's {kind}[{i}] is {m}, the launcher's is {rec[kind][i]} (the "
                              f"launcher derives the kernel's view)")
    return {"dtype": rec["dtype"], "shape": list(rec["shape"]), "stride": list(rec["stride"])}, ""


def _what(rec: Mapping[str, Any]) -> str:
    if "dtype" in rec:
        return f"a {rec['dtype']} tensor"
    if "value" in rec:
        return f"the value {rec['value']!r}"
    return rec.get("opaque", "a stream") if "stream" not in rec else "a stream"


def grid_fields(names: Sequence[str], records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str | None], int]:
    """The values a grid formula reads: (param, None) for a scalar, (param, 'shape{i}' / 'stride{i}') per mode."""
    out: dict[tuple[str, str | None], int] = {}
    for n, r in zip(names, records):
        if "value" in r and isinstance(r["value"], (int, float)) and not isinstance(r["value"], bool):
            out[(n, None)] = int(r["value"])
        for kind in ("shape", "stride"):
            for i, x in enumerate(r.get(kind, ())):
                out[(n, f"{kind}{i}")] = int(x)
    return out


# Grids a launcher computes from its own arguments rather than the kernel's (so kernelpack derived no grid formula
# and callers pass the grid): per launcher (the corpus's kernel name), the grid as a formula of the launcher's
# arguments, read from the package's source, in kernelpack's grid-formula form (kernelpack.bundle.artifact.GRID_OPS).
LAUNCHER_GRIDS: dict[str, tuple[Any, Any, Any]] = {
    # rope.py:165 `.launch(grid=[n_tok, 1, 1], ...)`: one block per token; n_tok is not a kernel argument
    "liger_kernel.ops.cutedsl.ops.rope:_make_launch_token": (["arg", "n_tok", None], 1, 1),
}


def describe_kernel(artifact: Any, host: Mapping[str, Mapping[str, Any]],
                    launcher_grid: tuple[Any, Any, Any] | None = None) -> dict[str, Any]:
    """One kernel-level artifact's launch: ``{"args": [...], "names": [...], "grid": [x, y, z]}`` or ``{"error"}``.
    The grid is the artifact's grid formula on the kernel's arguments, else ``launcher_grid`` (a formula of the
    launcher's arguments, :data:`LAUNCHER_GRIDS`) on the launcher's."""
    from kernelpack.core.launchspec import evaluate_grid

    names, records, missing = [], [], []
    for p in (q for q in artifact.abi.params if q.role == "arg"):
        rec, why = match_param(p.name, p.type, host)
        if rec is None:
            missing.append(why)
            continue
        names.append(p.name)
        records.append(rec)
    if missing:
        return {"error": "; ".join(missing)}
    rule = artifact.launch.grid
    fields = grid_fields(names, records)
    if rule is None and launcher_grid is not None:
        rule = launcher_grid
        fields = grid_fields(list(host), list(host.values()))
    if rule is None:
        return {"error": "the launcher computes the grid in DSL code (no grid formula of the kernel's arguments)"}
    try:
        grid = [evaluate_grid(e, fields) for e in rule]
    except KeyError as e:
        return {"error": f"the grid formula reads {e.args[0]}, which has no record"}
    return {"names": names, "args": records, "grid": grid}


def describe_launch(host: Mapping[str, Mapping[str, Any]], compiled: Any, launcher: str = "") -> dict[str, Any]:
    """The manifest's ``launch`` of a CuTe spec: the launcher's arguments and, per kernel or for the host
    program, what the GPU run passes."""
    out: dict[str, Any] = {"host_args": dict(host)}
    if type(compiled).__name__ == "HostProgram":
        args, missing = [], []
        for p in compiled.params:
            if getattr(p, "stream", False) or p.name == "stream":
                continue
            rec = host.get(p.name)
            if rec is None or not ("dtype" in rec or "value" in rec):
                missing.append(f"{p.name} ({_what(rec) if rec else 'no launcher argument of that name'})")
            else:
                args.append({"name": p.name, **rec})
        out["program"] = {"args": args} if not missing else {"error": "no record for " + ", ".join(missing)}
    else:
        grid = LAUNCHER_GRIDS.get(launcher) if len(compiled) == 1 else None
        out["kernels"] = {a.name: describe_kernel(a, host, grid) for a in compiled}
    return out


def storage_elements(shape: Sequence[int], stride: Sequence[int]) -> int:
    """Elements of the storage a view of this shape and strides spans (0 for an empty one)."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * abs(st) for n, st in zip(shape, stride))


def rebuild(desc: Mapping[str, Any], gen: Any, device: str = "cuda") -> Any:
    """A record as a fresh tensor of that dtype, shape and strides (random normal floats, zero integers: valid
    indices; broadcast strides of 0 and overlapping views included: the storage is filled, then viewed), or the
    scalar."""
    import torch

    if "value" in desc:
        return desc["value"]
    dtype = getattr(torch, desc["dtype"])
    n = storage_elements(desc["shape"], desc["stride"])
    if dtype.is_floating_point:
        base = torch.randn(n, generator=gen, device=device).to(dtype)
    else:
        base = torch.zeros(n, dtype=dtype, device=device)
    return base.as_strided(desc["shape"], desc["stride"])
