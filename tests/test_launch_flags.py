"""Launch flags on the fake driver: programmatic dependent launch (PDL) and cooperative launch, as artifact flags
(``kernelpack.cuda.compile(..., pdl=, cooperative=)``, Triton's ``launch_pdl`` / ``launch_cooperative_grid``, CuTe's
``use_pdl`` / ``cooperative``) and per call (``kp_launch.flags`` in C, ``pdl=`` / ``cooperative=`` in Python). What
reaches cuLaunchKernelEx is asserted attribute by attribute; the refusals (PDL below sm_90, a cooperative grid larger
than what fits at once) carry the same message from the C library and the Python runtime."""

from __future__ import annotations

import pytest

import kernelpack
from clib_support import compile_program, results
from fake_cuda import run
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.errors import CompileError, KernelpackError, LaunchError
from kernelpack.core.launchspec import LaunchSpec
from kernelpack.runtime import DriverError
from runtime_support import cpu_tensors_as_cuda

torch = pytest.importorskip("torch")

SOURCE = r"""
extern "C" __global__ void pdl_k(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 1.0f;
}
extern "C" __global__ void coop_k(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f;
}
extern "C" __global__ void plain_k(float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 3.0f;
}
"""

PDL = (6, (1, 0, 0))  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, programmaticStreamSerializationAllowed
COOP = (2, (1, 0, 0))  # CU_LAUNCH_ATTRIBUTE_COOPERATIVE, cooperative = 1
SMS = 132  # the fake's default SM count
PER_SM_128 = 16  # blocks of 128 threads the fake's SM holds (2048 threads)
TOO_BIG = PER_SM_128 * SMS + 1


@pytest.fixture(scope="module")
def bundle():
    return kernelpack.cuda.compile(SOURCE, ["pdl_k", "coop_k", "plain_k"], arch=["sm_80", "sm_90"], pdl=["pdl_k"],
                                   cooperative=["coop_k"])


def _art(bundle, name):
    return next(a for a in bundle if a.name == name)


def test_compile_options_become_launch_flags_that_survive_the_bundle(bundle):
    assert _art(bundle, "pdl_k").launch.pdl and not _art(bundle, "pdl_k").launch.cooperative
    assert _art(bundle, "coop_k").launch.cooperative and not _art(bundle, "coop_k").launch.pdl
    assert _art(bundle, "plain_k").launch == LaunchSpec()
    again = Bundle.from_bytes(bundle.to_bytes())
    assert {a.name: (a.launch.pdl, a.launch.cooperative) for a in again} == {
        "pdl_k": (True, False), "coop_k": (False, True), "plain_k": (False, False)}
    assert "pdl" not in _art(bundle, "plain_k").launch.to_json()  # older readers see an unchanged spec
    assert "pdl=True" in repr(_art(bundle, "pdl_k").launch)


def test_compile_option_naming_no_kernel_is_refused():
    with pytest.raises(CompileError, match=r"pdl names nope, which is no kernel of this compile \(kernels: plain_k\)"):
        kernelpack.cuda.compile(SOURCE, ["plain_k"], arch=["sm_90"], pdl=["nope"])


def test_launch_spec_flags_must_be_bools():
    with pytest.raises(KernelpackError, match=r"LaunchSpec.cooperative must be True or False \(got 1\)"):
        LaunchSpec(cooperative=1)  # type: ignore[arg-type]


# ------------------------------------------------------------------ Python runtime


@pytest.fixture
def mod(fake, bundle):
    m = kernelpack.load(bundle)
    with cpu_tensors_as_cuda():
        yield m


def _y():
    return torch.zeros(4096, dtype=torch.float32)


def test_python_plain_launch_has_no_attributes_and_per_call_flags_add_them(fake, mod):
    mod.plain_k(_y(), 4096, grid=32, block=128)
    assert not fake.last()["ex"] and fake.last()["attrs"] == ()
    mod.plain_k(_y(), 4096, grid=32, block=128, pdl=True)
    assert fake.last()["ex"] and fake.last()["attrs"] == (PDL,)
    mod.plain_k(_y(), 4096, grid=32, block=128, cooperative=True)
    assert fake.last()["attrs"] == (COOP,)
    mod.plain_k(_y(), 4096, grid=32, block=128, pdl=True, cooperative=True)
    assert fake.last()["attrs"] == (PDL, COOP)
    mod.plain_k(_y(), 4096, grid=32, block=128, cluster=2, pdl=True)
    assert fake.last()["attrs"] == ((4, (2, 1, 1)), PDL)


def test_python_artifact_flags_apply_by_default_and_pdl_can_be_turned_off(fake, mod):
    mod.pdl_k(_y(), 4096, grid=32, block=128)
    assert fake.last()["kernel"] == "pdl_k" and fake.last()["attrs"] == (PDL,)
    mod.pdl_k(_y(), 4096, grid=32, block=128, pdl=False)
    assert not fake.last()["ex"] and fake.last()["attrs"] == ()
    mod.coop_k(_y(), 4096, grid=32, block=128)
    assert fake.last()["attrs"] == (COOP,)
    with pytest.raises(LaunchError, match=r"kernel coop_k: cooperative=False, but the kernel's launch flags make "
                                          r"every launch cooperative"):
        mod.coop_k(_y(), 4096, grid=32, block=128, cooperative=False)
    with pytest.raises(LaunchError, match=r"kernel plain_k: pdl must be True, False or None \(got 1\)"):
        mod.plain_k(_y(), 4096, grid=32, block=128, pdl=1)


def test_python_cooperative_grid_that_cannot_be_resident_is_refused_with_the_numbers(fake, mod):
    mod.coop_k(_y(), 4096, grid=TOO_BIG - 1, block=128)  # exactly what fits
    n = fake.count()
    with pytest.raises(LaunchError) as e:
        mod.coop_k(_y(), 4096, grid=TOO_BIG, block=128)
    assert str(e.value) == (f"kernel coop_k: cooperative launch of grid {{{TOO_BIG},1,1}} ({TOO_BIG} blocks of 128 "
                            f"threads, 0 bytes of dynamic shared memory) exceeds the {TOO_BIG - 1} blocks that can be "
                            f"co-resident on device 0 (sm_90): {PER_SM_128} per SM x {SMS} SMs")
    assert fake.count() == n  # refused before the driver was asked to launch


def test_python_pdl_below_sm90_is_refused_naming_kernel_and_arch(fake, bundle):
    fake.reset((8, 0))
    m = kernelpack.load(bundle)
    with cpu_tensors_as_cuda():
        with pytest.raises(LaunchError) as e:
            m.pdl_k(_y(), 4096, grid=32, block=128)
        assert str(e.value) == ("kernel pdl_k: programmatic dependent launch (PDL, the kernel's launch flag) needs "
                                "compute capability 9.0 or newer; device 0 is sm_80 (pass pdl=False to launch without)")
        with pytest.raises(LaunchError, match=r"kernel plain_k: programmatic dependent launch \(PDL\) needs compute "
                                              r"capability 9.0 or newer; device 0 is sm_80$"):
            m.plain_k(_y(), 4096, grid=32, block=128, pdl=True)
        m.pdl_k(_y(), 4096, grid=32, block=128, pdl=False)
        assert fake.last()["attrs"] == ()


def test_signature_lists_the_launch_flag_keywords(mod):
    assert "pdl=None, cooperative=None" in mod.plain_k.__doc__.splitlines()[0]


# ------------------------------------------------------------------ C library

PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include "lf.h"

static float* const Y = (float*)0x10000;

static void show(const char* tag, kp_status s) {
    printf("%s status=%s msg=%s\n", tag, lf_status_name(s), s == KP_SUCCESS ? "" : lf_last_error());
}

static kp_launch cfg(uint32_t grid, uint32_t flags) {
    kp_launch l;
    memset(&l, 0, sizeof l);
    l.grid[0] = grid, l.block[0] = 128, l.flags = flags;
    return l;
}

int main(void) {
    kp_launch l = cfg(32, 0);
    show("plain", lf_plain_k(&l, Y, 4096));
    l = cfg(32, KP_LAUNCH_PDL);
    show("plain_pdl", lf_plain_k(&l, Y, 4096));
    l = cfg(32, KP_LAUNCH_COOPERATIVE);
    show("plain_coop", lf_plain_k(&l, Y, 4096));
    l = cfg(32, KP_LAUNCH_PDL | KP_LAUNCH_COOPERATIVE);
    show("plain_both", lf_plain_k(&l, Y, 4096));
    l = cfg(32, KP_LAUNCH_PDL);
    l.cluster[0] = 2;
    show("plain_cluster_pdl", lf_plain_k(&l, Y, 4096));
    l = cfg(32, 0);
    show("pdl", lf_pdl_k(&l, Y, 4096));
    l = cfg(32, KP_LAUNCH_NO_PDL);
    show("pdl_off", lf_pdl_k(&l, Y, 4096));
    l = cfg(32, 0);
    show("coop", lf_coop_k(&l, Y, 4096));
    l = cfg(TOO_BIG - 1, 0);
    show("coop_fits", lf_coop_k(&l, Y, 4096));
    l = cfg(TOO_BIG, 0);
    show("coop_too_big", lf_coop_k(&l, Y, 4096));
    l = cfg(32, KP_LAUNCH_PDL | KP_LAUNCH_NO_PDL);
    show("both_pdl_bits", lf_plain_k(&l, Y, 4096));
    l = cfg(32, 0x100);
    show("unknown_bit", lf_plain_k(&l, Y, 4096));
    return 0;
}
"""


@pytest.fixture(scope="module")
def c_program(bundle, fake_cuda, tmp_path_factory):
    from kernelpack.clib import Library

    root = tmp_path_factory.mktemp("lf")
    build = Library("lf", bundle, cflags=["-Werror"]).build(root / "lib")
    src = root / "main.c"
    src.write_text(PROGRAM)
    exe = compile_program(src, root / "main", build.include_dir,
                          [f"-L{build.lib_dir}", "-llf", f"-Wl,-rpath,{build.lib_dir}"],
                          flags=(f"-DTOO_BIG={TOO_BIG}u",))
    return root, exe


def test_c_flags_reach_cuLaunchKernelEx_exactly(c_program, fake_cuda):
    root, exe = c_program
    r = run(exe, root, fake_cuda)
    res = results(r)
    ok = ["plain", "plain_pdl", "plain_coop", "plain_both", "plain_cluster_pdl", "pdl", "pdl_off", "coop", "coop_fits"]
    assert {t: res[t][0] for t in ok} == {t: "KP_SUCCESS" for t in ok}, res
    got = [(x["kernel"], x["ex"], x["attrs"]) for x in r.launches()]
    assert got == [
        ("plain_k", False, ()), ("plain_k", True, (PDL,)), ("plain_k", True, (COOP,)),
        ("plain_k", True, (PDL, COOP)), ("plain_k", True, ((4, (2, 1, 1)), PDL)), ("pdl_k", True, (PDL,)),
        ("pdl_k", False, ()), ("coop_k", True, (COOP,)), ("coop_k", True, (COOP,)),
    ]
    assert res["coop_too_big"] == ("KP_ERROR_INVALID_LAUNCH", (
        f"lf_coop_k: kernel coop_k: cooperative launch of grid {{{TOO_BIG},1,1}} ({TOO_BIG} blocks of 128 threads, 0 "
        f"bytes of dynamic shared memory) exceeds the {TOO_BIG - 1} blocks that can be co-resident on device 0 "
        f"(sm_90): {PER_SM_128} per SM x {SMS} SMs"))
    assert res["both_pdl_bits"][0] == "KP_ERROR_INVALID_LAUNCH" and "both KP_LAUNCH_PDL and KP_LAUNCH_NO_PDL" in \
        res["both_pdl_bits"][1]
    assert res["unknown_bit"][0] == "KP_ERROR_INVALID_LAUNCH" and "launch.flags 0x100" in res["unknown_bit"][1]


def test_c_pdl_below_sm90_is_refused_naming_kernel_and_arch(c_program, fake_cuda):
    root, exe = c_program
    r = run(exe, root, fake_cuda, FAKECUDA_CC="8.0")
    res = results(r)
    assert res["pdl"] == ("KP_ERROR_INVALID_LAUNCH", "lf_pdl_k: kernel pdl_k: programmatic dependent launch (PDL, the "
                          "kernel's launch flag) needs compute capability 9.0 or newer; device 0 is sm_80 (pass "
                          "KP_LAUNCH_NO_PDL to launch without)")
    assert res["plain_pdl"][1].endswith("kernel plain_k: programmatic dependent launch (PDL) needs compute capability "
                                        "9.0 or newer; device 0 is sm_80")
    assert res["pdl_off"][0] == res["coop"][0] == "KP_SUCCESS"
    assert all(PDL not in x["attrs"] for x in r.attempts())  # nothing with PDL reached the driver


def test_c_and_python_refuse_with_the_same_message(c_program, fake_cuda, fake, bundle):
    root, exe = c_program
    c = results(run(exe, root, fake_cuda))["coop_too_big"][1]
    m = kernelpack.load(bundle)
    with cpu_tensors_as_cuda(), pytest.raises(LaunchError) as e:
        m.coop_k(_y(), 4096, grid=TOO_BIG, block=128)
    assert c == f"lf_coop_k: {e.value}"


# ------------------------------------------------------------------ frontends


def test_triton_launch_pdl_and_cooperative_grid_become_launch_flags(fresh_cache):
    pytest.importorskip("triton")
    import kernelpack.frontends.triton.compile as kt
    from triton_kernels import add_kernel

    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    (pdl,) = kt.compile(add_kernel, sig, constexprs={"BLOCK": 256}, arch="sm_90", options={"launch_pdl": True},
                        cache=fresh_cache)
    assert pdl.launch.pdl and not pdl.launch.cooperative
    (coop,) = kt.compile(add_kernel, sig, constexprs={"BLOCK": 256}, arch="sm_90",
                         options={"launch_cooperative_grid": True}, cache=fresh_cache)
    assert coop.launch.cooperative and not coop.launch.pdl
    (plain,) = kt.compile(add_kernel, sig, constexprs={"BLOCK": 256}, arch="sm_90", cache=fresh_cache)
    assert not plain.launch.pdl and not plain.launch.cooperative


def test_project_file_declares_cuda_launch_flags(tmp_path, fresh_cache):
    from kernelpack.project import ProjectError, build, load_project

    (tmp_path / "k.cu").write_text(SOURCE)
    (tmp_path / "kernelpack.toml").write_text('[library]\nname = "lfp"\narchs = ["sm_90"]\n[[cuda]]\nsource = "k.cu"\n'
                                             'kernels = ["pdl_k", "coop_k", "plain_k"]\npdl = ["pdl_k"]\n'
                                             'cooperative = ["coop_k"]\n')
    build(tmp_path, jobs=1)
    got = {a.name: (a.launch.pdl, a.launch.cooperative) for a in Bundle.read(tmp_path / "build" / "lfp.kpack")}
    assert got == {"pdl_k": (True, False), "coop_k": (False, True), "plain_k": (False, False)}
    (tmp_path / "kernelpack.toml").write_text('[library]\nname = "lfp"\narchs = ["sm_90"]\n[[cuda]]\nsource = "k.cu"\n'
                                             'kernels = ["plain_k"]\npdl = "yes"\n')
    with pytest.raises(ProjectError, match=r"pdl.*true, false or a list of kernel names"):
        load_project(tmp_path)


def test_flags_are_documented_in_the_python_doc_and_the_c_header(mod, c_program):
    assert "launched with programmatic dependent launch" in mod.pdl_k.__doc__
    assert "launched cooperatively" in mod.coop_k.__doc__
    root, _ = c_program
    header = (root / "lib" / "include" / "lf.h").read_text()
    assert "cooperative launch (the grid must fit on the device at once)" in header
    assert "#define KP_LAUNCH_PDL 1u" in header and "uint32_t flags;" in header


def test_c_extension_launches_pdl_kernels_itself_and_leaves_cooperative_ones_to_python(fake, mod):
    fam = mod.pdl_k.family
    if fam.fast is None:
        pytest.skip("the C extension is not built (python setup.py build_ext --inplace)")
    mod.pdl_k(_y(), 4096, grid=32, block=128)  # the first call loads the kernel and publishes the device
    before = fam.python_calls
    mod.pdl_k(_y(), 4096, grid=32, block=128)
    assert fam.python_calls == before and fake.last()["ex"] and fake.last()["attrs"] == (PDL,)
    mod.pdl_k(_y(), 4096, grid=32, block=128, pdl=False)  # a per-call flag: the Python path
    assert fam.python_calls == before + 1 and fake.last()["attrs"] == ()
    coop = mod.coop_k.family
    mod.coop_k(_y(), 4096, grid=32, block=128)
    before = coop.python_calls
    mod.coop_k(_y(), 4096, grid=32, block=128)  # every cooperative launch is checked against the occupancy
    assert coop.python_calls == before + 1 and fake.last()["attrs"] == (COOP,)


def test_a_driver_without_the_occupancy_query_refuses_cooperative_launches_only(fake, bundle, c_program, fake_cuda):
    query = "cuOccupancyMaxActiveBlocksPerMultiprocessor"
    fake.reset(missing=query)
    m = kernelpack.load(bundle)
    with cpu_tensors_as_cuda():
        with pytest.raises(DriverError, match=rf"kernel coop_k on device 0: a cooperative launch needs {query}"):
            m.coop_k(_y(), 4096, grid=32, block=128)
        m.pdl_k(_y(), 4096, grid=32, block=128)
        assert fake.last()["attrs"] == (PDL,)
    root, exe = c_program
    res = results(run(exe, root, fake_cuda, FAKECUDA_MISSING=query))
    assert res["coop"][0] == "KP_ERROR_DRIVER_TOO_OLD" and query in res["coop"][1]
    assert res["plain_coop"][0] == "KP_ERROR_DRIVER_TOO_OLD" and res["pdl"][0] == res["plain"][0] == "KP_SUCCESS"


def test_prebuilt_kernel_tables_declare_launch_flags(bundle, tmp_path):
    from kernelpack.frontends.prebuilt.entry import _table_kernels
    from kernelpack.project import ProjectError

    (cubin,) = [b for b in _art(bundle, "plain_k").binaries if str(b.arch) == "sm_90"]
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin.data)
    specs = _table_kernels({"plain_k": {"params": "float* y, int n", "pdl": True, "cooperative": True}})
    (art,) = kernelpack.prebuilt.compile([path], specs)
    assert art.launch.pdl and art.launch.cooperative
    with pytest.raises(ProjectError, match=r"kernels.plain_k: LaunchSpec.pdl must be True or False \(got 'yes'\)"):
        _table_kernels({"plain_k": {"params": "float* y, int n", "pdl": "yes"}})
