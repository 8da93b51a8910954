"""Generated libraries against the fake libcuda.so.1: packing, dispatch, arch selection, launch checks, errors."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from clib_support import PACK_DTYPES, results
from fake_cuda import fnv1a, param_bytes, run
from kernelpack.bundle.kpack import MAGIC, read_manifest

FMT = {"i8": "b", "i16": "h", "i32": "i", "i64": "q", "u8": "B", "u64": "Q", "f32": "f", "f64": "d", "bool": "?",
       "f16": "H"}


@pytest.mark.parametrize("cc,arch", [("8.0", "80"), ("9.0", "90a"), ("10.0", "100a")])
def test_scalars_packed_at_cubin_offsets_with_exact_widths(clib_env, cc, arch):
    r = clib_env.run("pack", FAKECUDA_CC=cc)
    assert results(r) == {"pack": ("KP_SUCCESS", ""), "pack_typed": ("KP_SUCCESS", "")}
    art = next(a for a in clib_env.artifacts if a.name == "pack")
    ck = art.cubin_kernel(f"sm_{arch}")
    values = [-5, -300, 123456, -1234567890123, 1.5, 2.25, True, 0x3C00, 200, 0xFEDCBA9876543210, 0x7000]
    fmts = [(FMT[d], v) for d, v in zip(PACK_DTYPES, values, strict=False)] + [("Q", 0x7000)]
    want = param_bytes(ck, fmts).hex()
    got = [r.field(x, "params") for x in r.launch_lines("pack")]
    assert got == [want, want]
    assert "0000c03f" in want  # the fp32 1.5 stays 4 bytes (a double would be 000000000000f83f)


def test_family_dispatch_picks_most_specific(clib_env):
    r = clib_env.run("dispatch")
    res = results(r)
    assert [res[t][0] for t in ("f32_aligned", "f32_misaligned", "f32_odd_n", "f64")] == ["KP_SUCCESS"] * 4
    assert [r.field(x, "kernel") for x in r.launch_lines()] == ["add_f32_vec4", "add_f32", "add_f32", "add_f64"]
    status, msg = res["f16"]
    assert status == "KP_ERROR_NO_MATCHING_SPECIALIZATION"
    assert "demo_add" in msg and "x: f16 pointer 0x10008 (8-byte aligned)" in msg and "n = 1000" in msg
    assert "add[f32_vec4] (x: f32, x 16-byte aligned" in msg and "sm_90" in msg
    assert res["mixed"][0] == "KP_ERROR_NO_MATCHING_SPECIALIZATION" and "y: f64 pointer" in res["mixed"][1]
    assert res["typed_misaligned"] == ("KP_ERROR_INVALID_ARGUMENT", "demo_add_f32_vec4: kernel add[f32_vec4]: "
                                       "parameter 0 'x': must be 16-byte aligned, got 0x10004")
    assert res["typed_n"][0] == "KP_ERROR_INVALID_ARGUMENT" and "multiple of 4, got 1022" in res["typed_n"][1]


def test_tensor_dispatch_and_descriptor_packing(clib_env):
    r = clib_env.run("tensor")
    res = results(r)
    assert res["tensor_ok"][0] == res["tensor_typed"][0] == "KP_SUCCESS"
    for tag, part in [("tensor_stride", "stride [8, 2]"), ("tensor_big", "shape [3000000000, 5]"),
                      ("tensor_dtype", "f16 tensor")]:
        assert res[tag][0] == "KP_ERROR_NO_MATCHING_SPECIALIZATION" and part in res[tag][1]
        assert "tsum (t: f32 rank 2 shape [?, ?] stride [?, 1]" in res[tag][1]
    assert res["tensor_null"][0] == "KP_ERROR_INVALID_ARGUMENT"
    # {data, shape0 (i32), shape1 (i32), stride0 (i64)} then out
    want = struct.pack("<QiiqQ", 0x40000, 3, 5, 8, 0x50000).hex()
    assert [r.field(x, "params") for x in r.launch_lines()] == [want, want]


def test_dynamic_smem_attribute_raised_once_per_new_maximum(clib_env):
    r = clib_env.run("smem")
    res = results(r)
    assert [res[t][0] for t in ("smem64a", "smem64b", "smem40", "smem100")] == ["KP_SUCCESS"] * 4
    assert res["smem300"][0] == "KP_ERROR_INVALID_LAUNCH" and "232448" in res["smem300"][1]
    sets = r.calls("cuKernelSetAttribute")
    assert [r.field(x, "val") for x in sets] == ["65536", "102400"]
    assert all(r.field(x, "attr") == "8" for x in sets)
    assert [r.field(x, "smem") for x in r.launch_lines()] == ["65536", "65536", "40960", "102400"]
    assert all(x.endswith("-> 0") for x in r.launch_lines())


def test_clusters(clib_env):
    r = clib_env.run("cluster")
    res = results(r)
    assert res["explicit"][0] == "KP_SUCCESS" and res["requested"][0] == "KP_SUCCESS"
    assert "not a multiple of the cluster {2,1,1}" in res["explicit_bad_grid"][1]
    assert "differs from the kernel's compile-time cluster {2,1,1}" in res["explicit_other"][1]
    (explicit,) = r.launch_lines("cluster2")
    assert explicit.startswith("cuLaunchKernel ")  # a compile-time cluster is not requested again
    (requested,) = r.launch_lines("add_f32")
    assert requested.startswith("cuLaunchKernelEx ") and r.field(requested, "attrs") == "cluster:2,1,1"
    r = clib_env.run("cluster", FAKECUDA_CC="8.0")  # spec_cluster: LaunchSpec.cluster (4,1,1), sm_80 only
    status, msg = results(r)["spec"]  # no clusters before sm_90 (CLUSTER_LAUNCH = 0): refused, as the runtime does
    assert status == "KP_ERROR_INVALID_LAUNCH" and "clusters need compute capability 9.0" in msg and "sm_80" in msg
    assert not r.launch_lines("cluster2")


def test_block_rules(clib_env):
    r = clib_env.run("block")
    res = results(r)
    assert res["fixed"][0] == res["right"][0] == res["spec_block"][0] == "KP_SUCCESS"
    assert res["wrong"] == ("KP_ERROR_INVALID_LAUNCH", "demo_fixed_block: kernel fixed_block (sm_90a): launch.block "
                            "{64,1,1} differs from the block the kernel requires (REQNTID) {128,1,1}; pass {0,0,0} to "
                            "use it")
    assert "fixes no block shape" in res["missing"][1]
    assert res["zero_grid"][0] == "KP_ERROR_INVALID_LAUNCH" and res["null_launch"][0] == "KP_ERROR_INVALID_ARGUMENT"
    assert [r.field(x, "block") for x in r.launch_lines()] == ["128,1,1", "128,1,1", "32,1,1"]


def test_hidden_scratch_params_are_null(clib_env):
    r = clib_env.run("hidden")
    (launch,) = r.launch_lines()
    assert r.field(launch, "params") == struct.pack("<Qi4xQQ", 0x1000, 77, 0, 0).hex()


@pytest.mark.parametrize("cc,expect", [("8.0", "sm_80"), ("8.6", "sm_80"), ("9.0", "sm_90a"), ("10.0", "ptx"),
                                       ("12.0", "ptx"), ("7.5", None)])
def test_arch_selection(clib_env, cc, expect):
    r = clib_env.run("add", FAKECUDA_CC=cc)
    res = results(r)
    loads = r.calls("cuLibraryLoadData")
    if expect is None:
        assert res["add"][0] in ("KP_ERROR_NO_MATCHING_SPECIALIZATION", "KP_ERROR_NO_BINARY_FOR_ARCH")
        assert loads == []
        assert "sm_75" in res["add"][1]
    elif expect == "ptx":
        assert res["add"][0] == "KP_SUCCESS"
        assert r.field(loads[0], "kind") == "ptx"
        assert r.field(loads[0], "fnv") == fnv1a(clib_env.kernels.ptx80)
    else:
        assert res["add"][0] == "KP_SUCCESS"
        assert r.field(loads[0], "fnv") == fnv1a(clib_env.kernels.cubins[expect[3:]])
    if cc in ("10.0", "12.0", "7.5"):  # add_f64 carries sm_80 and sm_90a only
        status, msg = res["add_f64"]
        major, minor = cc.split(".")
        assert status == "KP_ERROR_NO_BINARY_FOR_ARCH"
        assert msg == (f"demo_add_f64: kernel add[f64] has no binary for device 0 (sm_{major}{minor}): it carries "
                       f"sm_80, sm_90a")


def test_device_from_current_context_or_stream(clib_env):
    r = clib_env.run("add", FAKECUDA_CC="8.0,9.0", FAKECUDA_CURRENT="1")
    assert r.calls("cuDevicePrimaryCtxRetain") == []
    assert r.field(r.calls("cuLibraryLoadData")[0], "fnv") == fnv1a(clib_env.kernels.cubins["90a"])
    r = clib_env.run("add", FAKECUDA_CC="8.0,9.0")  # no context: device 0's primary context, made current
    ctx_calls = [x.split(" ")[0] for x in r.log if x.startswith(("cuDevicePrimary", "cuCtxSet"))]
    assert ctx_calls[:2] == ["cuDevicePrimaryCtxRetain", "cuCtxSetCurrent"]
    assert r.field(r.calls("cuLibraryLoadData")[0], "fnv") == fnv1a(clib_env.kernels.cubins["80"])
    r = clib_env.run("stream", FAKECUDA_CC="8.0,9.0")  # no context, stream of device 1
    assert results(r)["stream"][0] == "KP_SUCCESS"
    assert r.calls("cuStreamGetCtx") and r.calls("cuDevicePrimaryCtxRetain") == []
    assert [r.field(x, "dev") for x in r.launch_lines()] == ["1", "1"]


def test_preload_and_embedded_bundle(clib_env):
    r = clib_env.run("preload", FAKECUDA_VERSION="13050")  # a driver that JITs new_ptx's PTX ISA 9.5
    res = results(r)
    assert res["preload0"][0] == res["preload_all"][0] == "KP_SUCCESS"
    assert res["preload_bad"][0] == "KP_ERROR_INVALID_ARGUMENT"
    # every test kernel's sm_90a SASS lives in one cubin, loaded once; new_ptx and ptx_only carry PTX only
    assert [r.field(x, "kind") for x in r.calls("cuLibraryLoadData")] == ["cubin", "ptx", "ptx"]
    assert len(r.calls("cuLibraryGetKernel")) == 26  # one kernel per spec (spec_cluster has no sm_90 binary)
    assert "aligned=1" in r.stdout and "magic=7fKPACK" in r.stdout


def test_a_damaged_compressed_binary_is_refused_as_a_corrupt_library(clib_env, tmp_path):
    """The library stores its cubins zlib-compressed; a flipped byte in one is found when that blob is first
    expanded (Adler-32 / structure), reported as KP_ERROR_CORRUPT_LIBRARY, and nothing reaches the driver."""
    so = Path(clib_env.demo.shared).read_bytes()
    pos = so.find(MAGIC)
    moff, msize = struct.unpack_from("<QQ", so, pos + 16)
    bad = bytearray(so)
    for blob in read_manifest(so[pos:pos + moff + msize])["blobs"]:
        assert blob["encoding"] == "zlib" and blob["raw_size"] > blob["size"]
        bad[pos + blob["offset"] + blob["size"] // 2] ^= 0x10
    libs = tmp_path / "libs"  # the damaged library first on LD_LIBRARY_PATH (the harness's rpath is a RUNPATH)
    libs.mkdir()
    (libs / Path(clib_env.demo.shared).name).write_bytes(bytes(bad))
    shutil.copy(clib_env.fake.c_library, libs)
    r = run(clib_env.harness, tmp_path, libs, "preload")
    status, msg = results(r)["preload0"]
    assert status == "KP_ERROR_CORRUPT_LIBRARY"
    assert "compressed binary (blob " in msg and ") does not expand to" in msg and "the library is damaged" in msg
    assert not r.calls("cuLibraryLoadData")


def test_a_blob_table_row_past_the_embedded_bundle_is_refused_not_read(clib_env, tmp_path):
    """The library reads each binary from its embedded bundle at the offset its blob table gives (32-bit fields the
    generator checks: clib/widths.py); a row that points past the bundle -- a data object that is not the bundle's --
    is refused as KP_ERROR_CORRUPT_LIBRARY when the blob is first loaded, never read (before: read 4 GB past it)."""
    so = bytearray(Path(clib_env.demo.shared).read_bytes())
    pos = so.find(MAGIC)
    moff, msize = struct.unpack_from("<QQ", so, pos + 16)
    end = pos + moff + msize
    for blob in read_manifest(bytes(so[pos:end]))["blobs"]:
        row = struct.pack("<II", blob["offset"], blob["size"])  # its kp_blobs row (.rodata), found once
        (at,) = [i for i in range(len(so)) if so.startswith(row, i) and not pos <= i < end]
        struct.pack_into("<I", so, at, 0xF0000000)
    libs = tmp_path / "libs"  # first on LD_LIBRARY_PATH (the harness's rpath is a RUNPATH)
    libs.mkdir()
    (libs / Path(clib_env.demo.shared).name).write_bytes(bytes(so))
    shutil.copy(clib_env.fake.c_library, libs)
    r = run(clib_env.harness, tmp_path, libs, "preload")
    assert r.returncode == 0, f"the harness died (exit {r.returncode})"
    status, msg = results(r)["preload0"]
    assert status == "KP_ERROR_CORRUPT_LIBRARY", (status, msg)
    assert "lies past the embedded bundle's" in msg and "the library is damaged" in msg
    assert not r.calls("cuLibraryLoadData")


def test_no_driver(clib_env):
    r = run(clib_env.harness, clib_env.root, None, "add")
    status, msg = results(r)["add"]
    assert status == "KP_ERROR_NO_DRIVER"
    assert msg.startswith("demo: cannot load the CUDA driver libcuda.so.1 (libcuda.so.1: cannot open")
    assert results(r)["add_f64"][0] == "KP_ERROR_NO_DRIVER"  # remembered, reported again


@pytest.mark.parametrize("env,status,part", [
    ({"FAKECUDA_VERSION": "11080"}, "KP_ERROR_DRIVER_TOO_OLD", "supports CUDA 11.8; this library needs CUDA 12.0"),
    ({"FAKECUDA_MISSING": "cuLibraryLoadData"}, "KP_ERROR_DRIVER_TOO_OLD", "has no cuLibraryLoadData"),
    ({"FAKECUDA_CC": "none"}, "KP_ERROR_NO_DEVICE", "found no CUDA device"),
    ({"FAKECUDA_FAIL": "cuInit:999"}, "KP_ERROR_CUDA", "cuInit failed"),
    ({"FAKECUDA_FAIL": "cuLaunchKernel:700"}, "KP_ERROR_CUDA",
     "kernel add[f32]: cuLaunchKernel failed with CUDA_ERROR_ILLEGAL_ADDRESS (700)"),
    ({"FAKECUDA_FAIL": "cuLibraryLoadData:209"}, "KP_ERROR_CUDA",
     "cuLibraryLoadData failed with CUDA_ERROR_NO_BINARY_FOR_GPU (209)"),
])
def test_driver_error_paths(clib_env, env, status, part):
    r = clib_env.run("add", **env)
    got_status, msg = results(r)["add"]
    assert got_status == status and part in msg, msg
    assert msg.startswith("demo")


def test_first_launch_race_loads_once(clib_env):
    r = clib_env.run("race", FAKECUDA_LOAD_US="20000")
    assert "race ok=32" in r.stdout
    assert len(r.calls("cuLibraryLoadData")) == 1 and len(r.calls("cuLibraryGetKernel")) == 1
    assert len(r.calls("cuInit")) == 1 and len(r.launch_lines()) == 32
