"""``kernelpack inspect``'s tables: :func:`kernelpack.cli.describe.describe` and ``device_choice`` drawn with rich."""

from __future__ import annotations

from typing import Any

from . import facts


def render_device(desc: dict[str, Any]) -> None:
    """Print :func:`device_choice` as a table: family, binary (or why none)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table("kernel", "binary", title=f"binaries a {desc['device']} device gets", title_justify="left")
    for name, c in desc["families"].items():
        if "binary" in c:
            text = c["binary"] + (" (JIT-compiled by the driver on first load)" if c["binary"].endswith("PTX") else "")
        elif "error" in c:
            text = f"{c['error']}: {c['message']}"
        else:
            text = "; ".join(f"{label}: {b}" for label, b in c["specializations"].items())
        t.add_row(escape(name), escape(text))
    Console(width=200).print(t)


def _dims(d: list[int] | None) -> str:
    return "x".join(map(str, d)) if d else "-"


RES_COLS = ("arch", "regs", "stack", "static smem", "block", "cluster", "param bytes", "dyn smem")


def _res_row(arch: str, r: dict[str, Any]) -> list[str]:
    ls = r.get("launch") or {}
    cluster = _dims(r["cluster_dims"]) + (" (explicit)" if r["explicit_cluster"] else "")
    if not r["explicit_cluster"] and ls.get("cluster"):
        cluster = f"{_dims(ls['cluster'])} (launch)"
    limit = f"<= {_dims(r['max_threads'])}" if r["max_threads"] else "any"
    block = _dims(r["reqntid"]) if r["reqntid"] else f"{_dims(ls['block'])} (fixed)" if ls.get("block") else limit
    smem = f"{r['static_smem']} (+{r['smem_reserved']} sys)" if r["smem_reserved"] else str(r["static_smem"])
    capped = r["max_registers"] and r["max_registers"] < 255
    regs = f"{r['registers']}" + (f" (cap {r['max_registers']})" if capped else "")
    return [arch, regs, str(r["stack_bytes"]), smem, block, cluster, str(r["param_bytes"]),
            str(ls.get("dynamic_smem") or 0)]


def render(desc: dict[str, Any], *, verbose: bool = False) -> None:
    """Print the description as rich tables (``verbose``: each binary's provenance and hash too)."""
    from rich.console import Console

    console = Console()
    if desc["kind"] == "cubin":
        _cubin(console, desc)
        return
    _bundle(console, desc, verbose)


def _cubin(console: Any, desc: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    console.print(f"[bold]cubin[/] {desc['arch']} (toolkit {desc['toolkit'] or 'unknown'}), "
                  f"{len(desc['kernels'])} kernel(s)")
    for k in desc["kernels"]:
        t = Table(title=escape(k["name"]), title_justify="left")
        for c in ("#", "C type", "offset", "size"):
            t.add_column(c)
        for p in k["params"]:
            t.add_row(str(p["ordinal"]), p["c_type"] or "?", str(p["offset"]), str(p["size"]))
        console.print(t)
        r = Table(*RES_COLS[:-1])
        r.add_row(*_res_row(desc["arch"], k)[:-1])
        console.print(r)


def _bundle(console: Any, desc: dict[str, Any], verbose: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    console.print(f"[bold]{desc['kind']}[/], {len(desc['artifacts'])} kernel specialization(s)")
    for a in desc["artifacts"]:
        label = f"{a['name']}[{a['variant']}]" if a["variant"] else a["name"]
        prov = a["provenance"]
        requires = ", ".join(f"{n} == {v}" for n, v in a.get("requires", {}).items())
        flags = [f for f in ("pdl", "cooperative") if (a.get("launch") or {}).get(f)]
        console.print(f"\n[bold cyan]{escape(label)}[/]  entry {escape(a['entry'])}  "
                      f"({prov['frontend']} {prov['frontend_version']})"
                      + (f"  requires {requires}" if requires else "")
                      + (f"  when {escape(', '.join(a['ranges']))}" if a.get("ranges") else "")
                      + (f"  launch flags: {', '.join(flags)}" if flags else ""), highlight=False)
        cfg = a.get("config")
        if cfg:
            knobs = [f"{k}={v}" for k, v in cfg.items() if k != "constexprs"]
            consts = [f"{k}={v!r}" for k, v in cfg["constexprs"].items()]
            console.print(f"  config: {escape(', '.join(knobs + consts))}", highlight=False)
        grid = a.get("grid")
        console.print(f"  grid: {escape(', '.join(grid))} (when the call gives none)" if grid else
                      "  grid: given by each call", highlight=False)
        lays = a.get("layouts") or [{"archs": [b["arch"] for b in a["binaries"]], "params": a["params"]}]
        for i, lay in enumerate(lays):
            cubins = [b for b in a["binaries"] if b["kind"] == "cubin" and b.get("layout", 0) == i]
            title = f"parameters of {', '.join(lay['archs'])}" if len(lays) > 1 else None
            t = Table("#", "name", "C type", "size", *[f"offset {b['arch']}" for b in cubins], title=title,
                      title_justify="left")
            for j, p in enumerate(lay["params"]):
                extra = f" /{p['divisibility']}" if p["divisibility"] > 1 else ""
                hidden = "" if p["role"] == "arg" else f" ({p['role']})"
                t.add_row(str(j), escape(p["name"] + hidden), escape(p["c_type"] + extra), str(p["size"]),
                          *[str(b["offsets"][j]) for b in cubins])
                for f in _flat_fields(p.get("fields") or []):
                    t.add_row("", escape(f"  .{f['name']}"), escape(f["c_type"]), str(f["size"]),
                              *[f"+{f['offset']}" for _ in cubins])
            console.print(t)
        r = Table(*RES_COLS, "bytes")
        for b in a["binaries"]:
            if b["kind"] == "cubin":
                r.add_row(*_res_row(b["arch"], b), str(b["bytes"]))
            else:
                r.add_row(b["target"] + " PTX", *["-"] * (len(RES_COLS) - 1), str(b["bytes"]))
        console.print(r)
        if verbose:
            opts = " ".join(prov.get("options") or []) or "-"
            console.print(f"  compiler {escape(str(prov.get('compiler') or '?'))}; options {escape(opts)}; source "
                          f"sha256 {prov.get('source_sha256') or '-'}", highlight=False)
            for b in a["binaries"]:
                console.print(f"  {b['target'] if b['kind'] == 'ptx' else b['arch']} {b['kind']} sha256 {b['sha256']}",
                              highlight=False)
    _dispatch(console, desc.get("families") or [])
    lines = facts.device_lines(desc.get("devices") or [])
    if lines:
        console.print("\n[bold]GPUs[/] (which binary each device gets, by the launch model's rule; "
                      "`kernelpack inspect FILE --device sm_XY` for one):", highlight=False)
        for line in lines:
            console.print(f"  {escape(line)}", highlight=False)


def _flat_fields(fields: list[dict[str, Any]], prefix: str = "", base: int = 0) -> list[dict[str, Any]]:
    """A struct's fields, nested ones flattened (``t.shape.0``) with offsets from the struct's start."""
    out = []
    for f in fields:
        name, off = f"{prefix}{f['name']}", base + f["offset"]
        if f.get("fields"):
            out += _flat_fields(f["fields"], f"{name}.", off)
        else:
            out.append({**f, "name": name, "offset": off})
    return out


def _dispatch(console: Any, families: list[dict[str, Any]]) -> None:
    """The families of more than one specialization, each with its dispatch order."""
    from rich.markup import escape

    several = [f for f in families if len(f.get("order", ())) > 1 or "error" in f]
    if not several:
        return
    console.print("\n[bold]dispatch order[/] (a launch runs the first specialization its arguments satisfy; on a "
                  "device, among equals, the better binary):", highlight=False)
    for f in several:
        if "error" in f:
            console.print(f"  {escape(f['name'])}: {escape(f['error'])}", highlight=False)
            continue
        console.print(f"  {escape(f['name'])}:", highlight=False)
        for i, row in enumerate(f["order"], 1):
            when = "; ".join(row["when"]) or "any arguments the signature takes"
            console.print(f"    {i}. {escape(row['label'])}: {escape(when)}", highlight=False)
