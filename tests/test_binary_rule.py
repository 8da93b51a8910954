"""Which binary a device gets: one rule (kernelpack.launch.binaries, rendered into kp_model.h), one table of rows, each
row held against the C library (``demo_binary_for_device`` and what a launch loads, on the fake libcuda.so.1) and the
Python runtime (``mod.kernel.binary_for`` and what a launch loads, on the same fake in this process).

The demo library's kernels (tests/clib_support.py): ``ladder`` carries sm_80, sm_90a, sm_100f and sm_100a SASS and
compute_80 and compute_100f PTX; ``ptx_only`` compute_80, compute_90a and compute_100f PTX; ``on_ptx`` sm_90a SASS and
compute_80 PTX; the family ``add`` has specializations add[f32] (sm_80, sm_90a, compute_80 PTX), add[f32_vec4] and
add[f64] (sm_80, sm_90a); ``tmap`` two that carry the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

NO = "KP_ERROR_NO_BINARY_FOR_ARCH"
BAD = "KP_ERROR_INVALID_ARGUMENT"


@dataclass(frozen=True)
class Row:
    kernel: str
    device: str  # sm_XY
    want: str  # the binary ("sm_90a", "compute_80 PTX") or a status
    msg: str = ""  # with a status: a pattern both back ends' messages hold
    why: str = ""

    @property
    def cc(self) -> tuple[int, int]:
        sm = int(self.device.removeprefix("sm_"))
        return sm // 10, sm % 10


LADDER = "sm_80, sm_90a, sm_100f, sm_100a, compute_80 PTX, compute_100f PTX"
ROWS = [
    Row("ladder", "sm_80", "sm_80", why="SASS for the exact arch"),
    Row("ladder", "sm_86", "sm_80", why="plain SASS runs on a newer minor of its major"),
    Row("ladder", "sm_89", "sm_80", why="... every newer minor"),
    Row("ladder", "sm_90", "sm_90a", why="arch-specific SASS on exactly its arch beats everything"),
    Row("ladder", "sm_100", "sm_100a", why="arch-specific before family-specific"),
    Row("ladder", "sm_103", "sm_100f", why="family SASS on a newer minor of its family; sm_100a only on 10.0"),
    Row("ladder", "sm_110", "compute_80 PTX", why="no SASS of major 11; compute_100f PTX is for family 10 only"),
    Row("ladder", "sm_120", "compute_80 PTX", why="plain PTX JITs on any newer device"),
    Row("ladder", "sm_121", "compute_80 PTX"),
    Row("ladder", "sm_75", NO, rf"kernel ladder has no binary for sm_75: it carries {LADDER}", "older than all"),
    Row("ptx_only", "sm_90", "compute_90a PTX", why="the newest PTX at or below the device (arch-specific: exact)"),
    Row("ptx_only", "sm_86", "compute_80 PTX"),
    Row("ptx_only", "sm_100", "compute_100f PTX", why="the newest PTX: family PTX on its family"),
    Row("ptx_only", "sm_103", "compute_100f PTX"),
    Row("ptx_only", "sm_120", "compute_80 PTX", why="compute_90a runs on 9.0 only, compute_100f on family 10 only"),
    Row("ptx_only", "sm_70", NO, "kernel ptx_only has no binary for sm_70: it carries compute_80 PTX, compute_90a "
                                 "PTX, compute_100f PTX"),
    Row("on_ptx", "sm_90", "sm_90a", why="SASS before PTX"),
    Row("on_ptx", "sm_100", "compute_80 PTX", why="the arch-specific SASS does not run there: PTX"),
    Row("on_family", "sm_103", "sm_100f"),
    Row("on_family", "sm_120", NO, "kernel on_family has no binary for sm_120: it carries sm_90a, sm_100f"),
    Row("tmap", "sm_90", "sm_90a", why="a family whose specializations agree answers for all"),
    Row("add[f64]", "sm_86", "sm_80", why="one specialization by its label"),
    Row("add", "sm_100", BAD, r"kernel add: its specializations get different binaries on sm_100 \(add\[f32\]: "
                              r"compute_80 PTX, add\[f32_vec4\]: no binary, add\[f64\]: no binary\); name one",
        "a family that disagrees"),
    Row("add", "sm_80", "sm_80"),
    Row("no_such_kernel", "sm_90", BAD, "no kernel no_such_kernel"),
]
LAUNCHED = [r for r in ROWS if r.kernel in ("ladder", "ptx_only")]


def _id(r: Row) -> str:
    return f"{r.kernel}@{r.device}"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from clib_support import session_env

    return session_env(tmp_path_factory)


@pytest.fixture(scope="module")
def c_answers(env) -> dict[str, tuple[str, str]]:
    """Every row's query through the C library, one harness run."""
    from clib_support import results

    args = [x for r in ROWS for x in (r.kernel, str(r.cc[0]), str(r.cc[1]))]
    run = env.run("binary_for", *args)
    assert run.returncode == 0, run.stderr
    assert run.log == [], "the query needs no driver"
    return results(run)


@pytest.mark.parametrize("row", ROWS, ids=_id)
def test_the_c_library_and_the_python_runtime_name_the_same_binary(env, c_answers, fake, row):
    import kernelpack
    from kernelpack.launch.codes import STATUS_BY_NAME

    status, msg = c_answers[f"{row.kernel}@{row.cc[0]}.{row.cc[1]}"]
    fake.reset(row.cc)
    mod = kernelpack.load(env.demo.shared)
    family, _, variant = row.kernel.partition("[")
    if row.kernel == "no_such_kernel":
        query = lambda: mod.ladder.binary_for(row.device, "no_such_kernel")  # noqa: E731
    else:
        query = lambda: mod[family].binary_for(row.device, variant.rstrip("]") or None)  # noqa: E731
    if row.want.startswith("KP_"):
        assert status == row.want and re.search(row.msg, msg), (status, msg)
        with pytest.raises(kernelpack.core.errors.KernelpackError) as e:
            query()
        assert e.value.status == STATUS_BY_NAME[row.want].value, e.value
        if row.kernel != "no_such_kernel":
            assert re.search(row.msg, str(e.value)), str(e.value)
    else:
        assert (status, msg) == ("KP_SUCCESS", row.want), row.why
        assert query() == row.want, row.why
    assert fake.calls("cuInit") == 0 and fake.calls("cuLibraryLoadData") == 0, "an arch query needs no device"


@pytest.mark.parametrize("row", LAUNCHED, ids=_id)
def test_a_launch_loads_the_binary_the_rule_names(env, fake, row):
    """The query is the launch's own choice: the C library and the Python runtime load exactly that binary."""
    import kernelpack
    from clib_support import results
    from fake_cuda import environment, fnv1a
    from kernelpack.launch.binaries import binary_name
    from kernelpack.launch.codes import STATUS_BY_NAME

    art = next(a for a in env.artifacts if a.label == row.kernel)
    run = env.run("rule_launch", **environment(cc=f"{row.cc[0]}.{row.cc[1]}"))
    status, msg = results(run)[row.kernel]
    loads = run.calls("cuLibraryLoadData")
    launch_msg = rf"{row.device}\b.*carries {row.msg.partition('it carries ')[2]}$"  # the launch says which device
    if row.want.startswith("KP_"):
        assert status == row.want and re.search(launch_msg, msg), msg
    else:
        assert status == "KP_SUCCESS", msg
        chosen = next(b for b in art.binaries if binary_name(b.arch, b.kind == "ptx") == row.want)
        assert fnv1a(chosen.data) in [run.field(x, "fnv") for x in loads], (row.want, loads)
    fake.reset(row.cc)
    mod = kernelpack.load(env.demo.shared)
    launcher = mod[row.kernel]
    if row.want.startswith("KP_"):
        with pytest.raises(kernelpack.core.errors.KernelpackError) as e:
            launcher(grid=1)
        assert e.value.status == STATUS_BY_NAME[row.want].value and re.search(launch_msg, str(e.value)), e.value
        assert fake.count() == 0
        return
    launcher(grid=1)
    entry = launcher.family.device_state(0).entries[0]
    assert binary_name(entry.binary.arch, entry.binary.kind == "ptx") == row.want
    assert fake.count() == 1 and fake.calls("cuLibraryLoadData") == 1


@pytest.mark.parametrize("device,match", [
    ("sm_95", r"kernel ladder: not a CUDA arch: 'sm_95' \(no NVIDIA GPU has SM 95"),
    ("sm_90a", r"kernel ladder: not a device arch: 'sm_90a' names a binary target \(SASS for sm_90a\); a device is "
               r"plain sm_XY, e.g. 'sm_90'"),
    ("compute_80", r"kernel ladder: not a device arch: 'compute_80' names a binary target \(PTX"),
    ("gfx942", r"kernel ladder: not a CUDA arch: 'gfx942'"),
])
def test_a_malformed_device_arch_is_refused_naming_kernel_and_arch(env, fake, device, match):
    import kernelpack
    from kernelpack.runtime import ArgumentValueError

    fake.reset()
    mod = kernelpack.load(env.demo.shared)
    with pytest.raises(ArgumentValueError, match=match):
        mod.ladder.binary_for(device)
    with pytest.raises(kernelpack.runtime.ArgumentTypeError, match=r"kernel ladder: binary_for takes an arch"):
        mod.ladder.binary_for(9.0)


def test_a_device_index_asks_the_driver_for_its_arch(env, fake):
    import kernelpack

    fake.reset((12, 0))
    assert kernelpack.load(env.demo.shared).ladder.binary_for(0) == "compute_80 PTX"


def test_the_c_query_refuses_bad_arguments_naming_them(env):
    from clib_support import results

    r = env.run("binary_for", "ladder", "7", "10", "ladder", "0", "0")
    res = results(r)
    assert res["ladder@7.10"] == (BAD, "demo_binary_for_device: kernel ladder: 7.10 is not a compute capability "
                                       "(e.g. 9.0, 12.0)")
    assert res["ladder@0.0"][0] == BAD


def test_inspect_device_prints_what_each_kernel_gets_as_the_rule_table_says(env, capsys):
    """``kernelpack inspect LIB --device sm_XY``: the same answers, for a device that is not here."""
    import json

    from kernelpack.cli.commands import main

    for device in sorted({r.device for r in ROWS}):
        status = main(["inspect", str(env.demo.shared), "--device", device, "--json"])
        got = json.loads(capsys.readouterr().out)
        assert got["device"] == device
        every = all("binary" in c for c in got["families"].values())
        assert got["runs"] is every and status == (0 if every else 3)  # 3: some kernel has no binary there
        for r in (r for r in ROWS if r.device == device and "[" not in r.kernel and r.kernel in got["families"]):
            c = got["families"][r.kernel]
            if r.want == NO:
                assert c["error"] == NO and re.search(r.msg, c["message"]), c
            elif r.want == BAD:
                assert c["specializations"] == {"add[f32]": "compute_80 PTX", "add[f32_vec4]": "no binary",
                                                "add[f64]": "no binary"}
            else:
                assert c == {"binary": r.want}, (r, c)
    assert main(["inspect", str(env.demo.shared), "--device", "sm_120"]) == 3  # on_family has none there
    text = capsys.readouterr().out
    assert re.search(r"binaries a sm_120 device gets", text)
    assert re.search(r"ladder\s+│ compute_80 PTX \(JIT-compiled by the driver on first load\)", text)
    assert re.search(r"on_family\s+│ KP_ERROR_NO_BINARY_FOR_ARCH: kernel on_family has no binary for sm_120: it "
                     r"carries sm_90a, sm_100f", text)


@pytest.mark.parametrize("device,match", [
    ("sm_95", "no NVIDIA GPU has SM 95"),
    ("compute_120", "not a device arch: 'compute_120' names a binary target"),
    ("sm_12O", "not a CUDA arch: 'sm_12O'"),
])
def test_inspect_device_refuses_a_malformed_arch(env, capsys, device, match):
    from kernelpack.cli.commands import main

    assert main(["inspect", str(env.demo.shared), "--device", device]) == 1
    assert re.search(match, capsys.readouterr().err)
