"""Kernel time and host launch time of a launch, measured apart.

CUDA events around back-to-back launches measure the GPU only when the GPU has a backlog: for a kernel shorter
than its launch's host cost, the GPU idles between launches and the events measure the host. So
:func:`measure` first times the host (wall clock around ``batch`` launches, then a synchronize), then queues the
timed launches behind a sleep kernel (``torch.cuda._sleep``) long enough to cover that host time twice over: the
GPU starts the first timed kernel only after the host has queued them all, and the events between the sleep and
the last kernel measure back-to-back GPU execution. A measurement whose queueing outlasted the sleep (a host
hiccup) is repeated with a longer sleep.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MIN_SLEEP_US = 200.0


@dataclass(frozen=True)
class Timing:
    kernel_us: float  # GPU time per launch, back to back, with a backlog (median)
    host_us: float  # host time to issue one launch (median)


def backlog_us(host_batch_us: float) -> float:
    """How long the backlog kernel sleeps: twice the host time of the batch, at least MIN_SLEEP_US."""
    return max(MIN_SLEEP_US, 2.0 * host_batch_us)


_CYCLES_PER_US: list[float] = []


def cycles_per_us() -> float:
    """What ``torch.cuda._sleep(n)`` spins per microsecond on this GPU (measured once)."""
    import torch

    if not _CYCLES_PER_US:
        n = 5_000_000
        torch.cuda._sleep(1000)
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(n)
        b.record()
        b.synchronize()
        _CYCLES_PER_US.append(n / max(1e-3, a.elapsed_time(b) * 1000.0))
    return _CYCLES_PER_US[0]


def measure(launch: Callable[[], Any], reps: int, batch: int = 20) -> Timing:
    """Median kernel time and host time per launch of ``launch`` (``reps`` batches of ``batch`` launches)."""
    import torch

    launch()
    torch.cuda.synchronize()
    host, kernel = [], []
    cpu = cycles_per_us()
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(batch):
            launch()
        host_batch = (time.perf_counter() - t0) * 1e6
        torch.cuda.synchronize()
        host.append(host_batch / batch)
        sleep_us = backlog_us(host_batch)
        for _attempt in range(3):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(int(sleep_us * cpu))
            t0 = time.perf_counter()
            a.record()
            for _ in range(batch):
                launch()
            b.record()
            queued = (time.perf_counter() - t0) * 1e6
            b.synchronize()
            if queued < sleep_us:
                kernel.append(a.elapsed_time(b) * 1000.0 / batch)
                break
            sleep_us = 2.0 * queued  # the host was slower than the backlog: again, with a longer one
    return Timing(statistics.median(kernel) if kernel else float("nan"), statistics.median(host))
