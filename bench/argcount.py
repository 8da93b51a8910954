"""Kernels with 0, 4, 19 and 64 parameters for the launch-cost-vs-argument-count rows.

Parameter ``i`` of kernel ``argsN`` (N >= 1): ``float* out`` at 0, then by ``i % 4``: 1 a ``const float*``, 2 an
``int``, 3 a ``float`` (a ``long long`` when ``i % 8 == 7``), 0 a ``const float*`` -- half pointers, half scalars, as
in real elementwise/attention kernels. Thread 0 of block 0 writes the sum of every input's first element and every
scalar to ``out[0]``; the arguments :func:`arguments` makes give :func:`expected` (exact in float32).

Used by bench/launch_overhead.py and bench/launch_instructions.py; `scripts/gpu.py prepare launchcost` compiles
:func:`source` into ``.gpu/launchcost/``.
"""

from __future__ import annotations

from typing import Any

COUNTS = (0, 4, 19, 64)
ELEMS = 16  # elements of each pointer argument's buffer


def kinds(n: int) -> list[str]:
    """The parameter kinds of ``args{n}``: 'out', 'in' (const float*), 'i32', 'f32', 'i64'."""
    out = []
    for i in range(n):
        if i == 0:
            out.append("out")
        elif i % 4 in (0, 1):
            out.append("in")
        elif i % 4 == 2:
            out.append("i32")
        else:
            out.append("i64" if i % 8 == 7 else "f32")
    return out


_CTYPE = {"out": "float* p{i}", "in": "const float* __restrict__ p{i}", "i32": "int p{i}", "f32": "float p{i}",
          "i64": "long long p{i}"}
_TERM = {"in": "p{i}[0]", "i32": "(float)p{i}", "f32": "p{i}", "i64": "(float)p{i}"}


def source() -> str:
    """CUDA C++ source of ``args0``, ``args4``, ``args19``, ``args64`` (extern "C")."""
    parts = []
    for n in COUNTS:
        ks = kinds(n)
        params = ", ".join(_CTYPE[k].format(i=i) for i, k in enumerate(ks))
        if n == 0:
            parts.append('extern "C" __global__ void args0() {}\n')
            continue
        terms = " + ".join(_TERM[k].format(i=i) for i, k in enumerate(ks) if k != "out") or "0.0f"
        parts.append(f'extern "C" __global__ void args{n}({params}) {{\n'
                     f'    if (blockIdx.x == 0 && threadIdx.x == 0) p0[0] = 0.0f + {terms};\n}}\n')
    return "".join(parts)


def value(kind: str, i: int) -> float:
    """The value parameter i carries (an input buffer's elements, or the scalar)."""
    return i + 0.5 if kind == "f32" else float(i)


def expected(n: int) -> float:
    return sum(value(k, i) for i, k in enumerate(kinds(n)) if k != "out")


def arguments(n: int, torch: Any, device: Any) -> list[Any]:
    """Arguments for ``args{n}``: torch float32 tensors for pointers, Python ints and floats for scalars."""
    args: list[Any] = []
    for i, k in enumerate(kinds(n)):
        if k == "out":
            args.append(torch.zeros(ELEMS, device=device))
        elif k == "in":
            args.append(torch.full((ELEMS,), value(k, i), device=device))
        elif k == "f32":
            args.append(value(k, i))
        else:
            args.append(i)
    return args


def call_loop(fn: Any, args: list[Any], head: str = "", tail: str = "", env: dict[str, Any] | None = None) -> Any:
    """``run(count)``: ``count`` calls ``fn(HEAD a0, ..., a{n-1} TAIL)`` with the arguments written out in the call, as
    user code names them (no ``*args`` tuple per launch). ``head``/``tail``: source text before/after the arguments
    (e.g. ``tail=", grid=g, stream=s"``), naming values of ``env``; separators left dangling by zero arguments go."""
    env = env or {}
    names = [f"a{i}" for i in range(len(args))]
    lines = [f"def make(fn, env{''.join(', ' + n for n in names)}):"]
    lines += [f"    {k} = env[{k!r}]" for k in env]
    lines += ["    def run(count):", "        for _ in range(count):",
              f"            fn({(head + ', '.join(names) + tail).strip(', ')})", "    return run"]
    ns: dict[str, Any] = {}
    exec(compile("\n".join(lines) + "\n", f"<argcount loop, {len(args)} args>", "exec"), ns)  # noqa: S102
    return ns["make"](fn, env, *args)
