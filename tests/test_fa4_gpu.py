"""On a real GPU (no FlashAttention-4, no CuTe DSL, no JIT there): FlashAttention-4 precompiled by kernelpack on a
GPU-less machine (`python scripts/gpu.py prepare fa4`: corpus/fa4, ``$KERNELPACK_GPU_ARTIFACTS/fa4/``), forward and
backward, from Python (``kernelpack.load`` + corpus/fa4/attention.py, FA4's host logic) and from C++
(corpus/fa4/fa4_check.cpp linked with libfa4.so), against torch in float32.

Tolerances by precision: an output's largest error against the float32 reference may be at most twice the error of
torch's own SDPA run in the same low precision, plus a floor per dtype (the FA4 test suite's rule). Inputs are fresh
random numbers each run (the seed is in every failure message); every output starts as NaN and must be finite after.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu import cuda_torch, fa4_glue, require_carried, requires_gpu

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
FLOOR = {"bfloat16": 1e-2, "float16": 2e-3}  # absolute error floor per input dtype (outputs and gradients)
# (batch, seqlen, heads): lengths off the tile sizes, and one within a single tile (FA4 specializes that case for
# TVM-FFI's strides; kernelpack passes the strides as they are and uses the one kernel)
SHAPES = [(2, 1024, 8), (1, 1000, 4), (3, 333, 2), (2, 64, 4)]


def artifacts() -> Path:
    return require_carried("fa4", "fa4", holding="lib/libfa4.so")


@pytest.fixture(scope="module")
def torch():  # type: ignore[no-untyped-def]
    t = cuda_torch(current=False)
    major, _ = t.cuda.get_device_capability()
    if major not in (8, 9, 10):
        pytest.skip(f"libfa4 holds SM80/SM90/SM100 kernels; this GPU is sm_{major}x")
    return t


@pytest.fixture(scope="module")
def attn(torch):  # type: ignore[no-untyped-def]
    FA4 = fa4_glue().FA4

    root = artifacts()
    return FA4(root / "lib" / "libfa4.so", root / "fa4_meta.json")


def seeded(torch) -> int:  # type: ignore[no-untyped-def]
    seed = int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    return seed


def reference(torch, q, k, v, dout, causal: bool, *, dtype=None):  # type: ignore[no-untyped-def]
    """SDPA (math) on (batch, seqlen, heads, dim) tensors in ``dtype`` (default: float32): out, lse, dq, dk, dv."""
    dt = dtype or torch.float32
    qt, kt, vt = (x.detach().to(dt).transpose(1, 2).requires_grad_() for x in (q, k, v))
    scale = 1.0 / math.sqrt(q.shape[-1])
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
    out.backward(dout.to(dt).transpose(1, 2))
    s = (qt.detach().float() @ kt.detach().float().transpose(-1, -2)) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, device=s.device, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return (out.detach().transpose(1, 2), lse, qt.grad.transpose(1, 2), kt.grad.transpose(1, 2),
            vt.grad.transpose(1, 2))


def check(torch, name: str, got, ref, lowp, dtype: str, seed: int) -> None:  # type: ignore[no-untyped-def]
    assert torch.isfinite(got).all(), f"{name}: {int((~torch.isfinite(got)).sum())} elements not written / not " \
                                      f"finite (seed {seed})"
    err = (got.float() - ref.float()).abs().max().item()
    base = (lowp.float() - ref.float()).abs().max().item()
    bound = 2 * base + FLOOR[dtype]
    assert err <= bound, f"{name}: max error {err:.3g} > {bound:.3g} (torch SDPA in {dtype}: {base:.3g}; seed {seed})"


@requires_gpu
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_forward_backward_match_torch(torch, attn, dtype, head_dim, causal, shape) -> None:  # type: ignore[no-untyped-def]
    seed = seeded(torch)
    dt = getattr(torch, dtype)
    b, s, h = shape
    q, k, v, dout = (torch.randn(b, s, h, head_dim, device="cuda", dtype=dt) for _ in range(4))
    nan = float("nan")
    out = torch.full_like(q, nan)
    lse = torch.full((b, h, s), nan, device="cuda", dtype=torch.float32)
    attn.forward(q, k, v, causal=causal, out=out, lse=lse)
    dq, dk, dv = (torch.full_like(x, nan) for x in (q, k, v))
    attn.backward(q, k, v, out, dout, lse, causal=causal, dq=dq, dk=dk, dv=dv)
    torch.cuda.synchronize()
    ref = reference(torch, q, k, v, dout, causal)
    lowp = reference(torch, q, k, v, dout, causal, dtype=dt)
    for name, got, r, lp in zip(("out", "lse", "dq", "dk", "dv"), (out, lse, dq, dk, dv), ref, lowp):
        check(torch, name, got, r, lp, dtype, seed)


@requires_gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_varlen_forward_matches_torch_per_sequence(torch, attn, dtype, causal) -> None:  # type: ignore[no-untyped-def]
    seed = seeded(torch)
    dt = getattr(torch, dtype)
    lens = [300, 1, 777, 64, 129]
    cu = torch.tensor([0, *itertools.accumulate(lens)], device="cuda", dtype=torch.int32)
    total, h, d = sum(lens), 4, 128
    q, k, v = (torch.randn(total, h, d, device="cuda", dtype=dt) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    lse = torch.full((h, total), float("nan"), device="cuda", dtype=torch.float32)
    attn.forward_varlen(q, k, v, cu, cu, max(lens), causal=causal, out=out, lse=lse)
    torch.cuda.synchronize()
    for i, n in enumerate(lens):
        lo, hi = int(cu[i]), int(cu[i + 1])
        zeros = torch.zeros(1, n, h, d, device="cuda", dtype=dt)
        one = [x[lo:hi].unsqueeze(0) for x in (q, k, v)]
        ref = reference(torch, *one, zeros, causal)
        lowp = reference(torch, *one, zeros, causal, dtype=dt)
        check(torch, f"out[seq {i}, {n} tokens]", out[lo:hi].unsqueeze(0), ref[0], lowp[0], dtype, seed)
        check(torch, f"lse[seq {i}]", lse[:, lo:hi].unsqueeze(0), ref[1], lowp[1], dtype, seed)


@requires_gpu
def test_on_torch_current_stream(torch, attn) -> None:  # type: ignore[no-untyped-def]
    """The entries take torch's current stream (the environment stream FA4 takes through TVM-FFI)."""
    seed = seeded(torch)
    q, k, v = (torch.randn(2, 512, 4, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        out, lse = attn.forward(q, k, v, causal=True)
    stream.synchronize()
    ref = reference(torch, q, k, v, torch.zeros_like(q), True)
    lowp = reference(torch, q, k, v, torch.zeros_like(q), True, dtype=torch.bfloat16)
    check(torch, "out", out, ref[0], lowp[0], "bfloat16", seed)


@requires_gpu
@pytest.mark.parametrize("head_dim,causal", [(128, True), (64, False)])
def test_from_cpp(torch, attn, tmp_path: Path, head_dim: int, causal: bool) -> None:  # type: ignore[no-untyped-def]
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    inc = next((p for p in ("/usr/local/cuda/include", "/usr/include") if Path(p, "cuda.h").is_file()), None)
    if cxx is None or inc is None:
        pytest.skip("needs a C++ compiler and cuda.h")
    root = artifacts()
    exe = tmp_path / "fa4_check"
    subprocess.run([cxx, "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{root / 'include'}", f"-I{inc}",
                    str(ROOT / "corpus" / "fa4" / "fa4_check.cpp"), str(root / "lib" / "libfa4.so"),
                    f"-Wl,-rpath,{root / 'lib'}", "-lcuda", "-o", str(exe)], check=True)
    seed = seeded(torch)
    b, s, h = 2, 1000, 4
    inputs = [torch.randn(b, s, h, head_dim, dtype=torch.bfloat16) for _ in range(4)]
    for name, t in zip(("q", "k", "v", "do"), inputs):
        t.view(torch.int16).numpy().tofile(tmp_path / f"{name}.bin")
    major, minor = torch.cuda.get_device_capability()
    cfg = attn.meta["bwd"][str(major * 10)][f"d{head_dim}{'_causal' if causal else ''}"]
    r = subprocess.run([str(exe), str(tmp_path), str(b), str(s), str(h), str(head_dim), str(int(causal)),
                        str(cfg["tile_m"]), str(cfg["head_dim_padded"])], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr

    def load(name: str, shape: tuple[int, ...], dt: Any) -> Any:
        raw = torch.from_file(str(tmp_path / f"{name}.bin"), size=math.prod(shape),
                              dtype=torch.int16 if dt != torch.float32 else torch.float32)
        return (raw.view(torch.bfloat16) if dt != torch.float32 else raw).reshape(shape).cuda()

    q, k, v, dout = (x.cuda() for x in inputs)
    got = [load(n, (b, s, h, head_dim), torch.bfloat16) for n in ("o",)] + [load("lse", (b, h, s), torch.float32)] + \
          [load(n, (b, s, h, head_dim), torch.bfloat16) for n in ("dq", "dk", "dv")]
    ref = reference(torch, q, k, v, dout, causal)
    lowp = reference(torch, q, k, v, dout, causal, dtype=torch.bfloat16)
    for name, g, rf, lp in zip(("out", "lse", "dq", "dk", "dv"), got, ref, lowp):
        check(torch, f"C++ {name}", g, rf, lp, "bfloat16", seed)



WHEEL_CHECK = r"""
import json, math, sys
import torch
import fa4
torch.manual_seed(int(sys.argv[1]))
q, k, v = (torch.randn(2, 777, 4, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
out = torch.full_like(q, float("nan"))
lse = torch.full((2, 4, 777), float("nan"), device="cuda")
major, _ = torch.cuda.get_device_capability()
if major == 10:
    fa4.fwd_sm100_d128_causal(q, k, v, out, lse, 1 / math.sqrt(128), 777)
else:
    fa4.fwd_d128_causal(q, k, v, out, lse, 1 / math.sqrt(128))
torch.cuda.synchronize()
ref = torch.nn.functional.scaled_dot_product_attention(*(x.float().transpose(1, 2) for x in (q, k, v)),
                                                       is_causal=True).transpose(1, 2)
low = torch.nn.functional.scaled_dot_product_attention(*(x.transpose(1, 2) for x in (q, k, v)),
                                                       is_causal=True).transpose(1, 2)
print(json.dumps({"file": fa4.__file__, "finite": bool(torch.isfinite(out).all()),
                  "err": (out.float() - ref).abs().max().item(), "sdpa_err": (low.float() - ref).abs().max().item()}))
"""


@requires_gpu
def test_installed_wheel_runs_the_forward(torch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The `kernelpack wheel --with-library` of corpus/fa4 installed offline from its file and imported from there."""
    import json

    root = artifacts()
    wheels = sorted((root / "wheel").glob("fa4-*.whl"))
    assert wheels, f"no wheel under {root / 'wheel'}"
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--target", str(target),
                        str(wheels[0])], capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and "No module named pip" in r.stderr:
        pytest.skip("no pip on this interpreter")
    assert r.returncode == 0, r.stdout + r.stderr
    seed = seeded(torch)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT / "src")])}
    run = subprocess.run([sys.executable, "-c", WHEEL_CHECK, str(seed)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert str(target) in got["file"] and got["finite"], got
    assert got["err"] <= 2 * got["sdpa_err"] + FLOOR["bfloat16"], (seed, got)
