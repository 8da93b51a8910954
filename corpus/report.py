"""Render the results as the table in docs/corpus.md (the text between the corpus:results markers)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from .results import Section

BEGIN, END = "<!-- corpus:results:begin -->", "<!-- corpus:results:end -->"


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else f"{n}/0"


def table(sections: list[Section]) -> str:
    rows = ["| package | DSL | defined | reached | compiled | linked | families / specializations | failures |",
            "|---|---|---|---|---|---|---|---|"]
    for s in sections:
        classes = Counter(f.reason_class for f in s.failures)
        fails = ", ".join(f"{n} {c}" for c, n in sorted(classes.items())) or "none"
        d = len(s.defined)
        rows.append(f"| {s.package} | {s.dsl} | {d} | {_pct(len(s.reached & set(s.defined)), d)} | "
                    f"{_pct(len(s.compiled & set(s.defined)), d)} | {_pct(len(s.linked & set(s.defined)), d)} | "
                    f"{s.families} / {s.specializations}{_hosts(s)} | {fails} |")
    return "\n".join(rows)


def _hosts(s: Section) -> str:
    n = getattr(s, "host_programs", 0)
    return f" ({n} host program{'s' * (n != 1)})" if n else ""


def failures(sections: list[Section]) -> str:
    out = []
    for s in sections:
        if not s.failures and not s.notes:
            continue
        out.append(f"\n#### {s.package} / {s.dsl}\n")
        out += [f"- {n}" for n in s.notes]
        by_kernel: dict[str, list[Any]] = {}
        for f in s.failures:
            by_kernel.setdefault(f.kernel, []).append(f)
        for kernel, fs in sorted(by_kernel.items()):
            first = fs[0]
            more = f" (and {len(fs) - 1} more like it)" if len(fs) > 1 and _same(fs) else ""
            if len(fs) > 1 and not _same(fs):
                out.append(f"- `{kernel or '(case)'}`:")
                out += [f"  - [{f.stage}, {f.reason_class}] {f.reason}" + (f" — {f.where}" if f.where else "")
                        for f in fs]
            else:
                where = f" — {first.where}" if first.where else ""
                out.append(f"- `{kernel or '(case)'}`: [{first.stage}, {first.reason_class}] {first.reason}{where}"
                           f"{more}")
    return "\n".join(out)


def _same(fs: list[Any]) -> bool:
    return len({(f.stage, f.reason_class, re.sub(r"\d+", "N", f.reason)[:120]) for f in fs}) == 1


def render(meta: dict[str, Any], sections: list[Section]) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in sorted(meta.get("versions", {}).items()))
    head = (f"Run: `{meta.get('command', 'scripts/corpus.py')}` ({meta.get('seconds', '?')} s on the build machine; "
            f"{versions}).\n\n")
    return f"{BEGIN}\n{head}{table(sections)}\n\n### Every failure, with its reason\n{failures(sections)}\n{END}"


def markers(package: str) -> tuple[str, str]:
    """One package's block: ``<!-- corpus:results:begin liger-kernel -->`` ... (a run of one package leaves another
    package's results in place)."""
    return f"{BEGIN[:-4]} {package} -->", f"{END[:-4]} {package} -->"


def write(path: Path, meta: dict[str, Any], sections: list[Section]) -> None:
    """Replace each package's block in ``path`` (or the unkeyed block of older files; else append one)."""
    text = path.read_text() if path.exists() else "# Conformance corpus\n"
    for package in dict.fromkeys(s.package for s in sections):
        begin, end = markers(package)
        body = render(meta, [s for s in sections if s.package == package])[len(BEGIN): -len(END)]
        block = f"{begin}{body}{end}"
        for b, e in ((begin, end), (BEGIN, END)):
            if b in text and e in text:
                text = text[: text.index(b)] + block + text[text.index(e) + len(e):]
                break
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)
