"""kernelpack build --executor ray: against a real local Ray instance (one started by the build, one the process
started with ``ray.init(num_cpus=2)``, and a ``ray start --head`` cluster started here and stopped after), the bundle
and library are byte-identical to a local -j build, a compile error reads as it does locally, a worker killed
mid-step is retried, and an unreachable address is a clear error. Plus the [build] table's bad input. GPU-less."""

from __future__ import annotations

import concurrent.futures as cf
import os
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelpack.core import config
from kernelpack.core.errors import KernelpackError
from kernelpack.project import BuildFailed, ProjectError, build, load_project
from test_project_build import OTHER, TOML, write_project
from toolchain_support import needs_cuda_compiler

try:
    import ray
except ImportError:  # pragma: no cover - CI installs kernelpack[dev], which has the ray extra
    ray = None
needs_ray = pytest.mark.skipif(ray is None, reason="Ray is not installed (pip install 'kernelpack[ray]')")
OUTPUTS = ("proj.kpack", "lib/libproj.so", "lib/libproj.a", "include/proj.h")


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return write_project(tmp_path)


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory: pytest.TempPathFactory, module_cache: Any) -> dict[str, bytes]:
    """The outputs of a local -j 2 build of the ``proj`` project."""
    d = write_project(tmp_path_factory.mktemp("reference"))
    r = build(d, jobs=2, executor="local")
    return {f: (Path(r.out) / f).read_bytes() for f in OUTPUTS}


def outputs_of(report: Any) -> dict[str, bytes]:
    return {f: (Path(report.out) / f).read_bytes() for f in OUTPUTS}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def in_process_ray() -> Iterator[None]:
    """``ray.init(num_cpus=2)`` in this process (kernelpack uses that connection and leaves it up)."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


# ------------------------------------------------------------------------------------------------ bad input (no Ray)


def test_build_table_selects_the_executor_and_rejects_what_it_does_not_know(proj: Path) -> None:
    toml = proj / "kernelpack.toml"
    toml.write_text(TOML + '\n[build]\nexecutor = "ray"\naddress = "10.0.0.1:6379"\n')
    spec = load_project(proj).build
    assert (spec.executor, spec.address) == ("ray", "10.0.0.1:6379")
    toml.write_text(TOML + '\n[build]\nexecutor = "dask"\n')
    with pytest.raises(ProjectError, match=r"\[build\] executor: expected one of \['local', 'ray'\], given 'dask'"):
        load_project(proj)
    toml.write_text(TOML + '\n[build]\nexecutor = "local"\naddress = "10.0.0.1:6379"\n')
    with pytest.raises(ProjectError, match="only for executor \"ray\""):
        load_project(proj)
    toml.write_text(TOML + '\n[build]\nworkers = 3\n')
    with pytest.raises(ProjectError, match=r"\[build\]: unknown key\(s\) \['workers'\]"):
        load_project(proj)
    toml.write_text(TOML)
    with pytest.raises(ProjectError, match="--address '1.2.3.4:1' is for --executor ray; given --executor 'local'"):
        build(proj, executor="local", address="1.2.3.4:1")


# ------------------------------------------------------------------------------------------------ on Ray


@needs_ray
@needs_cuda_compiler
def test_unreachable_address_is_a_clear_error_and_keeps_the_previous_outputs(proj: Path, module_cache: Any) -> None:
    first = build(proj, jobs=1)
    before = outputs_of(first)
    (proj / "other.cu").write_text(OTHER + "// changed\n")
    addr = f"127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(KernelpackError, match=f"cannot reach the Ray cluster at '{addr}'"):
        build(proj, address=addr)
    assert outputs_of(first) == before and not ray.is_initialized()
    with pytest.raises(KernelpackError, match="Ray address 'nowhere': expected HOST:PORT"):
        build(proj, address="nowhere")


@needs_ray
@needs_cuda_compiler
def test_a_local_ray_instance_started_by_the_build_gives_the_local_bytes(proj: Path, local_reference: Any) -> None:
    r = build(proj, jobs=2, executor="ray")  # starts a 2-CPU Ray instance and stops it
    assert not ray.is_initialized()
    assert set(r.jobs.values()) <= {"compiled", "cached"} and len(r.jobs) == 2
    assert outputs_of(r) == local_reference
    assert build(proj, executor="ray").up_to_date  # nothing changed: Ray is not even started


@needs_ray
@needs_cuda_compiler
def test_in_process_ray_builds_the_local_bytes_and_reports_compile_errors_as_locally(
        proj: Path, local_reference: Any, in_process_ray: None, tmp_path_factory: pytest.TempPathFactory) -> None:
    events: list[str] = []

    class Recorder:
        def planned(self, stale: list[Any], reused: int) -> None:
            events.append(f"planned {len(stale)} {reused}")

        def start(self, job: Any) -> None:
            events.append(f"start {job.id}")

        def done(self, job: Any, outcome: Any) -> None:
            events.append(f"done {job.id} {outcome.ok}")

    r = build(proj, executor="ray", events=Recorder())  # type: ignore[arg-type]
    assert outputs_of(r) == local_reference and ray.is_initialized()
    assert events[0] == "planned 2 0" and sorted(events[1:]) == sorted(
        [f"{w} cuda:{f}" + (" True" if w == "done" else "") for f in ("k.cu", "other.cu") for w in ("start", "done")])

    bad = 'extern "C" __global__ void neg(float* y) { y[0] = undefined_name; }'
    (proj / "other.cu").write_text(bad)
    local = tmp_path_factory.mktemp("local")
    for f in ("k.cu", "common.cuh", "kernelpack.toml"):
        (local / f).write_bytes((proj / f).read_bytes())
    (local / "other.cu").write_text(bad)
    errors = []
    for where, executor in ((local, "local"), (proj, "ray")):
        with pytest.raises(BuildFailed) as e:
            build(where, jobs=2, executor=executor, force=True)
        errors.append((e.value.message.replace(str(where), "<root>"), e.value.log.replace(str(where), "<root>")))
    assert errors[0] == errors[1] and "undefined_name" in errors[1][1] and "1 of 2" in errors[1][0]
    assert outputs_of(r) == local_reference  # the failed build left the previous outputs


TRITON_KERNEL = """import triton
import triton.language as tl


@triton.jit
def twice(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
"""
TRITON_TOML = """[library]
name = "tr"
archs = ["sm_90a"]

[[triton]]
kernel = "tk.py:twice"
signature = { x_ptr = "*fp32", n = "i32" }
specializations = [{ variant = "b128", constexprs = { BLOCK = 128 } },
                   { variant = "b256", constexprs = { BLOCK = 256 } }]
"""


@needs_ray
@needs_cuda_compiler
def test_triton_steps_on_ray_give_the_local_bytes_line_info_included(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ray_after_triton_cache: None) -> None:
    pytest.importorskip("triton")
    (tmp_path / "tk.py").write_text(TRITON_KERNEL)
    (tmp_path / "kernelpack.toml").write_text(TRITON_TOML)
    files = ("tr.kpack", "lib/libtr.so")
    # the worker compiles a copy of tk.py elsewhere; Triton records the kernel's file in line info. Separate
    # caches (kernelpack's and Triton's), so that neither build reads the other's binaries
    with config.override(cache_dir=tmp_path / "kp-ray"):
        on_ray = build(tmp_path, jobs=2, executor="ray", out=tmp_path / "ray-out")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-local"))
    with config.override(cache_dir=tmp_path / "kp-local"):
        local = build(tmp_path, jobs=2, executor="local", out=tmp_path / "local-out")
    assert set(on_ray.jobs.values()) == set(local.jobs.values()) == {"compiled"}
    assert {f: (Path(on_ray.out) / f).read_bytes() for f in files} == {f: (Path(local.out) / f).read_bytes()
                                                                       for f in files}


@pytest.fixture
def ray_after_triton_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``ray.init(num_cpus=2)`` whose workers use an empty Triton cache of their own."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-ray"))
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def slow_project(d: Path) -> Path:
    """A project whose module makes the first worker that loads it wait (it writes its pid to ``d/worker.pid``)."""
    pidfile = d / "worker.pid"
    (d / "k.cu").write_text(OTHER)
    (d / "kernelpack_project.py").write_text(textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        from kernelpack.project import Cuda
        LIBRARY = {{"name": "slow", "archs": ["sm_90a"], "out": "out"}}
        KERNELS = [Cuda("k.cu", ["neg"])]
        PIDFILE = Path({str(pidfile)!r})
        if os.getpid() != {os.getpid()} and not PIDFILE.exists():  # the first worker to load it waits to be killed
            PIDFILE.write_text(str(os.getpid()))
            time.sleep(600)
    """))
    return pidfile


def build_killing_the_worker(d: Path) -> Any:
    pidfile = slow_project(d)
    with cf.ThreadPoolExecutor(1) as pool:
        fut = pool.submit(build, d, executor="ray")
        os.kill(wait_for_pid(pidfile, fut), signal.SIGKILL)
        return fut.result(timeout=300)


@needs_ray
@needs_cuda_compiler
def test_a_worker_killed_mid_step_is_retried(tmp_path: Path, module_cache: Any, in_process_ray: None) -> None:
    r = build_killing_the_worker(tmp_path)
    assert r.jobs == {"cuda:k.cu": "compiled"} and (tmp_path / "out/lib/libslow.so").is_file()


@needs_ray
@needs_cuda_compiler
def test_a_worker_lost_past_the_retries_fails_the_step_naming_it(tmp_path: Path, module_cache: Any,
                                                                 in_process_ray: None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpack.project import distributed

    monkeypatch.setattr(distributed, "MAX_RETRIES", 0)
    with pytest.raises(BuildFailed, match=r"1 of 1 build step\(s\) failed:\n  cuda:k.cu: its Ray task failed .*"
                                          r"WorkerCrashedError"):
        build_killing_the_worker(tmp_path)
    assert not (tmp_path / "out/lib/libslow.so").exists()


@needs_ray
def test_cli_unreachable_address_exits_1_naming_it(proj: Path) -> None:
    addr = f"127.0.0.1:{free_port()}"
    r = subprocess.run([sys.executable, "-m", "kernelpack.cli", "build", str(proj), "--address", addr],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 1 and f"cannot reach the Ray cluster at '{addr}'" in r.stderr, r.stderr


def wait_for_pid(pidfile: Path, fut: cf.Future[Any]) -> int:
    """The pid the worker wrote (the build's failure, if it ends first)."""
    while not (pidfile.exists() and pidfile.read_text()):
        if fut.done():
            fut.result()
            raise AssertionError("the build finished without loading the project in a worker")
        try:
            fut.result(timeout=0.2)
        except cf.TimeoutError:
            pass
    return int(pidfile.read_text())


@needs_ray
@needs_cuda_compiler
def test_a_ray_start_head_cluster_gives_the_local_bytes(proj: Path, local_reference: Any) -> None:
    port = free_port()
    temp = Path(f"/tmp/kpray-{uuid.uuid4().hex[:8]}")  # short: Ray puts unix sockets under it
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "RAY_USAGE_STATS_ENABLED": "0"}
    ray_cli = [sys.executable, "-c", "import sys; from ray.scripts.scripts import main; sys.exit(main())"]
    try:
        subprocess.run([*ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                        f"--temp-dir={temp}", "--disable-usage-stats"], env=env, check=True, capture_output=True,
                       timeout=180)
        r = build(proj, address=f"127.0.0.1:{port}", force=True, out=proj / "cluster-out")
        assert outputs_of(r) == local_reference and not ray.is_initialized()
    finally:
        stop_cluster(temp)


def stop_cluster(temp: Path) -> None:
    """Kill exactly the processes of the cluster whose session lives under ``temp`` (never another Ray's)."""
    import shutil

    procs: dict[int, tuple[int, bytes]] = {}  # pid -> (parent, command line)
    for d in Path("/proc").iterdir():
        try:
            stat = (d / "stat").read_text()
            procs[int(d.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), (d / "cmdline").read_bytes())
        except (OSError, ValueError, IndexError):
            continue
    doomed = {pid for pid, (_, cmd) in procs.items() if str(temp).encode() in cmd}
    grew = True
    while grew:  # and their descendants (workers rename themselves "ray::IDLE")
        more = {pid for pid, (ppid, _) in procs.items() if ppid in doomed} - doomed
        doomed |= more
        grew = bool(more)
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(temp, ignore_errors=True)

