"""Errors the runtime raises: every launch refusal is a :class:`~kernelpack.errors.LaunchError`.

A wrong kind of argument is also a :class:`TypeError`, a wrong value (dtype, shape, alignment, device) also a
:class:`ValueError`, so callers may catch either the kernelpack or the built-in class.
"""

from __future__ import annotations

from ..errors import BundleError, KernelpackError, LaunchError
from ..launch.codes import STATUS_BY_VALUE


class ArgumentTypeError(LaunchError, TypeError):
    """An argument of the wrong kind: a str for an int parameter, a float for a pointer, too few arguments."""


class ArgumentValueError(LaunchError, ValueError):
    """An argument of the right kind but a wrong value: dtype, rank, extent, stride, alignment, device, range."""


class NoMatchingSpecialization(ArgumentValueError):
    """No specialization of a kernel family accepts the arguments (each one's reason is in the message)."""


class DriverError(LaunchError):
    """The CUDA driver refused a call; ``code`` and ``name`` are the CUresult."""

    def __init__(self, message: str, *, code: int = 0, name: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.name = name


def error_for_status(status: int) -> type[KernelpackError]:
    """The class the runtime raises where the C library returns ``status`` (the launch model's STATUS table)."""
    st = STATUS_BY_VALUE.get(status)
    return _BY_NAME.get(st.python, LaunchError) if st is not None else LaunchError


_BY_NAME: dict[str, type[KernelpackError]] = {c.__name__: c for c in (
    LaunchError, BundleError, ArgumentTypeError, ArgumentValueError, NoMatchingSpecialization, DriverError)}
