"""AOT tuning tables: ``tune.py`` times every config specialization of a family on declared problem shapes (on a GPU
machine, ``kernelpack tune``) and turns a table into shape-range dispatch (``kernelpack build --tuning``);
``table.py`` is the tuning file's model and its checked reader."""

from __future__ import annotations

from .tune import (
    FORMAT,
    FamilyTable,
    Problem,
    Timer,
    TunedShape,
    TuningError,
    TuningTable,
    bucket,
    bundle_sha256,
    constexprs,
    cuda_event_timer,
    device_arch,
    embed,
    load_problems,
    rules,
    run_tune,
    tune,
)

__all__ = ["FORMAT", "FamilyTable", "Problem", "Timer", "TunedShape", "TuningError", "TuningTable", "bucket",
           "bundle_sha256", "constexprs", "cuda_event_timer", "device_arch", "embed", "load_problems", "rules",
           "run_tune", "tune"]
