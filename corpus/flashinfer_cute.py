"""FlashInfer's CuTe DSL kernels as host programs (``corpus/flashinfer_cute.toml``).

FlashInfer's package ``__init__`` imports its whole JIT stack (installed ``--no-deps`` here), so the modules are
loaded under empty parent packages (:func:`load`). Each kernel goes through FlashInfer's own compile helper with
``cute.compile`` intercepted (:func:`capture`): the kernel object and fake arguments it builds are exported with
``kernelpack.cute.export`` for each arch, and the per-arch programs merge into one entry per dtype.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

from .cases import CORPUS
from .pipeline import Item, Options, Outcome
from .results import DSL, ENVIRONMENT, KERNELPACK, Section

PACKAGE = "flashinfer-python"
SMEM_OPTIN = {80: 166912, 90: 232448, 100: 232448}  # cudaDevAttrMaxSharedMemoryPerBlockOptin per SM
STUB_PACKAGES = ("cute_dsl", "norm", "norm.kernels", "gemm", "gemm.kernels")  # their __init__ imports the JIT
DT_SHORT = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}


@dataclass(frozen=True)
class CuteKernel:
    id: str
    module: str
    builder: str
    args: tuple[Any, ...]
    dtypes: tuple[str, ...]
    archs: tuple[str, ...] = ()
    reduced: bool = False


def load_cute(path: Path = CORPUS / "flashinfer_cute.toml") -> tuple[dict[str, Any], list[CuteKernel]]:
    data = tomllib.loads(path.read_text())
    out = [CuteKernel(**{**k, "args": tuple(k["args"]), "dtypes": tuple(k["dtypes"]),
                         "archs": tuple(k.get("archs", ()))}) for k in data.get("kernel", [])]
    return dict(data.get("corpus", {})), out


def load(module: str, root: Path) -> types.ModuleType:
    """Import ``flashinfer.<...>`` without running the ``__init__`` of flashinfer and its subpackages."""
    parts = module.split(".")
    names = [".".join(parts[:i]) for i in range(1, len(parts))] + [f"flashinfer.{p}" for p in STUB_PACKAGES]
    for name in names:
        if name not in sys.modules:
            pkg = types.ModuleType(name)
            pkg.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
            sys.modules[name] = pkg
    return importlib.import_module(module)


class _Captured(Exception):
    def __init__(self, fn: Any, args: tuple[Any, ...]) -> None:
        super().__init__("captured")
        self.fn, self.args = fn, args


@contextlib.contextmanager
def device_answers(sm: int) -> Iterator[None]:
    """torch.cuda's device queries answered for ``sm`` (FlashInfer's helpers size clusters and shared memory from
    them), and cute.compile / make_fake_stream intercepted."""
    import cutlass.cute as cute
    import torch

    props = types.SimpleNamespace(shared_memory_per_block_optin=SMEM_OPTIN[sm], multi_processor_count=132,
                                  major=sm // 10, minor=sm % 10)
    saved = (torch.cuda.get_device_properties, torch.cuda.current_device, cute.compile, cute.runtime.make_fake_stream)
    fake_stream = saved[3]

    def compile_(fn: Any, *args: Any, **kw: Any) -> Any:
        raise _Captured(fn, args)

    torch.cuda.get_device_properties = lambda *a, **k: props  # type: ignore[assignment]
    torch.cuda.current_device = lambda: 0  # type: ignore[assignment]
    cute.compile = compile_  # type: ignore[assignment]
    cute.runtime.make_fake_stream = lambda *a, **k: fake_stream()  # no TVM-FFI env stream: a plain stream param
    try:
        yield
    finally:
        (torch.cuda.get_device_properties, torch.cuda.current_device, cute.compile,
         cute.runtime.make_fake_stream) = saved


def capture(k: CuteKernel, dt: str, sm: int, root: Path) -> tuple[Any, tuple[Any, ...]]:
    """(kernel object, fake arguments) FlashInfer's helper builds for dtype ``dt`` on ``sm``."""
    mod = load(k.module, root)
    args = tuple(dt if a == "$DT" else sm if a == "$SM" else dt == "float16" if a == "$FP16" else a for a in k.args)
    with device_answers(sm):
        if k.builder == "corpus":
            return _gemm_direct(mod, dt, *args)
        helper = getattr(mod, k.builder)
        helper = getattr(helper, "__wrapped__", helper)  # functools.cache
        try:
            helper(*args)
        except _Captured as c:
            return c.fn, c.args
    raise RuntimeError(f"{k.module}.{k.builder} did not call cute.compile")


def _gemm_direct(mod: Any, dt: str, rows: int, n: int, k: int) -> tuple[Any, tuple[Any, ...]]:
    """dense_bf16_gemm_direct: FlashInfer's helper builds its arguments from CUDA tensors; the same layouts as fake
    tensors (A [M, K] and C [M, N] row-major with M dynamic, B [N, K] static, 32-byte aligned)."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_compact_tensor

    tactic = mod.default_tactic(rows, n, k)
    kobj = mod.DirectDenseGemmKernel(element_type=cutlass.BFloat16, k_extent=k, tactic=tactic, use_pdl=False)
    m = cute.sym_int()
    a = make_fake_compact_tensor(cutlass.BFloat16, (m, k), stride_order=(1, 0), assumed_align=32)
    b = make_fake_compact_tensor(cutlass.BFloat16, (n, k), stride_order=(1, 0), assumed_align=32)
    c = make_fake_compact_tensor(cutlass.BFloat16, (m, n), stride_order=(1, 0), assumed_align=32)
    return kobj, (a, b, c, cute.runtime.make_fake_stream())


def export(k: CuteKernel, dt: str, arch: str, root: Path) -> Any:
    import kernelpack.cute as kc

    sm = int("".join(ch for ch in arch if ch.isdigit()))
    fn, args = capture(k, dt, sm, root)
    return kc.export(fn, *args, arch=[arch], name=k.id, variant=DT_SHORT.get(dt, dt))


def classify(err: str) -> str:
    if err.startswith("ModuleNotFoundError"):  # cute_dsl/ modules import flashinfer.utils: pynvml, tvm_ffi
        return ENVIRONMENT
    return DSL if ("CuTe compile" in err or "DSL" in err) else KERNELPACK


def section(opts: Options, root: Path | None) -> tuple[Section, Outcome]:
    sec = Section(PACKAGE, "cute")
    if root is None:
        sec.notes.append("flashinfer-python is not installed")
        return sec, Outcome()
    try:
        import cutlass  # noqa: F401
    except ImportError as e:
        sec.fail("", "capture", ENVIRONMENT, f"CuTe DSL not importable: {e}")
        return sec, Outcome()
    from kernelpack.bundle.merge import merge_programs

    meta, kernels = load_cute()
    sec.defined = [k.id for k in kernels]
    sel = [k for k in kernels if (not opts.cases or k.id in opts.cases) and (not opts.reduced or k.reduced)]
    sec.reached = {k.id for k in sel}
    out = Outcome()
    t0 = time.time()
    for k in sel:
        archs = k.archs or tuple(meta.get("archs", ("sm_80", "sm_90a")))
        if opts.archs:  # --arch narrows to the archs a kernel targets, never onto one it does not
            archs = tuple(a for a in opts.archs if a in archs)
        if not archs:
            sec.notes.append(f"{k.id}: targets {', '.join(k.archs)}, none of {', '.join(opts.archs)}")
            sec.reached.discard(k.id)
            continue
        programs, ok = [], True
        for dt in k.dtypes:
            for arch in archs:
                t = time.time()
                try:
                    programs.append(export(k, dt, arch, root))
                    opts.progress(f"  {k.id}[{dt}] {arch} {time.time() - t:.1f}s ok")
                except Exception as e:  # noqa: BLE001 - recorded per kernel
                    ok = False
                    msg = f"{type(e).__name__}: {getattr(e, 'message', None) or e}"
                    sec.fail(k.id, "compile", classify(msg), msg, f"{dt} {arch}")
                    opts.progress(f"  {k.id}[{dt}] {arch} FAILED {msg[:160]}")
        entry = {"dsl": "cute", "kernel": k.id, "family": k.id, "dtypes": list(k.dtypes), "archs": list(archs),
                 "compiled": ok}
        if ok:
            try:
                merged = merge_programs(programs)
            except Exception as e:  # noqa: BLE001
                sec.fail(k.id, "compile", KERNELPACK, f"merging the per-arch programs: {e}")
                merged, ok = [], False
            for p in merged:
                out.items.append(Item(f"{PACKAGE}/cute", k.id, p, None, ()))
            entry["programs"] = [repr(p) for p in merged]
        if ok:
            sec.compiled.add(k.id)
        out.manifest.append(entry)
    sec.seconds += time.time() - t0
    return sec, out
