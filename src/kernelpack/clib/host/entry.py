"""Generate the typed C entry points (NAME.h + NAME_entry.c) of a library of CuTe host programs.

Each program becomes ``kp_status NAME_<prog>(<typed params>)``: tensor descriptors by value as structs named
after the ABI, scalars at their exact width, streams as ``void*``. The entry refuses zero extents before any host
code runs, picks the object whose arch matches the current device, initializes it once per process and loads it
once per device, then calls CuTe's packed host function. Status values are kernelpack's ``kp_status``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...bundle.host_manifest import c_definition
from ...bundle.host_program import HostProgram
from ...core.abi import Struct
from ...core.errors import KernelpackError
from ...core.names import c_name, check_library_name, entry_name
from ..buildid import c_definitions, header_block
from ..cdecl import TypeNames, common_header


def _params(names: TypeNames, prog: HostProgram) -> str:
    out: list[str] = []
    seen: dict[str, str] = {}
    for p in prog.params:
        v = c_name(p.name)  # the entry's own locals are kp_-prefixed: a user's name never collides with them
        if v in seen:
            raise KernelpackError(f"host program {prog.label}: parameters '{seen[v]}' and '{p.name}' would both be "
                                  f"named {v} in the generated C (reserved names are renamed); rename one")
        seen[v] = p.name
        out.append(f"void* {v}" if p.stream else f"{names.c_type(p.type)} {v}")
    return ", ".join(out) or "void"


def _doc(prog: HostProgram) -> str:
    lines = [f"/** Run the CuTe host program {prog.label} ({', '.join(str(o.arch) for o in prog.objects)}) on the "
             f"current device."]
    for p in prog.params:
        v = c_name(p.name) + ("" if c_name(p.name) == p.name else f" ({p.name}, renamed: reserved in C/C++)")
        if p.stream:
            lines.append(f" *  @param {v} CUstream/cudaStream_t to launch on (NULL = legacy default stream)")
        elif isinstance(p.type, Struct) and p.type.tensor is not None:
            lines.append(f" *  @param {v} tensor descriptor (dynamic extents must be > 0"
                         f"{', else nothing runs' if prog.zero_extent == 'skip' else ''})")
        else:
            lines.append(f" *  @param {v} {p.type.c_type}")
    lines.append(" *  @return KP_SUCCESS, or an error; NAME_last_error() says why. */")
    return "\n".join(lines)


def declarations(lib: str, programs: Sequence[HostProgram], names: TypeNames) -> str:
    """The documented prototypes of the programs' entries (``names`` must know every parameter type)."""
    return "\n\n".join(f"{_doc(p).replace('NAME_', lib + '_')}\nkp_status {entry_name(lib, p.symbol)}("
                       f"{_params(names, p)});" for p in programs)


def call_args(prog: HostProgram) -> str:
    """The entry's parameter names, comma-separated (for forwarding wrappers)."""
    return ", ".join(c_name(p.name) for p in prog.params)


def params_decl(names: TypeNames, prog: HostProgram) -> str:
    return _params(names, prog)


def generate(lib: str, programs: Sequence[HostProgram], names: TypeNames | None = None, *,
             integrated: bool = False) -> tuple[str, str]:
    """Return (header, C source) for the library ``lib``.

    ``integrated``: the entries go into a kernelpack C library (:class:`kernelpack.clib.Library`) whose ``NAME.h``
    declares them and whose ``NAME_last_error``/``NAME_last_cuda_error`` report their failures too: the source
    then defines neither and hands each failure to the library's hidden ``NAME_kp_host_error(cuda, message)``;
    ``names`` must be the library's TypeNames (the header returned is then only the declarations).
    """
    check_library_name(lib)
    if not programs:
        raise KernelpackError(f"library {lib}: no host programs")
    syms = [p.symbol for p in programs]
    if len(set(syms)) != len(syms):
        raise KernelpackError(f"library {lib}: two host programs named {sorted(s for s in syms if syms.count(s) > 1)}")
    names = names or TypeNames(lib)
    for prog in programs:
        for p in prog.params:
            names.add(p.type)
    guard = f"{lib.upper()}_CUTE_H"
    decls = declarations(lib, programs, names)
    if integrated:
        return decls, _source(lib, programs, names, integrated=True)
    header = f"""/* {lib}: CuTe DSL host programs compiled ahead of time by kernelpack; needs only libcuda.so.1. */
#ifndef {guard}
#define {guard}
#include <stdbool.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {{
#endif
{common_header()}
{names.definitions()}

{decls}

/** Message of the last failed call on this thread ("" after a success). */
const char* {lib}_last_error(void);
/** The CUresult of the last failed driver call on this thread (0 if none). */
int {lib}_last_cuda_error(void);
/** Device whose primary context is made current on threads that have no current context (default 0). */
void {lib}_set_default_device(int device);

{header_block(lib, "")}
#ifdef __cplusplus
}}
#endif
#endif
"""
    return header, _source(lib, programs, names)


def _source(lib: str, programs: Sequence[HostProgram], names: TypeNames, integrated: bool = False) -> str:
    """NAME_entry.c: the object table and the typed entries; the fixed part is cute_host/kp_host.c."""
    objs = [(prog, o) for prog in programs for o in prog.objects]
    externs = "\n".join(
        f"extern void _mlir_{o.prefix}_cuda_init(void**);\n"
        f"extern void _mlir_{o.prefix}_cuda_load_to_device(void**);\n"
        f"extern void {o.info.entry(o.prefix)}(void**, int32_t);" for _, o in objs)
    table = ",\n    ".join(
        f"{{\"{o.arch}\", {o.arch.major}, {o.arch.minor}, {_suffix(o.arch.suffix)}, _mlir_{o.prefix}_cuda_init, "
        f"_mlir_{o.prefix}_cuda_load_to_device, {o.info.entry(o.prefix)}, NULL, 0, {{0}}}}" for _, o in objs)
    hook = (f"/* the kernelpack library's error state: its {lib}_last_error reports these failures too */\n"
            f"__attribute__((visibility(\"hidden\"))) void {lib}_kp_host_error(int cuda, const char* message);\n"
            f"#define KP_ERROR_HOOK {lib}_kp_host_error\n" if integrated else "")
    error_api = "" if integrated else (f"KP_EXPORT const char* {lib}_last_error(void) {{ return kp_tls_msg; }}\n"
                                       f"KP_EXPORT int {lib}_last_cuda_error(void) {{ return kp_tls_cuerr; }}\n"
                                       f"{c_definitions(lib, 'KP_EXPORT')}")
    bodies, first = [], 0
    for prog in programs:
        bodies.append(_entry(lib, prog, names, first))
        first += len(prog.objects)
    return f"""/* Generated by kernelpack: typed entries over CuTe export objects and the kernelpack driver shim. */
#include "{lib}.h"

#define KP_HOST_LIB "{lib}"
{hook}#include "kp_host.c"

#define KP_ENTRY_ASSERT(cond, tag) typedef char kp_entry_assert_##tag[(cond) ? 1 : -1]
{names.layout_asserts().replace("KP_STATIC_ASSERT", "KP_ENTRY_ASSERT")}

{externs}

static kp_cute_object kp_objects[] = {{
    {table}
}};

{error_api}KP_EXPORT void {lib}_set_default_device(int device) {{ kp_shim_set_default_device(device); }}

{chr(10).join(bodies)}
{c_definition(lib, programs)}"""


def _suffix(s: str) -> str:
    return f"'{s}'" if s else "0"


def _entry(lib: str, prog: HostProgram, names: TypeNames, first: int) -> str:
    fn = entry_name(lib, prog.symbol)
    checks = []
    for user_name, field in prog.extents():
        pname = c_name(user_name)
        if prog.zero_extent == "skip":
            checks.append(f"    if ({pname}.{field} == 0) return KP_SUCCESS; /* empty: nothing to compute */")
        else:
            checks.append(f"    if ({pname}.{field} == 0)\n        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "
                          f"\"{fn}: {pname}.{field} is 0 (zero extents are refused)\");")
        checks.append(f"    if ({pname}.{field} < 0)\n        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "
                      f"\"{fn}: {pname}.{field} is negative\");")
    for p in prog.params:
        for field, div in p.checks:
            v = c_name(p.name)
            value = f"(uintptr_t){v}.data" if field == "data" else f"{v}.{field}"
            what = (f"{p.name}.data is not {div}-byte aligned" if field == "data"
                    else f"{p.name}.{field} is not a multiple of {div}")
            checks.append(f"    if ({value} % {div} != 0)\n        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "
                          f"\"{fn}: {what} (the kernel was compiled for it)\");")
    args = ", ".join([f"&{c_name(p.name)}" for p in prog.params] + ["&kp_ret"])
    return f"""KP_EXPORT kp_status {fn}({_params(names, prog)}) {{
{chr(10).join(checks)}
    kp_cute_object* kp_o = NULL;
    kp_status kp_st = kp_prepare("{prog.label}", kp_objects + {first}, {len(prog.objects)}, &kp_o);
    if (kp_st != KP_SUCCESS) return kp_st;
    int32_t kp_ret = 0;
    void* kp_args[] = {{{args}}};
    return kp_run_host("{fn}", kp_o, kp_args, (int32_t)(sizeof kp_args / sizeof kp_args[0]), &kp_ret);
}}
"""
