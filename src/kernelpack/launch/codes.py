"""The numbers both back ends agree on: element-type codes, status codes, the CUDA results and attributes the code
reacts to, and the launch limits. The C side reads them from the generated ``csrc/kp_model.h``
(:mod:`kernelpack.launch.header`); the Python side imports them from here. Nothing else restates one.
"""

from __future__ import annotations

from ..core.abi import LIST_MAX_RANK, DType
from ..core.records import record

# ------------------------------------------------------------------------------------------------ element types

# kp_dtype numbering: stable, append-only (every kernelpack library's header, the runtime's plans, the C extension)
DTYPES: tuple[DType, ...] = (DType.i8, DType.i16, DType.i32, DType.i64, DType.u8, DType.u16, DType.u32, DType.u64,
                             DType.f16, DType.bf16, DType.f32, DType.f64, DType.bool,
                             DType.f8e4m3, DType.f8e5m2)
# the C header's kp_dtype enum lists the first DTYPES_V1 of them (a guarded block every kernelpack library shares);
# later ones are macros in a block of their own, so headers of libraries built before and after them mix. C++ gives
# an enum without a fixed type the values its enumerators' bits span (0..15 here): a 17th dtype (code 16) needs more
DTYPES_V1 = 13
DTYPE_CODE: dict[DType, int] = {d: i + 1 for i, d in enumerate(DTYPES)}  # 0: any / untyped
DTYPE_ANY = 0


def dtype_enum_name(d: DType | None) -> str:
    """The C enumerator of a dtype in ``kp_dtype`` (``KP_F32``; ``KP_DTYPE_ANY`` for None)."""
    return "KP_DTYPE_ANY" if d is None else f"KP_{d.value.upper()}"


# Each dtype as the array libraries name it: torch's attribute (torch.<name>) and c10's ScalarType enumerator (read by
# the runtime's adapters and the torch bridge), and DLPack's (type code, bits) (the runtime's DLPack reader). Only
# NVIDIA's (OCP) fp8 formats: torch's float8_e4m3fnuz/e5m2fnuz (AMD) stay unnamed, and are refused.
TORCH_DTYPES: dict[DType, tuple[str, str]] = {
    DType.i8: ("int8", "Char"), DType.i16: ("int16", "Short"), DType.i32: ("int32", "Int"),
    DType.i64: ("int64", "Long"), DType.u8: ("uint8", "Byte"), DType.u16: ("uint16", "UInt16"),
    DType.u32: ("uint32", "UInt32"), DType.u64: ("uint64", "UInt64"), DType.f16: ("float16", "Half"),
    DType.bf16: ("bfloat16", "BFloat16"), DType.f32: ("float32", "Float"), DType.f64: ("float64", "Double"),
    DType.bool: ("bool", "Bool"), DType.f8e4m3: ("float8_e4m3fn", "Float8_e4m3fn"),
    DType.f8e5m2: ("float8_e5m2", "Float8_e5m2")}
DLPACK_DTYPES: dict[DType, tuple[int, int]] = {  # kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6, fp8 (1.1+)
    DType.i8: (0, 8), DType.i16: (0, 16), DType.i32: (0, 32), DType.i64: (0, 64), DType.u8: (1, 8),
    DType.u16: (1, 16), DType.u32: (1, 32), DType.u64: (1, 64), DType.f16: (2, 16), DType.f32: (2, 32),
    DType.f64: (2, 64), DType.bf16: (4, 16), DType.bool: (6, 8), DType.f8e4m3: (10, 8), DType.f8e5m2: (12, 8)}

# the values a 64-bit field (kp_tensor's shape/stride, the C extension's int64) can carry for each integer dtype
INT_RANGE: dict[DType, tuple[int, int]] = {d: d.int_range for d in DTYPES if d.is_integer}
INT64_RANGE: dict[DType, tuple[int, int]] = {d: (lo, min(hi, 2**63 - 1)) for d, (lo, hi) in INT_RANGE.items()}

# ------------------------------------------------------------------------------------------------ status codes


@record(frozen=True)
class Status:
    """One ``kp_status``: C name, value (never changes; new ones are appended), meaning, and the class the Python
    runtime raises for the same refusal (``kernelpack.runtime.errors`` / ``kernelpack.core.errors``)."""

    name: str
    value: int
    doc: str
    python: str


STATUS: tuple[Status, ...] = (
    Status("KP_SUCCESS", 0, "The call succeeded.", ""),
    Status("KP_ERROR_NO_DRIVER", 1, "libcuda.so.1 could not be loaded (no NVIDIA driver installed).", "DriverError"),
    Status("KP_ERROR_DRIVER_TOO_OLD", 2, "The driver predates CUDA 12.0 or lacks an entry point this library needs.",
           "DriverError"),
    Status("KP_ERROR_NO_DEVICE", 3, "The driver found no CUDA device.", "DriverError"),
    Status("KP_ERROR_CUDA", 4, "A driver call failed; the message names the call and the CUDA error.", "DriverError"),
    Status("KP_ERROR_NO_BINARY_FOR_ARCH", 5, "The kernel carries no binary that runs on the device's architecture.",
           "NoBinaryForDevice"),
    Status("KP_ERROR_NO_MATCHING_SPECIALIZATION", 6, "No specialization of a kernel family accepts these arguments.",
           "NoMatchingSpecialization"),
    Status("KP_ERROR_INVALID_ARGUMENT", 7,
           "An argument breaks the kernel's requirements (NULL, alignment, divisibility).", "ArgumentError"),
    Status("KP_ERROR_INVALID_LAUNCH", 8, "The launch shape breaks the kernel's requirements (block, cluster, smem).",
           "LaunchError"),
    Status("KP_ERROR_OUT_OF_MEMORY", 9, "Host memory ran out.", "MemoryError"),
    Status("KP_ERROR_CORRUPT_LIBRARY", 10,
           "The library's embedded data is damaged (a compressed binary did not expand).", "BundleError"),
    Status("KP_ERROR_BUILD_MISMATCH", 11,
           "The header a program was compiled with and the library it runs with come from two kernelpack builds.",
           "BundleError"),
)
STATUS_V1 = 11  # the kp_status enum of the C header lists the first STATUS_V1 (a guarded block every library shares)
STATUS_BY_NAME: dict[str, Status] = {s.name: s for s in STATUS}
STATUS_BY_VALUE: dict[int, Status] = {s.value: s for s in STATUS}
KP_SUCCESS = STATUS_BY_NAME["KP_SUCCESS"].value
KP_ERROR_INVALID_ARGUMENT = STATUS_BY_NAME["KP_ERROR_INVALID_ARGUMENT"].value
DRIVER_STATUSES = tuple(s.value for s in STATUS if s.python == "DriverError")  # the driver could not be used

# ------------------------------------------------------------------------------------------------ the CUDA driver

CUDA_API_VERSION = 12000  # every driver entry point is requested at this version (cuGetProcAddress_v2)

# CUresult values the code reacts to (cuda.h)
CUDA_RESULTS: dict[str, int] = {
    "CUDA_SUCCESS": 0,
    "CUDA_ERROR_INVALID_VALUE": 1,
    "CUDA_ERROR_NOT_INITIALIZED": 3,
    "CUDA_ERROR_NO_DEVICE": 100,
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": 222,  # loading PTX whose ISA version the driver does not know
    "CUDA_ERROR_INVALID_CONTEXT": 201,
    "CUDA_ERROR_NOT_FOUND": 500,
    "CUDA_ERROR_NOT_SUPPORTED": 801,
}
CUDA_SUCCESS = CUDA_RESULTS["CUDA_SUCCESS"]
CUDA_ERROR_INVALID_CONTEXT = CUDA_RESULTS["CUDA_ERROR_INVALID_CONTEXT"]
CUDA_ERROR_UNSUPPORTED_PTX_VERSION = CUDA_RESULTS["CUDA_ERROR_UNSUPPORTED_PTX_VERSION"]


def ptx_too_new_hint(isa: str, driver_version: int) -> str:
    """What to do when the driver refuses PTX as too new (both back ends say the same)."""
    return (f"the driver (CUDA {driver_version // 1000}.{driver_version % 1000 // 10}) cannot JIT-compile PTX ISA "
            f"{isa}, which a newer toolkit wrote: update the driver, or build the PTX with a toolkit no newer than "
            f"the driver (e.g. compiler='nvcc' of that CUDA version), or ship SASS for this GPU")

# CUdevice_attribute, CUfunction_attribute, CUpointer_attribute and CUlaunchAttributeID values (cuda.h)
DEVICE_ATTRIBUTES: dict[str, int] = {
    "MAX_THREADS_PER_BLOCK": 1, "MAX_BLOCK_DIM_X": 2, "MAX_BLOCK_DIM_Y": 3, "MAX_BLOCK_DIM_Z": 4,
    "MAX_GRID_DIM_X": 5, "MAX_GRID_DIM_Y": 6, "MAX_GRID_DIM_Z": 7, "MULTIPROCESSOR_COUNT": 16,
    "COMPUTE_CAPABILITY_MAJOR": 75, "COMPUTE_CAPABILITY_MINOR": 76, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 97,
    "CLUSTER_LAUNCH": 120, "COOPERATIVE_LAUNCH": 95,
}
FUNC_ATTRIBUTES: dict[str, int] = {"MAX_DYNAMIC_SHARED_SIZE_BYTES": 8, "NON_PORTABLE_CLUSTER_SIZE_ALLOWED": 14}
POINTER_ATTRIBUTES: dict[str, int] = {"DEVICE_ORDINAL": 9}
LAUNCH_ATTRIBUTES: dict[str, int] = {"COOPERATIVE": 2, "CLUSTER_DIMENSION": 4,
                                     "PROGRAMMATIC_STREAM_SERIALIZATION": 6}

# ------------------------------------------------------------------------------------------------ launch flags

# kp_launch.flags bits (C) and the artifact's LaunchSpec.pdl / .cooperative: stable, append-only
LAUNCH_FLAGS: dict[str, int] = {
    "PDL": 1,  # programmatic dependent launch (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1)
    "NO_PDL": 2,  # launch without PDL although the kernel's artifact asks for it
    "COOPERATIVE": 4,  # cooperative launch (CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 1): every block co-resident
}
PDL_MIN_MAJOR = 9  # programmatic dependent launch needs compute capability 9.0 or newer

# ------------------------------------------------------------------------------------------------ launch limits

MAX_DEVICES = 64  # per-device state is kept for ordinals 0..MAX_DEVICES-1
MAX_RANK = LIST_MAX_RANK  # kp_tensor modes (a tensor list's element is what one kp_tensor holds)
SMEM_DEFAULT_LIMIT = 48 * 1024  # dynamic shared memory above this needs the kernel's opt-in (cuKernelSetAttribute)
MAX_PORTABLE_CLUSTER = 8  # blocks per cluster every cluster-capable GPU runs (larger: non-portable, refused)
MAX_BLOCK = (1024, 1024, 64)  # threads per block dimension on every supported GPU (the device may say less)
MAX_BLOCK_THREADS = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)


# ------------------------------------------------------------------------------------------------ per-arch limits


@record(frozen=True)
class SmLimits:
    """What a device of one compute capability allows (NVIDIA's CUDA programming guide, "Compute Capabilities";
    CCCL's ``cuda::arch_traits``): ``smem_block`` is the shared memory one block can have, static and dynamic
    together, with the kernel's opt-in (``MAX_SHARED_MEMORY_PER_BLOCK_OPTIN``: the SM's shared memory less the 1 KiB
    the system keeps per block from 8.0 on)."""

    threads: int  # resident threads per SM
    blocks: int  # resident blocks per SM
    smem_sm: int  # shared memory per SM (bytes)
    smem_block: int  # opt-in maximum per block (bytes)


KIB = 1024
SM_LIMITS: dict[tuple[int, int], SmLimits] = {
    (6, 0): SmLimits(2048, 32, 64 * KIB, 48 * KIB),
    (6, 1): SmLimits(2048, 32, 96 * KIB, 48 * KIB),
    (6, 2): SmLimits(2048, 32, 64 * KIB, 48 * KIB),
    (7, 0): SmLimits(2048, 32, 96 * KIB, 96 * KIB),
    (7, 2): SmLimits(2048, 32, 96 * KIB, 96 * KIB),
    (7, 5): SmLimits(1024, 16, 64 * KIB, 64 * KIB),
    (8, 0): SmLimits(2048, 32, 164 * KIB, 163 * KIB),
    (8, 6): SmLimits(1536, 16, 100 * KIB, 99 * KIB),
    (8, 7): SmLimits(1536, 16, 164 * KIB, 163 * KIB),
    (8, 8): SmLimits(1536, 16, 100 * KIB, 99 * KIB),
    (8, 9): SmLimits(1536, 24, 100 * KIB, 99 * KIB),
    (9, 0): SmLimits(2048, 32, 228 * KIB, 227 * KIB),
    (10, 0): SmLimits(2048, 32, 228 * KIB, 227 * KIB),
    (10, 1): SmLimits(1536, 24, 228 * KIB, 227 * KIB),  # Thor before CUDA 13 named it 11.0
    (10, 3): SmLimits(2048, 32, 228 * KIB, 227 * KIB),
    (11, 0): SmLimits(1536, 24, 228 * KIB, 227 * KIB),
    (12, 0): SmLimits(1536, 24, 100 * KIB, 99 * KIB),
    (12, 1): SmLimits(1536, 24, 100 * KIB, 99 * KIB),
}
