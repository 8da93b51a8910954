#!/usr/bin/env python3
"""Plot the benchmark tables of docs/benchmarks.md as PNGs under docs/img/ (matplotlib, no GPU needed).

    python3 bench/plots.py [--md docs/benchmarks.md] [--out docs/img]

Charts, each drawn only when its section exists and parses (missing or reshaped sections are reported and skipped):

* ``launch_overhead.png``: a ``## Launch overhead`` section's tables with a "host-only" column: ns per launch per
  path, p25-p75 whiskers, one panel per run, kernelpack highlighted;
* ``cold_start.png``: tables with ``import``/``load``/``first launch`` columns (stacked ms per run), plus any table
  row that names a cold start (e.g. the C library's dlopen + first launch);
* ``build_times.png``: the last ``## Build times`` table (the newest run): wall seconds per build against its target.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HIGHLIGHT, OTHER = "#2a7ab0", "#b0b0b0"


@dataclass
class Table:
    caption: str  # the paragraph line just above the table ("Run 1, ...")
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def col(self, *words: str) -> int | None:
        for i, h in enumerate(self.header):
            if all(w.lower() in h.lower() for w in words):
                return i
        return None


def sections(md: str) -> dict[str, list[Table]]:
    """``## title`` -> the tables in that section, in order."""
    out: dict[str, list[Table]] = {}
    title, caption, table = None, "", None
    for raw in md.splitlines():
        line = raw.strip()
        if line.startswith("## "):
            title, table = line[3:].strip(), None
            out[title] = []
            continue
        if title is None:
            continue
        if line.startswith("|"):
            cells = [clean(c) for c in line.strip("|").split("|")]
            if table is None:
                table = Table(caption, cells)
                out[title].append(table)
            elif not all(re.fullmatch(r":?-+:?", c.replace(" ", "")) for c in cells if c):
                table.rows.append(cells)
            continue
        table = None
        if line:
            caption = line
    return out


def clean(cell: str) -> str:
    return re.sub(r"[*`]", "", cell).strip()


def number(cell: str) -> float | None:
    """The first number in a cell ("3462", "1.10", "36.51", "73.1 ms", "3,568,000 B"); None if there is none."""
    m = re.search(r"[-−]?\d[\d,]*(?:\.\d+)?", cell)
    return float(m.group(0).replace(",", "").replace("−", "-")) if m else None


def span(cell: str) -> tuple[float, float] | None:
    m = re.fullmatch(r"\s*(\d[\d,.]*)\s*[-–]\s*(\d[\d,.]*)\s*", cell)
    return (float(m.group(1).replace(",", "")), float(m.group(2).replace(",", ""))) if m else None


def find(secs: dict[str, list[Table]], pattern: str) -> list[tuple[str, list[Table]]]:
    return [(t, tabs) for t, tabs in secs.items() if re.search(pattern, t, re.IGNORECASE)]


def launch_overhead(secs: dict[str, list[Table]], plt, out: Path) -> str:  # type: ignore[no-untyped-def]
    panels = [t for _, tabs in find(secs, r"launch overhead") for t in tabs if t.col("host-only") is not None]
    if not panels:
        return "skipped launch_overhead.png: no '## Launch overhead' table with a host-only column"
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 0.42 * sum(len(t.rows) for t in panels) + 1.2 * len(panels)),
                             squeeze=False)
    for ax, t in zip(axes[:, 0], panels):
        hc, sc = t.col("host-only"), t.col("p25")
        rows = [r for r in t.rows if number(r[hc]) is not None]
        labels = [shorten(r[0]) for r in rows]
        vals = [number(r[hc]) / 1000 for r in rows]  # type: ignore[operator]
        err = None
        if sc is not None:
            spans = [span(r[sc]) for r in rows]
            if all(spans):
                err = [[v - s[0] / 1000 for v, s in zip(vals, spans)], [s[1] / 1000 - v for v, s in zip(vals, spans)]]
        colors = [HIGHLIGHT if "kernelpack" in r[0].lower() else OTHER for r in rows]
        y = range(len(rows))[::-1]
        ax.barh(list(y), vals, xerr=err, color=colors, capsize=2)
        ax.set_yticks(list(y), labels, fontsize=8)
        ax.set_xlabel("µs per launch, host-only (lower is better)")
        ax.set_title(t.caption.rstrip(":") or "launch overhead", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "launch_overhead.png", dpi=120)
    plt.close(fig)
    return f"wrote launch_overhead.png ({len(panels)} run(s))"


def cold_start(secs: dict[str, list[Table]], plt, out: Path) -> str:  # type: ignore[no-untyped-def]
    bars: list[tuple[str, list[tuple[str, float]]]] = []  # label -> stacked (part, ms)
    for title, tabs in secs.items():
        for t in tabs:
            parts = [i for i, h in enumerate(t.header) if re.search(r"import|load|first launch", h, re.IGNORECASE)
                     and "another" not in h.lower()]
            if len(parts) >= 2:
                for r in t.rows:
                    stack = [(t.header[i], ms(r[i])) for i in parts]
                    if all(v is not None for _, v in stack):
                        bars.append((f"Python runtime, 100 kernels (run {r[0]})", stack))  # type: ignore[arg-type]
                continue
            for r in t.rows:
                if re.search(r"cold start", r[0], re.IGNORECASE) and len(r) > 1 and ms(r[1]) is not None:
                    bars.append((f"{title.split('(')[0].strip()}: {r[0].replace('cold start: ', '')}",
                                 [("total", ms(r[1]))]))  # type: ignore[list-item]
    if not bars:
        return "skipped cold_start.png: no cold-start table or row"
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(bars) + 1.5))
    parts = list(dict.fromkeys(p for _, stack in bars for p, _ in stack))
    cmap = plt.get_cmap("tab10")
    for i, (_label, stack) in enumerate(bars):
        left = 0.0
        for p, v in stack:
            ax.barh(len(bars) - 1 - i, v, left=left, color=cmap(parts.index(p)),
                    label=p if i == next(j for j, (_, s) in enumerate(bars) if p in dict(s)) else None)
            left += v
        ax.text(left, len(bars) - 1 - i, f" {left:.1f} ms", va="center", fontsize=8)
    ax.set_yticks(range(len(bars))[::-1], [shorten(b[0], 60) for b in bars], fontsize=8)
    ax.set_xlabel("ms (lower is better)")
    ax.set_title("cold start: import + load + first launch", fontsize=9)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(out / "cold_start.png", dpi=120)
    plt.close(fig)
    return f"wrote cold_start.png ({len(bars)} bar(s))"


def ms(cell: str) -> float | None:
    v = number(cell)
    if v is None:
        return None
    if re.search(r"\bµs\b|\bus\b", cell):
        return v / 1000
    if re.search(r"\d\s*s\b", cell) and "ms" not in cell:
        return v * 1000
    return v


def build_times(secs: dict[str, list[Table]], plt, out: Path) -> str:  # type: ignore[no-untyped-def]
    tabs = [t for _, ts in find(secs, r"build times") for t in ts if t.col("wall") is not None]
    if not tabs:
        return "skipped build_times.png: no '## Build times' table"
    t = tabs[-1]  # the newest run
    wc, tc = t.col("wall"), t.col("target")
    rows = [r for r in t.rows if number(r[wc]) is not None]  # type: ignore[index]
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.2))
    y = list(range(len(rows)))[::-1]
    ax.barh(y, [number(r[wc]) for r in rows], color=HIGHLIGHT, log=True)  # type: ignore[index, misc]
    for yy, r in zip(y, rows):
        target = number(r[tc]) if tc is not None else None
        if target is not None:
            ax.plot([target, target], [yy - 0.4, yy + 0.4], color="#c03030", lw=2)
        ax.text(number(r[wc]), yy, f" {number(r[wc]):.2f} s", va="center", fontsize=8)  # type: ignore[arg-type, index]
    ax.set_yticks(y, [r[0] for r in rows], fontsize=8)
    ax.set_xlabel("wall seconds, log scale (red: target)")
    ax.set_title("kernelpack build: 100 specializations, -j 2", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "build_times.png", dpi=120)
    plt.close(fig)
    return "wrote build_times.png"


def shorten(s: str, n: int = 48) -> str:
    s = re.sub(r"\s*\(.*?\)", "", s) if len(s) > n else s
    return s if len(s) <= n else s[:n - 1] + "…"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--md", default=str(ROOT / "docs" / "benchmarks.md"))
    p.add_argument("--out", default=str(ROOT / "docs" / "img"))
    args = p.parse_args(argv)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench/plots.py needs matplotlib: pip install -e '.[dev]'", file=sys.stderr)
        return 1
    md = Path(args.md)
    if not md.is_file():
        print(f"no {md}: nothing to plot")
        return 0
    secs = sections(md.read_text())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for chart in (launch_overhead, cold_start, build_times):
        try:
            print(chart(secs, plt, out))
        except Exception as e:  # a reshaped table must not stop the other charts
            print(f"skipped {chart.__name__}.png: {type(e).__name__}: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
