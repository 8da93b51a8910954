"""CuTe DSL: ``compiler.py`` the verbs ``compile`` and ``export`` (:mod:`kernelpack.cute`), ``derive.py`` typed
parameters from the DSL's argument objects, ``types.py`` its types, ``capture.py`` and ``grid.py`` the launches and
grid formulas it traces, ``llvm.py`` what it lowered, ``scope.py`` the target arch (and device) a build holds,
``examples.py`` example tensors made global-memory fake tensors, ``intercept.py`` a package's own ``cute.compile`` calls
recorded, ``device.py`` the target device answered to ``HardwareInfo``, ``entry.py`` the ``[[cute]]`` project entry.
Host programs (``export``) are linked by :mod:`kernelpack.clib.host`.

The registry (:mod:`kernelpack.frontends.registry`) reads ``FRONTEND`` and the entry class from here."""

from __future__ import annotations

from .entry import FRONTEND, Cute

__all__ = ["FRONTEND", "Cute"]
