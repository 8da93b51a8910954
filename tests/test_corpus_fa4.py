"""FlashAttention-4 precompiled (corpus/fa4), the GPU-less half: where the library was built (`python scripts/gpu.py
prepare fa4` -> .gpu/fa4, or `kernelpack build corpus/fa4`), it needs libc alone (no cudart, no CuTe or TVM-FFI
runtime), lists every entry, and corpus/fa4/attention.py -- FA4's host logic over it -- passes every entry's argument
checks for SM90 and SM100 on every configuration (the C entries replaced by recorders; no GPU). Skips where no
build is there (building takes minutes: the GPU step's prepare does it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpu import fa4_glue
from runtime_support import cpu_tensors_as_cuda

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = [ROOT / ".gpu" / "fa4", ROOT / "corpus" / "fa4" / "build"]
KINDS = ("fwd", "bwd_pre", "bwd", "bwd_post")


def built() -> Path:
    for root in CANDIDATES:
        if (root / "lib" / "libfa4.so").is_file() and (root / "fa4_meta.json").is_file():
            return root
    pytest.skip("libfa4 not built here (python scripts/gpu.py prepare fa4)")


def test_library_is_driver_only_and_lists_every_entry() -> None:
    lib = built() / "lib" / "libfa4.so"
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True, text=True,
                               check=True).stdout.split()
    assert not [s for s in undefined if s.lstrip("_").startswith("cu") or "TVMFFI" in s or "cuda_dialect" in s]
    needed = [ln.split()[-1] for ln in subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True,
                                                       check=True).stdout.splitlines() if "NEEDED" in ln]
    assert set(needed) <= {"[libc.so.6]", "[ld-linux-x86-64.so.2]"}, needed
    import kernelpack

    mod = kernelpack.load(str(lib))
    want = {f"{k}_d{d}{c}" for k in KINDS for d in (64, 128) for c in ("", "_causal")}
    want |= {f"fwd_sm100_d{d}{c}" for d in (64, 128) for c in ("", "_causal")}
    want |= {f"fwd{s}_varlen_d128{c}" for s in ("", "_sm100") for c in ("", "_causal")}
    assert set(mod.__all__) == want


@pytest.mark.parametrize("sm", [90, 100])
def test_attention_glue_passes_every_entry_check(sm: int, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    root = built()
    FA4 = fa4_glue().FA4

    from kernelpack.runtime import DriverError, host

    def no_driver() -> None:
        raise DriverError("no driver (test)")

    monkeypatch.setattr(host, "get_driver", no_driver)
    attn = FA4(root / "lib" / "libfa4.so", root / "fa4_meta.json")
    monkeypatch.setattr(FA4, "_sm", staticmethod(lambda t: sm))
    called: list[str] = []
    for name in attn.mod.__all__:
        hp = getattr(attn.mod, name).host_program
        for call in hp.calls:
            hp._fns[call.info.symbol] = lambda *a, s=call.info.symbol: called.append(s) or 0
    for dtype, short in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        for d in (64, 128):
            for causal in (False, True):
                called.clear()
                with cpu_tensors_as_cuda():
                    q, k, v, do = (torch.randn(2, 333, 3, d, dtype=dtype) for _ in range(4))
                    out, lse = attn.forward(q, k, v, causal=causal)
                    attn.backward(q, k, v, out, do, lse, causal=causal)
                c = "_causal" if causal else ""
                fwd = f"fa4_fwd_sm100_d{d}{c}" if sm == 100 else f"fa4_fwd_d{d}{c}"
                assert called == [f"{fwd}_{short}"] + [f"fa4_{k}_d{d}{c}_{short}" for k in KINDS[1:]]
                with cpu_tensors_as_cuda():
                    if d == 128:
                        called.clear()
                        cu = torch.tensor([0, 5, 333], dtype=torch.int32)
                        qv, kv, vv = (torch.randn(333, 3, d, dtype=dtype) for _ in range(3))
                        attn.forward_varlen(qv, kv, vv, cu, cu, 328, causal=causal)
                        sm100 = "_sm100" if sm == 100 else ""
                        assert called == [f"fa4_fwd{sm100}_varlen_d128{c}_{short}"]
    meta = json.loads((root / "fa4_meta.json").read_text())
    assert {k: v["tile_m"] for k, v in meta["bwd"]["90"].items()} == {"d64": 128, "d64_causal": 128, "d128": 80,
                                                                        "d128_causal": 64}
