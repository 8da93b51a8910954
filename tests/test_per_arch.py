"""Per-arch launch facts, per-arch parameter layouts and device-derived values (kernelpack.launch.facts,
kernelpack.launch.device), on the fake driver with no GPU: real kernels (a cuTile matmul whose thread count tileiras
picks per arch, a Triton kernel taking tensor descriptors, CUDA C++ kernels reading the SM count) launched through
the C library, the runtime's C path and its Python path on fake devices of compute capability 8.0 and 9.0, each
expected to hand the driver the facts and parameters of the binary chosen for the device.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import subprocess
import sys
from typing import Any

import pytest

import kernelpack
from clib_support import compile_program, results
from fake_cuda import param_bytes, run
from kernelpack.bundle.artifact import KernelArtifact
from kernelpack.bundle.kpack import Bundle, read_manifest
from kernelpack.core.abi import Abi, DType, Param, Pointer, Scalar
from kernelpack.core.errors import AbiError, AbiMismatch, KernelpackError
from kernelpack.core.launchspec import ArchLaunch, LaunchSpec
from kernelpack.core.tma import encode_args
from kernelpack.launch import device as dev_model
from kernelpack.launch.facts import facts, layouts
from per_arch_builds import CT_TILES
from runtime_support import CudaArray, python_path

MM = 256  # the matmuls' M = N = K
A, B, C, OUT = 0x100000, 0x200000, 0x300000, 0x400000


@pytest.fixture(scope="module")
def bundle(module_cache) -> Bundle:
    pytest.importorskip("triton")
    pytest.importorskip("cuda.tile")
    import per_arch_builds as pb

    return pb.bundle(module_cache)


PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include "pa.h"
@DEFINES@
static void* at(unsigned long a) { return (void*)a; }
static kp_tensor t2(unsigned long data, int64_t rows, int64_t cols, int64_t ld) {
    kp_tensor t;
    memset(&t, 0, sizeof t);
    t.data = at(data), t.dtype = KP_F16, t.rank = 2;
    t.shape[0] = rows, t.shape[1] = cols, t.stride[0] = ld, t.stride[1] = 1;
    return t;
}
#define REPORT(tag, call) do { kp_status s_ = (call); \
    printf("%s status=%s msg=%s\n", tag, pa_status_name(s_), s_ ? pa_last_error() : ""); } while (0)

int main(int argc, char** argv) {
    kp_launch l;
    memset(&l, 0, sizeof l);
    for (int i = 1; i < argc; i++) {
        const char* w = argv[i];
        memset(&l, 0, sizeof l);
        if (!strcmp(w, "ct")) { /* block {0,0,0}: the chosen binary's REQNTID */
            l.grid[0] = MM / TM, l.grid[1] = MM / TN;
            REPORT(w, pa_ct_mm(&l, (kp_f16*)at(KA), MM, MM, MM, 1, (kp_f16*)at(KB), MM, MM,
                               MM, 1, (float*)at(KC), MM, MM, MM, 1, 0.5f));
        } else if (!strcmp(w, "ct_block128")) {
            l.grid[0] = 1, l.block[0] = 128;
            REPORT(w, pa_ct_mm(&l, (kp_f16*)at(KA), MM, MM, MM, 1, (kp_f16*)at(KB), MM, MM,
                               MM, 1, (float*)at(KC), MM, MM, MM, 1, 0.5f));
        } else if (!strcmp(w, "tma")) {
            kp_tensor a = t2(KA, MM, MM, MM), b = t2(KB, MM, MM, MM);
            kp_tensor c = t2(KC, MM, MM, MM);
            l.grid[0] = MM / 64, l.grid[1] = MM / 64;
            REPORT(w, pa_tma(&l, &a, &b, &c, MM));
        } else if (!strcmp(w, "tma_strided")) { /* an inner stride of 2: TMA cannot take it, pointers can */
            kp_tensor a = t2(KA, MM, MM, 2 * MM), b = t2(KB, MM, MM, MM);
            kp_tensor c = t2(KC, MM, MM, MM);
            a.stride[1] = 2;
            l.grid[0] = 1;
            REPORT(w, pa_tma(&l, &a, &b, &c, MM));
        } else if (!strcmp(w, "persist")) { /* grid {0,0,0}: num_sms blocks */
            REPORT(w, pa_persist(&l, (float*)at(KOUT), 100000));
        } else if (!strcmp(w, "rows")) {
            l.grid[0] = 4, l.block[0] = 128;
            REPORT(w, pa_rows(&l, (float*)at(KOUT), 1000));
        } else if (!strcmp(w, "rows_132")) {
            l.grid[0] = 4, l.block[0] = 128;
            REPORT(w, pa_rows_132(&l, (float*)at(KOUT), 1000));
        } else if (!strcmp(w, "tr_persist")) { /* grid {0,0,0}: NUM_SMS programs */
            REPORT(w, pa_tr_persist(&l, (float*)at(KA), (float*)at(KOUT), 100000));
        } else if (!strcmp(w, "tr_rows")) {
            l.grid[0] = 4;
            REPORT(w, pa_tr_rows(&l, (float*)at(KA), (float*)at(KOUT), 1000, 200));
        } else if (!strcmp(w, "clustered")) { /* grid {0,0,0}: 2 x max_clusters blocks, in clusters of 2 */
            REPORT(w, pa_clustered(&l, (float*)at(KOUT), 100000));
        } else {
            printf("%s status=unknown msg=\n", w);
        }
    }
    return 0;
}
""".replace("@DEFINES@", f"#define MM {MM}\n#define TM {CT_TILES[0]}\n#define TN {CT_TILES[1]}\n#define KA {A}ul\n"
                          f"#define KB {B}ul\n#define KC {C}ul\n#define KOUT {OUT}ul\n")


@pytest.fixture(scope="module")
def lib(bundle, tmp_path_factory):
    from kernelpack.clib import Library

    root = tmp_path_factory.mktemp("perarch")
    built = Library("pa", bundle, cflags=["-Werror"]).build(root / "pa")
    src = root / "main.c"
    src.write_text(PROGRAM)
    exe = compile_program(src, root / "main", built.include_dir,
                          [f"-L{built.lib_dir}", "-lpa", f"-Wl,-rpath,{built.lib_dir}", "-lpthread"])
    return built, exe, root


def c_launches(lib, fake_cuda, *what: str, **config: Any) -> tuple[dict[str, tuple[str, str]], list[dict[str, Any]],
                                                                      Any]:
    """Run the C program's cases on the fake configured so: (tag -> (status, message), accepted launches, run)."""
    from fake_cuda import environment

    _, exe, root = lib
    r = run(exe, root, fake_cuda, *what, **environment(**config))
    assert r.returncode == 0, r.stdout + r.stderr
    return results(r), r.launches(), r


def runtime_launch(bundle, fake, path: str, cc: tuple[int, int], call: Any, **config: Any) -> list[dict[str, Any]]:
    """``call(module)`` through the runtime's C path or its Python path on a fresh fake: the accepted launches."""
    fresh(fake, cc, **config)
    if path == "python":
        with python_path():
            mod = kernelpack.load(bundle)
    else:
        mod = kernelpack.load(bundle)
    before = len(fake.launches())
    call(mod)
    return fake.launches()[before:]


def fresh(fake: Any, cc: tuple[int, int], **config: Any) -> None:
    """The fake reset to one device of ``cc`` (and ``config``), and a driver the runtime opens anew (what it read of
    the devices before is forgotten)."""
    from kernelpack.runtime import driver

    fake.reset(cc, **config)
    driver.use_library(str(fake.path))


PATHS = ["c_library", "runtime_c", "runtime_python"]
CCS = [(8, 0), (9, 0)]


def launches_on(path: str, cc: tuple[int, int], bundle, lib, fake, fake_cuda, case: str, call: Any,
                **config: Any) -> list[dict[str, Any]]:
    if path == "c_library":
        got, done, _ = c_launches(lib, fake_cuda, case, cc=[cc], **config)
        assert got[case][0] == "KP_SUCCESS", got[case]
        return done
    return runtime_launch(bundle, fake, path.removeprefix("runtime_"), cc, call, **config)


def art(bundle: Bundle, label: str) -> KernelArtifact:
    return next(a for a in bundle if a.label == label)


def binary_for(a: KernelArtifact, cc: tuple[int, int]) -> Any:
    return a.binary("sm_80" if cc == (8, 0) else "sm_90a")


# ------------------------------------------------------------------ item 1: per-arch launch facts (cuTile REQNTID)


def _ct_args() -> tuple[Any, ...]:
    """cuTile's flattened array parameters: pointer, shape, strides (the C program passes the same)."""
    return (A, MM, MM, MM, 1, B, MM, MM, MM, 1, C, MM, MM, MM, 1, 0.5)


def test_cutile_matmul_for_two_archs_is_one_artifact_with_each_archs_block(bundle):
    a = art(bundle, "ct_mm")
    blocks = {str(b.arch): b.cubin.kernel(a.entry).reqntid for b in a.binaries}
    assert blocks == {"sm_80": (128, 1, 1), "sm_90a": (256, 1, 1)}  # what tileiras chose
    assert {str(b.arch): a.launch_for(b.arch).block for b in a.binaries} == blocks
    assert {str(b.arch): facts(a, b).block for b in a.binaries} == blocks
    again = Bundle.from_bytes(Bundle.of(a).to_bytes()).artifacts[0]
    assert again == a and again.launch_for("sm_90a").block == (256, 1, 1)


@pytest.mark.parametrize("cc", CCS, ids=["sm80", "sm90"])
@pytest.mark.parametrize("path", PATHS)
def test_cutile_matmul_launches_with_the_block_of_the_devices_binary(bundle, lib, fake, fake_cuda, path, cc):
    def call(m: Any) -> None:
        m.ct_mm(*_ct_args(), grid=(MM // CT_TILES[0], MM // CT_TILES[1]))

    (launch,) = launches_on(path, cc, bundle, lib, fake, fake_cuda, "ct", call)
    a = art(bundle, "ct_mm")
    assert launch["block"] == binary_for(a, cc).cubin.kernel(a.entry).reqntid == ((128 if cc == (8, 0) else 256), 1, 1)
    assert launch["grid"] == (MM // CT_TILES[0], MM // CT_TILES[1], 1)


def test_a_block_right_for_one_arch_is_refused_on_the_other(bundle, lib, fake, fake_cuda):
    got, done, _ = c_launches(lib, fake_cuda, "ct_block128", cc="9.0")
    assert got["ct_block128"][0] == "KP_ERROR_INVALID_LAUNCH" and "(sm_90a)" in got["ct_block128"][1]
    assert "{256,1,1}" in got["ct_block128"][1] and not done
    got, done, _ = c_launches(lib, fake_cuda, "ct_block128", cc="8.0")
    assert got["ct_block128"][0] == "KP_SUCCESS" and done[0]["block"] == (128, 1, 1)
    for path in ("c", "python"):
        fresh(fake, (9, 0))
        with python_path() if path == "python" else _nothing():
            m = kernelpack.load(bundle)
        with pytest.raises(kernelpack.LaunchError, match=r"ct_mm: block \(128, 1, 1\) differs .*\(256, 1, 1\)"):
            m.ct_mm(*_ct_args(), grid=1, block=128)
        assert fake.launches() == []


# ------------------------------------------------------------------ item 6: per-arch parameter layouts (Triton TMA)


def test_one_triton_family_lowers_descriptors_per_arch_behind_one_signature(bundle, lib):
    a = art(bundle, "tma")
    assert len(layouts(a)) == 2
    assert {str(b.arch): [d.lowering for d in a.launch_for(b.arch).tensor_descs] for b in a.binaries} == {
        "sm_80": ["decomposed"] * 3, "sm_90a": ["tma"] * 3}
    assert a.abi_for("sm_90a").params[0].type.size == 128  # the CUtensorMap
    header = (lib[0].include_dir / "pa.h").read_text()
    assert ("kp_status pa_tma(const kp_launch* kp_cfg, const kp_tensor* a_desc, const kp_tensor* b_desc, "
            "const kp_tensor* c_desc, int32_t K);") in header
    mod = kernelpack.load(bundle)
    assert mod.tma.family.arg_names == ("a_desc", "b_desc", "c_desc", "K")
    assert str(mod.tma.__signature__).startswith("(a_desc: 'tensor fp16, rank 2 (tensor descriptor)'")


def _tma_params(a: KernelArtifact, cc: tuple[int, int], tensors: list[tuple[int, tuple[int, int], tuple[int, int]]]
                ) -> bytes:
    """The parameter bytes a launch of ``tma`` on ``cc`` must hand the driver (the fake's tensor map: the address,
    then all ones, bit 21 of the second word cleared on drivers <= 13.1 for spans below 128 KiB)."""
    b = binary_for(a, cc)
    ls, abi = a.launch_for(b.arch), a.abi_for(b.arch)
    vals: dict[str, Any] = {"K": MM, "global_scratch": 0, "profile_scratch": 0}
    for d, (ptr, shape, strides) in zip(ls.tensor_descs, tensors, strict=True):
        got = encode_args(d, ptr, shape, strides, driver_version=13000)
        first = got.values[0]
        if got.encode is not None:
            words = [ptr] + [2**64 - 1] * 15
            words[1] &= ~(1 << 21) if got.encode.clear_bit21 else words[1]
            first = struct.pack("<16Q", *words)
        vals.update(zip(d.params, (first, *got.values[1:])))
    fmt = {DType.i32: "i", DType.i64: "q", DType.bool: "?"}
    spec = []
    for p in abi.params:
        v = vals[p.name]
        spec.append(("128s", v) if isinstance(v, bytes) else ("Q", v) if not isinstance(p.type, Scalar)
                    else (fmt[p.type.dtype], v))
    return param_bytes(b.cubin.kernel(a.entry), spec)


@pytest.mark.parametrize("cc", CCS, ids=["sm80", "sm90"])
@pytest.mark.parametrize("path", PATHS)
def test_the_same_tensors_reach_each_arch_in_its_own_lowering(bundle, lib, fake, fake_cuda, path, cc):
    def call(m: Any) -> None:
        m.tma(*(CudaArray(p, (MM, MM), "<f2") for p in (A, B, C)), MM, grid=(MM // 64, MM // 64))

    (launch,) = launches_on(path, cc, bundle, lib, fake, fake_cuda, "tma", call)
    a = art(bundle, "tma")
    want = _tma_params(a, cc, [(p, (MM, MM), (MM, 1)) for p in (A, B, C)])
    assert launch["params"] == want
    assert launch["block"] == (128, 1, 1) and launch["smem"] == a.launch_for(binary_for(a, cc).arch).dynamic_smem


def test_tma_constraints_apply_only_where_the_binary_takes_a_tensor_map(bundle, lib, fake, fake_cuda):
    got, done, r = c_launches(lib, fake_cuda, "tma_strided", cc="9.0")
    assert got["tma_strided"][0] == "KP_ERROR_INVALID_ARGUMENT" and "innermost stride" in got["tma_strided"][1]
    assert not done and not r.calls("cuTensorMapEncodeTiled")
    got, done, r = c_launches(lib, fake_cuda, "tma_strided", cc="8.0")
    assert got["tma_strided"][0] == "KP_SUCCESS" and len(done) == 1 and not r.calls("cuTensorMapEncodeTiled")
    strided = CudaArray(A, (MM, MM), "<f2", (4 * MM, 4))
    for path in ("c", "python"):
        for cc, ok in (((9, 0), False), ((8, 0), True)):
            fresh(fake, cc)
            with python_path() if path == "python" else _nothing():
                m = kernelpack.load(bundle)
            args = (strided, CudaArray(B, (MM, MM), "<f2"), CudaArray(C, (MM, MM), "<f2"), MM)
            if ok:
                m.tma(*args, grid=1)
            else:
                with pytest.raises(kernelpack.runtime.ArgumentValueError, match="a_desc: the innermost stride"):
                    m.tma(*args, grid=1)
            assert len(fake.launches()) == ok, (path, cc)


# ------------------------------------------------------------------ inspect


def test_inspect_shows_each_archs_launch_facts_and_parameters(bundle, tmp_path):
    path = tmp_path / "b.kpack"
    bundle.write(path)
    out = subprocess.run([sys.executable, "-m", "kernelpack.cli", "inspect", str(path), "--json"],
                         capture_output=True, text=True, check=True).stdout
    desc = {a["name"] + (f"[{a['variant']}]" if a["variant"] else ""): a for a in json.loads(out)["artifacts"]}
    ct = {b["arch"]: b for b in desc["ct_mm"]["binaries"]}
    assert ct["sm_80"]["launch"]["block"] == [128, 1, 1] and ct["sm_90a"]["launch"]["block"] == [256, 1, 1]
    tma = {b["arch"]: b for b in desc["tma"]["binaries"]}
    assert tma["sm_80"]["layout"] == 0 and tma["sm_90a"]["layout"] == 1
    assert [p["name"] for p in desc["tma"]["layouts"][1]["params"]][:2] == ["a_desc", "a_desc_shape0"]
    assert desc["rows[132]"]["requires"] == {"sm_count": 132}
    assert desc["persist"]["params"][2]["role"] == "sm_count"
    text = subprocess.run([sys.executable, "-m", "kernelpack.cli", "inspect", str(path)], capture_output=True,
                          text=True, check=True, env={**os.environ, "COLUMNS": "250"}).stdout
    assert "sm_80" in text and "128x1x1" in text and "256x1x1" in text
    assert "parameters of sm_90a" in text and "requires sm_count == 132" in text


# ------------------------------------------------------------------ item 7: device-derived values


@pytest.mark.parametrize("sms", [132, 108])
@pytest.mark.parametrize("path", PATHS)
def test_the_sm_count_is_read_from_the_device_and_sizes_the_grid(bundle, lib, fake, fake_cuda, path, sms):
    def call(m: Any) -> None:
        m.persist(OUT, 100000)
        m.persist(OUT, 100000)
        if path == "runtime_c":
            assert m.persist.family.python_calls == 0  # both took the C path (the first made the table through
            # the family's load callback, which also read the SM count when it loaded the kernel)

    done = launches_on(path, (9, 0), bundle, lib, fake, fake_cuda, "persist", call, sms=sms)
    a = art(bundle, "persist")
    want = param_bytes(a.cubin_kernel("sm_90a"), [("Q", OUT), ("i", 100000), ("i", sms)])
    assert done and all(x["params"] == want and x["grid"] == (sms, 1, 1) for x in done)


@pytest.mark.parametrize("sms,variant", [(132, "132"), (108, "108"), (114, "any")])
@pytest.mark.parametrize("path", PATHS)
def test_specializations_built_for_an_sm_count_are_dispatched_by_the_device(bundle, lib, fake, fake_cuda, path, sms,
                                                                             variant):
    (launch,) = launches_on(path, (9, 0), bundle, lib, fake, fake_cuda, "rows",
                            lambda m: m.rows(OUT, 1000, grid=4, block=128), sms=sms)
    assert launch["kernel"] == art(bundle, f"rows[{variant}]").entry


@pytest.mark.parametrize("sms", [132, 108])
@pytest.mark.parametrize("path", PATHS)
def test_a_triton_persistent_kernel_reads_the_sm_count_and_launches_that_many_programs(bundle, lib, fake, fake_cuda,
                                                                                      path, sms):
    (launch,) = launches_on(path, (9, 0), bundle, lib, fake, fake_cuda, "tr_persist",
                            lambda m: m.tr_persist(A, OUT, 100000), sms=sms)
    a = art(bundle, "tr_persist")
    want = param_bytes(a.cubin_kernel("sm_90a"), [("Q", A), ("Q", OUT), ("i", 100000), ("i", sms), ("Q", 0),
                                                  ("Q", 0)])
    assert launch["params"] == want and launch["grid"] == (sms, 1, 1) and launch["block"] == (128, 1, 1)


@pytest.mark.parametrize("sms,variant", [(132, "sm132"), (108, "sm108"), (114, "any")])
def test_triton_builds_for_sm_counts_are_chosen_by_the_device(bundle, lib, fake, fake_cuda, sms, variant):
    from fake_cuda import fnv1a

    chosen = art(bundle, f"tr_rows[{variant}]").binary("sm_90a")
    got, done, r = c_launches(lib, fake_cuda, "tr_rows", sms=sms)
    assert got["tr_rows"][0] == "KP_SUCCESS" and len(done) == 1
    assert [x for x in r.log if x.startswith("cuLibraryLoadData")] and all(
        f"fnv={fnv1a(chosen.data)}" in x for x in r.log if x.startswith("cuLibraryLoadData"))
    for path in ("runtime_c", "runtime_python"):
        def call(m: Any) -> None:
            m.tr_rows(A, OUT, 1000, 200, grid=4)
            assert m.tr_rows.family.device_state(0).entries[0].spec.label == f"tr_rows[{variant}]"

        assert len(runtime_launch(bundle, fake, path.removeprefix("runtime_"), (9, 0), call, sms=sms)) == 1


def test_a_specialization_on_a_device_it_was_not_built_for_is_refused_naming_why(bundle, lib, fake, fake_cuda):
    got, done, _ = c_launches(lib, fake_cuda, "rows_132", sms=108)
    status, msg = got["rows_132"]
    assert status == "KP_ERROR_NO_BINARY_FOR_ARCH" and not done
    assert "rows[132] is built for devices with sm_count == 132" in msg and "sm_count is 108" in msg
    no_fallback = Bundle.of(*(a for a in bundle if a.label in ("rows[132]", "rows[108]")))
    for path in ("c", "python"):
        fresh(fake, (9, 0), sms=114)
        with python_path() if path == "python" else _nothing():
            m = kernelpack.load(no_fallback)
        with pytest.raises(kernelpack.runtime.NoBinaryForDevice, match=r"rows\[1(32|08)\] is built for devices with "
                                                                        r"sm_count == 1\d\d; .*sm_count is 114"):
            m.rows(OUT, 1000, grid=4, block=128)


@pytest.mark.parametrize("sms", [132, 114])
@pytest.mark.parametrize("path", PATHS)
def test_max_active_clusters_is_asked_of_the_driver_once_and_passed(bundle, lib, fake, fake_cuda, path, sms):
    def call(m: Any) -> None:
        m.clustered(OUT, 100000)
        m.clustered(OUT, 100000)

    done = launches_on(path, (9, 0), bundle, lib, fake, fake_cuda, "clustered", call, sms=sms)
    n = sms // 2  # the fake: one block per SM
    a = art(bundle, "clustered")
    want = param_bytes(a.cubin_kernel("sm_90a"), [("Q", OUT), ("i", 100000), ("i", n)])
    assert done and all(x["params"] == want and x["grid"] == (2 * n, 1, 1) and x["cluster"] == (2, 1, 1)
                        for x in done)
    if path != "c_library":
        assert fake.calls("cuOccupancyMaxActiveClusters") == 1


def test_the_max_active_clusters_query_is_cutes(lib, fake_cuda):
    """Clusters of 2, a grid of one cluster, the kernel's block, all the shared memory a block can have (the
    kernel's limit raised to it first): CuTe's HardwareInfo().get_max_active_clusters(2)."""
    _, _, r = c_launches(lib, fake_cuda, "clustered", "clustered", cc="9.0", sms="132")
    (query,) = [x for x in r.log if x.startswith("cuOccupancyMaxActiveClusters") and "-> 0 (" in x]
    optin = 232448  # the fake's sm_90 opt-in limit; the kernel has no static shared memory
    assert f"grid=2,1,1 block=128,1,1 smem={optin} cluster=2 dev=0 -> 0 (66)" in query
    raised = [x for x in r.log if x.startswith("cuKernelSetAttribute attr=8")]
    assert raised and f"val={optin}" in raised[0]
    assert dev_model.mac_smem(optin, 0) == optin


# ------------------------------------------------------------------ the model


def _add_art(bundle: Bundle) -> KernelArtifact:
    return art(bundle, "persist")


def test_per_arch_facts_round_trip_and_stay_out_of_old_manifests(bundle):
    plain = dataclasses.replace(art(bundle, "rows[any]"))
    assert plain.arch_launches == {} and plain.requirements == ()
    data = read_manifest(Bundle.of(plain).to_bytes())
    assert all(set(b) == {"arch", "kind", "blob"} for b in data["artifacts"][0]["binaries"])
    assert "requires" not in data["artifacts"][0]
    for a in bundle:
        assert Bundle.from_bytes(Bundle.of(a).to_bytes()).artifacts[0] == a


def test_every_arch_must_take_the_same_caller_arguments(bundle):
    a = _add_art(bundle)
    other = Abi((Param("out", Pointer(DType.f32)), Param("count", Scalar(DType.i32)),
                 Param("num_sms", Scalar(DType.i32), role="sm_count")))
    with pytest.raises(AbiMismatch, match=r"persist: the binaries for sm_90a take other arguments \(out: f32\*, "
                                          r"count: i32\) than the artifact \(out: f32\*, n: i32\)"):
        dataclasses.replace(a, per_arch={"sm_90a": ArchLaunch(abi=other)})


@pytest.mark.parametrize("per_arch,match", [
    ({"sm_100a": ArchLaunch(LaunchSpec(block=(64, 1, 1)))}, r"per_arch names sm_100a, for which it carries no binary"),
    ({"sm_80": ArchLaunch(LaunchSpec(block=(64, 1, 1)))}, r"per_arch\[sm_80\] has another grid formula"),
    ({"sm_80": "block 64"}, r"per_arch\[sm_80\] must be an ArchLaunch"),
])
def test_bad_per_arch_facts_are_refused(bundle, per_arch, match):
    with pytest.raises(KernelpackError, match=match):
        dataclasses.replace(_add_art(bundle), per_arch=per_arch)


def test_a_fixed_block_contradicting_an_archs_reqntid_names_the_way_out(bundle):
    a = art(bundle, "ct_mm")
    with pytest.raises(AbiMismatch, match=r"ct_mm \(sm_90a\): launch block \(128, 1, 1\) contradicts the cubin's "
                                          r"required block \(256, 1, 1\); give sm_90a its own block \(per_arch\)"):
        dataclasses.replace(a, per_arch={})


@pytest.mark.parametrize("requires,match", [
    ({"max_active_clusters": 2}, r"cannot require device property 'max_active_clusters'"),
    ({"sm_count": -1}, r"sm_count must be an int >= 0"),
    ({"cores": 4}, r"cannot require device property 'cores'"),
])
def test_bad_device_requirements_are_refused(bundle, requires, match):
    with pytest.raises(KernelpackError, match=match):
        dataclasses.replace(_add_art(bundle), requires=requires)


@pytest.mark.parametrize("role,type_,match", [
    ("max_active_clusters:16", Scalar(DType.i32), r"clusters of 16 blocks; at most 8"),
    ("sm_count", Scalar(DType.f32), r"fills a 32- or 64-bit integer, not float"),
    ("sm_count", Scalar(DType.i16), r"fills a 32- or 64-bit integer, not int16_t"),
    ("num_sms", Scalar(DType.i32), r"unknown role 'num_sms'"),
])
def test_bad_device_roles_are_refused(bundle, role, type_, match):
    a = _add_art(bundle)
    with pytest.raises((AbiError, AbiMismatch), match=match):
        dataclasses.replace(a, abi=Abi((*a.abi.params[:2], Param("num_sms", type_, role=role))))


def test_with_roles_names_unknown_parameters(bundle):
    with pytest.raises(KernelpackError, match=r"persist: no parameter named nsm \(parameters: out, n, num_sms\)"):
        _add_art(bundle).with_roles({"nsm": "sm_count"})


def test_requirements_rank_a_specialization_above_the_binary_rule():
    q = dev_model.device_quality
    assert q(2000, (("sm_count", 132),), {"sm_count": 132}) > q(3000, (), {"sm_count": 132}) > 0
    assert q(3000, (("sm_count", 132),), {"sm_count": 108}) == 0 == q(0, (), {"sm_count": 132})


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False
