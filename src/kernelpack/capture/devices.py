"""The devices a GPU-less capture can stand for: what the wrapper's device queries are answered with.

Each row is what ``torch.cuda.get_device_properties`` reports on that GPU (NVIDIA's published figures for the SXM
or the desktop board); the project a capture writes is built for the row's ``arch``. Values a wrapper derives from
them (a grid of one program per SM, ``rows_per_program = ceil(n_rows / sm_count)``) are those of the device named:
capture again for another device. The table is documented in docs/capture.md, which a test holds to this one.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import KernelpackError

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Device:
    name: str  # what --device takes
    title: str  # torch's device name
    capability: tuple[int, int]
    arch: str  # what the captured project is built for
    sm_count: int
    smem_optin: int  # max_shared_memory_per_block_optin, bytes
    smem_per_sm: int  # shared_memory_per_multiprocessor, bytes
    l2_bytes: int
    memory: int  # total_memory, bytes
    max_threads_per_sm: int
    regs_per_sm: int = 65536
    warp_size: int = 32

    def properties(self) -> dict[str, object]:
        """The fields of torch's ``_CudaDeviceProperties`` (and their common aliases) a wrapper may read."""
        return {"name": self.title, "major": self.capability[0], "minor": self.capability[1],
                "multi_processor_count": self.sm_count, "total_memory": self.memory,
                "max_shared_memory_per_block_optin": self.smem_optin, "shared_memory_per_block_optin": self.smem_optin,
                "shared_memory_per_block": 48 * KIB, "shared_memory_per_multiprocessor": self.smem_per_sm,
                "L2_cache_size": self.l2_bytes, "regs_per_multiprocessor": self.regs_per_sm,
                "max_threads_per_multi_processor": self.max_threads_per_sm, "max_threads_per_block": 1024,
                "warp_size": self.warp_size, "is_integrated": False, "is_multi_gpu_board": False,
                "gcnArchName": "", "uuid": "00000000-0000-0000-0000-000000000000", "pci_bus_id": 0,
                "pci_device_id": 0, "pci_domain_id": 0}

    def triton_properties(self) -> dict[str, int]:
        """What Triton's ``driver.active.utils.get_device_properties`` returns."""
        return {"max_shared_mem": self.smem_optin, "max_num_regs": self.regs_per_sm,
                "multiprocessor_count": self.sm_count, "warpSize": self.warp_size, "sm_clock_rate": 1_980_000,
                "mem_clock_rate": 2_619_000, "mem_bus_width": 5120}


DEVICES: dict[str, Device] = {d.name: d for d in (
    Device("a100", "NVIDIA A100-SXM4-80GB", (8, 0), "sm_80", 108, 163 * KIB, 164 * KIB, 40 * MIB, 80 * GIB, 2048),
    Device("l40s", "NVIDIA L40S", (8, 9), "sm_89", 142, 99 * KIB, 100 * KIB, 96 * MIB, 48 * GIB, 1536),
    Device("rtx4090", "NVIDIA GeForce RTX 4090", (8, 9), "sm_89", 128, 99 * KIB, 100 * KIB, 72 * MIB, 24 * GIB, 1536),
    Device("h100", "NVIDIA H100 80GB HBM3", (9, 0), "sm_90a", 132, 227 * KIB, 228 * KIB, 50 * MIB, 80 * GIB, 2048),
    Device("h100-pcie", "NVIDIA H100 PCIe", (9, 0), "sm_90a", 114, 227 * KIB, 228 * KIB, 50 * MIB, 80 * GIB, 2048),
    Device("h200", "NVIDIA H200", (9, 0), "sm_90a", 132, 227 * KIB, 228 * KIB, 50 * MIB, 141 * GIB, 2048),
    Device("b200", "NVIDIA B200", (10, 0), "sm_100a", 148, 227 * KIB, 228 * KIB, 126 * MIB, 180 * GIB, 2048),
    Device("rtx5090", "NVIDIA GeForce RTX 5090", (12, 0), "sm_120", 170, 99 * KIB, 100 * KIB, 96 * MIB, 32 * GIB,
           1536),
)}


def device(name: str) -> Device:
    """The row named ``name`` (case-insensitive); KernelpackError listing the rows otherwise."""
    d = DEVICES.get(name.strip().lower())
    if d is None:
        raise KernelpackError(f"unknown device {name!r} for a GPU-less capture; known: {', '.join(DEVICES)}")
    return d
