"""bench/plots.py: parses benchmark tables, draws what exists, skips what is missing or reshaped."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _plots():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("kp_bench_plots", ROOT / "bench" / "plots.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # (dataclasses look their module up)
    spec.loader.exec_module(mod)
    return mod


MD = """# Benchmarks
## Launch overhead (Python)
Run 1:

| path | host-only ns | × raw C | p25-p75 | min | steady ns |
|---|---:|---:|---:|---:|---:|
| raw C | 3118 | 1.00 | 3047-3323 | 2920 | 3023 |
| **kernelpack** (C extension) | **3462** | **1.11** | 3368-3695 | 3201 | 3395 |

## Something else
| a | b |
|---|---|
| x | not a number |
"""


def test_tables_parse() -> None:
    p = _plots()
    secs = p.sections(MD)
    (t,) = secs["Launch overhead (Python)"]
    assert t.caption == "Run 1:" and t.header[1] == "host-only ns" and t.rows[1][0] == "kernelpack (C extension)"
    assert p.number("3,568,000 B") == 3568000 and p.span("3047-3323") == (3047, 3323) and p.ms("1.5 s") == 1500


def test_draws_what_exists_and_skips_the_rest(tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    p = _plots()
    md = tmp_path / "b.md"
    md.write_text(MD)
    assert p.main(["--md", str(md), "--out", str(tmp_path / "img")]) == 0
    out = capsys.readouterr().out
    assert "wrote launch_overhead.png" in out and "skipped cold_start.png" in out and "skipped build_times.png" in out
    assert (tmp_path / "img" / "launch_overhead.png").stat().st_size > 1000
    assert p.main(["--md", str(tmp_path / "missing.md"), "--out", str(tmp_path / "img")]) == 0


def test_the_benchmarks_page_gives_every_plot_its_table_and_its_links_resolve() -> None:
    """docs/benchmarks.md (today's figures) keeps the tables bench/plots.py draws the page's three images from, and its
    links to the history and the images resolve."""
    p = _plots()
    page = ROOT / "docs" / "benchmarks.md"
    secs = p.sections(page.read_text())
    overhead = [t for _, ts in p.find(secs, r"launch overhead") for t in ts if t.col("host-only") is not None]
    assert len(overhead) == 1 and any("kernelpack" in r[0] for r in overhead[0].rows)
    assert [t for _, ts in p.find(secs, r"build times") for t in ts if t.col("wall") is not None]
    cold = [r for ts in secs.values() for t in ts for r in t.rows if "cold start" in r[0]]
    assert cold and all(p.ms(r[1]) is not None for r in cold)
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        assert (page.parent / target).exists(), f"benchmarks.md: broken link {target}"
