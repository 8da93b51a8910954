"""First launches under contention, GPU-less: 32 threads released together, each launching every kernel of a library
once with its own argument values, repeated 100 times from a cold start (C: a fresh forked process per repetition,
under ThreadSanitizer; Python: a fresh ``kernelpack.load`` per repetition, both launch paths). Every launch must be
recorded by the fake driver exactly once with exactly the bytes its thread passed; each binary is loaded once.
"""

from __future__ import annotations

import collections
import struct
import subprocess
import threading

import pytest

from clib_support import HERE, session_env
from fake_cuda import fnv1a, run
from toolchain_support import CC

THREADS, REPS = 32, 100
C_KERNELS = 15  # launches per thread in tests/reliability_harness.c's storm


@pytest.fixture(scope="module")
def tsan_harness(tmp_path_factory):
    env = session_env(tmp_path_factory)
    src = env.demo.sources
    exe = env.root / "reliability_harness_tsan"
    subprocess.run([CC, "-std=c99", "-D_POSIX_C_SOURCE=200809L", "-g", "-O1", "-fsanitize=thread",
                    f"-I{env.demo.include_dir}", f"-Wa,-I{src}", *[str(p) for p in sorted(src.glob("*.[cs]"))],
                    str(HERE / "reliability_harness.c"), "-o", str(exe), "-ldl", "-lpthread"], check=True)
    return env, exe


def test_c_library_32_threads_first_launches_100_times_under_tsan(tsan_harness):
    env, exe = tsan_harness
    r = run(exe, env.root, env.fake, "storm", str(REPS), FAKECUDA_CC="9.0", FAKECUDA_LOAD_US="500",
            TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1")
    assert r.returncode == 0 and "ThreadSanitizer" not in r.stderr, r.stderr[-4000:]
    reps = [line for line in r.stdout.splitlines() if line.startswith("storm rep=")]
    assert reps == [f"storm rep={i} ok={THREADS * C_KERNELS}" for i in range(REPS)]
    assert r.stdout.rstrip().endswith("storm done")
    launches = [x for x in r.log if x.startswith(("cuLaunchKernel ", "cuLaunchKernelEx ")) and x.endswith("-> 0")]
    assert len(launches) == REPS * THREADS * C_KERNELS, "every launch reached the driver exactly once"
    loads = r.calls("cuLibraryLoadData")
    assert len(loads) == REPS, "one cubin per process, loaded once despite 32 racing threads"
    assert {r.field(x, "fnv") for x in loads} == {fnv1a(env.kernels.cubins["90a"])}
    # the bytes: add_f32's parameters carry the thread's own pointers and n (tag = (thread + 1) << 24); it is
    # launched by demo_add_f32 and demo_gadd with n, and by the family demo_add with n + 1
    got = collections.Counter(r.field(x, "params") for x in launches if r.field(x, "kernel") == "add_f32"
                              and r.field(x, "block") == "128,1,1")
    want = collections.Counter()
    for t in range(THREADS):
        tag = (t + 1) << 24
        want[struct.pack("<QQQi", tag + 0x10000, tag + 0x20000, tag + 0x30000, (tag >> 20) * 4).hex()] += 2 * REPS
        want[struct.pack("<QQQi", tag + 0x10000, tag + 0x20000, tag + 0x30000, (tag >> 20) * 4 + 1).hex()] += REPS
    assert got == want


# ------------------------------------------------------------------ Python runtime

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def rt(runtime_bundle, fake_cuda):
    with fake_cuda.in_process().installed() as fake:
        yield runtime_bundle, fake


def _calls(t: int) -> list[tuple[str, str, tuple, dict]]:
    """(kernel attribute, artifact label, args, launch keywords) of thread t: raw device addresses unique to it."""
    base = (t + 1) << 24
    a, b, c, n = base + 0x1000, base + 0x2000, base + 0x3000, 64 + 4 * t
    vec = (a, b, c, n)
    return [
        ("add", "add", vec, {"grid": 1, "block": 32}),
        ("vadd", "vadd[aligned]", vec, {"grid": 1, "block": 64}),
        ("fixed_block", "fixed_block", vec, {"grid": 2}),
        ("reqntid", "reqntid", vec, {"grid": 2}),
        ("spec_cluster", "spec_cluster", vec, {"grid": 4, "block": 32}),
        ("clustered", "clustered", (a, n), {"grid": 4, "block": 32}),
        ("big_smem", "big_smem", (a, n), {"grid": 1, "block": 64, "smem": 100_000}),
        ("smem_kernel", "smem_kernel", (a, n), {"grid": 1, "block": 64}),
        ("affine", "affine", (a, b, struct.pack("<ffi", 0.5, t, 1), n), {"grid": 1, "block": 32}),
        ("scalars", "scalars", (-t, t, -(2**31), 2**40 + t, 255, 65535, t, 2**63 + t, 1.5, -2.0, 0.5, bool(t & 1), c),
         {"grid": 1, "block": 1}),
    ]


@pytest.mark.parametrize("path", ["c", "python"])
def test_python_runtime_32_threads_first_launches_100_times(rt, path):
    import kernelpack
    from kernelpack.core.packing import pack_params
    from runtime_support import python_path

    bundle, fake = rt
    arts = {a.label: a for a in bundle}
    want: collections.Counter[tuple[str, bytes]] = collections.Counter()
    for t in range(THREADS):
        for _, label, args, _kw in _calls(t):
            art = arts[label]
            want[(art.entry, pack_params(art.abi, list(args), base=art.cubin_kernel("sm_90a").param_base,
                                         kernel=label))] += 1
    cubins = {b.sha256 for _, label, _, _ in _calls(0) for b in arts[label].binaries if str(b.arch) == "sm_90a"}
    assert len(cubins) == 3  # kernels.cu, cluster.cu, the REQNTID variant of add
    for rep in range(REPS):
        fake.reset((9, 0))
        if path == "python":
            with python_path():
                m = kernelpack.load(bundle)
        else:
            m = kernelpack.load(bundle)
        barrier, errors = threading.Barrier(THREADS), []

        def worker(t: int, m=m, barrier=barrier, errors=errors) -> None:  # type: ignore[no-untyped-def]
            try:
                fake.set_current(-1)  # a fresh thread: no current context
                barrier.wait()
                for attr, _, args, kw in _calls(t):
                    getattr(m, attr)(*args, **kw)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors, (rep, errors[:3])
        got = collections.Counter((x["kernel"], x["params"]) for x in fake.launches())
        assert got == want, f"repetition {rep}: launches lost, doubled or mixed between threads"
        assert fake.calls("cuLibraryLoadData") == len(cubins), "each cubin loaded once despite 32 racing threads"
