"""liger-kernel's Triton kernels: capture through liger's wrappers, compile every specialization with kernelpack.

Today's kernelpack takes a signature, constexprs and divisibility hints (``kernelpack.triton.compile``); they come
from Triton's own binder applied to the captured arguments (:func:`corpus.capture.specialize`). When
``kernelpack.triton.compile(kernel, example_args=...)`` exists, :func:`compile_spec` passes the captured arguments
instead (``KP_CORPUS_EXAMPLE_ARGS=1``, or automatically when the keyword is accepted) -- the one place to change.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .capture import H200_SMS, TritonLaunch, cpu_world, to_meta, triton_launches
from .cases import Case, resolve, run_case, tag
from .results import CAPTURE, DSL, KERNELPACK, Section
from .specs import Spec, stable

_DTYPE_TYPES = ("dtype",)


def _is_dtype(v: Any) -> bool:
    return type(v).__name__ in _DTYPE_TYPES and type(v).__module__.startswith("triton")


def capture(cases: Sequence[Case], section: Section, *, device: str = "cpu",
            on_launch: Any = None) -> list[tuple[str, TritonLaunch]]:
    """Run every case point; returns (case[point], launch) for each launch. Failures go into ``section``."""
    out: list[tuple[str, TritonLaunch]] = []
    for case in cases:
        for point in case.points():
            where = f"{case.id}[{tag(point)}]"
            interp = set(case.interpret)

            def forward(rec: TritonLaunch, _interp: set[str] = interp) -> Any:
                if rec.name in _interp:
                    return _interpret(rec)
                return on_launch(rec) if on_launch is not None else None

            world = cpu_world() if device == "cpu" else _nullctx()
            try:
                with world, triton_launches(_config_choice(case), forward) as recs:
                    run_case(case, point, device)
            except Exception as e:  # noqa: BLE001 - a wrapper failing on this machine is a corpus result
                section.fail("", "capture", CAPTURE, f"{type(e).__name__}: {e}", where)
                recs = locals().get("recs", [])
            if device == "cpu":
                for r in recs:
                    device_constexprs(case, r)
                    r.args = {k: to_meta(v) for k, v in r.args.items()}
            out += [(where, r) for r in recs]
    return out


def device_constexprs(case: Case, rec: TritonLaunch, sm_count: int = H200_SMS) -> None:
    """Give ``rec``'s device-derived constexprs (``case.device_constexprs``) the values the wrapper computes on a
    GPU of ``sm_count`` SMs, and require that SM count of the specialization (kernelpack dispatches it by device)."""
    import math

    for name, expr in case.device_constexprs.items():
        if name not in rec.constexprs:
            continue
        scope = {n: v for n, v in rec.args.items() if isinstance(v, int) and not isinstance(v, bool)}
        try:
            value = eval(expr, {"__builtins__": {}, "ceil": math.ceil}, {**scope, "sm_count": sm_count})  # noqa: S307
        except Exception as e:  # noqa: BLE001 - the case's own expression: name it
            raise ValueError(f"case {case.id}: device_constexprs {name} = {expr!r} on {rec.name}: "
                             f"{type(e).__name__}: {e}") from e
        rec.constexprs[name] = int(value)
        rec.args[name] = int(value)
        rec.requires["sm_count"] = sm_count


class _nullctx:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: Any) -> None:
        return None


def _config_choice(case: Case) -> Any:
    def choose(tuner: Any, configs: list[Any]) -> int:
        name = getattr(getattr(tuner, "base_fn", None), "__name__", "")
        return min(int(case.autotune.get(name, 0)), len(configs) - 1)
    return choose


def _interpret(rec: TritonLaunch) -> Any:
    """Run the launch with Triton's CPU interpreter (helpers it calls are interpreted too)."""
    from triton.runtime.interpreter import InterpretedFunction, _patch_lang
    from triton.runtime.jit import JITFunction

    from .capture import patched

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        # InterpretedFunction.__call__ patches triton.language for the helper and never restores it (later
        # compiles in this process would break): the same, restored
        scope = _patch_lang(self.fn)
        try:
            return InterpretedFunction(self.fn).rewrite()(*args, **kwargs)
        finally:
            scope.restore()

    with patched([(JITFunction, "__call__", call)]):
        return InterpretedFunction(rec.jit.fn).run(grid=rec.grid, warmup=False, **rec.args)


def to_spec(where: str, rec: TritonLaunch) -> Spec:
    ptrs = {n: t for n, t in rec.signature.items() if t.startswith("*")}
    scalars = {n: t for n, t in rec.signature.items() if not t.startswith("*")}
    consts = {n: _const(v) for n, v in rec.constexprs.items() if not _is_dtype(v)}
    dconsts = {n: _const(v) for n, v in rec.constexprs.items() if _is_dtype(v)}
    fam = {"args": list(rec.signature), "scalars": scalars, "constexprs": consts, "options": rec.options,
           **({"requires": dict(rec.requires)} if rec.requires else {})}
    var = {"pointers": ptrs, "divisibility": rec.divisibility, "dtype_constexprs": dconsts}
    return Spec(rec.qualname, rec.jit, fam, var, rec, [where])


def _const(v: Any) -> Any:
    return repr(v) if _is_dtype(v) else v


def variant_name(s: Spec) -> str:
    """Pointer element types, then ``_u<names>`` when some pointer/integer is not 16-divisible."""
    types: list[str] = []
    for t in s.variant_key["pointers"].values():
        t = t.lstrip("*").removeprefix("k")
        if t not in types:
            types.append(t)
    div = s.variant_key["divisibility"]
    hintable = [n for n, t in {**s.variant_key["pointers"], **s.family_key["scalars"]}.items()
                if t.startswith("*") or t[0] in "iu"]
    loose = [n for n in hintable if n not in div]
    return "_".join(types) + (f"_u{len(loose)}" if loose else "")


def _example_args_supported() -> bool:
    if os.environ.get("KP_CORPUS_EXAMPLE_ARGS") == "1":
        return True
    import kernelpack.frontends.triton.compile as kt

    return "example_args" in inspect.signature(kt.compile).parameters


def compile_spec(spec: Spec, archs: Sequence[str]) -> Any:
    """One specialization for every arch -> a Bundle (raises KernelpackError/CompileError)."""
    import kernelpack.frontends.triton.compile as kt

    rec: TritonLaunch = spec.payload
    opts = {k: v for k, v in rec.options.items() if k in ("num_warps", "num_stages", "num_ctas")}
    extra = {k: v for k, v in rec.options.items() if k not in opts}
    if _example_args_supported():  # the signature-from-example-arguments API (issue #14, in parallel)
        args = [rec.args[n] for n in rec.args]
        req = {"requires": dict(rec.requires)} if rec.requires else {}
        return kt.compile(rec.jit, example_args=args, arch=list(archs), name=spec.family,  # type: ignore[call-arg]
                          specializations=[{"variant": spec.variant or None, **opts, **req}], options=extra or None)
    s = {"constexprs": rec.constexprs, "divisibility": rec.divisibility, "variant": spec.variant or None, **opts,
         **({"requires": dict(rec.requires)} if rec.requires else {})}
    return kt.compile(rec.jit, rec.signature, arch=list(archs), name=spec.family, specializations=[s],
                      options=extra or None)


def classify(err: str) -> str:
    """kernelpack's own refusals vs Triton's compiler failing (the error text says which)."""
    return DSL if "Triton failed" in err else KERNELPACK


def kernel_ref(spec: Spec) -> str:
    return spec.kernel


def launch_key(rec: TritonLaunch) -> str:
    """What the GPU run matches a launch with (the same on both machines)."""
    s = to_spec("", rec)
    return stable({"k": s.kernel, "f": s.family_key, "v": s.variant_key})


def resolve_kernel(qualname: str) -> Any:
    return resolve(qualname)


def summary(recs: Mapping[str, Any]) -> str:
    return ", ".join(sorted(recs))
