"""One kernel compiled in separate calls for different archs is one artifact: Bundle.of, kernelpack.Library and
kernelpack build merge the parts (the same entry, caller-visible arguments, grid formula, requirements and ranges; each
arch's binary from one part, or the very same bytes; launch facts per arch) whatever their order, and refuse anything
else naming both parts and what differs. GPU-less."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest

import kernelpack
from kernelpack.bundle.kpack import Bundle
from kernelpack.bundle.merge import origin
from kernelpack.core.abi import Abi
from kernelpack.core.errors import BundleError
from kernelpack.core.launchspec import LaunchSpec
from toolchain_support import needs_cuda_compiler

pytestmark = needs_cuda_compiler

# `hopper_only` exists only where __CUDA_ARCH__ >= 900: it can be compiled for sm_90a alone
SOURCE = """
extern "C" __global__ void scale(float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}
#if __CUDA_ARCH__ >= 900
extern "C" __global__ void hopper_only(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.0f;
}
#endif
"""
OTHER_ABI = SOURCE.replace("float a, int n) {\n    int i", "float a, long long n) {\n    long long i", 1)


def compile_(source: str, kernels: list[str], arch: str, **kw: object) -> Bundle:
    return kernelpack.cuda.compile(source, kernels, arch=[arch], **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def parts(module_cache) -> dict[str, Bundle]:
    return {"80": compile_(SOURCE, ["scale"], "sm_80"), "90": compile_(SOURCE, ["scale", "hopper_only"], "sm_90a"),
            "both": kernelpack.cuda.compile(SOURCE, ["scale"], arch=["sm_80", "sm_90a"])}


def test_archs_compiled_in_separate_calls_merge_into_the_one_call_artifact(parts) -> None:
    b80, b90, both = parts["80"], parts["90"], parts["both"]
    merged = Bundle.of(b90, b80)
    assert merged.to_bytes() == Bundle.of(b80, b90).to_bytes()  # whatever the order
    scale = next(a for a in merged if a.name == "scale")
    assert [str(a) for a in scale.archs] == ["sm_80", "sm_90a"]  # sorted by arch
    assert scale == both.artifacts[0] and scale.provenance == both.artifacts[0].provenance
    hopper = next(a for a in merged if a.name == "hopper_only")
    assert [str(a) for a in hopper.archs] == ["sm_90a"]  # the kernel behind #if: only where it exists
    # the same kernel again (the same bytes) is harmless, and a part holding it all is kept as it is
    assert Bundle.of(merged, b80, b90, merged).to_bytes() == merged.to_bytes()
    assert Bundle.of(both, b80).artifacts[0] is both.artifacts[0]


def test_a_merge_keeps_the_provenance_of_the_lowest_arch_whatever_the_order(parts) -> None:
    b80 = compile_(SOURCE, ["scale"], "sm_80", defines={"UNUSED_FLAG": 1})  # another provenance, the same code
    one, two = Bundle.of(b80, parts["90"]), Bundle.of(parts["90"], b80)
    assert one.to_bytes() == two.to_bytes()
    scale = next(a for a in one if a.name == "scale")
    assert "-DUNUSED_FLAG=1" in scale.provenance.options


def test_a_different_abi_is_refused_naming_both_sources_and_the_parameter(parts, tmp_path: Path) -> None:
    a = parts["80"].write(tmp_path / "a80.kpack")
    b = compile_(OTHER_ABI, ["scale"], "sm_90a").write(tmp_path / "b90.kpack")
    with pytest.raises(BundleError) as err:
        Bundle.of(Bundle.read(b), Bundle.read(a))
    msg = err.value.message
    assert f"kernel scale: cannot merge {a} (sm_80) with {b} (sm_90a)" in msg, msg
    assert f"parameter 2: int32_t n in {a}, int64_t n in {b}" in msg, msg
    with pytest.raises(BundleError, match="parameter 2: int32_t n in .*a80.kpack"):
        kernelpack.Library("twoabis", a, b)


def test_other_divisibility_grid_or_requirements_is_another_kernel(parts) -> None:
    scale = parts["80"].artifacts[0]
    s90 = next(a for a in parts["90"] if a.name == "scale")
    params = list(s90.abi.params)
    params[0] = dataclasses.replace(params[0], divisibility=16)
    aligned = dataclasses.replace(s90, abi=Abi(tuple(params)))
    with pytest.raises(BundleError, match=r"parameter 0: float\* y in argument 1, float\* y \(divisible by 16\) in "
                                          r"argument 2"):
        Bundle.of(scale, aligned)
    gridded = dataclasses.replace(s90, launch=LaunchSpec(grid=(("ceil_div", ("arg", "n", None), 256), 1, 1)))
    with pytest.raises(BundleError, match=r"launch grid: None in argument 2, \(\('ceil_div'"):
        Bundle.of(gridded, scale)
    with pytest.raises(BundleError, match=r"device requirements \{\} in argument 2, \{'sm_count': 132\} in argument"):
        Bundle.of(dataclasses.replace(s90, requires={"sm_count": 132}), scale)
    with pytest.raises(BundleError, match=r"range constraints none in argument 2, n <= 4096 in argument 1"):
        Bundle.of(dataclasses.replace(s90, ranges=["n <= 4096"]), scale)


def test_launch_facts_that_differ_per_arch_stay_with_each_archs_binaries(parts) -> None:
    """Dynamic shared memory, block, cluster, scratch and flags may differ per arch: merged, not refused."""
    scale = parts["80"].artifacts[0]
    s90 = next(a for a in parts["90"] if a.name == "scale")
    own = LaunchSpec(block=(256, 1, 1), dynamic_smem=98304, cluster=(2, 1, 1), pdl=True)
    merged = Bundle.of(dataclasses.replace(s90, launch=own), scale).artifacts[0]
    assert merged.launch == scale.launch and merged.launch_for("sm_80") == LaunchSpec()
    assert merged.launch_for("sm_90a") == own and merged.abi == scale.abi
    again = Bundle.from_bytes(Bundle.of(merged).to_bytes()).artifacts[0]
    assert again == merged and again.launch_for("sm_90a").dynamic_smem == 98304
    # one arch's binary from two places with two launch specs: which one holds is unknowable
    other = dataclasses.replace(scale, launch=LaunchSpec(dynamic_smem=1024))
    with pytest.raises(BundleError, match=r"kernel scale: the sm_80 binaries launch otherwise in argument 1 and "
                                          r"argument 2: launch dynamic_smem: None in argument 1, 1024 in argument 2"):
        Bundle.of(scale, other)
    with pytest.raises(BundleError, match="entry symbol"):
        Bundle.of(scale, dataclasses.replace(s90, entry="hopper_only", abi=next(
            a for a in parts["90"] if a.name == "hopper_only").abi))


def test_an_arch_from_two_places_must_be_the_same_bytes(parts, tmp_path: Path) -> None:
    mine = parts["90"].write(tmp_path / "mine.kpack")
    theirs = compile_(SOURCE, ["scale", "hopper_only"], "sm_90a", lineinfo=True).write(tmp_path / "theirs.kpack")
    with pytest.raises(BundleError) as err:
        Bundle.of(Bundle.read(mine), Bundle.read(theirs))
    msg = err.value.message
    ours, other = (Bundle.read(p).artifacts[0].binaries[0] for p in (mine, theirs))
    assert "two different sm_90a cubins" in msg and ours.sha256[:16] in msg and other.sha256[:16] in msg, msg
    assert f"{len(ours.data)} bytes from {mine}" in msg and f"{len(other.data)} bytes from {theirs}" in msg, msg
    copy = tmp_path / "copy.kpack"
    copy.write_bytes(mine.read_bytes())
    assert Bundle.of(Bundle.read(mine), Bundle.read(copy)) == Bundle.read(mine)  # the same cubin twice: harmless


def test_where_an_artifact_came_from_is_no_part_of_it(parts, tmp_path: Path) -> None:
    data = parts["90"].to_bytes()
    read = Bundle.from_bytes(data, source="somewhere.kpack")
    assert read.source == "somewhere.kpack" and origin(read.artifacts[0]) == "somewhere.kpack"
    assert read == parts["90"] and read.to_bytes() == data and Bundle.from_bytes(data).source == ""
    assert pickle.loads(pickle.dumps(read.artifacts[0])) == read.artifacts[0]
    merged = Bundle.of(read, parts["80"]).artifacts[1]
    assert origin(merged) == "argument 2 + somewhere.kpack"  # lowest arch first


def test_library_merges_bundle_files_of_different_archs(parts, tmp_path: Path) -> None:
    p80, p90 = parts["80"].write(tmp_path / "k80.kpack"), parts["90"].write(tmp_path / "k90.kpack")
    lib = kernelpack.Library("guarded", p90, p80)
    assert lib.bundle.to_bytes() == Bundle.of(parts["80"], parts["90"]).to_bytes()
    built = lib.build(tmp_path / "out")
    header = built.header.read_text()
    assert "guarded_scale(" in header and "guarded_hopper_only(" in header
    from kernelpack.clib import read_embedded_bundle

    assert read_embedded_bundle(built.shared) == lib.bundle


TOML = """
[library]
name = "guard"
archs = ["sm_80", "sm_90a"]

[[cuda]]
source = "k.cu"
kernels = ["scale"]
archs = ["sm_80"]

[[cuda]]
source = "{second}"
kernels = {kernels}
archs = ["sm_90a"]
"""


def test_kernelpack_build_merges_entries_built_for_disjoint_archs(tmp_path: Path, fresh_cache) -> None:
    from kernelpack.project import BuildFailed, build

    (tmp_path / "k.cu").write_text(SOURCE)
    (tmp_path / "kernelpack.toml").write_text(TOML.format(second="k.cu", kernels='["scale", "hopper_only"]'))
    report = build(tmp_path, jobs=1)
    archs = {r.kernel: r.archs for r in report.rows}
    assert archs == {"scale": ["sm_80", "sm_90a"], "hopper_only": ["sm_90a"]}, archs
    merged = Bundle.read(tmp_path / "build" / "guard.kpack")
    by_hand = Bundle.of(compile_(SOURCE, ["scale"], "sm_80"), compile_(SOURCE, ["scale", "hopper_only"], "sm_90a"))
    assert [(a.label, a.abi, a.binaries) for a in merged] == [(a.label, a.abi, a.binaries) for a in by_hand]

    (tmp_path / "other.cu").write_text(OTHER_ABI)
    (tmp_path / "kernelpack.toml").write_text(TOML.format(second="other.cu", kernels='["scale"]'))
    with pytest.raises(BuildFailed) as err:
        build(tmp_path, jobs=1)
    msg = err.value.message
    assert "cannot merge cuda:k.cu (sm_80) with cuda:other.cu (sm_90a)" in msg, msg
    assert "parameter 2: int32_t n in cuda:k.cu, int64_t n in cuda:other.cu" in msg, msg

