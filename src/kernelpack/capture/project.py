"""Write a captured project: ``kernelpack.toml``, the example-arguments module, ``capture.json``.

``capture.json`` keeps every family and specialization found so far (with the calls, grids and runs that found
them): capturing again into the same directory merges into it -- the union of specializations, names kept, nothing
twice -- and ``kernelpack.toml`` and ``capture_args.py`` are written again from it. ``[library]`` of an existing
``kernelpack.toml`` is kept (edit its name, archs or outputs freely); the entries are rewritten.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..bundle.kpack import write_atomic
from ..core.errors import KernelpackError
from ..core.version import __version__
from .families import Family, merge
from .records import Launch, Skip, stable
from .values import HEADER

STATE = "capture.json"
ARGS = "capture_args.py"
TOML = "kernelpack.toml"
MEASURED = "tuning-measured.json"
FORMAT = 1
PREFIX = {"cute": "cute_"}  # a CuTe family is one launcher compiled one way: say so in its name


@dataclass
class Written:
    """What :func:`write` wrote: the project directory and its families, counted."""

    root: Path
    families: list[Family] = field(default_factory=list)
    new_families: int = 0
    new_specs: int = 0

    @property
    def specializations(self) -> int:
        return sum(len(f.specs) for f in self.families)


def _read_state(root: Path) -> dict[str, Any]:
    path = root / STATE
    if not path.exists():
        return {"format": FORMAT, "runs": [], "families": []}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise KernelpackError(f"{path}: cannot read the earlier capture ({e}); move it away to start afresh") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise KernelpackError(f"{path}: not a capture state of format {FORMAT}; move it away to start afresh")
    return data


def write(root: str | os.PathLike[str], launches: list[Launch], skipped: list[Skip], run: dict[str, Any], *,
          name: str | None = None, archs: list[str] | None = None,
          progress: Callable[[str], None] | None = None) -> Written:
    """Merge ``launches`` into the project at ``root`` (made if missing) and write its files."""
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    state = _read_state(root)
    old = [Family.from_json(f) for f in state["families"]]
    before = {(f.dsl, json.dumps(f.key, sort_keys=True)): len(f.specs) for f in old}
    rel = [_relative(la, root) for la in launches]
    fams = merge(old, rel, prefix=PREFIX)
    library = _library(root, name, archs, state)
    _compile_cute(fams, launches, root, list(library["archs"]), progress)
    _compile_live_cutile(fams, launches, root, list(library["archs"]), progress)
    _write_native(launches, root)
    out = Written(root, fams)
    out.new_families = len(fams) - len(old)
    out.new_specs = sum(len(f.specs) for f in fams) - sum(before.values())
    state["runs"].append({**run, "launches": len(launches), "skipped": [s.line() for s in skipped]})
    state["families"] = [f.to_json() for f in fams]
    state["library"] = library
    _atomic(root / ARGS, args_module(fams))
    _atomic(root / TOML, toml(fams, library, state["runs"]))
    measured = _measured(fams)
    if measured:
        _atomic(root / MEASURED, json.dumps(measured, indent=1, sort_keys=True) + "\n")
    _atomic(root / STATE, json.dumps(state, indent=1, sort_keys=True, default=repr) + "\n")
    return out


def _compile_cute(fams: list[Family], launches: list[Launch], root: Path, archs: list[str],
                  progress: Callable[[str], None] | None) -> None:
    """Compile each CuTe family not compiled yet, from a launch of this capture (its Python objects live now)."""
    from .cute import compile_family

    payloads = {stable(la.family): la.payload for la in launches if la.dsl == "cute" and la.payload}
    for f in fams:
        if f.dsl != "cute" or f.prebuilt or stable(f.key) not in payloads:
            continue
        if progress is not None:
            progress(f"compiling CuTe launcher {f.name} for {', '.join(archs)}")
        try:
            path = compile_family(payloads[stable(f.key)], f.name, _targets(f, archs), root / "cute")
            f.prebuilt, f.error = path.relative_to(root).as_posix(), ""
        except KernelpackError as e:
            f.error = " ".join(e.message.split())[:600]
        except Exception as e:  # noqa: BLE001 - the DSL failed on the recorded call: the family says why
            f.error = f"{type(e).__name__}: {' '.join(str(e).split())[:600]}"


def _compile_live_cutile(fams: list[Family], launches: list[Launch], root: Path, archs: list[str],
                         progress: Callable[[str], None] | None) -> None:
    """Compile the specializations of each cuTile family no project file can name (its kernel made in a function, or
    given other hints) from this capture's launches, while the kernel objects live, into ``cutile/NAME.kpack``
    (what an earlier capture compiled is kept, new specializations added)."""
    from ..bundle.kpack import Bundle
    from ..frontends.cutile.compile import compile as compile_cutile

    for f in fams:
        if f.dsl != "cutile" or not f.options.get("live"):
            continue
        path = root / "cutile" / f"{f.name}.kpack"
        old = Bundle.read(path) if f.prebuilt and path.exists() else None
        have = {a.variant for a in old} if old is not None else set()
        calls: dict[str, Any] = {}
        kernel = None
        for la in launches:
            if la.dsl != "cutile" or stable(la.family) != stable(f.key) or not la.payload:
                continue
            spec = next((s for s in f.specs if stable(s.key) == stable(la.variant)), None)
            if spec is not None and spec.variant not in have and spec.variant not in calls:
                calls[spec.variant] = list(la.payload["args"])
                kernel = la.payload["kernel"]
        if not calls:
            continue
        if progress is not None:
            progress(f"compiling cuTile kernel {f.name} ({len(calls)} specialization(s)) for {', '.join(archs)}")
        try:
            new = compile_cutile(kernel, arch=_targets(f, archs), example_args=calls, name=f.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            (Bundle.of(old, new) if old is not None else new).write(path)
            f.prebuilt, f.error = path.relative_to(root).as_posix(), ""
        except KernelpackError as e:
            f.error = " ".join(e.message.split())[:600]
        except Exception as e:  # noqa: BLE001 - cuTile failed on the recorded call: the family says why
            f.error = f"{type(e).__name__}: {' '.join(str(e).split())[:600]}"


def _write_native(launches: list[Launch], root: Path) -> None:
    """The cubins of the native kernels captured, under native/ (named by their bytes: a file written once)."""
    for la in launches:
        if la.dsl != "native" or not la.payload:
            continue
        for rel, data in la.payload.items():
            if not (root / rel).exists():
                write_atomic(root / rel, data)


def _targets(f: Family, library: list[str]) -> list[str]:
    """What a family is built for: the library's archs, or the archs of the devices it was captured for when none of
    those is one of the library's (a path the package takes on another GPU only)."""
    return list(library) if not f.archs or set(f.archs) & set(library) else list(f.archs)


def _relative(la: Launch, root: Path) -> Launch:
    """A kernel in a file (a script) is referenced relative to the project, as project files reference files."""
    mod, _, attr = la.kernel.rpartition(":")
    if not os.path.isabs(mod):
        return la
    from dataclasses import replace

    kernel = f"{Path(os.path.relpath(mod, root)).as_posix()}:{attr}"
    return replace(la, kernel=kernel, family={**la.family, "kernel": kernel})


def _library(root: Path, name: str | None, archs: list[str] | None, state: dict[str, Any]) -> dict[str, Any]:
    """``[library]``: an existing ``kernelpack.toml``'s (its name and archs win unless given now), else new."""
    lib: dict[str, Any] = dict(state.get("library") or {})
    path = root / TOML
    if path.exists():
        from ..project.model import read_toml

        try:
            lib = dict(read_toml(path).get("library") or lib)
        except (KernelpackError, ValueError):  # unreadable or not TOML: the state's [library] stands
            pass
    if name:
        lib["name"] = name
    lib.setdefault("name", _library_name(root))
    lib.setdefault("archs", list(archs or ["sm_90a"]))
    return lib


def _library_name(root: Path) -> str:
    from .records import short_name

    n = short_name(root.name).lower()
    return n if n[:1].isalpha() else f"k{n}"


def _atomic(path: Path, text: str) -> None:
    write_atomic(path, text.encode())


def args_module(fams: list[Family]) -> str:
    imports: set[str] = set()
    body: list[str] = []
    for f in fams:
        for s in f.specs:
            imports.update(s.imports)
        if f.dsl in ("cute", "native") or f.options.get("live"):  # compiled already: no arguments to write
            continue
        body.append(f"\n\ndef {f.name}():")
        body.append("    return {")
        for s in f.specs:
            body.append(f"        {s.variant!r}: {s.call},")
        body.append("    }")
    head = ['"""Example arguments of the kernels `kernelpack capture` recorded: one function per family of',
            'kernelpack.toml, returning {specialization: the arguments of one call}. Written by kernelpack capture',
            '(capture again to add calls; edits here are overwritten)."""', ""]
    head += [HEADER[k] for k in sorted(imports) if k in HEADER]
    return "\n".join(head) + "\n" + "\n".join(body) + "\n"


def _toml_str(v: Any) -> str:
    return json.dumps(v)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise KernelpackError(f"{v!r} has no TOML form")


def toml(fams: list[Family], library: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    archs = list(library.get("archs", []))
    lines = [f"# Written by `kernelpack capture` (kernelpack {__version__}) from {len(runs)} run(s) (capture.json",
             "# lists them). Capture again to add calls: [library] is kept, the entries are written again.",
             "[library]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in library.items()]
    for f in fams:
        entry = _entry(f)
        if f.dsl != "cute" and _targets(f, archs) != archs and any(x.startswith("[[") for x in entry):
            entry.append(f"archs = {_toml_value(_targets(f, archs))}")
        lines += ["", *(_comment(x) if x.startswith("#") else x for x in entry)]
    return "\n".join(lines) + "\n"


_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]+")


def _comment(line: str) -> str:
    """A comment line as TOML allows it: the names, errors and call sites it quotes are data, so a line break or other
    control character in them becomes a space (else the rest of the line would be read as TOML)."""
    return _CONTROL.sub(" ", line)


def _entry(f: Family) -> list[str]:
    specs = ", ".join(f"{s.variant} ({s.launches})" for s in f.specs)
    out = [f"# {f.name}: {f.launches} launch(es); specializations {specs}"]
    if f.dsl == "triton":
        grid, why = f.grid()
        chosen = sorted({c for s in f.specs for c in s.chosen})
        if f.configs:
            out.append(f"# autotuned: configs {', '.join(f.configs)} built; runs launched {', '.join(chosen)}")
        if grid is None:
            out.append(f"# grid: {why}; captured: " + "; ".join(
                f"{s.variant} {tuple(x['grid'])}" for s in f.specs for x in s.samples[:2]))
        out += ["[[triton]]", f"name = {_toml_str(f.name)}", f"kernel = {_toml_str(f.kernel)}",
                f"example_args = {_toml_str(f'{ARGS}:{f.name}')}"]
        opts = dict(f.options)
        for k in ("num_warps", "num_stages", "num_ctas"):
            if k in opts:
                out.append(f"{k} = {_toml_value(opts.pop(k))}")
        if opts:
            out.append(f"options = {_toml_value(opts)}")
        if f.configs:
            out.append(f"autotune = {_toml_value(f.configs)}")
        if grid is not None:
            out.append(f"grid = {_toml_value(grid)}")
    elif f.dsl == "native":
        seen = [x for s in f.specs for x in s.samples]
        out.append(f"# {f.kernel} from {f.options.get('from', '?')}: its host code computes each launch; captured: "
                   + "; ".join(_native_launch(x) for x in seen[:4]) + (" ..." if len(seen) > 4 else ""))
        out += ["[[cubin]]", f"files = {_toml_value(list(f.options.get('files', [])))}",
                f"kernels = {_toml_value({f.kernel: {'name': f.name}})}"]
    elif f.dsl == "cutile":
        out.append("# grid: the wrapper computes it; captured: " + "; ".join(
            f"{s.variant} {tuple(x['grid'])}" for s in f.specs for x in s.samples[:2]))
        if f.options.get("live"):
            if f.error or not f.prebuilt:
                return [*out, f"# {f.name}: {f.kernel} ({f.key.get('made', '')}) could not be compiled: "
                              f"{f.error or 'no launch of this capture recorded it'}"]
            return [*out, f"# {f.kernel}, made as ({f.key.get('made', '')}): no project file can name it; "
                          f"compiled by kernelpack capture (capture again to rebuild it)",
                    "[[cutile]]", f"name = {_toml_str(f.name)}", f"prebuilt = {_toml_str(f.prebuilt)}"]
        out += ["[[cutile]]", f"name = {_toml_str(f.name)}", f"kernel = {_toml_str(f.kernel)}",
                f"example_args = {_toml_str(f'{ARGS}:{f.name}')}"]
    else:
        if f.error or not f.prebuilt:
            return [f"# {f.name}: {f.kernel} ({f.options.get('site', '')}) could not be compiled: "
                    f"{f.error or 'no launch of this capture recorded it'}"]
        out = [f"# {f.name}: {f.kernel}, compiled by kernelpack capture from the call at {f.options.get('site')} "
               f"(capture again to rebuild it)", "[[cute]]", f"name = {_toml_str(f.name)}",
               f"prebuilt = {_toml_str(f.prebuilt)}"]
    return out


def _native_launch(sample: dict[str, Any]) -> str:
    c = sample.get("consts", {})
    text = f"grid {tuple(sample['grid'])} block {tuple(c.get('block', ()))} smem {c.get('smem', 0)}"
    return text + (f" cluster {tuple(c['cluster'])}" if c.get("cluster", [1, 1, 1]) != [1, 1, 1] else "")


def _measured(fams: list[Family]) -> dict[str, Any]:
    """What autotuners measured on a GPU, per family: the key of each measured call, the chosen config and every
    config's time (``kernelpack tune --measured`` turns it into a tuning table for the built bundle)."""
    out: dict[str, Any] = {}
    for f in fams:
        shapes = []
        for s in f.specs:
            for m in s.measured:
                times: dict[str, float] = m.get("timings_ms") or {}
                if times:
                    shapes.append({"specialization": s.variant, "shape": m.get("key", {}),
                                   "chosen": min(times, key=lambda c: times[c]), "timings_ms": times})
        if shapes:
            out[f.name] = {"configs": f.configs, "shapes": shapes}
    return out
