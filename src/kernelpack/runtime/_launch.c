/* kernelpack.runtime._launch: the fast launch path.
 *
 * One Family object per kernel family is the callable users hold. Per parameter layout of each specialization it
 * keeps a packing plan (built once from kernelpack.core.abi by launch/plan.py); per device, the dispatch table (per
 * specialization: the plan of the binary chosen for the device, its kernel handle and launch facts, the values of
 * its device-derived params; the device's limits) pushed by runtime/family.py after the device was loaded. A call
 * reads the arguments (torch tensors through the optional torch bridge, ints, floats), picks the first
 * specialization every argument fits, checks the launch configuration, packs the parameters into a stack buffer and
 * calls cuLaunchKernel / cuLaunchKernelEx with the GIL released. It allocates nothing and calls no Python code on
 * that path.
 *
 * Anything else -- another kind of argument, a device not loaded yet, any failed check -- goes to the Python
 * path (KernelFamily.call), which launches the general case or raises the error with its full message. So the
 * extension never formats a user error; the one error it raises itself is a driver failure of the launch.
 *
 * Driver entry points are handed over by runtime/driver.py (resolved there with cuGetProcAddress_v2 from the
 * dlopen-ed driver), so both paths always call one driver.
 *
 * Built as a version-specific extension (ints and floats read inline: CPython's compact ints); with
 * KERNELPACK_BUILD_ABI3=1, with the limited API (abi3) for CPython >= 3.12, where vectorcall is part of it; and for
 * the runtime a generated wheel carries, with the limited API of 3.10 (abi3 for every CPython >= 3.10: vectorcall
 * where the interpreter is 3.12 or newer, _launch_vcall.c).
 *
 * The extension is one translation unit made of the parts below, one concern each (a unity build): this file
 * includes them in order and setup.py compiles this file alone, so the code is what one file gives. The static steps
 * a call takes from other parts (read_views, map_kwnames, grid_from_rule, current_stream, launch) are inlined into
 * family_call (the plain call: family_resolve with no capture and no lists) and family_resolve_any (a capture, a
 * family with lists), and gcc specializes others (call_load, driver_error); separate units would lose that without
 * LTO. A new part is included here; a part is never compiled on its own.
 */
#include "_launch.h"

#include "_launch_scalars.c"   /* scalar values: ranges, int and float read and stored */
#include "_launch_vcall.c"     /* the limited API of 3.10: calls without vectorcall where it is not stable ABI */
#include "_launch_desc.c"      /* tensor descriptors: TMA maps encoded and cached */
#include "_launch_args.c"      /* the arguments of one launch: views, fit_slot */
#include "_launch_config.c"    /* launch configuration, grid formulas, the driver call */
#include "_launch_call.c"      /* one call: keywords, device, dispatch, checks, launch */
#include "_launch_prepared.c"  /* prepared launches (Family.prepare) */
#include "_launch_family.c"    /* make_family, plans, device tables */
#include "_launch_module.c"    /* the Family type, module functions, init */
