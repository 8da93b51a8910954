"""What a launch with lists of tensors costs (cuTile list-of-arrays parameters). Prints a markdown table.

    python3 bench/list_launch.py [--artifacts .gpu/cutile_lists] [--json out.json]

A list reaches the kernel as the device address of one descriptor per tensor (data pointer, extents, strides), so
each launch stages the descriptors and copies them to the device: one stream-ordered allocation on the launch stream
(cuMemAllocAsync), one cuMemcpyHtoDAsync from pageable host memory, the launch, cuMemFreeAsync. Measured on the GPU
machine with the carried ``scripts/gpu.py prepare cutile_lists`` artifacts (no cuTile there):

* per-launch host cost, steady state (batches of 200 launches, then a synchronize, not timed), of ``group_scale``
  with lists of 1, 8 and 64 tensors against ``scale_one`` -- the same kernel on one array passed flat (pointer,
  extent, stride), no list -- through the C library (ctypes calls of the family entries: the same ctypes cost on both
  sides) and through ``kernelpack.load`` (the Python runtime: its C extension, which reads a list of torch
  tensors through the torch bridge, and its pure-Python path);
* whether a list launch waits for the stream: one launch timed right after ``torch.cuda._sleep`` has queued ~200 ms
  of GPU work on the same stream (a pageable cuMemcpyHtoDAsync may synchronize with the stream, the CUDA docs say);
* whether a list launch can be captured into a CUDA graph (``torch.cuda.graph``): the C entry's status and the
  Python runtime's error.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BATCH, BATCHES = 200, 15


def _per_call_us(fn: Any, sync: Any) -> float:
    """Median over batches of the host time per call (µs), each batch started on an idle GPU."""
    fn()
    sync()
    rates = []
    for _ in range(BATCHES):
        t0 = time.perf_counter()
        for _ in range(BATCH):
            fn()
        rates.append((time.perf_counter() - t0) / BATCH * 1e6)
        sync()
    return statistics.median(rates)


def main() -> None:
    ap = argparse.ArgumentParser()
    default = Path(os.environ.get("KERNELPACK_GPU_ARTIFACTS", ROOT / ".gpu")) / "cutile_lists"
    ap.add_argument("--artifacts", type=Path, default=default)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import torch

    import kernelpack
    from kernelpack.runtime import fast
    from kernelpack.runtime.cstructs import KpLaunch, KpTensor, kp_tensor, launch

    mod = kernelpack.load(args.artifacts / "lists.kpack")
    saved = dict(fast._state)
    fast._state.update(ext=None, tried=True)  # a module loaded now launches through the Python path alone
    try:
        pymod = kernelpack.load(args.artifacts / "lists.kpack")
    finally:
        fast._state.clear()
        fast._state.update(saved)
    lib = ctypes.CDLL(str(args.artifacts / "kplists" / "lib" / "libkplists.so"))
    lib.kplists_last_error.restype = ctypes.c_char_p
    stream = torch.cuda.current_stream().cuda_stream
    sync = torch.cuda.synchronize
    n = 4096
    xs = [torch.randn(n, device="cuda") for _ in range(64)]
    ys = [torch.empty(n, device="cuda") for _ in range(64)]
    alpha = ctypes.c_float(1.5)
    rows: dict[str, dict[str, float]] = {}

    flat = launch((n // 256, 1), stream=stream)
    x0, y0 = xs[0].data_ptr(), ys[0].data_ptr()
    lib.kplists_scale_one.argtypes = (ctypes.POINTER(KpLaunch), ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                                      ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32, ctypes.c_float)
    lib.kplists_group_scale.argtypes = (ctypes.POINTER(KpLaunch), ctypes.POINTER(KpTensor), ctypes.c_int32,
                                        ctypes.POINTER(KpTensor), ctypes.c_int32, ctypes.c_float)

    def c_flat() -> None:
        lib.kplists_scale_one(ctypes.byref(flat), x0, n, 1, y0, n, 1, alpha)

    rows["scale_one (one array, flat)"] = {
        "c_us": _per_call_us(c_flat, sync),
        "python_us": _per_call_us(lambda: mod.scale_one(xs[0], n, 1, ys[0], n, 1, 1.5, grid=n // 256), sync),
        "python_path_us": _per_call_us(lambda: pymod.scale_one(xs[0], n, 1, ys[0], n, 1, 1.5, grid=n // 256), sync)}
    for groups in (1, 8, 64):
        cx = (KpTensor * groups)(*(kp_tensor(t) for t in xs[:groups]))
        cy = (KpTensor * groups)(*(kp_tensor(t) for t in ys[:groups]))
        grid = launch((n // 256, groups), stream=stream)
        px, py = xs[:groups], ys[:groups]

        def c_list(cx: Any = cx, cy: Any = cy, grid: Any = grid, groups: int = groups) -> None:
            s = lib.kplists_group_scale(ctypes.byref(grid), cx, groups, cy, groups, alpha)
            if s:
                raise RuntimeError(lib.kplists_last_error().decode())

        rows[f"group_scale, list of {groups}"] = {
            "c_us": _per_call_us(c_list, sync),
            "python_us": _per_call_us(lambda px=px, py=py, groups=groups: mod.group_scale(
                px, py, 1.5, grid=(n // 256, groups)), sync),
            "python_path_us": _per_call_us(lambda px=px, py=py, groups=groups: pymod.group_scale(
                px, py, 1.5, grid=(n // 256, groups)), sync)}
    torch.testing.assert_close(ys[63], xs[63] * 1.5)  # the launches did their work

    # does a list launch wait for the work queued before it on its stream?
    cx = (KpTensor * 8)(*(kp_tensor(t) for t in xs[:8]))
    cy = (KpTensor * 8)(*(kp_tensor(t) for t in ys[:8]))
    grid = launch((n // 256, 8), stream=stream)
    sync()
    torch.cuda._sleep(400_000_000)  # ~0.2 s of GPU time on this stream
    t0 = time.perf_counter()
    status = lib.kplists_group_scale(ctypes.byref(grid), cx, 8, cy, 8, alpha)
    blocked_ms = (time.perf_counter() - t0) * 1e3
    t1 = time.perf_counter()
    sync()
    queued_ms = (time.perf_counter() - t1) * 1e3

    print(f"| launch ({torch.cuda.get_device_name()}) | C library (ctypes), µs | Python runtime, µs | its Python "
          f"path, µs |")
    print("|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['c_us']:.2f} | {r['python_us']:.2f} | {r['python_path_us']:.2f} |")
    print(f"\nPython runtime launches of group_scale that took its Python path: {mod.group_scale.family.python_calls} "
          f"(0: all through the C extension)")
    print(f"\nlist launch behind ~0.2 s of queued GPU work: status {status}, the call took {blocked_ms:.3f} ms, the "
          f"synchronize after it {queued_ms:.1f} ms (a call that waited for the stream would take the 0.2 s)",
          flush=True)
    result: dict[str, Any] = {"rows": rows, "blocked_ms": blocked_ms, "queued_ms": queued_ms, "status": status}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))

    # CUDA graph capture (last: a refused capture may leave the stream unusable for what follows)
    capture: dict[str, str] = {}
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            cap = launch((n // 256, 8), stream=torch.cuda.current_stream().cuda_stream)
            s = lib.kplists_group_scale(ctypes.byref(cap), cx, 8, cy, 8, alpha)
            capture["c"] = f"status {s}" + (f": {lib.kplists_last_error().decode()}" if s else "")
    except Exception as e:  # noqa: BLE001 - what the capture says is the measurement
        capture["c"] = capture.get("c", "") + f" (capture: {type(e).__name__}: {e})"
    print(f"CUDA graph capture, C entry: {capture['c']}", flush=True)
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            mod.group_scale(xs[:8], ys[:8], 1.5, grid=(n // 256, 8))
        capture["python"] = "captured"
    except Exception as e:  # noqa: BLE001
        capture["python"] = f"{type(e).__name__}: {e}"
    print(f"CUDA graph capture, Python runtime: {capture['python']}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({**result, "capture": capture}, indent=1))


if __name__ == "__main__":
    main()
