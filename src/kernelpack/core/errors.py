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
