"""The GPU run: every compiled kernel launched through kernelpack from Python and from C++, checked and timed.

Triton kernels are reached as on the build machine -- liger's own wrappers run on CUDA tensors -- but each launch
runs for real: first liger's Triton JIT (the reference; the wrapper continues with its results), then the same
launch through kernelpack's Python runtime and through the library's C entry (a C++ driver compiled here), each
from the state the JIT started from, and every tensor argument is compared with the JIT's. Fresh tensors from
``torch.empty`` are NaN-filled, so an element the JIT wrote and kernelpack did not shows up. Time: the JIT's launch
vs kernelpack's (below).

cuTile kernels (cuTile is not installed on the GPU machine): the recorded launch (grid, argument shapes, strides,
scalars) is rebuilt on fresh random inputs and run through Python and C++; the two must agree (no package
reference: liger's eager path needs cuTile). CuTe kernels (no CuTe DSL there either): the launch recorded at
capture time (``corpus.cute_launch``: each kernel's ABI arguments and grid, or a host program's arguments) is
rebuilt the same way; C++ must equal Python bit for bit, and kernels with a float64 torch reference
(``corpus.cute_reference``: rms_norm forward, scale-in-place, plain cross-entropy forward) are checked against it.

Time (``corpus.gpu_timing``): kernel time of back-to-back launches queued behind a sleep kernel (the GPU has a
backlog, so the events measure GPU execution, not the host), and the host time per launch, apart.
"""

from __future__ import annotations

import contextlib
import ctypes
import inspect
import tempfile
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kernelpack.runtime.cstructs import KpLaunch

from .gpu_check import (
    Entry,
    Row,
    compare,
    driver_source,
    launch_precision,
    match_family,
    pack_slots,
    parse_host_prototypes,
    parse_prototypes,
    runs_on,
    supported,
)
from .gpu_runner import python_then_cpp

OPTION_KEYS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


class Cpp:
    """The C++ driver over the library's C entries (compiled here with g++)."""

    def __init__(self, lib_dir: Path, lib: str, work: Path) -> None:
        from .gpu_runner import compile_harness

        header = (lib_dir / "include" / f"{lib}.h").read_text()
        self.protos = parse_prototypes(header, lib)
        hosts = parse_host_prototypes(header, lib)
        self.protos.update({k: v for k, v in hosts.items() if k not in self.protos})
        self.error, self.dll = "", None
        try:
            self.dll = compile_harness(driver_source(lib, self.protos, hosts), lib_dir, lib, work, "corpus_driver")
        except RuntimeError as e:
            self.error = f"driver did not compile: {str(e)[:300]}"

    def why_not(self, family: str) -> str:
        if self.error:
            return self.error
        if family not in self.protos:
            return f"no C entry {family}"
        return supported(self.protos[family])

    def call(self, family: str, values: dict[str, Any], grid: tuple[int, int, int], stream: int) -> str:
        """'' on KP_SUCCESS, else the library's message."""
        assert self.dll is not None
        keep: list[Any] = []  # kp_tensor structs the slots point at
        slots = pack_slots(self.protos[family], values, keep)
        arr = (ctypes.c_uint64 * max(1, len(slots)))(*slots)
        cfg = KpLaunch((ctypes.c_uint32 * 3)(*grid), (ctypes.c_uint32 * 3)(0, 0, 0), 0,
                       (ctypes.c_uint32 * 3)(0, 0, 0), ctypes.c_void_p(stream))
        fn = getattr(self.dll, f"corpus_{family}")
        fn.restype, fn.argtypes = ctypes.c_int, [ctypes.POINTER(KpLaunch), ctypes.POINTER(ctypes.c_uint64)]
        status = fn(ctypes.byref(cfg), arr)
        if status == 0:
            return ""
        err = self.dll.corpus_last_error
        err.restype = ctypes.c_char_p
        return f"status {status}: {(err() or b'').decode(errors='replace')}"


@contextlib.contextmanager
def nan_world() -> Iterator[None]:
    """``torch.empty`` & co. NaN-fill floating tensors: an element nobody wrote stays NaN."""
    import torch

    from kernelpack.capture.world import patched

    def filled(fn: Callable[..., Any]) -> Callable[..., Any]:
        def make(*args: Any, **kwargs: Any) -> Any:
            t = fn(*args, **kwargs)
            if t.is_floating_point() and t.numel():
                with torch.no_grad():
                    t.data.fill_(float("nan"))  # .data: no version bump (see restore_tensors)
            return t
        return make

    with patched([(torch, "empty", filled(torch.empty)), (torch, "empty_like", filled(torch.empty_like)),
                  (torch.Tensor, "new_empty", filled(torch.Tensor.new_empty))]):
        yield


def _grid(grid: Any, meta: dict[str, Any]) -> tuple[int, int, int]:
    g = grid(meta) if callable(grid) else grid
    g = tuple(int(x) for x in (g if isinstance(g, (tuple, list)) else (g,)))
    return (g + (1, 1, 1))[:3]  # type: ignore[return-value]


def bind(jit: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(every parameter by name, defaults applied; the launch options) of ``jit[grid](*args, **kwargs)``.

    As in Triton's own binder, a keyword that names a kernel parameter binds to it even when it is also a launch
    option (liger's sparsemax kernels declare ``num_warps: tl.constexpr``: the value is both)."""
    sig = inspect.signature(jit.fn)
    opts = {k: kwargs[k] for k in OPTION_KEYS if k in kwargs}
    rest = {k: v for k, v in kwargs.items() if k not in OPTION_KEYS or k in sig.parameters}
    b = sig.bind_partial(*args, **rest)
    b.apply_defaults()
    return dict(b.arguments), opts


def time_row(row: Row, package: Callable[[], Any] | None, kernelpack: Callable[[], Any], reps: int) -> None:
    """Kernel time and host time per launch (``corpus.gpu_timing.measure``) of the package's launch (when there
    is one) and kernelpack's, into ``row``."""
    from .gpu_timing import measure

    if package is not None:
        t = measure(package, reps)
        row.t_package_us, row.h_package_us = t.kernel_us, t.host_us
    t = measure(kernelpack, reps)
    row.t_kernelpack_us, row.h_kernelpack_us = t.kernel_us, t.host_us


class TritonCheck:
    """Checks each Triton launch of the liger wrappers (first launch per family and case point)."""

    def __init__(self, entries: Sequence[Entry], module: Any, cpp: Cpp, reps: int) -> None:
        self.entries, self.module, self.cpp, self.reps = entries, module, cpp, reps
        self.rows: list[Row] = []
        self.where = ""
        self.seen: set[tuple[str, str]] = set()

    def launch(self, orig_run: Callable[..., Any], jit: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               grid: Any, warmup: bool) -> Any:
        import torch

        qual = f"{jit.__module__}:{jit.__name__}"
        try:
            bound, opts = bind(jit, args, kwargs)
            entry = match_family(self.entries, qual, bound, opts)
        except Exception as e:  # noqa: BLE001 - a launch the check cannot read is reported, liger's still runs
            self.rows.append(Row("triton", qual, self.where, python=f"FAIL: cannot bind ({type(e).__name__}: {e})"))
            return orig_run(jit, *args, grid=grid, warmup=warmup, **kwargs)
        key = (entry.family if entry else qual, self.where)
        if key in self.seen:
            return orig_run(jit, *args, grid=grid, warmup=warmup, **kwargs)
        self.seen.add(key)
        if entry is None:
            self.rows.append(Row("triton", qual, self.where, python="FAIL: no compiled family matches this launch"))
            return orig_run(jit, *args, grid=grid, warmup=warmup, **kwargs)
        row = Row("triton", entry.family, self.where)
        self.rows.append(row)
        plain = {n: _tensor_of(v) for n, v in bound.items()}  # a TensorDescriptor goes to kernelpack as its tensor
        tensors = [(n, v) for n, v in plain.items() if isinstance(v, torch.Tensor) and v.is_cuda]
        before = [v.clone() for _, v in tensors]
        out = orig_run(jit, *args, grid=grid, warmup=warmup, **kwargs)
        torch.cuda.synchronize()
        ref = [v.clone() for _, v in tensors]
        g = _grid(grid, {**bound, **opts})
        fam = getattr(self.module, entry.family)
        values = [plain[n] for n in self.module.families[entry.family].arg_names]

        def restore(state: list[Any]) -> None:
            restore_tensors([v for _, v in tensors], state)

        prec = launch_precision([v for _, v in tensors])
        python_out: list[Any] = []
        # float atomics (group_norm, modulated_rms_norm, attn_res, mhc, fused_moe) make the sum order differ from
        # run to run: there C++ matches Python at the launch's precision, elsewhere bit for bit
        exact = "atomic_" not in str(getattr(jit, "src", ""))

        def check(run: Callable[[], str], same_as: list[Any] | None = None) -> str:
            """Run from the JIT's starting state; compare with the JIT (the launch's precision) and, for C++,
            with Python's result bit for bit (the same binary)."""
            restore(before)
            try:
                err = run()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - reported in the row
                return f"FAIL: {type(e).__name__}: {str(e)[:200]}"
            if err:
                return f"FAIL: {err}"
            if same_as is None:
                python_out[:] = [v.clone() for _, v in tensors]
            bad = [m for (n, v), r in zip(tensors, ref) if (m := compare(n, r, v, prec))]
            if same_as:
                bad += [f"vs Python {m}" for (n, v), p in zip(tensors, same_as)
                        if (m := compare(n, p, v, prec, exact=exact))]
            return "pass" if not bad else "FAIL: " + "; ".join(bad)

        row.python = check(lambda: fam(*values, grid=g) or "")
        why = self.cpp.why_not(entry.family)
        stream = torch.cuda.current_stream().cuda_stream
        row.cpp = f"n/a: {why}" if why else check(
            lambda: self.cpp.call(entry.family, plain, g, stream), python_out)
        if row.python == "pass" and self.reps:
            try:
                time_row(row, lambda: orig_run(jit, *args, grid=grid, warmup=False, **kwargs),
                         lambda: fam(*values, grid=g), self.reps)
            except Exception as e:  # noqa: BLE001
                row.python += f" (timing failed: {type(e).__name__}: {e})"
        restore(ref)
        torch.cuda.synchronize()
        return out


def restore_tensors(tensors: Sequence[Any], state: Sequence[Any]) -> None:
    """Write ``state`` back into the package's tensors, invisibly to autograd.

    The package's tensors are often views made inside an autograd Function's forward (no-grad mode) of inputs that
    require grad (liger: ``X.view(-1, H)``). Any in-place write through the view -- even under ``torch.no_grad()``
    -- bumps the shared version counter, and autograd then refuses the view when backward reaches it ("A view was
    created in no_grad mode and its base ... has been modified inplace"), or refuses a saved tensor ("modified by
    an inplace operation"). ``.data`` is the same memory under its own version counter: the bytes change, the
    autograd record does not -- as when the kernel itself writes the tensor."""
    import torch

    with torch.no_grad():
        for v, s in zip(tensors, state):
            v.data.copy_(s)


def _tensor_of(v: Any) -> Any:
    """Triton's host ``TensorDescriptor`` is one tensor to kernelpack (it builds the TMA map or passes pointer, shape
    and strides per arch); anything else as it is."""
    return v.base if type(v).__name__ == "TensorDescriptor" and hasattr(v, "base") else v


def run_triton(cases: Sequence[Any], entries: Sequence[Entry], module: Any, cpp: Cpp, reps: int,
               progress: Callable[[str], None] = print) -> list[Row]:
    """Run every Triton case point on the GPU with each launch checked (a failing case is reported, and the
    next runs)."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    from kernelpack.capture.world import patched

    from .cases import run_case, tag

    orig_run = JITFunction.run
    checker = TritonCheck(entries, module, cpp, reps)

    def jit_run(self: Any, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        if warmup:
            return orig_run(self, *args, grid=grid, warmup=warmup, **kwargs)
        return checker.launch(orig_run, self, args, kwargs, grid, warmup)

    for case in cases:
        for point in case.points():
            checker.where = f"{case.id}[{tag(point)}]"
            n = len(checker.rows)
            try:
                with nan_world(), patched([(JITFunction, "run", jit_run),
                                           (Autotuner, "run", chosen_config_run(_config_choice(case)))]):
                    run_case(case, point, "cuda")
            except Exception as e:  # noqa: BLE001 - the case stops; what it launched so far stays checked
                checker.rows.append(Row("triton", "(case)", checker.where,
                                        python=f"FAIL: case stopped: {type(e).__name__}: {str(e)[:200]}"))
                traceback.print_exc()
            progress(f"  {checker.where}: {len(checker.rows) - n} launches checked")
    return checker.rows


def _config_choice(case: Any) -> Callable[[Any, list[Any]], int]:
    """The config the corpus built for an autotuned kernel of ``case`` (its ``autotune`` index, default the first)."""
    def choose(tuner: Any, configs: list[Any]) -> int:
        name = getattr(getattr(tuner, "base_fn", None), "__name__", "")
        return min(int(case.autotune.get(name, 0)), len(configs) - 1)
    return choose


def chosen_config_run(config_choice: Callable[[Any, list[Any]], int]) -> Callable[..., Any]:
    """A replacement for ``Autotuner.run``: no benchmarking; the config ``config_choice(tuner, configs)`` picks among
    those the autotuner's pruning keeps runs -- the one the capture ran (kernelpack.capture's GPU-less choice)."""

    def tuner_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.nargs = dict(zip(self.arg_names, args))
        configs = self.prune_configs(kwargs) if len(self.configs) > 1 else list(self.configs)
        config = configs[config_choice(self, configs)]
        self.best_config = config  # wrappers read it (liger's MLP hands it to its backward)
        if config.pre_hook is not None:
            config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
        try:
            return self.fn.run(*args, **kwargs, **config.all_kwargs())
        finally:
            self.nargs = None

    return tuner_run


def rebuild(desc: dict[str, Any], gen: Any) -> Any:
    """A recorded cuTile argument on the GPU: a tensor of that dtype, shape and strides with fresh values (random
    floats, zero integers: valid indices), or the scalar."""
    import torch

    if "value" in desc:
        return desc["value"]
    dtype = getattr(torch, desc["dtype"])
    t = torch.empty_strided(desc["shape"], desc["stride"], dtype=dtype, device="cuda")
    if t.is_floating_point():
        t.copy_(torch.randn(t.shape, generator=gen, device="cuda").to(dtype))
    else:
        t.zero_()
    return t


def run_recorded(entries: Sequence[Entry], module: Any, cpp: Cpp, progress: Callable[[str], None] = print) -> list[Row]:
    """cuTile: each family's recorded launch through Python and C++ on the same fresh inputs; both must agree."""
    import torch

    rows: list[Row] = []
    try:
        gen = torch.Generator(device="cuda").manual_seed(0)
    except Exception as ex:  # noqa: BLE001 - no CUDA device: every cuTile row says so
        return [Row("cutile", f, "", python=f"FAIL: {type(ex).__name__}: {ex}")
                for f in sorted({e.family for e in entries if e.dsl == "cutile"})]
    done: set[str] = set()
    for e in entries:
        if e.dsl != "cutile" or e.family in done:
            continue
        done.add(e.family)
        row = Row("cutile", e.family, e.sources[0] if e.sources else "")
        rows.append(row)
        try:
            if "args" not in e.launch:
                raise RuntimeError(f"no recorded launch ({e.launch.get('error', 'manifest without launches')})")
            fam = getattr(module, e.family)
            names = module.families[e.family].arg_names
            args = [rebuild(d, gen) for d in e.launch["args"]]
            if len(args) != len(names):
                raise RuntimeError(f"{len(args)} recorded arguments for {len(names)} parameters")
            grid = tuple(e.launch["grid"])
            tensors = [(f"arg{i}", a) for i, a in enumerate(t for t in args if isinstance(t, torch.Tensor))]
            row.python = "ran (no reference: liger's cuTile path needs cuTile)"
            _, _, row.cpp = python_then_cpp(tensors, _launcher(fam, args, grid), cpp, e.family,
                                            dict(zip(names, args)), grid, _stream(), exact=False)
            time_row(row, None, _launcher(fam, args, grid), 10)
        except Exception as ex:  # noqa: BLE001 - reported, the next family runs
            row.python = f"FAIL: {type(ex).__name__}: {str(ex)[:200]}"
        progress(f"  {row.family}: {row.python} / {row.cpp}")
    return rows


def _launcher(fam: Any, args: list[Any], grid: tuple[int, ...]) -> Callable[[], Any]:
    return lambda: fam(*args, grid=grid)


def _stream() -> int:
    import torch

    return int(torch.cuda.current_stream().cuda_stream)


def run_cute(entries: Sequence[Entry], module: Any, cpp: Cpp, reps: int = 10,
             progress: Callable[[str], None] = print) -> list[Row]:
    """CuTe: each recorded launch (``corpus.cute_launch``) on fresh random inputs through kernelpack's Python
    runtime and the library's C entry; C++ must equal Python bit for bit; where the op is simple and known
    (``corpus.cute_reference``), Python is checked against a float64 torch reference at the launch's precision.
    No package reference otherwise (liger's CuTe path needs CuTe DSL)."""
    import torch

    rows: list[Row] = []
    try:
        gen = torch.Generator(device="cuda").manual_seed(0)
        cap = torch.cuda.get_device_capability()
    except Exception as ex:  # noqa: BLE001 - no CUDA device: every CuTe row says so
        return [Row("cute", f, "", python=f"FAIL: {type(ex).__name__}: {ex}")
                for f in sorted({e.family for e in entries if e.dsl == "cute"})]
    done: set[str] = set()
    for e in entries:
        if e.dsl != "cute" or e.family in done:
            continue
        done.add(e.family)
        where = e.sources[0] if e.sources else ""
        if not runs_on(e.archs, cap):
            rows.append(Row("cute", e.family, where, python=f"n/a: built for {', '.join(e.archs)} only (this GPU: "
                            f"sm_{cap[0]}{cap[1]})", cpp="n/a"))
            continue
        if "error" in e.launch or not e.launch:
            rows.append(Row("cute", e.family, where, python=f"n/a: no recorded launch "
                            f"({e.launch.get('error', 'manifest without launches')})", cpp="n/a"))
            continue
        if e.host_program:
            rows.append(_cute_host(e, module, cpp, gen, reps, where))
        else:
            for name, k in e.launch.get("kernels", {}).items():
                rows.append(_cute_kernel(name, k, e, module, cpp, gen, reps, where))
        progress(f"  {rows[-1].family}: {rows[-1].python} / {rows[-1].cpp}")
    return rows


def _cute_kernel(name: str, k: dict[str, Any], e: Entry, module: Any, cpp: Cpp, gen: Any, reps: int,
                 where: str) -> Row:
    import torch

    from .cute_launch import rebuild
    from .cute_reference import reference_for

    row = Row("cute", name, where)
    if "error" in k:
        row.python, row.cpp = f"n/a: not launched: {k['error']}", "n/a"
        return row
    try:
        fam = module[name]
        names = list(k["names"])
        args = [rebuild(d, gen) for d in k["args"]]
        grid = tuple(k["grid"])
        tensors = [(n, a) for n, a in zip(names, args) if isinstance(a, torch.Tensor)]
        start, py, row.cpp = python_then_cpp(tensors, _launcher(fam, args, grid), cpp, name, dict(zip(names, args)),
                                             grid, _stream())
        row.python = _check_reference(reference_for(name), dict(zip(names, args)), dict(zip(names, start)),
                                      dict(zip(names, py)), e.launch.get("host_args", {}))
        if reps:
            time_row(row, None, _launcher(fam, args, grid), reps)
        restore_tensors([t for _, t in tensors], start)
    except Exception as ex:  # noqa: BLE001 - reported, the next family runs
        row.python = f"FAIL: {type(ex).__name__}: {str(ex)[:200]}"
    return row


def _check_reference(ref_fn: Callable[..., Any] | None, values: dict[str, Any], start: dict[str, Any],
                     got: dict[str, Any], host: dict[str, Any]) -> str:
    """'pass (== reference)' / 'FAIL: ...' against the float64 reference, or 'ran (no reference: ...)'."""
    expected = None
    if ref_fn is not None:
        inputs = {n: start.get(n, v) for n, v in values.items()}
        expected = ref_fn(inputs, host)
    if expected is None:
        return "ran (no reference: Python == C++ is the check)"
    prec = launch_precision(list(start.values()))
    bad = [m for n, want in expected.items() if (m := compare(n, want, got[n].double(), prec))]
    return "pass (== float64 reference)" if not bad else "FAIL: vs float64 reference: " + "; ".join(bad)


def _cute_host(e: Entry, module: Any, cpp: Cpp, gen: Any, reps: int, where: str) -> Row:
    import torch

    from .cute_launch import rebuild

    row = Row("cute", e.family, where)
    prog = e.launch.get("program", {})
    if "error" in prog:
        row.python, row.cpp = f"n/a: not launched: {prog['error']}", "n/a"
        return row
    try:
        fn = module[e.family]
        values = {d["name"]: rebuild(d, gen) for d in prog["args"]}
        tensors = [(n, a) for n, a in values.items() if isinstance(a, torch.Tensor)]
        stream = _stream()
        start, _, row.cpp = python_then_cpp(tensors, lambda: fn(**values), cpp, e.family, {**values, "stream": stream},
                                            (0, 0, 0), stream)
        row.python = "ran (no reference: Python == C++ is the check)"
        if reps:
            time_row(row, None, lambda: fn(**values), reps)
        restore_tensors([t for _, t in tensors], start)
    except Exception as ex:  # noqa: BLE001 - reported, the next family runs
        row.python = f"FAIL: {type(ex).__name__}: {str(ex)[:200]}"
    return row


def run_liger(gpu_dir: Path, case_ids: Sequence[str], dsls: set[str], shard: tuple[int, int], reps: int) -> str:
    """The liger corpus's GPU run over ``gpu_dir`` (.gpu/corpus): the Triton cases of ``shard`` (K, N: every N-th
    from the K-th; only ``case_ids`` when given), then -- with shard 1 and no case named -- the recorded cuTile and
    CuTe launches, of the DSLs in ``dsls``; returns the markdown report."""
    import sys

    sys.path.insert(0, str(gpu_dir / "site"))  # liger's pure-Python sources, carried
    import kernelpack

    from .cases import CORPUS, load_cases
    from .gpu_check import read_manifest, render

    libs, entries = read_manifest(gpu_dir / "manifest.json")
    info = libs["liger"]
    module = kernelpack.load(str(gpu_dir / info["shared"]))
    cpp = Cpp(gpu_dir / "liger" / "lib", info["name"], Path(tempfile.mkdtemp(prefix="kp-corpus-gpu-")))
    if cpp.error:
        print(f"C++ driver: {cpp.error}", flush=True)
    _, cases = load_cases(CORPUS / "liger_triton.toml")
    k, n = shard
    cases = [c for i, c in enumerate(cases) if (not case_ids or c.id in case_ids) and i % n == k - 1]
    rows = run_triton(cases, entries, module, cpp, reps) if "triton" in dsls else []
    if not case_ids and k == 1:
        rows += run_recorded(entries, module, cpp) if "cutile" in dsls else []
        rows += run_cute(entries, module, cpp, min(reps, 10)) if "cute" in dsls else []
    return render(rows)
