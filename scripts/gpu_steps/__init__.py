"""The steps of ``scripts/gpu.py``: the table (``table``), the build-machine half (``prepare``), the GPU-machine half
(``run``) and the tools the GPU steps call (``sanitize``, ...)."""
