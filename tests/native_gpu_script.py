"""On a GPU: capture native launches (CUDA C++ whose host code launches its kernels) and replay them through the
kernelpack library built from the captured project. Run in a fresh process by tests/test_capture_native_gpu.py:

    python native_gpu_script.py ARTIFACTS PROJECT_DIR   ->  its last line: a JSON report

1. ``kernelpack.capture(native=True)`` first (before anything opens the CUDA driver);
2. each case makes fresh random inputs (outputs filled with NaN), snapshots every tensor, calls the native code,
   checks its result against a float64 torch reference and keeps the result;
3. the project is written and built (``kernelpack build``), its bundle loaded;
4. each case's tensors are restored to the snapshot and the launches the recorder saw for it are replayed through
   kernelpack (the captured grid, block, dynamic shared memory and parameter bytes, decoded by the built ABI): every
   tensor must equal the native call's result, bit for bit.

Cases: ARTIFACTS/libnative_runtime.so (tests/native_runtime.cu: templates, a struct by value, dynamic shared
memory, a block the host code picks by size) and, where carried, FlashInfer's CUDA modules (ARTIFACTS/flashinfer/:
its JIT-built silu_and_mul.so and rope.so, called through tvm-ffi as flashinfer's Python does).
"""

from __future__ import annotations

import ctypes
import faulthandler
import json
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kernelpack

ART, PROJECT = Path(sys.argv[1]), Path(sys.argv[2])
faulthandler.dump_traceback_later(int(os.environ.get("KP_NATIVE_WATCHDOG", "240")), exit=True)  # a hang says where
os.environ.setdefault("TVM_FFI_DISABLE_TORCH_C_DLPACK", "1")  # no JIT build of tvm-ffi's torch addon: DLPack will do
sys.path.insert(0, str(ART / "site"))
cap = kernelpack.capture(native=True)  # before torch opens the driver

import torch  # noqa: E402

from kernelpack.bundle.kpack import Bundle  # noqa: E402
from kernelpack.capture.native import driver, log  # noqa: E402

Case = tuple[str, Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None], Callable[[dict[str, Any]], Any],
             str]


def _runtime_cases() -> list[Case]:
    lib = ctypes.CDLL(str(ART / "libnative_runtime.so"))
    stream = lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)  # noqa: E731

    def scale_inputs(n: int, dtype: torch.dtype) -> Callable[[], dict[str, Any]]:
        return lambda: {"x": torch.randn(n, device="cuda", dtype=dtype),
                        "out": torch.full((n,), float("nan"), device="cuda", dtype=dtype)}

    def scale(t: dict[str, Any]) -> None:
        fn = lib.native_scale if t["x"].dtype == torch.float32 else lib.native_scale_double
        assert fn(ctypes.c_void_p(t["x"].data_ptr()), ctypes.c_void_p(t["out"].data_ptr()), ctypes.c_float(1.75),
                  t["x"].numel(), stream()) == 0

    def pair_inputs(n: int) -> Callable[[], dict[str, Any]]:
        return lambda: {"x": torch.randn(n, device="cuda"), "y": torch.randn(n, device="cuda"),
                        "out": torch.randn(n, device="cuda")}

    def pair(t: dict[str, Any]) -> None:
        assert lib.native_pair_add(ctypes.c_float(0.5), ctypes.c_float(-1.25), ctypes.c_void_p(t["x"].data_ptr()),
                                   ctypes.c_void_p(t["y"].data_ptr()), ctypes.c_void_p(t["out"].data_ptr()),
                                   t["x"].numel(), stream()) == 0

    def scale_ref(t: dict[str, Any]) -> Any:
        return {"out": 1.75 * t["x"].double()}

    def pair_ref(t: dict[str, Any]) -> Any:
        return {"out": 0.5 * t["x"].double() - 1.25 * t["y"].double() + t["out"].double()}

    return [("scale f32 n=1000", scale_inputs(1000, torch.float32), scale, scale_ref, "libnative_runtime"),
            ("scale f32 n=100000", scale_inputs(100_000, torch.float32), scale, scale_ref, "libnative_runtime"),
            ("scale f64 n=5000", scale_inputs(5000, torch.float64), scale, scale_ref, "libnative_runtime"),
            ("pair_add n=7777", pair_inputs(7777), pair, pair_ref, "libnative_runtime")]


def _flashinfer_cases() -> list[Case]:
    fi = ART / "flashinfer"
    if not (fi / "silu_and_mul.so").exists():
        return []
    import tvm_ffi

    act = tvm_ffi.load_module(str(fi / "silu_and_mul.so"))
    rope_mod = tvm_ffi.load_module(str(fi / "rope.so"))

    def silu_inputs(tokens: int, d: int) -> Callable[[], dict[str, Any]]:
        return lambda: {"x": torch.randn(tokens, 2 * d, device="cuda", dtype=torch.bfloat16),
                        "out": torch.full((tokens, d), float("nan"), device="cuda", dtype=torch.bfloat16)}

    def silu(t: dict[str, Any]) -> None:
        act.silu_and_mul(t["out"], t["x"], False)  # flashinfer.activation.silu_and_mul's call

    def silu_ref(t: dict[str, Any]) -> Any:
        x = t["x"].double()
        d = x.shape[-1] // 2
        return {"out": torch.nn.functional.silu(x[..., :d]) * x[..., d:]}

    def rope_inputs(tokens: int, heads: int, kv_heads: int) -> Callable[[], dict[str, Any]]:
        return lambda: {"q": torch.randn(tokens, heads, 128, device="cuda", dtype=torch.float16),
                        "k": torch.randn(tokens, kv_heads, 128, device="cuda", dtype=torch.float16),
                        "pos": torch.randint(0, 512, (tokens,), device="cuda", dtype=torch.int32),
                        "q_rope": torch.full((tokens, heads, 128), float("nan"), device="cuda", dtype=torch.float16),
                        "k_rope": torch.full((tokens, kv_heads, 128), float("nan"), device="cuda",
                                             dtype=torch.float16)}

    def rope(t: dict[str, Any]) -> None:  # flashinfer.rope.apply_rope_pos_ids's call: rotary_dim 128, not
        rope_mod.apply_rope_pos_ids(t["q"], t["k"], t["q_rope"], t["k_rope"], t["pos"], 128, False, 1.0, 1e4)

    def rope_ref(t: dict[str, Any]) -> Any:
        freq = 1e4 ** (-torch.arange(0, 64, device="cuda", dtype=torch.float64) / 64)
        angle = t["pos"].double()[:, None, None] * freq
        out = {}
        for name in ("q", "k"):
            x = t[name].double()
            lo, hi = x[..., :64], x[..., 64:]
            out[f"{name}_rope"] = torch.cat([lo * angle.cos() - hi * angle.sin(), hi * angle.cos() + lo * angle.sin()],
                                            -1)
        return out

    return [("flashinfer silu_and_mul 37x4096", silu_inputs(37, 4096), silu, silu_ref, "silu_and_mul"),
            ("flashinfer silu_and_mul 5x11008", silu_inputs(5, 11008), silu, silu_ref, "silu_and_mul"),
            ("flashinfer rope 300x32/8 heads", rope_inputs(300, 32, 8), rope, rope_ref, "rope"),
            ("flashinfer rope 7x8/1 heads", rope_inputs(7, 8, 1), rope, rope_ref, "rope")]


_FMT = {"f32": "f", "f64": "d", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I", "i64": "q",
        "u64": "Q", "bool": "?", "f16": "e"}


def _values(abi: Any, params: tuple[bytes | None, ...]) -> list[Any]:
    """The recorded parameter bytes as the arguments kernelpack takes: a pointer as its int address, a scalar as
    its value, a struct as its bytes."""
    from kernelpack.core.abi import Opaque, Pointer, Scalar

    assert len(params) == len(abi.params), f"{len(params)} parameters recorded, the ABI has {len(abi.params)}"
    out: list[Any] = []
    for p, raw in zip(abi.params, params):
        assert raw is not None, f"parameter {p.name}: its bytes were not recorded"
        if isinstance(p.type, Pointer):
            out.append(int.from_bytes(raw, "little"))
        elif isinstance(p.type, Scalar) and p.type.dtype.value in _FMT:
            out.append(struct.unpack("<" + _FMT[p.type.dtype.value], raw)[0])
        elif isinstance(p.type, Scalar) and p.type.dtype.value == "bf16":
            out.append(struct.unpack("<f", b"\0\0" + raw)[0])
        elif isinstance(p.type, Opaque):
            out.append(raw)
        else:
            raise AssertionError(f"parameter {p.name}: no replay for {p.type}")
    return out


def say(text: str) -> None:
    print(f"native_gpu_script: {text}", file=sys.stderr, flush=True)


def main() -> None:
    say(f"recorder {driver.installed()}")
    cases = _runtime_cases() + _flashinfer_cases()
    rec = driver.installed()
    assert rec is not None
    runs = []
    with cap:
        for label, make, call, ref, lib in cases:
            say(f"case {label}")
            t = make()
            before = {k: v.clone() for k, v in t.items()}
            start = rec.log.stat().st_size
            call(t)
            torch.cuda.synchronize()
            got = log.read(rec.log, start)
            for k, want in ref(before).items():
                tol = 1e-5 if t[k].dtype in (torch.float32, torch.float64) else 3e-2
                torch.testing.assert_close(t[k].double(), want, rtol=tol, atol=tol,
                                           msg=lambda m, at=label: f"{at}: {m}")
            runs.append((label, t, before, {k: v.clone() for k, v in t.items()}, got, lib))
    say("writing the project")
    written = cap.write_project(PROJECT)
    say("building it")
    build = subprocess.run([sys.executable, "-m", "kernelpack.cli", "build", str(PROJECT)], capture_output=True,
                           text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    name = json.loads((PROJECT / "capture.json").read_text())["library"]["name"]
    mod = kernelpack.load(PROJECT / "build" / f"{name}.kpack")
    by_symbol = {f.kernel: f.name for f in written.families}
    abis = {a.entry: a.abi for a in Bundle.read(PROJECT / "build" / f"{name}.kpack")}
    report: dict[str, Any] = {"families": sorted(by_symbol.values()), "cases": [], "skipped": [s.line() for s in
                                                                                              cap.skipped],
                              "notes": cap.notes}
    for label, t, before, after, launches, lib in runs:
        say(f"replaying {label}: {len(launches.launches)} launch(es)")
        for k, v in t.items():
            v.copy_(before[k])
        replayed = []
        for la in launches.launches:
            symbol = la.name or launches.owner(la.function)[1]
            fam = by_symbol[symbol]
            kw: dict[str, Any] = {"grid": la.grid, "block": la.block}
            if la.smem:
                kw["smem"] = la.smem
            getattr(mod, fam)(*_values(abis[symbol], la.params), **kw)
            replayed.append({"family": fam, "grid": la.grid, "block": la.block, "smem": la.smem})
        torch.cuda.synchronize()
        for k, v in t.items():
            assert not v.isnan().any(), f"{label}: {k} has elements no launch wrote"
            assert torch.equal(v, after[k]), f"{label}: {k} differs from the native call's result"
        report["cases"].append({"case": label, "library": lib, "launches": replayed, "elements": sum(
            v.numel() for v in t.values())})
    print(json.dumps(report))


main()
