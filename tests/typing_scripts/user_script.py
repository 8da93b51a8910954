"""A user's script touching every public verb (never run): tests/test_typing.py type-checks it with mypy --strict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import kernelpack
from kernelpack import Bundle, DriverError, Kernel, KernelArtifact, KernelModule, Library, NoMatchingSpecialization
from kernelpack.argtypes import PreparedLaunch


class DeviceArray:
    """An array on the GPU, as far as kernelpack can tell (``__cuda_array_interface__``)."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"data": (0, False), "shape": (16,), "typestr": "<f4", "version": 3}


def compile_everything(triton_kernel: Any, cutile_kernel: Any, cute_fn: Any) -> Bundle:
    cuda = kernelpack.cuda.compile("k.cu", ["axpy", "scale<float>"], arch=["sm_80", "sm_90a"], options=["-O3"])
    triton = kernelpack.triton.compile(triton_kernel, {"x": "*fp32", "n": "i32"}, arch="sm_90a",
                                       constexprs={"BLOCK": 1024})
    cutile = kernelpack.cutile.compile(cutile_kernel, example_args=(1, 2), arch=["sm_90a"])
    cute = kernelpack.cute.compile(cute_fn, 1, 2, arch="sm_90a")
    prebuilt = kernelpack.prebuilt.compile(["k.cubin"], {"k": "float* y, int n"})
    bundle = Bundle.of(cuda, triton, cutile, cute, prebuilt)
    first: KernelArtifact = next(iter(bundle))
    print(first.label, len(bundle))
    bundle.write("k.kpack")
    host = kernelpack.cute.export(cute_fn, 1, 2, arch="sm_90a")
    Library("mylib", bundle, host).build("out")
    report = kernelpack.project.build("kernelpack.toml", jobs=2)
    print(report.seconds, report.outputs)
    return bundle


def launch(x: DeviceArray) -> str:
    mod: KernelModule = kernelpack.load("k.kpack", verify=True)
    axpy: Kernel = mod.axpy
    axpy(2.0, x, x, 16, grid=1, block=256)
    axpy(2.0, x, x, 16, grid=(1, 1), block=(256, 1, 1), smem=0, stream=0, pdl=False)
    prepared: PreparedLaunch = axpy.prepare(2.0, x, x, 16, grid=1, block=256)
    prepared(stream=0)
    mod["scale"](x, 2.0, 16, grid=1, block=256)
    try:
        mod.preload()
    except (DriverError, NoMatchingSpecialization) as e:
        print(e.status, e.message)
    return axpy.binary_for("sm_120") + axpy.__name__


def test_without_a_gpu(x: DeviceArray) -> int:
    with kernelpack.testing.dryrun(["sm_90"], sms=[132]) as run:
        kernelpack.load("k.kpack").axpy(2.0, x, x, 16, grid=1, block=256)
    launch = run.launches()[0]
    grid: tuple[int, int, int] = launch.grid
    return len(run.launches()) + grid[0] + int(launch.ok)


def tune_on_a_gpu(bundle: Bundle, x: DeviceArray) -> Bundle:
    def make(shape: Mapping[str, int], meta: Mapping[str, Any]) -> tuple[Sequence[Any], Mapping[str, Any]]:
        return (x, shape["n"]), {"grid": (shape["n"] + meta["BLOCK"] - 1) // meta["BLOCK"]}

    problems = {"scale": kernelpack.tuning.Problem(key=["n"], shapes=[{"n": 1 << k} for k in range(10, 20)],
                                                   make=make)}
    table: kernelpack.tuning.TuningTable = kernelpack.tuning.tune(bundle, problems, arch="sm_90a")
    table.write("tuning.json")
    return kernelpack.tuning.embed(bundle, kernelpack.tuning.TuningTable.read("tuning.json"))
