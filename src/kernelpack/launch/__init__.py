"""The launch model: everything both back ends (the C library generator ``clib/`` and the Python runtime
``runtime/``) must agree on about launching an artifact, written once.

* :mod:`.codes` -- element-type codes, status codes (with the runtime exception of each), the CUDA results,
  attributes and entry points the code reacts to, launch limits;
* :mod:`.binaries` -- which of a kernel's binaries a device runs (SASS, arch-specific, PTX);
* :mod:`.plan` -- the argument plan of one specialization: how each kernel parameter is filled from the caller's
  arguments (tensor descriptors folded, hidden scratch, TMA descriptors), grid formulas as programs;
* :mod:`.ranges` -- range constraints on integer arguments and tensor extents (shape-range dispatch);
* :mod:`.family` -- a family's consistency, each specialization's constraints as data and the dispatch order;
* :mod:`.header` -- all of it rendered for C as ``csrc/kp_model.h`` (generated, committed, checked for drift).

``clib/`` renders the model as C; ``runtime/`` interprets it. A fact both need lives here, never in two files.
"""
