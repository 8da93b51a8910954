#!/usr/bin/env python3
"""On the GPU-less build machine: compile every CuTe DSL artifact the GPU run needs into .gpu/cute/ (git-ignored,
carried to the GPU machine, which has no CuTe DSL).

    .gpu/cute/kernels.kpack      kernel-level artifacts: ew_add (f32, bf16; sm_80 + sm_90a), scale_shift
    .gpu/cute/kpkern/            the C library kernelpack.Library builds from kernels.kpack
    .gpu/cute/kpcute/            host programs linked with the driver shim: ew_add_{f32,bf16}, scale_shift,
                                 gemm_{f16,bf16} (sm_90a): lib/libkpcute.{so,a}, include/kpcute.h; the .so also
                                 loads with kernelpack.load (tests/test_cute_host_runtime_gpu.py: mod.gemm(a, b, c))
    .gpu/cute/kpmix/             one kernelpack.Library of all of it plus .gpu/frontends/*.kpack (run
                                 gpu_prepare_frontends.py first): lib/libkpmix.{so,a}, include/kpmix.h{,pp}
    .gpu/cute/manifest.json      what was built (read by tests/test_cute_gpu.py and bench/cute_gemm.py)
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".gpu" / "cute"


def example(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(f"kp_cute_example_{name}", ROOT / "examples" / "cute" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    import cutlass

    import kernelpack
    import kernelpack.cute as kc
    from kernelpack.bundle import Bundle
    from kernelpack.cute_host import build_host_library

    t0 = time.time()
    ea, ps, hg = example("elementwise_add"), example("policy_scale"), example("hopper_gemm")
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    archs = ["sm_80", "sm_90a"]
    kernels = Bundle.of(
        *(kc.compile(ea.elementwise_add, *ea.example_args(dt), arch=archs, name="ew_add", variant=v)
          for dt, v in ((cutlass.Float32, "f32"), (cutlass.BFloat16, "bf16"))),
        kc.compile(ps.ScaleShift(), *ps.example_args(), arch=archs, name="scale_shift"),
    )
    kernels.write(OUT / "kernels.kpack")
    kernelpack.Library("kpkern", kernels).build(OUT / "kpkern")

    programs = [kc.export(ea.elementwise_add, *ea.example_args(dt), arch=archs, name="ew_add", variant=v)
                for dt, v in ((cutlass.Float32, "f32"), (cutlass.BFloat16, "bf16"))]
    programs.append(kc.export(ps.ScaleShift(), *ps.example_args(), arch=archs, name="scale_shift"))
    programs += [kc.export(hg.HopperGemm(), *hg.example_args(dt), arch="sm_90a", name="gemm", variant=v)
                 for dt, v in ((cutlass.Float16, "f16"), (cutlass.BFloat16, "bf16"))]
    lib = build_host_library("kpcute", programs, OUT / "kpcute")
    # one library holding everything: CuTe host programs, CuTe kernel-level artifacts, Triton/cuTile kernels
    frontends = [ROOT / ".gpu" / "frontends" / "triton.kpack", ROOT / ".gpu" / "frontends" / "cutile.kpack"]
    missing = [str(p) for p in frontends if not p.is_file()]
    if missing:  # the mixed library's GPU test calls Triton and cuTile kernels: never build it without them
        raise SystemExit(f"gpu_prepare_cute.py: {', '.join(missing)} missing; run gpu_prepare_frontends.py first")
    hosts = [p for p in programs if p.name == "gemm"]  # the others share names with the kernel-level families
    kernelpack.Library("kpmix", kernels, *[Bundle.read(p) for p in frontends], *hosts).build(OUT / "kpmix")

    manifest = {
        "cute_dsl": kc.dsl_version(),
        "kernels": [{"name": a.name, "variant": a.variant, "abi": a.abi.describe(), "launch": a.launch.to_json(),
                     "archs": [str(x) for x in a.archs]} for a in kernels],
        "host_programs": [{"entry": f"kpcute_{p.symbol}", "params": [[q.name, q.type.c_type] for q in p.params],
                           "archs": [str(o.arch) for o in p.objects]} for p in programs],
        "shared": str(lib.shared.relative_to(OUT)),
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {OUT} in {time.time() - t0:.1f} s:", ", ".join(sorted(p.name for p in OUT.rglob("*") if p.is_file())))


if __name__ == "__main__":
    main()
