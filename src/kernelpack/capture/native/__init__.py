"""Native launches: kernels launched by code that calls the CUDA driver itself (CUDA C++ built with nvcc, whose host
code computes the launch; NVRTC; any library), recorded on a GPU by a stand-in for ``libcuda.so.1``.

- :mod:`.driver`: the real driver, its exports, the recorder built from ``recorder.c`` and loaded into the process;
- :mod:`.log`: the recorder's log, read back;
- :mod:`.kernels`: the log -> capture launches (each kernel's cubin, its C++ name, its launches).
"""
