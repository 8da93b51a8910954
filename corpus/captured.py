"""A package's corpus through the product: its script of calls (``corpus/*.toml``, ``corpus.cases``) run under
``kernelpack.capture`` (no GPU: CPU tensors stand in, device queries answered for an H200), the project written and
built by ``kernelpack build -k``; then what the corpus reports -- per DSL, the kernels the package defines, reached,
compiled and linked, every failure classified -- and the manifest the GPU run reads.

Nothing here knows a package: the package's cases, its inventory of defined kernels and its library name are the
arguments. Cases marked for another GPU (``device = "b200"``: a path the package takes on Blackwell only) are
captured for that device into the same project; their families are built for its arch.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cases import Case, run_case, tag
from .results import CAPTURE, DSL, KERNELPACK, LINK, NOT_REACHED, Section

DEVICE = "h200"
DSL_LIMIT = {"triton": "Triton failed", "cutile": "cuTile failed", "cute": "CuTe compile for"}


@dataclass
class Captured:
    """One package captured and built."""

    project: Path
    state: dict[str, Any]  # capture.json
    report: Any  # kernelpack.project.BuildReport (None when the build failed whole)
    launches: list[Any] = field(default_factory=list)  # kernelpack.capture.Launch, with their payloads
    skipped: list[Any] = field(default_factory=list)
    error: str = ""  # the build's own failure
    seconds: float = 0.0

    @property
    def families(self) -> list[dict[str, Any]]:
        return list(self.state.get("families", []))


def capture_and_build(cases: Sequence[Case], project: Path, archs: Sequence[str], jobs: int,
                      progress: Callable[[str], None] = print, out: Path | None = None) -> Captured:
    """Run ``cases`` under one capture per device they name (merged into a fresh ``project``), write it, build it
    (into ``out``, default the project's ``build/``)."""
    import shutil

    import kernelpack.capture as kc
    from kernelpack.core.errors import KernelpackError
    from kernelpack.project import build

    t0 = time.time()
    prefer_pip_tileiras()
    shutil.rmtree(project, ignore_errors=True)
    launches: list[Any] = []
    skipped: list[Any] = []
    by_device: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        by_device[c.device or DEVICE].append(c)
    for device in sorted(by_device, key=lambda d: d != DEVICE):
        cap = kc.capture(device=device)
        with cap:
            for case in by_device[device]:
                cap.interpret.update(case.interpret)
                for point in case.points():
                    cap.run(f"{case.id}[{tag(point)}]", lambda c=case, p=point: run_case(c, p))
        progress(f"captured {len(cap.launches)} launches for {device} in {cap.seconds:.1f} s "
                 f"({len(cap.skipped)} skipped)")
        cap.write_project(project, name=project.parent.name, command=f"corpus cases for {device}",
                          archs=list(archs), progress=progress)
        launches += cap.launches
        skipped += cap.skipped
    state = json.loads((project / "capture.json").read_text())
    got = Captured(project, state, None, launches, skipped)
    try:
        got.report = build(project, jobs=jobs, keep_going=True, out=out)
    except KernelpackError as e:
        got.error = e.message
    got.seconds = time.time() - t0
    return got


def prefer_pip_tileiras() -> None:
    """cuTile looks for its pip ``tileiras`` under ``nvidia.cu13.__path__[0]`` only; another wheel's
    ``nvidia/cu13`` earlier on sys.path (nvidia-curand's, next to a ``--no-deps`` package install) hides it. Put the
    directory that has ``bin/tileiras`` first (this process only)."""
    try:
        import nvidia.cu13 as cu13
    except ImportError:
        return
    paths = list(cu13.__path__)
    good = [p for p in paths if (Path(p) / "bin" / "tileiras").exists()]
    if good and paths[0] != good[0]:
        cu13.__path__ = [good[0], *(p for p in paths if p != good[0])]


def _classify(dsl: str, why: str) -> str:
    return DSL if DSL_LIMIT.get(dsl, "\0") in why else KERNELPACK


def sections(package: str, got: Captured, defined: dict[str, list[str]], notes: dict[str, list[str]],
             cute_name: Callable[[Any], str] | None = None, not_reached: bool = True) -> dict[str, Section]:
    """Per DSL: what the package defines (``defined``), what the capture reached, what compiled and linked (and,
    with ``not_reached``, every defined kernel no case launched, as a failure)."""
    secs = {d: Section(package, d, defined=list(names), notes=list(notes.get(d, []))) for d, names in defined.items()}
    kernel_of: dict[str, tuple[str, str]] = {}
    names = {**_cutile_names(got), **_cute_names(got, cute_name)}
    for f in got.families:
        kernel = names.get(f["name"], f["kernel"])
        kernel_of[f["name"]] = (f["dsl"], kernel)
        sec = secs.setdefault(f["dsl"], Section(package, f["dsl"]))
        sec.reached.add(kernel)
        if f["dsl"] == "cute" and f.get("error"):
            sec.fail(kernel, "compile", _classify("cute", f["error"]), f["error"], f["name"])
    for s in got.skipped:
        dsl = next((d for d in DSL_LIMIT if s.what.startswith(f"{d} kernel ")), "")
        for sec in ([secs[dsl]] if dsl in secs else list(secs.values())[:1]):
            sec.fail(s.what.split(" ", 2)[-1] if dsl else "", "capture", CAPTURE if not dsl else KERNELPACK, s.why,
                     s.source)
    ok: dict[tuple[str, str], bool] = defaultdict(lambda: True)
    if got.report is not None:
        for job, why in got.report.failed.items():
            fam = job.split(":", 1)[1].split("[")[0]
            dsl, kernel = kernel_of.get(fam, (job.split(":")[0], fam))
            ok[(dsl, kernel)] = False
            secs[dsl].fail(kernel, "compile", _classify(dsl, why), why, job)
    for f in got.families:
        dsl, kernel = kernel_of[f["name"]]
        if f["dsl"] == "cute" and not f.get("prebuilt"):
            ok[(dsl, kernel)] = False
    for dsl, sec in secs.items():
        if got.report is None:
            sec.fail("", "link", LINK, got.error)
            continue
        sec.compiled = {k for k in sec.reached if ok[(dsl, k)]}
        sec.linked = set(sec.compiled)
        fams = [f for f in got.families if f["dsl"] == dsl and ok[kernel_of[f["name"]]]]
        sec.families = len({f["name"] for f in fams if not str(f.get("prebuilt", "")).endswith(".kphost")})
        sec.host_programs = sum(1 for f in fams if str(f.get("prebuilt", "")).endswith(".kphost"))
        sec.specializations = sum(1 for r in got.report.rows if r.kernel.split("[")[0].split(" (")[0] in
                                  {f["name"] for f in fams}) + sec.host_programs
        for k in sec.defined if not_reached else ():
            if k not in sec.reached:
                sec.fail(k, "capture", NOT_REACHED, "no corpus case launches it")
        sec.seconds = got.seconds
    return secs


def _cutile_names(got: Captured) -> dict[str, str]:
    """cuTile family -> ``module:function`` of its kernel (a module attribute may hold it with other hints:
    ``_dyt_bwd_kernel_nww8 = _dyt_bwd_kernel.replace_hints(...)``; the inventory names the function)."""
    from kernelpack.capture.records import stable

    by_key = {stable(la.family): la for la in got.launches if la.dsl == "cutile"}
    return {f["name"]: f"{f['kernel'].rsplit(':', 1)[0]}:{by_key[stable(f['key'])].name}" for f in got.families
            if f["dsl"] == "cutile" and stable(f["key"]) in by_key}


def _cute_names(got: Captured, cute_name: Callable[[Any], str] | None) -> dict[str, str]:
    """CuTe family -> the inventory's name of its launcher (by the ``cute.compile`` call site)."""
    if cute_name is None:
        return {}
    from kernelpack.capture.records import stable

    by_key = {stable(la.family): la for la in got.launches if la.dsl == "cute"}
    return {f["name"]: cute_name(by_key[stable(f["key"])].payload) for f in got.families
            if f["dsl"] == "cute" and stable(f["key"]) in by_key}


# ------------------------------------------------------------------------------------------ the GPU run's manifest


def manifest(got: Captured, bundle: Any, programs: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per built specialization (and CuTe family), as ``corpus.gpu_check.read_manifest`` reads them: the
    family key the GPU run matches a live launch with (Triton), the recorded launch it replays (cuTile, CuTe)."""
    from kernelpack.capture.records import stable

    arts: dict[str, list[Any]] = defaultdict(list)
    for a in bundle or ():
        arts[a.name].append(a)
    by_key = {(la.dsl, stable(la.family), stable(la.variant)): la for la in got.launches}
    out = []
    for f in got.families:
        for s in f["specs"]:
            la = by_key.get((f["dsl"], stable(f["key"]), stable(s["key"])))
            entry: dict[str, Any] = {"dsl": f["dsl"], "kernel": _qualname(f, la), "family": f["name"],
                                     "sources": s["sources"], "key": json.dumps({"f": _family_key(f, la)},
                                                                                sort_keys=True, default=repr)}
            if f["dsl"] == "cute":
                prog = programs.get(f["name"])
                mine = arts.get(f["name"], [])
                entry.update(variant="", compiled=bool(mine or prog))
                if prog is not None:
                    entry["host_program"] = {"name": prog.name, "variant": prog.variant,
                                             "params": [p.name for p in prog.params],
                                             "archs": [str(o.arch) for o in prog.objects]}
                else:
                    entry["artifacts"] = [_artifact(a) for a in mine]
                if la is not None and (mine or prog):
                    entry["launch"] = _cute_launch(la, mine, prog)
                out.append(entry)
                continue
            mine = [a for a in arts.get(f["name"], []) if a.variant == s["variant"] or
                    a.variant.startswith(f"{s['variant']}_c")]
            entry.update(variant=mine[0].variant if mine else s["variant"], compiled=bool(mine),
                         artifacts=[_artifact(a) for a in mine])
            if f["dsl"] == "cutile" and la is not None and mine:
                entry["launch"] = _cutile_launch(la)
            out.append(entry)
    return out


def _qualname(f: dict[str, Any], la: Any) -> str:
    """The kernel as the GPU run names a live launch: ``module:function`` of the JIT function (or cuTile kernel)."""
    if la is not None and f["dsl"] == "triton":
        jit = la.payload["jit"]
        return f"{jit.__module__}:{jit.__name__}"
    return str(f["kernel"])


def _family_key(f: dict[str, Any], la: Any) -> dict[str, Any]:
    """The family's constexprs and options as a launch gives them (an autotuned family: its config's too)."""
    key = f["key"]
    if f["dsl"] != "triton":
        return dict(key)
    consts, opts = dict(key.get("constexprs", {})), dict(key.get("options", {}))
    config = _config(f["kernel"], la.chosen) if la is not None and la.chosen else None
    if config is not None:
        consts.update(config.kwargs)
        opts.update({k: getattr(config, k) for k in ("num_warps", "num_stages") if getattr(config, k, None)})
    return {"args": key.get("params", []), "scalars": key.get("scalars", {}), "constexprs": consts, "options": opts}


def _config(ref: str, name: str) -> Any:
    from kernelpack.frontends.refs import resolve

    try:
        tuner = resolve(ref, Path.cwd(), "autotuned kernel")
        return tuner.configs[int(name[1:])]
    except Exception:  # noqa: BLE001 - the manifest then matches on the family's own constexprs
        return None


def _artifact(a: Any) -> dict[str, Any]:
    return {"name": a.name, "variant": a.variant, "entry": a.entry, "abi": a.abi.describe(),
            "archs": [str(x) for x in a.archs]}


def _cutile_launch(la: Any) -> dict[str, Any]:
    """The recorded launch as the GPU run rebuilds it: the grid, and per flat ABI argument a tensor's dtype, shape
    and strides (elements) or a scalar's value (``ct.Constant`` parameters are baked: left out)."""
    import inspect

    kernel = la.payload["kernel"]
    af = getattr(kernel, "_annotated_function", None)
    pyfunc = af.pyfunc if af is not None else kernel
    names = list(inspect.signature(pyfunc).parameters)
    args: list[dict[str, Any]] = []

    def flat(annotation: Any, value: Any) -> None:
        if annotation is not None and "Constant" in repr(annotation):
            return
        if hasattr(value, "shape") and hasattr(value, "stride"):
            args.append({"dtype": str(value.dtype).removeprefix("torch."), "shape": list(value.shape),
                         "stride": list(value.stride())})
            args.extend({"value": int(x)} for x in (*value.shape, *value.stride()))
        elif isinstance(value, (tuple, list)):
            for v in value:
                flat(None, v)
        else:
            args.append({"value": value if isinstance(value, (bool, int, float)) or value is None else repr(value)})

    for n, v in zip(names, la.payload["args"]):
        flat(pyfunc.__annotations__.get(n), v)
    return {"grid": list(la.grid), "args": args}


def _cute_launch(la: Any, arts: list[Any], program: Any) -> dict[str, Any]:
    from . import cute_launch

    p = la.payload
    compiled: Any = program
    if program is None:
        from kernelpack.bundle.kpack import Bundle

        compiled = Bundle(tuple(arts))
    try:
        call = cute_launch.describe_call(*p["call"]) if p.get("call") else None
        host = cute_launch.host_values(p["fn"], p["args"], _param_names(p["fn"], len(p["args"])), call)
        return cute_launch.describe_launch(host, compiled, la.kernel)
    except Exception as e:  # noqa: BLE001 - the GPU run then reports this entry as not launched
        return {"error": f"{type(e).__name__}: {e}"}


def _param_names(fn: Any, n: int) -> list[str]:
    import inspect

    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__ if callable(fn) else fn
    try:
        names = [p for p in inspect.signature(target).parameters if p != "self"]
    except (TypeError, ValueError):
        names = []
    return (names + [f"a{i}" for i in range(len(names), n)])[:n]
