"""The target device's properties, answered at compile time in place of the build machine's GPU.

Some CuTe kernels ask ``cutlass.utils.HardwareInfo`` for the device while they are traced: a persistent scheduler sizes
its grid from the SM count (``min(sm_count, tiles)``), others read the L2 size or the clusters that fit. That asks the
build machine's driver: on a machine without a GPU it fails (``DynamicLibNotFoundError: "cuda"``), on one with another
GPU it bakes that GPU's answer into a program for the target. Inside :func:`answering` every ``HardwareInfo`` (however
a module imported the class) answers from the properties given for the target instead, and a property not given is a
``CompileError`` naming it.

Properties (:data:`PROPERTIES`): ``sm_count`` (``get_device_multiprocessor_count``), ``l2_cache_bytes``
(``get_l2_cache_size_in_bytes``), ``max_active_clusters`` (``get_max_active_clusters(n)``: a table by cluster size,
``{"2": 66}``, or one number for every size).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from ...core.errors import CompileError

PROPERTIES = ("sm_count", "l2_cache_bytes", "max_active_clusters")


def check_device(device: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``device`` checked: known properties, positive integers (``max_active_clusters`` also a table of them)."""
    out: dict[str, Any] = {}
    for key, value in device.items():
        if key not in PROPERTIES:
            raise CompileError(f"{where}: unknown device property {key!r}; known: {', '.join(PROPERTIES)}")
        if key == "max_active_clusters" and isinstance(value, Mapping):
            if not all(_positive(v) and str(k).isdigit() for k, v in value.items()):
                raise CompileError(f"{where}: max_active_clusters must map cluster sizes to positive integers "
                                   f"(got {dict(value)!r})")
            out[key] = {int(k): int(v) for k, v in value.items()}
        elif _positive(value):
            out[key] = int(value)
        else:
            raise CompileError(f"{where}: device property {key} must be a positive integer (got {value!r})")
    return out


def _positive(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def describe(device: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(device.items()))


@contextlib.contextmanager
def answering(arch: str, device: Mapping[str, Any] | None) -> Iterator[None]:
    """Within the block ``cutlass.utils.HardwareInfo`` answers for the target ``arch`` from ``device``."""
    try:
        from cutlass.utils.hardware_info import HardwareInfo
    except ImportError:  # a DSL without it: nothing to answer
        yield
        return
    dev = dict(device or {})

    def ask(prop: str, method: str) -> Any:
        if prop not in dev:
            raise CompileError(
                f"the kernel asks cutlass.utils.HardwareInfo.{method}() while it is compiled for {arch}; the build "
                f"machine's GPU must not answer for the target: give the target device's {prop} (kernelpack.cute."
                f"target_arch({arch!r}, device={{'{prop}': ...}}) or the [[cute]] entry's device table)")
        return dev[prop]

    def init(self: Any, device_id: int = 0) -> None:
        self.device_id = device_id

    def clusters(self: Any, cluster_size: int, stream: Any = None) -> int:
        value = ask("max_active_clusters", "get_max_active_clusters")
        if isinstance(value, dict):
            if cluster_size not in value:
                raise CompileError(f"the kernel asks for the max active clusters of size {cluster_size} on {arch}; "
                                   f"the device table gives sizes {sorted(value)}")
            return int(value[cluster_size])
        return int(value)

    patched = {
        "__init__": init,
        "get_device_multiprocessor_count": lambda self: ask("sm_count", "get_device_multiprocessor_count"),
        "get_l2_cache_size_in_bytes": lambda self: ask("l2_cache_bytes", "get_l2_cache_size_in_bytes"),
        "get_max_active_clusters": clusters,
    }
    saved = {name: HardwareInfo.__dict__[name] for name in patched if name in HardwareInfo.__dict__}
    for name, fn in patched.items():
        setattr(HardwareInfo, name, fn)
    try:
        yield
    finally:
        for name in patched:
            if name in saved:
                setattr(HardwareInfo, name, saved[name])
            else:
                delattr(HardwareInfo, name)
