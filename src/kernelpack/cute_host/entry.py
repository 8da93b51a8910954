"""Generate the typed C entry points (NAME.h + NAME_entry.c) of a library of CuTe host programs.

Each program becomes ``kp_status NAME_<prog>(<typed params>)``: tensor descriptors by value as structs named
after the ABI, scalars at their exact width, streams as ``void*``. The entry refuses zero extents before any host
code runs, picks the object whose arch matches the current device, initializes it once per process and loads it
once per device, then calls CuTe's packed host function. Status values are kernelpack's ``kp_status``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..abi import Struct
from ..clib.cdecl import TypeNames, common_header
from ..errors import KernelpackError
from ..names import c_name, check_library_name, entry_name
from .manifest import c_definition
from .program import HostProgram

MAX_DEVICES = 64


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
#ifdef __cplusplus
}}
#endif
#endif
"""
    return header, _source(lib, programs, names)


def _source(lib: str, programs: Sequence[HostProgram], names: TypeNames, integrated: bool = False) -> str:
    objs = [(prog, o) for prog in programs for o in prog.objects]
    externs = "\n".join(
        f"extern void _mlir_{o.prefix}_cuda_init(void**);\n"
        f"extern void _mlir_{o.prefix}_cuda_load_to_device(void**);\n"
        f"extern void {o.info.entry(o.prefix)}(void**, int32_t);" for _, o in objs)
    table = ",\n    ".join(
        f"{{\"{o.arch}\", {o.arch.major}, {o.arch.minor}, {int(o.arch.suffix == 'a')}, _mlir_{o.prefix}_cuda_init, "
        f"_mlir_{o.prefix}_cuda_load_to_device, {o.info.entry(o.prefix)}, NULL, 0, {{0}}}}" for _, o in objs)
    hook = f"{lib}_kp_host_error"
    hook_decl = (f"/* the kernelpack library's error state (its {lib}_last_error reports these failures too) */\n"
                 f"__attribute__((visibility(\"hidden\"))) void {hook}(int cuda, const char* message);"
                 if integrated else "")
    hook_call = f"\n    {hook}(cuda, kp_err);" if integrated else ""
    error_api = "" if integrated else (f"KP_EXPORT const char* {lib}_last_error(void) {{ return kp_err; }}\n"
                                       f"KP_EXPORT int {lib}_last_cuda_error(void) {{ return kp_cuda_err; }}\n")
    bodies, first = [], 0
    for prog in programs:
        bodies.append(_entry(lib, prog, names, first))
        first += len(prog.objects)
    return f"""/* Generated by kernelpack: typed entries over CuTe export objects and the kernelpack driver shim. */
#include "{lib}.h"
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define KP_ENTRY_ASSERT(cond, tag) typedef char kp_entry_assert_##tag[(cond) ? 1 : -1]
{names.layout_asserts().replace("KP_STATIC_ASSERT", "KP_ENTRY_ASSERT")}

/* the shim (shim.c, hidden symbols) */
int kp_shim_enter(void);
const char* kp_shim_open_error(void);
void kp_shim_set_default_device(int device);
int kp_shim_current_device(int* device);
int kp_shim_device_attribute(int* value, int attr, int device);

{externs}

typedef struct kp_cute_object {{
    const char* arch;
    int major, minor, exact;
    void (*init)(void**);
    void (*load)(void**);
    void (*entry)(void**, int32_t);
    void* library; /* cudaLibrary_t the object's cuda_init fills */
    int inited;
    unsigned char loaded[{MAX_DEVICES}];
}} kp_cute_object;

static kp_cute_object kp_objects[] = {{
    {table}
}};
static pthread_mutex_t kp_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread char kp_err[512];
static __thread int kp_cuda_err;

{hook_decl}
static kp_status kp_fail(kp_status s, int cuda, const char* fmt, ...) {{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kp_err, sizeof kp_err, fmt, ap);
    va_end(ap);
    kp_cuda_err = cuda;{hook_call}
    return s;
}}

#define KP_EXPORT __attribute__((visibility("default")))
{error_api}KP_EXPORT void {lib}_set_default_device(int device) {{ kp_shim_set_default_device(device); }}

/* The object among [first, first + n) for the current device, initialized and loaded for it. */
static kp_status kp_prepare(const char* label, int first, int n, kp_cute_object** out) {{
    int dev = 0, major = 0, minor = 0, r = kp_shim_current_device(&dev);
    if (r == 0) r = kp_shim_device_attribute(&major, 75, dev);
    if (r == 0) r = kp_shim_device_attribute(&minor, 76, dev);
    if (r != 0) {{
        const char* why = kp_shim_open_error();
        if (why[0]) return kp_fail(KP_ERROR_NO_DRIVER, r, "{lib}: %s: %s", label, why);
        return kp_fail(KP_ERROR_CUDA, r, "{lib}: %s: cannot query the current device (CUresult %d)", label, r);
    }}
    if (dev < 0 || dev >= {MAX_DEVICES})
        return kp_fail(KP_ERROR_NO_DEVICE, 0, "{lib}: %s: device %d is beyond the {MAX_DEVICES} supported", label, dev);
    kp_cute_object* o = NULL;
    for (int i = first; i < first + n && !o; i++) {{
        kp_cute_object* c = &kp_objects[i];
        if (c->major == major && (c->exact ? c->minor == minor : c->minor <= minor)) o = c;
    }}
    if (o == NULL)
        return kp_fail(KP_ERROR_NO_BINARY_FOR_ARCH, 0, "{lib}: %s has no object for sm_%d%d (device %d)", label,
                       major, minor, dev);
    if (!__atomic_load_n(&o->loaded[dev], __ATOMIC_ACQUIRE)) {{
        pthread_mutex_lock(&kp_lock);
        int32_t ret = 0;
        void* lib_ptr = &o->library;
        if (!o->inited) {{
            void* args[2] = {{&lib_ptr, &ret}};
            o->init(args);
            if (ret == 0) o->inited = 1;
        }}
        if (ret == 0 && !o->loaded[dev]) {{
            int32_t device = dev;
            void* args[3] = {{&lib_ptr, &device, &ret}};
            o->load(args);
            if (ret == 0) __atomic_store_n(&o->loaded[dev], 1, __ATOMIC_RELEASE);
        }}
        pthread_mutex_unlock(&kp_lock);
        if (ret != 0)
            return kp_fail(KP_ERROR_CUDA, ret, "{lib}: %s: loading the %s object on device %d failed (CUresult %d)",
                           label, o->arch, dev, (int)ret);
    }}
    *out = o;
    return KP_SUCCESS;
}}

{chr(10).join(bodies)}
{c_definition(lib, programs)}"""


def _entry(lib: str, prog: HostProgram, names: TypeNames, first: int) -> str:
    fn = entry_name(lib, prog.symbol)
    checks = []
    for user_name, field in prog.extents():
        pname = c_name(user_name)
        if prog.zero_extent == "skip":
            checks.append(f"    if ({pname}.{field} == 0) return KP_SUCCESS; /* empty: nothing to compute */")
        else:
            checks.append(f"    if ({pname}.{field} == 0)\n        return kp_fail(KP_ERROR_INVALID_ARGUMENT, 0, "
                          f"\"{fn}: {pname}.{field} is 0 (zero extents are refused)\");")
        checks.append(f"    if ({pname}.{field} < 0)\n        return kp_fail(KP_ERROR_INVALID_ARGUMENT, 0, "
                      f"\"{fn}: {pname}.{field} is negative\");")
    for p in prog.params:
        for field, div in p.checks:
            v = c_name(p.name)
            value = f"(uintptr_t){v}.data" if field == "data" else f"{v}.{field}"
            what = (f"{p.name}.data is not {div}-byte aligned" if field == "data"
                    else f"{p.name}.{field} is not a multiple of {div}")
            checks.append(f"    if ({value} % {div} != 0)\n        return kp_fail(KP_ERROR_INVALID_ARGUMENT, 0, "
                          f"\"{fn}: {what} (the kernel was compiled for it)\");")
    args = ", ".join([f"&{c_name(p.name)}" for p in prog.params] + ["&kp_ret"])
    return f"""KP_EXPORT kp_status {fn}({_params(names, prog)}) {{
{chr(10).join(checks)}
    kp_cute_object* kp_o = NULL;
    kp_status kp_st = kp_prepare("{prog.label}", {first}, {len(prog.objects)}, &kp_o);
    if (kp_st != KP_SUCCESS) return kp_st;
    int32_t kp_ret = 0;
    void* kp_args[] = {{{args}}};
    kp_o->entry(kp_args, (int32_t)(sizeof kp_args / sizeof kp_args[0]));
    if (kp_ret != 0)
        return kp_fail(KP_ERROR_CUDA, kp_ret, "{fn}: the host program failed (CUresult %d)",
                       (int)kp_ret);
    kp_err[0] = 0;
    kp_cuda_err = 0;
    return KP_SUCCESS;
}}
"""
