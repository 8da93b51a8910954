"""Triton frontend, the public verbs: ``kernelpack.triton.compile(kernel, signature | example_args=...) -> Bundle``
and ``signature_from_args``.

The frontend lives in :mod:`kernelpack.frontends.triton`.
"""

from __future__ import annotations

from .frontends.triton.compile import DerivedSignature, Specialization, compile, signature_from_args

__all__ = ["DerivedSignature", "Specialization", "compile", "signature_from_args"]
