"""Errors the runtime raises: every launch refusal is a :class:`~kernelpack.core.errors.LaunchError`.

A wrong kind of argument is also a :class:`TypeError`, a wrong value (dtype, shape, alignment, device) also a
:class:`ValueError`, so callers may catch either the kernelpack or the built-in class. Every class (every
``DriverError`` instance) has ``status``: the ``kp_status`` the C library returns for the same refusal (the launch
model's STATUS table; ``tests/test_same_answer.py`` holds both back ends to it).
"""

from __future__ import annotations

from ..core.errors import BundleError, LaunchError
from ..launch.codes import STATUS_BY_NAME, STATUS_BY_VALUE


class ArgumentError(LaunchError):
    """An argument a kernel cannot take (the C library's KP_ERROR_INVALID_ARGUMENT)."""

    status = STATUS_BY_NAME["KP_ERROR_INVALID_ARGUMENT"].value


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of the wrong kind: a str for an int parameter, a float for a pointer, too few arguments."""


class ArgumentValueError(ArgumentError, ValueError):
    """An argument of the right kind but a wrong value: dtype, rank, extent, stride, alignment, device, range."""


class DescriptorArgumentError(ArgumentValueError):
    """A tensor for a tensor-descriptor argument whose dtype and rank chose the specialization but that cannot be
    encoded (strides, alignment, extents): refused for that specialization, not a reason to try another."""


class NoMatchingSpecialization(ArgumentValueError):
    """No specialization of a kernel family accepts the arguments (each one's reason is in the message)."""

    status = STATUS_BY_NAME["KP_ERROR_NO_MATCHING_SPECIALIZATION"].value


class NoBinaryForDevice(LaunchError):
    """The kernel carries no binary that runs on the launch's device."""

    status = STATUS_BY_NAME["KP_ERROR_NO_BINARY_FOR_ARCH"].value


class DriverError(LaunchError):
    """The CUDA driver refused a call or could not be used; ``code`` and ``name`` are the CUresult, ``status`` the
    C library's status for the same failure (no driver, too old, no device, a failed call)."""

    def __init__(self, message: str, *, code: int = 0, name: str = "",
                 status: int = STATUS_BY_NAME["KP_ERROR_CUDA"].value) -> None:
        super().__init__(message)
        self.code = code
        self.name = name
        self.status = status


def error_for_status(status: int) -> type[Exception]:
    """The class the runtime raises where the C library returns ``status`` (the launch model's STATUS table)."""
    st = STATUS_BY_VALUE.get(status)
    return _BY_NAME.get(st.python, LaunchError) if st is not None else LaunchError


_BY_NAME: dict[str, type[Exception]] = {c.__name__: c for c in (
    MemoryError, LaunchError, BundleError, ArgumentError, ArgumentTypeError, ArgumentValueError,
    NoMatchingSpecialization, NoBinaryForDevice, DriverError)}
