"""Launch values generated libraries derive from the arguments, against the fake libcuda.so.1: grid formulas vs
kernelpack.core.launchspec.evaluate_grid, Triton scratch buffers (stream-ordered), tensor descriptors (TMA) encoded
exactly as kernelpack.core.tma.encode_args says, and the one-device launch path (no context query per launch)."""

from __future__ import annotations

import struct

import pytest

from clib_support import DEC_SPEC, GADD_GRID, GSUM_GRID, TMA_SPEC, results
from fake_cuda import param_bytes
from kernelpack.core.errors import LaunchError
from kernelpack.core.launchspec import evaluate_grid
from kernelpack.core.tma import encode_args


def grid(r, line):
    return tuple(int(v) for v in r.field(line, "grid").split(","))


def test_grid_formulas_match_the_reference(clib_env):
    r = clib_env.run("grid")
    res = results(r)
    assert all(status == "KP_SUCCESS" for status, _ in res.values()), res
    want = []
    for n in (1000, 1, 256, 257, 50, 0, -5):
        g = tuple(evaluate_grid(e, {("n", None): n}) for e in GADD_GRID)
        if min(g) > 0:  # a dimension <= 0: success without a launch
            want.append(g)
    assert want[:2] == [(4, 6, 1), (1, 1, 1)] and len(want) == 5
    want.append((7, 1, 1))  # a caller-given grid wins
    assert [grid(r, x) for x in r.launch_lines("add_f32")] == want
    shapes = [(3, 5), (6, 9)]
    assert [grid(r, x) for x in r.launch_lines("tsum")] == [
        tuple(evaluate_grid(e, {("t", "shape0"): m, ("t", "shape1"): n}) for e in GSUM_GRID) for m, n in shapes]


def test_cute_elementwise_add_grid_from_its_recorded_formula(clib_env, tmp_path):
    from cute_support import example, need_cute

    need_cute()
    import cutlass

    import kernelpack.cute as kc
    from clib_support import compile_program
    from fake_cuda import run
    from kernelpack.clib import Library

    ea = example("elementwise_add")
    bundle = kc.compile(ea.elementwise_add, *ea.example_args(cutlass.Float32), arch=["sm_80", "sm_90a"],
                        name="ew_add", variant="f32")
    (art,) = bundle.artifacts
    lib = Library("cg", bundle, cflags=["-Werror"]).build(tmp_path / "cg")
    src = tmp_path / "main.c"
    src.write_text(CUTE_MAIN)
    exe = compile_program(src, tmp_path / "cg_main", lib.include_dir,
                          [f"-L{lib.lib_dir}", "-lcg", f"-Wl,-rpath,{lib.lib_dir}"])
    r = run(exe, clib_env.root, clib_env.fake, FAKECUDA_CURRENT="0")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["0"] * 5
    want = [tuple(evaluate_grid(e, {("c", "shape0"): m, ("c", "shape1"): n}) for e in art.launch.grid or ())
            for m, n in ((77, 301), (1, 1), (8, 32), (1000, 33))]
    got = [grid(r, x) for x in r.launch_lines()]
    assert got == want and got[0] == (10, 10, 1)  # ceil(301 / 32), ceil(77 / 8); the (0, 5) call launched nothing
    assert all(r.field(x, "block") == "32,8,1" for x in r.launch_lines())


CUTE_MAIN = r"""
#include <stdio.h>
#include <string.h>
#include "cg.h"
int main(void) {
    static const long long shapes[][2] = {{77, 301}, {1, 1}, {8, 32}, {0, 5}, {1000, 33}};
    kp_launch l;
    memset(&l, 0, sizeof l);
    for (int i = 0; i < 5; i++) {
        kp_tensor t;
        memset(&t, 0, sizeof t);
        t.data = (void*)0x10000, t.dtype = KP_F32, t.rank = 2;
        t.shape[0] = shapes[i][0], t.shape[1] = shapes[i][1], t.stride[0] = shapes[i][1], t.stride[1] = 1;
        kp_status s = cg_ew_add(&l, &t, &t, &t);
        printf("%d\n", (int)s);
        if (s) printf("%s\n", cg_last_error());
    }
    return 0;
}
"""


def test_scratch_is_allocated_per_launch_on_the_stream(clib_env):
    r = clib_env.run("scratch")
    res = results(r)
    assert res["scratch"] == res["scratch_stream"] == res["hidden_null"] == ("KP_SUCCESS", "")
    allocs, frees = r.calls("cuMemAllocAsync"), r.calls("cuMemFreeAsync")
    allocs = [a for a in allocs if a.endswith("-> 0")]
    # 256 B/CTA aligned 128 then 100 B/CTA aligned 512: 10 CTAs -> 2560 + 1000 (+ 512 to align), 30 CTAs -> 7680 + 3000
    assert [int(r.field(a, "size")) for a in allocs] == [2560 + 1000 + 512, 7680 + 3000 + 512]
    assert [r.field(a, "stream") for a in allocs] == ["(nil)", "0x1000"]
    assert [r.field(f, "ptr") for f in frees] == [r.field(a, "ptr") for a in allocs]
    assert [r.field(f, "stream") for f in frees] == ["(nil)", "0x1000"]
    order = [x.split(" ")[0] for x in r.log if x.startswith(("cuMem", "cuLaunch")) and not x.endswith("-> 201")]
    assert order == ["cuMemAllocAsync", "cuLaunchKernel", "cuMemFreeAsync"] * 2 + ["cuLaunchKernel"]
    for a, (launch, ctas) in zip(allocs, [(r.launch_lines()[0], 10), (r.launch_lines()[1], 30)], strict=True):
        base = int(r.field(a, "ptr"), 16)  # 256-byte aligned, as the driver promises: the library aligns to 512
        gs = -(-base // 512) * 512
        ps = gs + -(-256 * ctas // 512) * 512
        assert r.field(launch, "params") == struct.pack("<Qi4xQQ", 0x1000, 5, gs, ps).hex()
    assert r.field(r.launch_lines()[2], "params") == struct.pack("<Qi4xQQ", 0x1000, 5, 0, 0).hex()


def test_scratch_without_stream_ordered_allocation_is_a_clear_error(clib_env):
    r = clib_env.run("scratch", FAKECUDA_MISSING="cuMemAllocAsync")
    status, msg = results(r)["scratch"]
    assert status == "KP_ERROR_DRIVER_TOO_OLD"
    assert msg == ("demo_scratch: kernel scratch needs 4072 bytes of scratch per launch, allocated with "
                   "cuMemAllocAsync/cuMemFreeAsync, which this CUDA driver does not provide (CUDA 11.2+)")
    assert results(r)["hidden_null"][0] == "KP_SUCCESS"  # kernels without scratch do not need it


TMA_SHAPES = [(256, 512, 512), (64, 64, 64), (100, 72, 72), (1, 8, 8), (300, 200, 256), (4096, 64, 64)]


def _encode_fields(enc):
    def j(v):
        return ",".join(map(str, v))

    return {"dtype": str(enc.data_type), "rank": str(enc.rank), "addr": hex(enc.global_address),
            "dims": j(enc.global_dim), "strides": j(enc.global_strides), "box": j(enc.box_dim),
            "estrides": j(enc.element_strides), "interleave": str(enc.interleave), "swizzle": str(enc.swizzle),
            "l2": str(enc.l2_promotion), "oob": str(enc.oob_fill)}


@pytest.mark.parametrize("version", [13000, 13020])
def test_tensor_maps_encoded_as_encode_args_says(clib_env, version):
    r = clib_env.run("tma", FAKECUDA_VERSION=str(version))
    res = results(r)
    art = next(a for a in clib_env.artifacts if a.name == "tma2d")
    ck = art.cubin_kernel("sm_90a")
    encodes = r.calls("cuTensorMapEncodeTiled")
    tma_launches = r.launch_lines("tma2d")
    cases = [(0x100000 + 0x1000 * i, s) for i, s in enumerate(TMA_SHAPES)] + [(0x105000, TMA_SHAPES[-1])]
    assert len(encodes) == len(tma_launches) == len(cases)
    for (ptr, (m, k, ld)), line, launch in zip(cases, encodes, tma_launches, strict=True):
        want = encode_args(TMA_SPEC, ptr, (m, k), (ld, 1), driver_version=version, kernel="tma2d")
        assert want.encode is not None
        assert {key: r.field(line, key) for key in _encode_fields(want.encode)} == _encode_fields(want.encode)
        words = [ptr, ~(1 << 21) & (2**64 - 1) if want.encode.clear_bit21 else 2**64 - 1] + [2**64 - 1] * 14
        packed = [("128s", struct.pack("<16Q", *words))] + [("i", v) for v in want.values[1:3]] + [
            ("q", v) for v in want.values[3:5]] + [("i", 7), ("Q", 0x2000)]
        assert r.field(launch, "params") == param_bytes(ck, packed).hex()
    bits = [encode_args(TMA_SPEC, 0, s[:2], (s[2], 1), driver_version=version).encode.clear_bit21  # type: ignore[union-attr]
            for s in TMA_SHAPES]
    assert set(bits) == ({True, False} if version == 13000 else {False})  # the shapes cover both sides of 128 KiB
    assert res["tma_typed"] == ("KP_SUCCESS", "")
    pre = "demo_tma2d: kernel tma2d: tensor descriptor m: "
    assert res["tma_misaligned"] == ("KP_ERROR_INVALID_ARGUMENT", pre + "TMA needs a 16-byte aligned base address "
                                     "(got 0x100002)")
    assert res["tma_inner"][1] == pre + "the innermost stride must be 1 for TMA (got 2)"
    assert res["tma_stride"][1] == (pre + "TMA needs positive strides that are multiples of 16 bytes (stride[0] = 70 "
                                    "elements of 2 bytes)")
    assert res["tma_dims"][1] == pre + "dims must be in [1, 2^32) (got shape[0] = 0)"
    # a descriptor's dtype and rank choose the specialization (the launch model), as in the runtime
    assert res["tma_rank"][0] == "KP_ERROR_NO_MATCHING_SPECIALIZATION"
    assert "m: f16 tensor rank 3" in res["tma_rank"][1] and "tma2d (m: fp16 rank 2 (TMA)" in res["tma_rank"][1]
    assert res["tma_dtype"][0] == "KP_ERROR_NO_MATCHING_SPECIALIZATION"
    assert "m: f32 tensor rank 2" in res["tma_dtype"][1]
    assert res["tma_null"] == ("KP_ERROR_INVALID_ARGUMENT", "demo_tma2d: argument 'm' (kp_tensor*) is NULL")
    for tag in ("tma_misaligned", "tma_inner", "tma_stride", "tma_dims"):  # encoding: for the chosen specialization
        assert res[tag][0] == "KP_ERROR_INVALID_ARGUMENT"
    for ptr, shape, stride in [(0x100002, (4096, 64), (64, 1)), (0x100000, (4096, 64), (64, 2)),
                               (0x100000, (4096, 64), (70, 1)), (0x100000, (0, 64), (64, 1))]:
        with pytest.raises(LaunchError):  # the reference refuses the same tensors
            encode_args(TMA_SPEC, ptr, shape, stride)


def test_decomposed_descriptor_values(clib_env):
    r = clib_env.run("tma")
    assert results(r)["dec"] == ("KP_SUCCESS", "")
    (launch,) = r.launch_lines("desc_dec")
    art = next(a for a in clib_env.artifacts if a.name == "desc_dec")
    want = encode_args(DEC_SPEC, 0x3000, (5, 7), (9, 3))
    fmts = ["Q", "q", "q", "q", "q", "?", "?", "i", "i", "q", "q"]
    packed = list(zip(fmts, want.values, strict=True)) + [("Q", 0x2000)]
    assert r.field(launch, "params") == param_bytes(art.cubin_kernel("sm_90a"), packed).hex()


def test_one_device_launches_ask_the_driver_nothing_but_the_launch(clib_env):
    r = clib_env.run("add", FAKECUDA_CURRENT="0")
    assert r.calls("cuCtxGetDevice") == [] and r.calls("cuDevicePrimaryCtxRetain") == []
    # no context on the thread: the launch is refused once, a context is bound, the launch repeated
    r = clib_env.run("grid")
    kinds = [x.split(" ")[0] + (" refused" if x.endswith("-> 201") else "") for x in r.log
             if x.startswith(("cuLaunchKernel", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuCtxGetDevice"))]
    assert kinds[:5] == ["cuLaunchKernel refused", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuCtxGetDevice",
                         "cuLaunchKernel"]
    assert "refused" not in " ".join(kinds[5:]) and "cuCtxGetDevice" not in kinds[5:]
    # a stream whose context cannot be found (the fake's 0x2000 belongs to a device 1 that is not there): the
    # binding's own error, with the driver's documented CUDA_ERROR_INVALID_HANDLE
    r = clib_env.run("stream")
    assert results(r)["stream"] == ("KP_ERROR_CUDA", "demo_add_f32: cuStreamGetCtx failed with "
                                    "CUDA_ERROR_INVALID_HANDLE (400)")


def test_several_devices_follow_the_current_context(clib_env):
    r = clib_env.run("add", FAKECUDA_CC="8.0,9.0", FAKECUDA_CURRENT="1")
    assert len(r.calls("cuCtxGetDevice")) == 2  # asked on every launch
    assert [r.field(x, "dev") for x in r.launch_lines()] == ["1", "1"]
