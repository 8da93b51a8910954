"""AOT tuning tables: time every config specialization of a family on declared problem shapes (on a GPU machine,
``kernelpack tune``), write the winners to a JSON tuning file (:mod:`kernelpack.tuning.table`: the format and its
checked reader), and turn that file into shape-range dispatch rules (:mod:`kernelpack.launch.ranges`) when a bundle
is built (``kernelpack build``, any machine).

Rules (:func:`rules`): each tuned shape falls in a **bucket**, per key argument the power-of-two interval holding
its value (``(2**(k-1), 2**k]``; values <= 1: ``[.., 1]``); the winner of a bucket is the config with the least total
median time over the bucket's shapes. Each bucket becomes one specialization: a copy of its winner (variant
``<variant>_t<i>``) with the bucket as range constraints. Buckets are disjoint, so no two rules overlap; the config
with the least total time over all shapes stays, without ranges, for shapes outside every bucket; the other
untuned configs are dropped from the family -- but where that fallback config was left out for an arch (it exceeds
the arch's limits: kernelpack.bundle.pruned), the fastest config that carries the arch stays for it, without ranges
(variant ``<variant>_fallback``, holding that arch's binaries only). A table for another bundle (hash mismatch), an
arch the bundle does not carry, a family, config or key argument the bundle lacks is refused (:class:`TuningError`).
"""

from __future__ import annotations

import ast
import hashlib
import math
import operator
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..bundle.artifact import KernelArtifact
from ..bundle.kpack import Bundle
from ..core.errors import KernelpackError
from ..launch.binaries import best as best_binary
from ..launch.ranges import INT64_MAX, INT64_MIN
from .table import FORMAT, FamilyTable, TunedShape, TuningError, TuningTable

__all__ = ["FORMAT", "FamilyTable", "Problem", "Timer", "TunedShape", "TuningError", "TuningTable", "bucket",
           "bundle_sha256", "constexprs", "cuda_event_timer", "device_arch", "embed", "load_problems", "rules",
           "run_tune", "tune"]


def bundle_sha256(bundle: Bundle) -> str:
    """The hash a tuning file names its bundle by: SHA-256 of the bundle file's bytes."""
    return hashlib.sha256(bundle.to_bytes()).hexdigest()


def constexprs(art: KernelArtifact) -> dict[str, Any]:
    """The compile-time constants a Triton specialization was built with (from its provenance): a tuner's ``meta``."""
    out: dict[str, Any] = {}
    for opt in art.provenance.options:
        if opt.startswith("constexpr ") and "=" in opt:
            k, _, v = opt[len("constexpr "):].partition("=")
            try:
                out[k] = ast.literal_eval(v)
            except (ValueError, SyntaxError):
                out[k] = v
    return out


# ------------------------------------------------------------------ table -> rules


def bucket(v: int) -> tuple[int, int]:
    """The power-of-two interval holding ``v``: ``(2**(k-1), 2**k]`` for ``v > 1``, ``[INT64_MIN, 1]`` otherwise."""
    if v <= 1:
        return INT64_MIN, 1
    hi = 1 << (v - 1).bit_length()
    return hi // 2 + 1, min(hi, INT64_MAX)


def rules(name: str, table: FamilyTable, labels: Sequence[str]) -> tuple[str, list[tuple[str, list[str]]]]:
    """(the label of the fallback config, [(winning config label, range texts)] one per bucket) for family
    ``name`` whose config specializations are ``labels``."""
    known = set(labels)
    total: dict[str, float] = {}
    buckets: dict[tuple[tuple[int, int], ...], dict[str, float]] = {}
    for i, s in enumerate(table.shapes):
        missing = [k for k in table.key if k not in s.shape]
        if missing:
            raise TuningError(f"tuning of {name}: shape {s.shape} lacks key argument(s) {', '.join(missing)}")
        unknown = sorted(set(s.timings_ms) - known)
        if unknown:
            raise TuningError(f"families.{name}.shapes[{i}].timings_ms: {', '.join(unknown)}: not a specialization "
                              f"of {name} in the bundle (its specializations: {', '.join(labels)})")
        box = tuple(bucket(s.shape[k]) for k in table.key)
        sums = buckets.setdefault(box, {})
        for label, ms in s.timings_ms.items():
            if math.isfinite(ms):
                sums[label] = sums.get(label, 0.0) + ms
                total[label] = total.get(label, 0.0) + ms
    if not total:
        raise TuningError(f"tuning of {name}: no timings")
    order = {label: i for i, label in enumerate(labels)}
    fallback = min(total, key=lambda lb: (total[lb], order[lb]))
    out = []
    for box, sums in sorted(buckets.items()):
        if not sums:
            continue
        win = min(sums, key=lambda lb: (sums[lb], order[lb]))
        texts = []
        for k, (lo, hi) in zip(table.key, box, strict=True):
            texts.append(f"{k} <= {hi}" if lo == INT64_MIN else f"{k} in [{lo}, {hi}]")
        out.append((win, texts))
    return fallback, out


def embed(bundle: Bundle, table: TuningTable, *, source: str = "tuning file") -> Bundle:
    """The bundle with the table's rules (see the module doc): refused for another bundle or arch."""
    have = bundle_sha256(bundle)
    if table.bundle_sha256 != have:
        raise TuningError(f"{source} was made for another bundle (sha256 {table.bundle_sha256[:16]}..., this bundle "
                          f"is {have[:16]}...): re-run kernelpack tune on this build")
    archs = sorted({str(a) for art in bundle for a in art.archs})
    if table.arch not in archs:
        raise TuningError(f"{source} was tuned on {table.arch} ({table.device or 'unknown device'}); the bundle "
                          f"carries {', '.join(archs)}")
    fams = bundle.families()
    out: list[KernelArtifact] = []
    for name, arts in fams.items():
        ft = table.families.get(name)
        if ft is None:
            out += arts
            continue
        if any(a.range_rules for a in arts):
            raise TuningError(f"{source}: family {name} already has range constraints; tune a family of plain "
                              f"config specializations")
        by_label = {a.label: a for a in arts}
        try:
            fallback, picked = rules(name, ft, list(by_label))
        except TuningError as e:
            raise TuningError(f"{source}: {e.message}") from None
        out.append(by_label[fallback])
        out += _other_archs(by_label, fallback, ft)
        for i, (label, texts) in enumerate(picked):
            a = by_label[label]
            try:
                out.append(replace(a, variant=f"{a.variant or 'base'}_t{i}", ranges=texts))
            except KernelpackError as e:  # a key argument the kernel cannot be dispatched on
                raise TuningError(f"{source}: families.{name}.key: expected integer arguments of {name}, got "
                                  f"{list(ft.key)}: {e.message}") from None
    unknown = sorted(set(table.families) - set(fams))
    if unknown:
        raise TuningError(f"{source}: no family {', '.join(unknown)} in the bundle")
    return Bundle(tuple(out))


def _other_archs(by_label: Mapping[str, KernelArtifact], fallback: str, table: FamilyTable) -> list[KernelArtifact]:
    """For each arch a family carries but its fallback config does not (left out for it: kernelpack.bundle.pruned), a
    config that carries it, without ranges, holding only the binaries of such archs (variant ``<variant>_fallback``):
    the fastest on the tuned arch (the least total time), else the first. Every arch keeps a config for every call,
    and the fallback stays the only one on the archs it carries."""
    have = {b.target for b in by_label[fallback].binaries}
    total: dict[str, float] = {}
    for s in table.shapes:
        for label, ms in s.timings_ms.items():
            if math.isfinite(ms):
                total[label] = total.get(label, 0.0) + ms
    order = list(by_label)
    chosen: dict[str, set[Any]] = {}
    for target in sorted({b.target for a in by_label.values() for b in a.binaries} - have, key=str):
        carriers = [lb for lb in order if any(b.target == target for b in by_label[lb].binaries)]
        best = min(carriers, key=lambda lb: (total.get(lb, math.inf), order.index(lb)))
        chosen.setdefault(best, set()).add(target)
    out = []
    for label, targets in chosen.items():
        a = by_label[label]
        keep = tuple(b for b in a.binaries if b.target in targets)
        archs = {b.arch for b in keep}
        out.append(replace(a, variant=f"{a.variant or 'base'}_fallback", binaries=keep, ranges=(),
                           per_arch={k: v for k, v in a.arch_launches.items() if k in archs}))
    return out


# ------------------------------------------------------------------ timing (a GPU machine)

Timer = Callable[[Callable[[], None]], Sequence[float]]  # launch -> kernel times in ms


def cuda_event_timer(warmup: int = 10, reps: int = 50, queue_cycles: int = 100_000, flush_l2: bool = True) -> Timer:
    """Kernel times with CUDA events (torch.cuda.Event) around each launch, after ``warmup`` launches. Each timed
    launch is queued behind a spin kernel (``torch.cuda._sleep``) that outlasts the host's time to issue the launch,
    so the interval between the events is the kernel's alone, however slow the launch path under test: the spin is
    ``queue_cycles`` or 4 x the host time per launch measured over the warm-up (converted to GPU clock cycles by a
    calibration spin on first use), whichever is longer, at most 50 ms. With ``flush_l2`` (the default, as Triton's
    ``do_bench`` does for its autotuner) a 256 MiB buffer is cleared before each timed launch, so every config starts
    from a cold L2: its time does not depend on what ran before it."""
    hz: list[float] = []  # GPU clock cycles per second of the spin kernel, measured once
    scratch: list[Any] = []  # the buffer that evicts L2, allocated once

    def timer(launch: Callable[[], None]) -> list[float]:
        import torch

        spin = getattr(torch.cuda, "_sleep", None)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(warmup):
            launch()
        host_s = (time.perf_counter() - t0) / max(warmup, 1)
        torch.cuda.synchronize()
        cycles = 0
        if spin is not None:
            if not hz:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                spin(2_000_000)
                b.record()
                torch.cuda.synchronize()
                hz.append(2_000_000 / max(a.elapsed_time(b) * 1e-3, 1e-6))
            cycles = int(min(max(queue_cycles, 4 * host_s * hz[0]), 0.05 * hz[0]))
        if flush_l2 and not scratch:
            scratch.append(torch.empty(256 << 20, dtype=torch.int8, device="cuda"))
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for start, end in pairs:
            if scratch:
                scratch[0].zero_()
            if cycles and spin is not None:
                spin(cycles)
            start.record()
            launch()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in pairs]

    return timer


@dataclass(frozen=True)
class Problem:
    """What ``kernelpack tune`` times for one family: ``key`` (the integer arguments the shapes vary), ``shapes``
    (``{arg: value}`` each), and ``make(shape, meta) -> (args, launch kwargs)``: the arguments of one call of the
    kernel for that shape, ``meta`` being the constexprs of the config timed (a grid depends on its block sizes)."""

    key: Sequence[str]
    shapes: Sequence[Mapping[str, int]]
    make: Callable[[Mapping[str, int], Mapping[str, Any]], tuple[Sequence[Any], Mapping[str, Any]]]


def tune(bundle: Bundle, problems: Mapping[str, Problem], *, timer: Timer | None = None, arch: str,
         device: str = "", load: Callable[[Bundle], Any] | None = None,
         log: Callable[[str], None] | None = None, rounds: int = 3) -> TuningTable:
    """Time each config specialization of each family in ``problems`` on each of its shapes (the median of
    ``timer``'s times, the best of ``rounds`` rounds that time every config in turn), pick the fastest per shape: the
    tuning table (``arch``/``device``: where it ran)."""
    if rounds < 1:
        raise TuningError(f"kernelpack tune: rounds must be >= 1, got {rounds}")
    from ..runtime import load as kp_load

    timer = timer or cuda_event_timer()
    loader = load or kp_load
    fams = bundle.families()
    tables: dict[str, FamilyTable] = {}
    for name, problem in problems.items():
        arts = fams.get(name)
        if arts is None:
            raise TuningError(f"kernelpack tune: no family {name} in the bundle (families: {', '.join(fams)})")
        if len(arts) < 2:
            raise TuningError(f"kernelpack tune: family {name} has one specialization; nothing to choose")
        keyed = _problem_shapes(name, problem)
        mods = {a.label: getattr(loader(Bundle((replace(a, variant="", ranges=()),))), name) for a in arts}
        shapes = []
        for shape, values in zip(problem.shapes, keyed, strict=True):
            times: dict[str, float] = {}
            for _ in range(rounds):  # interleaved rounds, the best median of each config: drift hits all alike
                for a in arts:
                    if times.get(a.label) == math.inf:
                        continue
                    args, kwargs = problem.make(shape, constexprs(a))
                    fn = mods[a.label]

                    def launch(fn: Any = fn, args: Sequence[Any] = args,
                               kwargs: Mapping[str, Any] = kwargs) -> None:
                        fn(*args, **kwargs)

                    try:
                        t = float(statistics.median(timer(launch)))
                    except KernelpackError as e:  # a config that cannot run this shape is never chosen for it
                        t = math.inf
                        if log:
                            log(f"{a.label} {dict(shape)}: {e}")
                    if not t > 0:  # NaN, 0 or negative: the timer is broken, and its times would decide
                        raise TuningError(f"kernelpack tune: the timer gave {t} ms for {a.label} on shape "
                                          f"{dict(shape)}; kernel times are > 0")
                    times[a.label] = min(times.get(a.label, math.inf), t)
            chosen = min(times, key=lambda lb: times[lb])
            if not math.isfinite(times[chosen]):
                raise TuningError(f"kernelpack tune: no config of {name} runs shape {dict(shape)}")
            if log:
                log(f"{name} {dict(shape)}: {chosen} ({times[chosen]:.4f} ms)")
            shapes.append(TunedShape(dict(zip(problem.key, values, strict=True)), chosen, times))
        tables[name] = FamilyTable(tuple(problem.key), tuple(shapes))
    table = TuningTable(bundle_sha256(bundle), arch, device, tables)
    TuningTable.from_json(table.to_json(), "kernelpack tune")  # what the build will accept: one rule both ways
    return table


def _problem_shapes(name: str, problem: Problem) -> list[tuple[int, ...]]:
    """Each shape's key values (integers), refused before anything is timed when one is not an integer or a shape
    comes twice."""
    out: list[tuple[int, ...]] = []
    for i, shape in enumerate(problem.shapes):
        try:
            values = tuple(operator.index(shape[k]) for k in problem.key)
        except (KeyError, TypeError) as e:
            raise TuningError(f"kernelpack tune: {name} shapes[{i}] {dict(shape)}: expected an integer for each key "
                              f"argument {list(problem.key)} ({type(e).__name__}: {e})") from None
        if values in out:
            raise TuningError(f"kernelpack tune: {name} shapes[{out.index(values)}] and shapes[{i}] are the same "
                              f"shape {dict(shape)}; list each shape once")
        out.append(values)
    return out


# ------------------------------------------------------------------ kernelpack tune


def device_arch(bundle: Bundle, major: int, minor: int) -> str:
    """The bundle's arch that a device of compute capability ``major.minor`` runs, chosen as the runtime chooses
    (:func:`kernelpack.launch.binaries.best`: ``sm_90a`` before ``sm_90``, ``sm_80`` on an 8.6 device); ``sm_XY``
    when the bundle carries nothing for it."""
    targets = sorted({b.target for art in bundle for b in art.binaries}, key=str)
    at = best_binary([(t.real, t.virtual) for t in targets], major, minor)
    return str(targets[at].real) if at is not None else f"sm_{major}{minor}"


def load_problems(ref: str) -> dict[str, Problem]:
    """``FILE.py:NAME``: a dict {family: Problem} (or a function returning one)."""
    from ..frontends.refs import resolve

    obj = resolve(ref, Path.cwd(), f"problems {ref!r}")
    if callable(obj) and not isinstance(obj, Mapping):
        obj = obj()
    if not isinstance(obj, Mapping) or not all(isinstance(p, Problem) for p in obj.values()):
        raise TuningError(f"problems {ref!r}: expected a dict {{family: kernelpack.tuning.Problem}} (got "
                          f"{type(obj).__name__})")
    return {str(k): v for k, v in obj.items()}


def run_tune(bundle_path: str, problems: str, out: str, *, warmup: int = 10, reps: int = 50,
             device: int = 0, rounds: int = 3) -> Path:
    """``kernelpack tune``: time on CUDA device ``device`` (torch for the events), write the tuning file."""
    import sys

    try:
        import torch
    except ImportError:
        raise TuningError("kernelpack tune needs torch (CUDA events and the problems' tensors)") from None
    if not torch.cuda.is_available():
        raise TuningError("kernelpack tune needs a CUDA device (torch.cuda.is_available() is False)")
    torch.cuda.set_device(device)
    bundle = Bundle.read(bundle_path)
    major, minor = torch.cuda.get_device_capability(device)
    table = tune(bundle, load_problems(problems), timer=cuda_event_timer(warmup, reps),
                 arch=device_arch(bundle, major, minor), device=torch.cuda.get_device_name(device),
                 log=lambda line: print(line, file=sys.stderr), rounds=rounds)
    return table.write(out)
