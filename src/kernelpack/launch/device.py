"""Values a launch reads from its device, and specializations restricted to devices: one rule, as data, for the C
library and the Python runtime (``csrc/kp_model.h`` renders the codes and the rules).

* **Device-derived parameters**: a hidden parameter whose role names a property
(:data:`kernelpack.core.abi.DEVICE_ROLES`:
  ``sm_count``, ``max_dynamic_smem``, ``max_active_clusters:<blocks per cluster>``) is filled at launch with that
  property of the launch device. Device-wide properties are read once per device; ``max_active_clusters`` depends on
  the kernel too and is asked for once per device and specialization (``cuOccupancyMaxActiveClusters``, an optional
  driver entry point: a launch that needs it on a driver without it is refused with ``KP_ERROR_DRIVER_TOO_OLD``).
* **Device requirements** (``KernelArtifact.requires``, e.g. ``{"sm_count": 132}``): a specialization runs only on
  devices whose property has that value -- built for a constexpr computed from the SM count, say. Where a
  requirement fails the specialization is unavailable, as one with no binary for the arch
  (``KP_ERROR_NO_BINARY_FOR_ARCH`` when nothing else fits); where its requirements hold it ranks above a
  specialization with fewer of them, before the binary rule (:func:`device_quality`).

``max_active_clusters:N`` is what CuTe's ``HardwareInfo().get_max_active_clusters(N)`` computes, asked of the kernel
being launched: clusters of N x 1 x 1 blocks, a grid of one cluster, the kernel's fixed block (REQNTID or
``LaunchSpec.block``; :data:`MAC_BLOCK` threads when it fixes none) and as much dynamic shared memory as leaves
room for one block per SM (:func:`mac_smem`, the kernel's limit raised to it first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..core.abi import DEVICE_ROLES, device_role
from ..core.records import record
from .codes import DEVICE_ATTRIBUTES, MAX_PORTABLE_CLUSTER


@record(frozen=True)
class DeviceProperty:
    """One property of a device a launch can read: ``code`` is its ``KP_DP_*`` number; ``attribute`` the
    ``CUdevice_attribute`` it is (a key of codes.DEVICE_ATTRIBUTES), or None for one asked of the kernel."""

    name: str
    code: int
    attribute: str | None
    doc: str


PROPERTIES: tuple[DeviceProperty, ...] = (
    DeviceProperty("sm_count", 1, "MULTIPROCESSOR_COUNT", "streaming multiprocessors on the device"),
    DeviceProperty("max_dynamic_smem", 2, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN",
                   "bytes of shared memory a block can opt into on the device"),
    DeviceProperty("max_active_clusters", 3, None,
                   "clusters of a given size of the kernel that fit at once (cuOccupancyMaxActiveClusters)"),
)
BY_NAME: dict[str, DeviceProperty] = {p.name: p for p in PROPERTIES}
REQUIRABLE: tuple[str, ...] = tuple(p.name for p in PROPERTIES if p.attribute is not None)
REQUIRES_BONUS = 10000  # the quality a satisfied requirement adds: more than any binary rule gives (binaries.RULES)
MAC_BLOCK = 128  # threads per block of the max_active_clusters query for a kernel that fixes no block

assert tuple(p.name for p in PROPERTIES) == DEVICE_ROLES
assert all(p.attribute is None or p.attribute in DEVICE_ATTRIBUTES for p in PROPERTIES)


def role_property(role: str) -> tuple[DeviceProperty, int] | None:
    """The property a parameter role reads, with its cluster size (0 but for ``max_active_clusters:N``)."""
    hit = device_role(role)
    return None if hit is None else (BY_NAME[hit[0]], hit[1])


def check_role(role: str, where: str) -> str | None:
    """Why a device-derived role cannot be used (None: it can)."""
    hit = role_property(role)
    if hit is not None and hit[0].name == "max_active_clusters" and not 1 <= hit[1] <= MAX_PORTABLE_CLUSTER:
        return (f"{where}: role {role!r} asks for clusters of {hit[1]} blocks; at most {MAX_PORTABLE_CLUSTER} (the "
                f"portable cluster size) are allowed")
    return None


def normalize_requires(requires: Mapping[str, int] | Sequence[tuple[str, int]], where: str) -> tuple[
        tuple[str, int], ...]:
    """``{"sm_count": 132}`` or pairs, checked, as sorted pairs (ValueError naming ``where``)."""
    items = list(requires.items()) if isinstance(requires, Mapping) else [tuple(x) for x in requires]
    out: dict[str, int] = {}
    for item in items:
        if len(item) != 2:
            raise ValueError(f"{where}: a device requirement is a (property, value) pair (got {item!r})")
        name, value = item
        if name not in REQUIRABLE:
            raise ValueError(f"{where}: cannot require device property {name!r} (requirable: {', '.join(REQUIRABLE)})")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{where}: device requirement {name} must be an int >= 0 (got {value!r})")
        if name in out and out[name] != value:
            raise ValueError(f"{where}: device property {name} required twice ({out[name]} and {value})")
        out[name] = value
    return tuple(sorted(out.items()))


def requires_text(requires: Sequence[tuple[str, int]]) -> str:
    """``sm_count == 132, max_dynamic_smem == 232448`` (messages, docs)."""
    return ", ".join(f"{n} == {v}" for n, v in requires)


def unmet(requires: Sequence[tuple[str, int]], values: Mapping[str, int]) -> list[tuple[str, int, int]]:
    """(property, required, the device's) of each requirement the device's ``values`` break."""
    return [(n, v, values[n]) for n, v in requires if values[n] != v]


def device_quality(binary_quality: int, requires: Sequence[tuple[str, int]], values: Mapping[str, int]) -> int:
    """How well a specialization fits a device: 0 when its best binary cannot run there (``binary_quality`` 0) or a
    requirement fails; else the binary's quality plus :data:`REQUIRES_BONUS` per requirement."""
    if binary_quality <= 0 or unmet(requires, values):
        return 0
    return binary_quality + REQUIRES_BONUS * len(requires)


def mac_smem(smem_optin: int, static_smem: int) -> int:
    """The dynamic shared memory of the max_active_clusters query: all a block can have, so one block fills an SM."""
    return max(smem_optin - static_smem, 0)
