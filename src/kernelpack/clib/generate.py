"""Emit one C translation unit plus NAME.h (C99) and NAME.hpp (C++17) for a bundle of kernel artifacts.

The translation unit embeds the bundle bytes once (``.incbin`` into section ``.kpack``) and refers to every binary
by its offset in it; all internal symbols are static and only ``NAME_*`` entry points are exported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources

from .. import __version__
from ..abi import DType, Opaque, Pointer, Struct
from ..artifact import KernelArtifact
from ..bundle import Bundle, read_manifest
from ..errors import KernelpackError
from .cdecl import TypeNames, check_ident, common_header, dtype_enum, param_decl
from .family import Family, FamilyArg, build_families, describe_arg, typed_constraint_checks

SECTION = ".kpack"


@dataclass(frozen=True)
class Sources:
    """Everything one library is compiled from."""

    name: str
    header: str  # NAME.h
    cpp_header: str  # NAME.hpp
    tu: str  # NAME.c (incbins NAME.kpack)
    bundle: bytes  # NAME.kpack


def _csrc(name: str) -> str:
    return resources.files("kernelpack").joinpath("csrc", name).read_text()


def _cstr(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dims(v: tuple[int, int, int] | None) -> str:
    return "{" + ", ".join(map(str, v or (0, 0, 0))) + "}"


def _aliased(f: Family) -> bool:
    """A family with one unconstrained specialization and no tensor argument: its entry aliases the wrapper."""
    return len(f.specs) == 1 and not f.specs[0].constraints and all(fa.kind != "tensor" for fa in f.args)


def _archs(a: KernelArtifact) -> str:
    return ", ".join(f"{b.arch}{' PTX' if b.kind == 'ptx' else ''}" for b in a.binaries)


def wrapper_name(lib: str, art: KernelArtifact) -> str:
    return f"{lib}_{art.name}_{art.variant or 'default'}"


class _Gen:
    def __init__(self, lib: str, bundle: Bundle) -> None:
        check_ident(lib, "library name")
        if not bundle.artifacts:
            raise KernelpackError(f"library {lib}: no kernels given")
        self.lib = lib
        self.bundle = bundle
        self.data = bundle.to_bytes()
        self.manifest = read_manifest(self.data)
        self.arts = bundle.artifacts
        self.names = TypeNames(lib)
        for a in self.arts:
            for p in a.abi.params:
                self.names.add(p.type)
        self.families, self.const_decls = build_families(bundle.families(), {id(a): i for i, a in enumerate(self.arts)})
        self._check_names()

    def _check_names(self) -> None:
        for a in self.arts:
            for role in ("global_scratch", "profile_scratch"):
                if getattr(a.launch, role, 0):
                    raise KernelpackError(f"kernel {a.label}: needs {getattr(a.launch, role)} bytes of {role} per "
                                          f"CTA; generated C libraries pass NULL scratch and do not allocate it yet")
            for p in a.abi.params:
                if p.name == "launch" or p.name.startswith("kp_"):
                    raise KernelpackError(f"kernel {a.label}: parameter name {p.name!r} is reserved in generated C "
                                          f"(launch, kp_*); rename it")
        seen: dict[str, str] = {}
        for fn, what in [(f"{self.lib}_{f.name}", f"family {f.name}") for f in self.families] + [
                (wrapper_name(self.lib, a), f"specialization {a.label}") for a in self.arts] + [
                (f"{self.lib}_{n}", "the library API") for n in ("preload", "last_error", "last_cuda_error",
                                                                  "status_name", "bundle")]:
            if fn in seen:
                raise KernelpackError(f"library {self.lib}: {what} and {seen[fn]} would both be named {fn}; rename a "
                                      f"kernel or variant")
            seen[fn] = what

    # ------------------------------------------------------------ tables

    def tables(self) -> str:
        blobs = ",\n    ".join(f"{{{b['offset']}u, {b['size']}u, 0}}" for b in self.manifest["blobs"])
        bins, specs = [], []
        ptx_blobs = set()
        pool: dict[str, int] = {}
        size = 0

        def string(text: str) -> int:
            nonlocal size
            if text not in pool:
                pool[text] = size
                size += len(text.encode()) + 1
            return pool[text]

        for i, (a, m) in enumerate(zip(self.arts, self.manifest["artifacts"], strict=True)):
            first = len(bins)
            for b, mb in zip(a.binaries, m["binaries"], strict=True):
                reqntid = cluster = None
                max_threads = static_smem = 0
                if b.kind == "cubin":
                    ck = a.cubin_kernel(b.arch)
                    reqntid = ck.reqntid
                    cluster = ck.cluster_dims if ck.explicit_cluster else None
                    max_threads = math.prod(ck.max_threads) if ck.max_threads else 0
                    static_smem = ck.static_smem
                else:
                    ptx_blobs.add(mb["blob"])
                suffix = f"'{b.arch.suffix}'" if b.arch.suffix else "0"
                bins.append(f"{{{mb['blob']}u, {b.arch.major}, {b.arch.minor}, {suffix}, {int(b.kind == 'ptx')}, "
                            f"{_dims(reqntid)}, {_dims(cluster)}, {max_threads}u, {static_smem}u}}")
            archs = _archs(a)
            ls = a.launch
            specs.append(f"{{{string(a.label)}u, {string(a.entry)}u, {string(archs)}u, {first}u, {len(a.binaries)}u, "
                         f"{_dims(ls.block)}, {ls.dynamic_smem or 0}u, {_dims(ls.cluster)}}} /* {i} */")
        if ptx_blobs:
            rows = [f"{{{b['offset']}u, {b['size']}u, {int(k in ptx_blobs)}}}"
                    for k, b in enumerate(self.manifest["blobs"])]
            blobs = ",\n    ".join(rows)
        sym = f"kp_bundle_{self.lib}"
        sep = ",\n    "
        bins_c, specs_c = sep.join(bins), sep.join(specs)
        strtab = "\n    ".join(_cstr(t)[:-1] + '\\0"' for t in pool)
        return f"""/* The bundle ({len(self.data)} bytes), embedded once; binaries are referred to by offset. */
__asm__(".pushsection {SECTION},\\"a\\",%progbits\\n"
        ".balign 64\\n"
        "{sym}:\\n"
        ".incbin \\"{self.lib}.kpack\\"\\n"
        ".popsection\\n");
extern const unsigned char {sym}[] __attribute__((visibility("hidden")));
#define kp_bundle {sym}
#define KP_BUNDLE_SIZE {len(self.data)}u

static const char kp_strtab[] =
    {strtab};
static const kp_blob_info kp_blobs[KP_NBLOB] = {{
    {blobs}
}};
static const kp_bin_info kp_bins[KP_NBIN] = {{
    {bins_c}
}};
static const kp_spec_info kp_specs[KP_NSPEC] = {{
    {specs_c}
}};
"""

    # ------------------------------------------------------------ wrappers

    def _arg_ptrs(self, a: KernelArtifact, rename: dict[str, str] | None = None) -> str:
        items = []
        for p in a.abi.params:
            if p.role != "arg":
                items.append("(void*)&kp_null")
            elif isinstance(p.type, Opaque):
                items.append(f"(void*)(uintptr_t){(rename or {}).get(p.name, p.name)}")
            else:
                items.append(f"(void*)&{(rename or {}).get(p.name, p.name)}")
        return ", ".join(items)

    def _run(self, a: KernelArtifact, index: int, indent: str, rename: dict[str, str] | None = None) -> str:
        if not a.abi.params:
            return f"{indent}return kp_run(&kp_c, {index}, launch, NULL);\n"
        null = f"{indent}void* kp_null = NULL;\n" if any(p.role != "arg" for p in a.abi.params) else ""
        return (f"{null}{indent}void* kp_args[{len(a.abi.params)}] = {{{self._arg_ptrs(a, rename)}}};\n"
                f"{indent}return kp_run(&kp_c, {index}, launch, kp_args);\n")

    def typed_signature(self, a: KernelArtifact) -> str:
        params = ["const kp_launch* launch"] + [param_decl(self.names, p.type, p.name) for p in a.abi.args]
        return f"kp_status {wrapper_name(self.lib, a)}({', '.join(params)})"

    def typed_wrapper(self, a: KernelArtifact, index: int) -> str:
        fn = wrapper_name(self.lib, a)
        if any(_aliased(f) and f.specs[0].index == index for f in self.families):
            fn = f"{self.lib}_{a.name}"  # also reached as the family entry: name that in messages
        checks = "".join(
            f"    if (KP_UNLIKELY(!({cond})))\n        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "
            f"{_cstr(f'{fn}: kernel {a.label}: ' + msg)}, {arg});\n"
            for cond, msg, arg in typed_constraint_checks(a))
        return (f"{self.lib.upper()}_API {self.typed_signature(a)} {{\n{checks}    kp_ctx kp_c;\n"
                f"    kp_status kp_s = kp_enter(\"{fn}\", launch, &kp_c);\n"
                f"    if (KP_UNLIKELY(kp_s != KP_SUCCESS)) return kp_s;\n{self._run(a, index, '    ')}}}\n")

    def family_signature(self, f: Family) -> str:
        params = ["const kp_launch* launch"] + [fa.decl(self.names) for fa in f.args]
        return f"kp_status {self.lib}_{f.name}({', '.join(params)})"

    def family_entry(self, f: Family) -> str:
        fn = f"{self.lib}_{f.name}"
        if _aliased(f):
            # nothing to dispatch or check: the family entry is the typed wrapper under a second name
            return (f"{self.lib.upper()}_API {self.family_signature(f)}\n"
                    f"    __attribute__((alias(\"{wrapper_name(self.lib, f.specs[0].artifact)}\")));\n")
        fparams = ", ".join(fa.decl(self.names) for fa in f.args)
        fargs = ", ".join(x for fa in f.args for x in fa.call_args())
        carried = "; ".join(
            f"{s.artifact.label} ({', '.join([c.text for c in s.constraints] or ['any arguments'])}; "
            f"{_archs(s.artifact)})" for s in f.specs)
        describe = '\n    kp_sb_add(&kp_sb_, ", ");\n    '.join(describe_arg(fa) for fa in f.args) or ";"
        proto = f"static kp_status kp_nomatch_{f.name}(const kp_ctx* kp_c, int kp_cm{', ' if fparams else ''}{fparams})"
        head = f"{fn}: no specialization %s the arguments ("
        nomatch = (f"{proto} __attribute__((noinline, cold));\n{proto} {{\n    char kp_buf[2048];\n"
                   f"    kp_sb kp_sb_ = {{kp_buf, sizeof kp_buf, 0}};\n    kp_buf[0] = 0;\n"
                   f"    kp_sb_add(&kp_sb_, {_cstr(head)}, kp_cm ? \"with a binary for this device accepts\" : "
                   f"\"accepts\");\n    {describe}\n"
                   f"    return kp_no_match(kp_c, &kp_sb_, kp_cm, {_cstr(carried)});\n}}\n")
        nulls = "".join(
            f"    if (KP_UNLIKELY({fa.name} == NULL))\n        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "
            f"\"{fn}: argument '{fa.name}' (kp_tensor*) is NULL\");\n" for fa in f.args if fa.kind == "tensor")
        body = [f"{self.lib.upper()}_API {self.family_signature(f)} {{\n{nulls}    kp_ctx kp_c;\n"
                f"    kp_status kp_s = kp_enter(\"{fn}\", launch, &kp_c);\n"
                f"    if (KP_UNLIKELY(kp_s != KP_SUCCESS)) return kp_s;\n"
                f"    int kp_best = -1, kp_cm = 0;\n    int32_t kp_q, kp_bq = 0;\n"]
        for gi, group in enumerate(f.groups()):
            ind = "    " if gi == 0 else "        "
            if gi:
                body.append("    if (kp_best < 0) {\n")
            for s in group:
                cond = " && ".join(f"({c.expr})" for c in s.constraints) or "1"
                body.append(f"{ind}if ({cond}) {{ /* {s.artifact.label} */\n{ind}    kp_cm = 1;\n"
                            f"{ind}    kp_q = kp_c.d->quality[{s.index}];\n"
                            f"{ind}    if (kp_q > kp_bq) kp_best = {s.index}, kp_bq = kp_q;\n"
                            f"{ind}}}\n")
            if gi:
                body.append("    }\n")
        body.append(f"    if (KP_UNLIKELY(kp_best < 0))\n        return kp_nomatch_{f.name}(&kp_c, kp_cm"
                    f"{', ' if fargs else ''}{fargs});\n    switch (kp_best) {{\n")
        for k, s in enumerate(f.specs):
            label = "default" if k == len(f.specs) - 1 else f"case {s.index}"
            body.append(f"    {label}: {{ /* {s.artifact.label} */\n{self._convert(f, s.artifact)}"
                        f"{self._run(s.artifact, s.index, '        ', self._renames(f))}    }}\n")
        body.append("    }\n}\n")
        return nomatch + "".join(body)

    @staticmethod
    def _renames(f: Family) -> dict[str, str]:
        return {fa.name: f"kp_t_{fa.name}" for fa in f.args if fa.kind == "tensor"}

    def _convert(self, f: Family, a: KernelArtifact) -> str:
        out = []
        for fa, p in zip(f.args, a.abi.args, strict=True):
            if fa.kind != "tensor":
                continue
            t = p.type
            assert isinstance(t, Struct) and t.tensor is not None
            v = f"kp_t_{p.name}"
            out.append(f"        {self.names.c_type(t)} {v};\n        memset(&{v}, 0, sizeof {v});\n"
                       f"        {v}.data = ({t.fields[0].type.c_type}){p.name}->data;\n")
            for fld in t.fields[1:]:
                kind, idx = ("shape", fld.name[5:]) if fld.name.startswith("shape") else ("stride", fld.name[6:])
                out.append(f"        {v}.{fld.name} = ({fld.type.c_type}){p.name}->{kind}[{idx}];\n")
        return "".join(out)

    # ------------------------------------------------------------ files

    def tu(self) -> str:
        api = self.lib.upper() + "_API"
        lib = self.lib
        runtime_h, runtime_c = _csrc("kp_runtime.h"), _csrc("kp_runtime.c")
        public = f"""{api} const char* {lib}_last_error(void) {{ return kp_tls_msg; }}
{api} int {lib}_last_cuda_error(void) {{ return kp_tls_cuerr; }}
{api} const char* {lib}_status_name(kp_status status) {{ return kp_status_name(status); }}
{api} kp_status {lib}_preload(int device) {{ return kp_preload(device); }}
{api} const void* {lib}_bundle(size_t* size) {{
    if (size != NULL) *size = KP_BUNDLE_SIZE;
    return kp_bundle;
}}
"""
        wrappers = "\n".join(self.typed_wrapper(a, i) for i, a in enumerate(self.arts))
        families = "\n".join(self.family_entry(f) for f in self.families)
        return f"""/* Generated by kernelpack {__version__}: library {lib}. Do not edit. One translation unit: every
 * internal symbol is static; only the {lib}_* entry points are exported. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "{lib}.h"

#define KP_LIBNAME "{lib}"
#define KP_NSPEC {len(self.arts)}
#define KP_NBIN {sum(len(a.binaries) for a in self.arts)}
#define KP_NBLOB {len(self.manifest["blobs"])}

{runtime_h}
{self.names.layout_asserts()}

{self.tables()}
{chr(10).join(self.const_decls)}

{runtime_c}
/* ------------------------------------------------------------------ public API */

{public}
/* ------------------------------------------------------------------ typed wrappers, one per specialization */

{wrappers}
/* ------------------------------------------------------------------ family entries: dispatch */

{families}"""

    def header(self) -> str:
        lib, api = self.lib, self.lib.upper() + "_API"
        decls = []
        for f in self.families:
            specs = "\n".join(
                f" *  - {s.artifact.label}: {', '.join(c.text for c in s.constraints) or 'any arguments'} "
                f"({_archs(s.artifact)}); typed: {wrapper_name(lib, s.artifact)}"
                for s in f.specs)
            decls.append(f"/** Launch kernel family `{f.name}`: picks the most specific specialization whose "
                         f"constraints the arguments\n * meet and that carries a binary for the current device "
                         f"(KP_ERROR_NO_MATCHING_SPECIALIZATION otherwise):\n{specs}\n"
                         f" * Arguments: {self._arg_doc(f.args)}.\n */\n{api} {self.family_signature(f)};\n")
        for a in self.arts:
            decls.append(f"/** Launch specialization {a.label} (entry `{a.entry}`; {self._facts(a)}).\n"
                         f" * Checks alignment/divisibility it relies on, not static tensor shapes.\n */\n"
                         f"{api} {self.typed_signature(a)};\n")
        return f"""/* Generated by kernelpack {__version__}: C99 interface to lib{lib}. Do not edit.
 *
 * Needs only the NVIDIA driver at run time (libcuda.so.1, opened on first use). Every entry returns a kp_status;
 * on failure {lib}_last_error() gives this thread's message. Launches run on the device of the calling thread's
 * current CUDA context; a thread with none gets the stream's context (launch.stream set) or device 0's primary
 * context made current, as the CUDA runtime does. Kernels load lazily per device, thread-safely.
 */
#ifndef {lib.upper()}_H_
#define {lib.upper()}_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

{common_header()}
#define {api} __attribute__((visibility("default")))

{self.names.definitions()}

/** This thread's message for its last failed {lib}_* call (kernel, parameter, expected vs given, CUDA error). */
{api} const char* {lib}_last_error(void);
/** The CUresult behind this thread's last KP_ERROR_CUDA, else 0. */
{api} int {lib}_last_cuda_error(void);
/** The name of a status, e.g. "KP_ERROR_NO_DRIVER". */
{api} const char* {lib}_status_name(kp_status status);
/** Load every kernel's binary for device `device` now (-1 = every device) instead of on first launch. */
{api} kp_status {lib}_preload(int device);
/** The embedded kernelpack bundle (.kpack bytes: every binary plus the manifest); its size goes to *size. */
{api} const void* {lib}_bundle(size_t* size);

{chr(10).join(decls)}
#ifdef __cplusplus
}}
#endif

#endif /* {lib.upper()}_H_ */
"""

    def _arg_doc(self, args: tuple[FamilyArg, ...]) -> str:
        out = []
        for fa in args:
            if fa.kind == "tensor":
                out.append(f"{fa.name} (kp_tensor)")
            elif fa.kind == "ptr" and fa.varying:
                out.append(f"{fa.name} (device pointer, element type in {fa.name}_dtype)")
            else:
                out.append(f"{fa.name} ({self.names.c_type(fa.type)})")
        return ", ".join(out) or "none"

    def _facts(self, a: KernelArtifact) -> str:
        facts = [_archs(a)]
        if a.launch.block:
            facts.append(f"block {a.launch.block}")
        for b in a.binaries:
            if b.kind == "cubin":
                ck = a.cubin_kernel(b.arch)
                if ck.reqntid:
                    facts.append(f"{b.arch} requires block {ck.reqntid}")
                if ck.explicit_cluster and ck.cluster_dims:
                    facts.append(f"{b.arch} cluster {ck.cluster_dims}")
        if a.launch.dynamic_smem:
            facts.append(f"{a.launch.dynamic_smem} bytes dynamic smem")
        if a.launch.cluster:
            facts.append(f"cluster {a.launch.cluster}")
        return "; ".join(facts)

    def cpp_header(self) -> str:
        lib = self.lib
        dtypes = "\n".join(f"template <> struct dtype_of<{c}> {{ static constexpr kp_dtype value = {dtype_enum(d)}; }};"
                           for d, c in _CPP_TYPES)
        overloads = []
        for f in self.families:
            seen = set()
            for s in f.specs:
                params, call = ["const kp_launch& launch"], ["&launch"]
                for fa, p in zip(f.args, s.artifact.abi.args, strict=True):
                    if fa.kind == "tensor":
                        params.append(f"const kp_tensor& {fa.name}")
                        call.append(f"&{fa.name}")
                    elif fa.kind == "ptr" and fa.varying:
                        assert isinstance(p.type, Pointer)
                        elem = p.type.pointee.c_type if p.type.pointee else "void"
                        params.append(f"{'const ' if fa.const else ''}{elem}* {fa.name}")
                        call += [fa.name, dtype_enum(p.type.pointee)]
                    else:
                        params.append(param_decl(self.names, fa.type, fa.name))
                        call.append(fa.name)
                sig = ", ".join(params)
                if sig in seen:
                    continue
                seen.add(sig)
                overloads.append(f"/// Family `{f.name}` (see {lib}_{f.name}).\ninline kp_status {f.name}({sig}) "
                                 f"{{\n    return {lib}_{f.name}({', '.join(call)});\n}}")
        return f"""// Generated by kernelpack {__version__}: C++17 interface to lib{lib}. Do not edit.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "{lib}.h"

#ifndef KP_CPP_COMMON_V1
#define KP_CPP_COMMON_V1
namespace kp {{

/// A failed kernelpack call: its status and the library's message.
class Error : public std::runtime_error {{
  public:
    Error(kp_status status, const std::string& message) : std::runtime_error(message), status_(status) {{}}
    /// The status the call returned.
    kp_status status() const noexcept {{ return status_; }}

  private:
    kp_status status_;
}};

/// The kp_dtype of a C++ element type.
template <class T> struct dtype_of;
{dtypes}

/// A launch of grid x block threads (block 0 = the kernel's fixed block) on a stream.
inline kp_launch launch(uint32_t grid_x, uint32_t block_x = 0, uint32_t dynamic_smem = 0, void* stream = nullptr) {{
    kp_launch l{{}};
    l.grid[0] = grid_x;
    l.block[0] = block_x;
    l.dynamic_smem = dynamic_smem;
    l.stream = stream;
    return l;
}}

}}  // namespace kp
#endif  // KP_CPP_COMMON_V1

namespace {lib} {{

/// Throws kp::Error carrying {lib}_last_error() unless status is KP_SUCCESS.
inline void check(kp_status status) {{
    if (status != KP_SUCCESS) throw kp::Error(status, {lib}_last_error());
}}

/// This thread's message for its last failed call.
inline const char* last_error() noexcept {{ return {lib}_last_error(); }}

/// Load every kernel for a device now (-1 = all devices).
inline kp_status preload(int device = -1) {{ return {lib}_preload(device); }}

{chr(10).join(overloads)}

}}  // namespace {lib}
"""


_CPP_TYPES = [(DType.i8, "int8_t"), (DType.i16, "int16_t"), (DType.i32, "int32_t"), (DType.i64, "int64_t"),
              (DType.u8, "uint8_t"), (DType.u16, "uint16_t"), (DType.u32, "uint32_t"), (DType.u64, "uint64_t"),
              (DType.f16, "kp_f16"), (DType.bf16, "kp_bf16"), (DType.f32, "float"), (DType.f64, "double"),
              (DType.bool, "bool")]


def generate(name: str, bundle: Bundle) -> Sources:
    """Generate the sources of library ``name`` from ``bundle`` (raises KernelpackError on an unusable set)."""
    g = _Gen(name, bundle)
    return Sources(name, g.header(), g.cpp_header(), g.tu(), g.data)
