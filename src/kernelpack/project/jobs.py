"""Build steps: a project's entries expanded into jobs (one per compile unit), their fingerprints, and running one.

A job is the smallest unit that compiles independently: a CUDA source (all its kernels, one compiler call per
arch), a Triton specialization, a cuTile signature, a CuTe variant. Jobs run in worker processes (the DSLs are not
thread-safe) and return bytes: a ``.kpack`` bundle, or a CuTe ``HostProgram`` as JSON (``HostProgram.to_bytes``).

The fingerprint of a job hashes what it is built from without compiling it: the entry's settings, the files it
reads (source, local headers, the Python modules it imports), the frontend's package versions and kernelpack's.
Equal fingerprint -> the previous output is reused; otherwise the frontend runs, and its own compile cache
(precise keys) still skips whatever did not change underneath.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import inspect
import json
import re
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cache import CompileCache
from ..errors import KernelpackError
from .deps import cuda_includes, digest_files, python_deps, tool_versions
from .model import Cuda, Cute, Cutile, Entry, Project, ProjectError, Triton, ref_file, ref_name, resolve, resolve_values


@dataclass(frozen=True)
class Job:
    id: str  # stable across builds: "triton:add[f32]"
    entry: int  # index into Project.entries
    key: str  # the variant (Triton specialization name, cuTile signature name, CuTe variant); "" if none
    index: int  # position of that variant in the entry
    frontend: str
    archs: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    """What a worker sends back (plain data: exceptions do not always pickle)."""

    job: str
    ok: bool
    kind: str = "bundle"  # "bundle" (.kpack bytes) | "host" (HostProgram.to_bytes())
    data: bytes = b""
    seconds: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    error: str = ""
    log: str = ""

    @property
    def status(self) -> str:
        if not self.ok:
            return "failed"
        return "cached" if self.cache_hits and not self.cache_misses else "compiled"


class CountingCache(CompileCache):
    """The compile cache, counting hits and misses so the progress display can say "cached"."""

    def __init__(self, root: Path | None) -> None:
        super().__init__(root)
        self.hits = self.misses = 0

    def get(self, key: str):  # type: ignore[no-untyped-def]
        entry = super().get(key)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry


# ------------------------------------------------------------------------------------------------ planning


def plan(project: Project) -> list[Job]:
    """Every job of the project, in entry order; ids are unique."""
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    for i, e in enumerate(project.entries):
        archs = project.archs_of(e)
        for n, key in enumerate(variants(e, project.root)):
            kind = "cute-host" if isinstance(e, Cute) and e.mode == "host" else e.frontend
            base = f"{kind}:{_entry_name(e, project.root)}" + (f"[{key}]" if key else "")
            seen[base] = seen.get(base, 0) + 1
            jid = base if seen[base] == 1 else f"{base}#{seen[base]}"
            jobs.append(Job(jid, i, key, n, e.frontend, archs))
    return jobs


def _entry_name(e: Entry, root: Path) -> str:
    if isinstance(e, Cuda):
        src = Path(e.source)
        try:
            return str((root / src).resolve().relative_to(root.resolve()))
        except ValueError:
            return str(src)
    name = getattr(e, "name", None)
    return name or ref_name(getattr(e, "kernel", None) or getattr(e, "function", None))


def variants(e: Entry, root: Path) -> list[str]:
    """The variant keys of an entry (one job each)."""
    if isinstance(e, Triton):
        specs = list(e.specializations) or [{}]
        if len(specs) == 1:
            return [str(specs[0].get("variant") or "")]
        from .. import triton as kt

        name = e.name or ref_name(e.kernel)
        return kt._variant_names(name, [kt._spec(s, name) for s in specs], dict(e.constexprs), e.num_warps,
                                 e.num_stages)
    if isinstance(e, Cutile):
        sigs = _cutile_signatures(e, root)
        if isinstance(sigs, Mapping):
            return list(sigs)
        return ["" if len(sigs) == 1 else f"s{i}" for i in range(len(sigs))]
    if isinstance(e, Cute):
        return list(e.variants) if e.variants else [""]
    return [""]


def _cutile_signatures(e: Cutile, root: Path) -> Any:
    sigs = resolve(e.signatures, root, "cutile signatures")
    if callable(sigs):
        sigs = sigs()
    if isinstance(sigs, (str, bytes)) or not isinstance(sigs, (Mapping, Sequence)) or not sigs:
        raise ProjectError(f"cutile entry {ref_name(e.kernel)}: signatures must be a non-empty list or dict "
                           f"(got {type(sigs).__name__})")
    return sigs


# ------------------------------------------------------------------------------------------------ fingerprints


def static_files(e: Entry, root: Path) -> list[Path]:
    """Files an entry reads, found without importing anything (references to files, CUDA headers, depends)."""
    files: list[Path] = [p for pat in e.depends for p in sorted(root.glob(pat))]
    if isinstance(e, Cuda):
        src = (root / e.source).resolve()
        try:
            text = src.read_text(errors="replace")
        except OSError:
            text = ""
        files += [src, *cuda_includes(src, text, [root / d for d in e.include_dirs])]
        return files
    for attr in ("kernel", "function", "signatures", "example_args"):
        v = getattr(e, attr, None)
        f = ref_file(v, root) if isinstance(v, str) else _object_file(v)
        if f is None and isinstance(v, str) and ":" in v:
            f = _module_file(v.partition(":")[0], root)
        if f is not None:
            files += python_deps(f, [root])
    return files


def _object_file(obj: Any) -> Path | None:
    if obj is None:
        return None
    for target in (obj, getattr(obj, "fn", None), type(obj)):
        try:
            f = inspect.getsourcefile(target)  # type: ignore[arg-type]
        except TypeError:
            continue
        if f:
            return Path(f)
    return None


def _module_file(name: str, root: Path) -> Path | None:
    import sys

    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        spec = importlib.util.find_spec(name)  # imports the parent packages: the user's code, which may raise anything
    except Exception:  # the job's own import reports it, with the traceback
        return None
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def fingerprint(project: Project, job: Job, files: Sequence[Path]) -> str:
    """``files``: what the job reads (``static_files`` of its entry, plus the defining modules of Python entries)."""
    e = project.entries[job.entry]
    blob = {"job": job.id, "key": job.key, "archs": job.archs, "entry": _settings(e),
            "files": digest_files(files), "versions": tool_versions(e.frontend)}
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()


def _settings(e: Entry) -> dict[str, Any]:
    out = {"frontend": e.frontend}
    for f in dataclasses.fields(e):
        if f.name != "_":
            out[f.name] = _stable(getattr(e, f.name))
    return out


def _stable(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, Mapping):
        return {str(k): _stable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_stable(x) for x in v]
    mod, qual = getattr(v, "__module__", None), getattr(v, "__qualname__", None)
    if mod and qual:
        return f"<{mod}:{qual}>"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(v))  # its defining file's hash covers the value


# ------------------------------------------------------------------------------------------------ running


def run(project: Project, job: Job, cache_dir: str | None) -> Outcome:
    """Compile one job; never raises (errors come back in the Outcome)."""
    cache = CountingCache(Path(cache_dir) if cache_dir else None)
    t0 = time.perf_counter()
    try:
        kind, data = _compile(project, job, cache)
    except KernelpackError as err:
        return Outcome(job.id, False, seconds=time.perf_counter() - t0, error=err.message, log=err.log or "")
    except Exception as err:  # a user's kernel module can raise anything
        return Outcome(job.id, False, seconds=time.perf_counter() - t0, error=f"{type(err).__name__}: {err}",
                       log=traceback.format_exc())
    return Outcome(job.id, True, kind, data, time.perf_counter() - t0, cache.hits, cache.misses)


def _compile(project: Project, job: Job, cache: CompileCache) -> tuple[str, bytes]:
    e, root, archs = project.entries[job.entry], project.root, list(job.archs)
    if isinstance(e, Cuda):
        from .. import cuda

        return "bundle", cuda.compile(root / e.source, e.kernels, arch=archs, options=list(e.options),
                                      defines=dict(e.defines), include_dirs=[root / d for d in e.include_dirs],
                                      maxrregcount=e.maxrregcount, lineinfo=e.lineinfo, signatures=e.signatures,
                                      compiler=e.compiler, cache=cache).to_bytes()
    if isinstance(e, Triton):
        from .. import triton as kt

        fn = resolve(e.kernel, root, f"triton kernel {e.kernel!r}")
        specs = list(e.specializations) or [{}]
        spec = {**specs[job.index], "variant": job.key} if len(specs) > 1 else dict(specs[0])
        return "bundle", kt.compile(fn, e.signature, arch=archs, constexprs=dict(e.constexprs),
                                    num_warps=e.num_warps, num_stages=e.num_stages, num_ctas=e.num_ctas,
                                    specializations=[spec], name=e.name, options=dict(e.options) or None,
                                    cache=cache).to_bytes()
    if isinstance(e, Cutile):
        from .. import cutile as kc

        kernel = resolve(e.kernel, root, f"cutile kernel {e.kernel!r}")
        sigs = _cutile_signatures(e, root)
        sig = sigs[job.key] if isinstance(sigs, Mapping) else list(sigs)[job.index]
        return "bundle", kc.compile(kernel, {job.key: sig}, arch=archs, name=e.name, cache=cache).to_bytes()
    if isinstance(e, Cute):
        return _compile_cute(e, job, root, archs)
    raise ProjectError(f"unknown entry type {type(e).__name__}")


def _compile_cute(e: Cute, job: Job, root: Path, archs: list[str]) -> tuple[str, bytes]:
    from .. import cute as kcute

    what = f"cute function {e.function!r}"
    fn = resolve(e.function, root, what)
    if inspect.isclass(fn):
        fn = fn(**resolve_values(dict(e.init), root, what))
    factory = resolve(e.example_args, root, f"cute example_args {e.example_args!r}")
    fargs = resolve_values(e.variants[job.key] if e.variants else e.args, root, what)
    args = factory(**fargs) if isinstance(fargs, Mapping) else factory(*fargs)
    if not isinstance(args, tuple):
        args = tuple(args)
    name = e.name or ref_name(e.function)
    if e.mode == "kernel":
        return "bundle", kcute.compile(fn, *args, arch=archs, name=name, variant=job.key,
                                       options=e.options).to_bytes()
    if e.mode == "host":
        program = kcute.export(fn, *args, arch=archs, name=name, variant=job.key, options=e.options,
                               zero_extent=e.zero_extent)
        return "host", program.to_bytes()
    raise ProjectError(f"cute entry {name}: mode must be 'kernel' or 'host' (got {e.mode!r})")


_LOADED: dict[str, tuple[float, Project, dict[str, Job]]] = {}


def execute(project_file: str, job_id: str, cache_dir: str | None) -> Outcome:
    """Worker entry point: load the project once per process, then run one job."""
    from .model import load_project

    mtime = Path(project_file).stat().st_mtime
    hit = _LOADED.get(project_file)
    if hit is None or hit[0] != mtime:
        try:
            project = load_project(project_file)
            hit = (mtime, project, {j.id: j for j in plan(project)})
        except Exception as err:
            return Outcome(job_id, False, error=f"loading {project_file}: {type(err).__name__}: {err}",
                           log=traceback.format_exc())
        _LOADED[project_file] = hit
    job = hit[2].get(job_id)
    if job is None:
        return Outcome(job_id, False, error=f"job {job_id} is no longer in {project_file}")
    return run(hit[1], job, cache_dir)
