"""One exception hierarchy for everything kernelpack raises on purpose."""

from __future__ import annotations


class KernelpackError(Exception):
    """Base of every error kernelpack raises deliberately.

    ``log`` carries a tool's output (compiler log) where there is one; it is appended to the message.
    """

    def __init__(self, message: str, *, log: str | None = None) -> None:
        self.message = message
        self.log = log
        super().__init__(message if not log else f"{message}\n--- log ---\n{log.rstrip()}")


class CompileError(KernelpackError):
    """A frontend could not compile a kernel (the compiler's log is attached)."""


class CubinError(KernelpackError):
    """A cubin is malformed, truncated, relocatable or not a CUDA ELF."""


class DecompressError(KernelpackError):
    """Compressed data (a fatbin entry) is malformed, truncated, larger than allowed, or uses what kernelpack lacks."""


class AbiMismatch(KernelpackError):
    """A kernel's typed ABI disagrees with the parameter table in its cubin."""


class AbiError(KernelpackError):
    """An ABI description is invalid in itself (bad dtype, bad size, bad JSON)."""


class LimitError(KernelpackError):
    """A binary's launch fits no device it runs on (shared memory beyond its arch's limit): refused when the
    artifact is made (kernelpack.launch.limits), naming the kernel, its arch, what it needs and the limit."""


class ConfigDropped(UserWarning):
    """One config of an autotuned family left out for one arch because it exceeds that arch's limits, as Triton's
    autotuner prunes it: the family has no binary of that arch for the config (dispatch there picks another one).
    ``kernel``: the family; ``label``: the config's (``mm[c0]``); ``arch``; ``reason``: what it needs and the
    limit."""

    def __init__(self, kernel: str, label: str, arch: str, reason: str) -> None:
        self.kernel, self.label, self.arch, self.reason = kernel, label, arch, reason
        super().__init__(kernel, label, arch, reason)

    def __str__(self) -> str:
        return f"kernel {self.label} left out for {self.arch}: {self.reason}"


class BundleError(KernelpackError):
    """A bundle file is truncated, tampered with, or of an unsupported format version."""


class CacheError(KernelpackError):
    """The compile cache could not be used (unwritable directory and the like)."""


class ProjectError(KernelpackError):
    """The project file is malformed or names something that does not exist."""


class LaunchError(KernelpackError):
    """A launch was refused before reaching the driver, or the driver refused it. ``status``: the C library's
    ``kp_status`` for the same refusal (here KP_ERROR_INVALID_LAUNCH: the launch shape; subclasses say theirs)."""

    status = 8  # KP_ERROR_INVALID_LAUNCH (kernelpack.launch.codes; the test of the model checks it)
