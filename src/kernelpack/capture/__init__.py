"""``kernelpack capture``: from a user's own PyTorch code to a kernelpack project, with no hand-written signatures.

    with kernelpack.capture(device="h200") as cap:      # no GPU here: CPU tensors stand in, queries answered for h200
        loss = model(x).sum(); loss.backward()
    cap.write_project("captured")                       # kernelpack.toml + capture_args.py; then kernelpack build

Every Triton, cuTile and CuTe DSL launch (and ``cute.compile`` call) the code makes is recorded with what the DSL's
own binder derives from its arguments; the project groups them into families and specializations (docs/capture.md).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from .devices import DEVICES, Device
from .records import Launch, Skip
from .session import Capture, current, run_script

capture = Capture


class _Module(types.ModuleType):
    """``kernelpack.capture(device="h200")``: the package itself makes a :class:`Capture`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Capture:
        return Capture(*args, **kwargs)


sys.modules[__name__].__class__ = _Module

__all__ = ["DEVICES", "Capture", "Device", "Launch", "Skip", "capture", "current", "run_script"]
