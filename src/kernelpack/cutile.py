"""cuTile frontend, the public verbs: ``kernelpack.cutile.compile(kernel, signature | example_args=...) -> Bundle``,
``signature_from_args`` and ``signature_source``.

The frontend lives in :mod:`kernelpack.frontends.cutile`.
"""

from __future__ import annotations

from .frontends.cutile.compile import compile, signature_from_args, signature_source

__all__ = ["compile", "signature_from_args", "signature_source"]
