/* kernelpack.runtime._wheel_launch -- _launch.c built with the limited API of CPython 3.10 (setup.py): the launch
 * extension of the runtime generated wheels carry (kernelpack/wheel/runtime.py), which puts it there as
 * _launch.abi3.so. Its init function is PyInit__launch: it is never imported under this file's own name. A file of
 * its own so that its object does not overwrite the version-specific build's.
 */
#include "_launch.c"
