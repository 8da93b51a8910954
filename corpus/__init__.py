"""kernelpack's conformance corpus: real third-party kernels from pinned pip packages, compiled without a GPU.

The corpus is data (``corpus/*.toml``: which wrapper calls, on which example inputs, cover which specializations)
plus this package, which runs each package's own Python wrappers on CPU tensors with the kernel launches
intercepted (``kernelpack capture``, :mod:`corpus.captured`), compiles what was captured with kernelpack for every
arch, links one library per package, checks the ABIs and the generated headers, and records every failure with its
reason.

Entry point: ``scripts/corpus.py`` (``--help``); results: ``docs/corpus.md``; GPU run: ``scripts/corpus_gpu.py``.
"""

PINS = {"liger-kernel": "0.8.5", "flashinfer-python": "0.7.2.post1"}
