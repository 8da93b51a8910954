"""Corpus cases: calls of a package's own wrappers on example inputs, read from ``corpus/*.toml``.

A case names an operator (``module:attr``; an ``autograd.Function`` is applied, anything else called), its
positional ``inputs`` and keyword ``kwargs`` in a small input language, whether to run ``backward``, and
``params``: lists of values whose cartesian product are the specializations the case covers (``H = [1024, 4096]``
covers two hidden sizes, i.e. two ``calculate_settings`` buckets). Strings in shapes and values are Python
expressions over the params (``"2 * H"``).

Input language (one TOML value per argument)::

    1e-6, "llama", true           literal (a string that names a param or is an expression is evaluated: "H")
    { randn = [BT, H], dtype = "DT", grad = true, scale = 1.0 }   normal values
    { rand = [...], dtype = ..., low = 0.0, high = 1.0 }          uniform values
    { randint = [N], low = 0, high = "V", dtype = "int64" }        integers in [low, high)
    { softmax = [BT, V], dtype = ..., log = false }                 rows of probabilities (log: log-probabilities)
    { ones = [...] }, { zeros = [...] }, { arange = "N", dtype = "int64" }
    { none = true }               None
    { torch_dtype = "DT" }        a torch.dtype value
    { value = "expr" }            an evaluated Python value
    { list = [input, ...] }       a Python list of inputs (also "tuple")
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

CORPUS = Path(__file__).resolve().parent

DTYPES = {"float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16", "bfloat16": "bfloat16",
          "bf16": "bfloat16", "float64": "float64", "int64": "int64", "int32": "int32", "int16": "int16",
          "int8": "int8", "uint8": "uint8", "bool": "bool"}


@dataclass(frozen=True)
class Case:
    id: str
    op: str
    inputs: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    params: Mapping[str, tuple[Any, ...]]
    backward: bool = False
    grad_output: str = "randn"  # or "ones"
    autotune: Mapping[str, int] = field(default_factory=dict)  # kernel name -> autotune config index
    note: str = ""
    reduced: bool = False  # part of the reduced corpus CI runs
    device: str = ""  # the GPU the capture stands for (kernelpack.capture.DEVICES); empty: the corpus's (h200)
    seed: int = 0
    pretend: Mapping[str, Any] = field(default_factory=dict)  # "module:attr" -> what it returns instead
    # ({ value = X }: the attribute itself becomes X, for module constants)
    interpret: tuple[str, ...] = ()  # kernels run by Triton's CPU interpreter during capture
    env: Mapping[str, str] = field(default_factory=dict)  # environment variables set while the case runs (a
    # package's own switch between its implementations: LIGER_KERNEL_IMPL_JSD_LOSS_AND_GRAD = "nvidia-triton")

    def points(self) -> Iterator[dict[str, Any]]:
        """The specializations: every combination of the params."""
        keys = list(self.params)
        for values in itertools.product(*(self.params[k] for k in keys)):
            yield dict(zip(keys, values))


def tag(point: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in point.items())


def load_cases(path: str | Path) -> tuple[dict[str, Any], list[Case]]:
    """The file's ``[corpus]`` table and its ``[[case]]`` entries."""
    data = tomllib.loads(Path(path).read_text())
    cases = []
    for raw in data.get("case", []):
        raw = dict(raw)
        params = {k: tuple(v if isinstance(v, list) else [v]) for k, v in dict(raw.pop("params", {})).items()}
        cases.append(Case(id=raw.pop("id"), op=raw.pop("op"), inputs=tuple(raw.pop("inputs", ())),
                          kwargs=dict(raw.pop("kwargs", {})), params=params,
                          interpret=tuple(raw.pop("interpret", ())), **raw))
    ids = [c.id for c in cases]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"{path}: duplicate case ids {dupes}")
    return dict(data.get("corpus", {})), cases


def resolve(ref: str) -> Any:
    mod, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


class Inputs:
    """Builds the inputs of one case point on one device."""

    def __init__(self, point: Mapping[str, Any], device: str, seed: int) -> None:
        import torch

        self.env = dict(point)
        self.device = device
        self.gen = torch.Generator(device="cpu").manual_seed(seed)

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            try:
                return eval(v, {"__builtins__": {}, "min": min, "max": max}, self.env)  # noqa: S307 - corpus data
            except Exception:  # noqa: BLE001 - a plain string argument ("llama")
                return v
        return v

    def shape(self, dims: Any) -> tuple[int, ...]:
        dims = dims if isinstance(dims, list) else [dims]
        return tuple(int(self.value(d)) for d in dims)

    def dtype(self, spec: Mapping[str, Any], default: str = "float32") -> Any:
        import torch

        name = self.value(spec.get("dtype", default))
        return getattr(torch, DTYPES.get(str(name), str(name)))

    def build(self, spec: Any) -> Any:
        import torch

        if not isinstance(spec, dict):
            return self.value(spec)
        if "none" in spec:
            return None
        if "value" in spec:
            return self.value(spec["value"])
        if "process_group" in spec:
            return single_rank_group()
        if "torch_dtype" in spec:
            return self.dtype({"dtype": spec["torch_dtype"]})
        if "list" in spec or "tuple" in spec:
            items = [self.build(x) for x in (spec.get("list") or spec.get("tuple") or [])]
            return items if "list" in spec else tuple(items)
        dt = self.dtype(spec, "int64" if ("randint" in spec or "arange" in spec) else "float32")
        if "randn" in spec:
            t = torch.randn(self.shape(spec["randn"]), generator=self.gen) * float(self.value(spec.get("scale", 1.0)))
            t = t + float(self.value(spec.get("shift", 0.0)))
        elif "rand" in spec:
            lo, hi = float(self.value(spec.get("low", 0.0))), float(self.value(spec.get("high", 1.0)))
            t = torch.rand(self.shape(spec["rand"]), generator=self.gen) * (hi - lo) + lo
        elif "randint" in spec:
            t = torch.randint(int(self.value(spec.get("low", 0))), int(self.value(spec["high"])),
                              self.shape(spec["randint"]), generator=self.gen)
        elif "softmax" in spec:
            x = torch.randn(self.shape(spec["softmax"]), generator=self.gen)
            t = torch.log_softmax(x, -1) if spec.get("log") else torch.softmax(x, -1)
        elif "ones" in spec:
            t = torch.ones(self.shape(spec["ones"]))
        elif "zeros" in spec:
            t = torch.zeros(self.shape(spec["zeros"]))
        elif "arange" in spec:
            t = torch.arange(int(self.value(spec["arange"])))
        else:
            raise ValueError(f"unknown input spec {spec}")
        t = t.to(dt).to(self.device)
        if spec.get("grad"):
            t.requires_grad_(True)
        return t


def single_rank_group() -> Any:
    """A one-process gloo group (for wrappers that take a tensor-parallel group)."""
    import os

    import torch.distributed as dist

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 2000))
        dist.init_process_group("gloo", rank=0, world_size=1)
    return dist.group.WORLD


def pretend_patches(case: Case) -> list[tuple[Any, str, Any]]:
    out = []
    for ref, value in case.pretend.items():
        mod, _, attr = ref.partition(":")
        if isinstance(value, dict) and set(value) == {"value"}:  # a module constant: set it as it is
            out.append((importlib.import_module(mod), attr, value["value"]))
            continue
        value = tuple(value) if isinstance(value, list) else value
        out.append((importlib.import_module(mod), attr, lambda *a, _v=value, **k: _v))
    return out


def run_case(case: Case, point: Mapping[str, Any], device: str = "cpu") -> Any:
    """Build the inputs and run the operator (and its backward); returns the outputs and the inputs."""
    from kernelpack.capture.world import patched

    with patched(pretend_patches(case)), _environment(case.env):
        return _run(case, point, device)


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run(case: Case, point: Mapping[str, Any], device: str) -> Any:
    import torch

    torch.manual_seed(case.seed)
    ins = Inputs(point, device, case.seed)
    args = [ins.build(x) for x in case.inputs]
    kwargs = {k: ins.build(v) for k, v in case.kwargs.items()}
    op = resolve(case.op)
    out = op.apply(*args, **kwargs) if isinstance(op, type) and issubclass(op, torch.autograd.Function) \
        else op(*args, **kwargs)
    if case.backward:
        first = next((o for o in (out if isinstance(out, (tuple, list)) else (out,))
                      if isinstance(o, torch.Tensor) and o.requires_grad), None)
        if first is None:
            raise RuntimeError(f"case {case.id}: backward asked for but no output requires grad")
        grad = torch.ones_like(first) if case.grad_output == "ones" else \
            torch.randn(first.shape, generator=ins.gen).to(first.dtype).to(device)
        first.backward(grad)
    return out, args, kwargs


def run_all(files: list[str], *, only: tuple[str, ...] = (), reduced: bool = False, device: str = "",
            progress: Any = None) -> tuple[int, int]:
    """Run every case point of the case files; under ``kernelpack capture`` each point is one of its runs (a point that
    fails is listed as skipped and the rest go on). ``device``: only the cases for that GPU (a case's ``device``,
    default ``h200``). Returns (points run, points that failed)."""
    from kernelpack.capture import current

    ran = failed = 0
    for f in files:
        _, cases = load_cases(f)
        for case in cases:
            if (only and case.id not in only) or (reduced and not case.reduced) or (
                    device and (case.device or "h200") != device):
                continue
            for point in case.points():
                label = f"{case.id}[{tag(point)}]"
                cap = current()
                if cap is not None:
                    cap.interpret.update(case.interpret)
                    ok = cap.run(label, lambda c=case, p=point: run_case(c, p))
                else:
                    try:
                        run_case(case, point)
                        ok = True
                    except Exception as e:  # noqa: BLE001 - one point failing leaves the others to run
                        print(f"{label}: {type(e).__name__}: {e}")
                        ok = False
                ran, failed = ran + 1, failed + (not ok)
                if progress is not None:
                    progress(label, ok)
    return ran, failed


def main(argv: list[str] | None = None) -> int:
    """``python -m corpus.cases FILE.toml... [--case ID]... [--reduced]``: the package's own wrappers called on the
    cases' inputs -- the script of calls ``kernelpack capture`` runs (``kernelpack capture -o DIR --device h200 --
    python -m corpus.cases corpus/liger_triton.toml``)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m corpus.cases", description=main.__doc__)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--case", action="append", default=[], help="only this case id (repeatable)")
    ap.add_argument("--reduced", action="store_true", help="only the cases marked reduced")
    ap.add_argument("--device", default="", help="only the cases for this GPU (a case's device, default h200): "
                    "capture each device's cases with kernelpack capture --device of the same name")
    args = ap.parse_args(argv)
    ran, failed = run_all(args.files, only=tuple(args.case), reduced=args.reduced, device=args.device)
    print(f"{ran} case point(s) run, {failed} failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
