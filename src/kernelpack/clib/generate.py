"""Emit the sources of one library: a C translation unit, a data object (assembly), NAME.h (C99), NAME.hpp (C++17).

The translation unit depends only on what the C API depends on (ABIs, launch specs, names, arch lists); the bundle
bytes and every table derived from them are in the data object (``dataobj.py``: ``.incbin`` into section ``.kpack``)
and reached through hidden library-prefixed symbols. All other internal symbols are static; only ``NAME_*`` entry
points are exported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..bundle.artifact import KernelArtifact
from ..bundle.kpack import Bundle, read_manifest
from ..core.abi import Struct
from ..core.binary import Binary
from ..core.cache import CompileCache
from ..core.errors import KernelpackError
from ..core.names import c_name, c_string, check_library_name
from ..core.version import __version__
from ..launch.codes import LAUNCH_FLAGS
from ..launch.device import requires_text
from ..launch.facts import facts
from . import memo as memos
from .buildid import c_definitions
from .cdecl import LIBRARY_API, TypeNames, archs_text, entry_name, param_decl, status_name_body, wrapper_name
from .cppheader import cpp_header, cpp_names
from .dataobj import RowFacts, c_declarations, data_asm, launch_facts
from .family import Family, build_families, describe_arg, null_checks, typed_constraint_checks
from .headers import c_header
from .launchgen import LAUNCH, DescArg, ListArg, Plan, desc_table, list_table
from .rangeindex import dispatch_c

if TYPE_CHECKING:
    from ..bundle.host_program import HostProgram



@dataclass(frozen=True)
class Sources:
    """Everything one library is compiled from."""

    name: str
    header: str  # NAME.h
    cpp_header: str  # NAME.hpp
    tu: str  # NAME.c: code and the tables that depend on the C API only
    bundle: bytes  # NAME.kpack
    type_names: TypeNames | None = None  # C names of the ABI's structs (CuTe host entries must use the same)
    data: str = ""  # NAME_data.s: incbins NAME.kpack; the tables that depend on the binaries' bytes

    def __repr__(self) -> str:
        return (f"<Sources of library {self.name}: {self.name}.c {len(self.tu)} chars, {self.name}.h {len(self.header)}"
                f" chars, {self.name}.kpack {len(self.bundle)} bytes>")


def _csrc(*names: str) -> str:
    """The runtime sources ``names``, pasted into one translation unit in that order (their includes of one
    another dropped: each is pasted once, before its users)."""
    texts = [resources.files("kernelpack").joinpath("csrc").joinpath(n).read_text() for n in names]
    return "\n".join(re.sub(r'(?m)^#include "kp_[a-z_]+\.[ch]".*\n', "", t) for t in texts)


_cstr = c_string


def _dims(v: tuple[int, int, int] | None) -> str:
    return "{" + ", ".join(map(str, v or (0, 0, 0))) + "}"


def _aliased(f: Family) -> bool:
    """A family with one unconstrained specialization and no tensor argument: its entry aliases the wrapper."""
    return len(f.specs) == 1 and not f.specs[0].constraints and all(fa.kind != "tensor" for fa in f.args)


_archs = archs_text


class _Gen:
    def __init__(self, lib: str, bundle: Bundle, programs: Sequence[HostProgram] = (), data: bytes | None = None,
                 manifest: dict[str, Any] | None = None) -> None:
        check_library_name(lib)
        if not bundle.artifacts:
            raise KernelpackError(f"library {lib}: no kernels given" + (
                "; for CuTe host programs alone use kernelpack.clib.host.build_host_library" if programs else ""))
        self.programs = tuple(programs)
        self.lib = lib
        self.bundle = bundle
        self.data = bundle.to_bytes() if data is None else data
        self.manifest = read_manifest(self.data) if manifest is None else manifest
        self.arts = bundle.artifacts
        self.names = TypeNames(lib)
        self.plans: list[Plan] = []
        ndesc = nlist = 0
        for a in self.arts:
            self.plans.append(Plan(a, ndesc, nlist))
            ndesc += len(self.plans[-1].descs)
            nlist += len(self.plans[-1].lists)
            for p in self.plans[-1].params:
                self.names.add(p.type)  # type: ignore[arg-type]
        self.ndesc, self.nlist = ndesc, nlist
        self.nreq = sum(len(a.requirements) for a in self.arts)
        for prog in self.programs:
            for hp in prog.params:
                self.names.add(hp.type)
        self._index = {id(a): i for i, a in enumerate(self.arts)}
        self.families, self.const_decls = build_families(bundle.families(), self._index,
                                                         lambda a: self.plan(a).model,
                                                         lambda a, name: self.plan(a).list_row(name))
        self._check_names()

    def plan(self, a: KernelArtifact) -> Plan:
        return self.plans[self._index[id(a)]]

    def _check_names(self) -> None:
        """User names are renamed where C or C++ reserves them (kernelpack.core.names.c_name); names that still collide
        are refused here, before any file is written, naming both."""
        for a in self.arts:
            _unique([(LAUNCH, "the launch configuration")] + [(c_name(p.name), f"parameter '{p.name}'")
                                                               for p in self.plan(a).args] + [
                (x.count, f"the count of parameter '{x.name}'") for x in self.plan(a).args if isinstance(x, ListArg)],
                f"kernel {a.label}")
        for f in self.families:
            _unique([(LAUNCH, "the launch configuration")] + [
                (c, f"parameter '{fa.name}'" if c == fa.cname else
             f"the {'count' if fa.kind == 'list' else 'element type'} of parameter '{fa.name}'")
                for fa in f.args for c in fa.call_args()], f"kernel family {f.name}")
        for t in self.names.structs():
            _unique([(c_name(fld.name), f"field '{fld.name}'") for fld in t.fields], f"struct {t.name}")
        lib = self.lib
        _unique([(entry_name(lib, f.name), f"family {f.name}") for f in self.families] + [
            (wrapper_name(lib, a), f"specialization {a.label}") for a in self.arts] + [
            (entry_name(lib, p.symbol), f"CuTe host program {p.label}") for p in self.programs] + [
            (self.names.c_type(t), f"the C type of {t.name}") for t in self.names.types()] + [
            (f"{lib}_{n}", "the library API") for n in (*LIBRARY_API, "kp_host_error", "kp_host_manifest", "kp_bundle",
                                                        "kp_bundle_size", "kp_blobs", "kp_bins")], f"library {lib}")
        _unique(cpp_names(self), f"library {lib} (C++ namespace)")

    # ------------------------------------------------------------ tables

    def tables(self) -> str:
        """The tables that depend only on the C API (names, launch specs, arch lists): the byte-dependent ones
        (blobs, the launch facts read from each cubin) live in the data object (dataobj.py)."""
        specs: list[str] = []
        launches: list[str] = []
        requires: list[str] = []
        pool: dict[str, int] = {}
        size = 0

        def string(text: str) -> int:
            nonlocal size
            if text not in pool:
                pool[text] = size
                size += len(text.encode()) + 1
            return pool[text]

        first = 0
        for i, a in enumerate(self.arts):
            specs.append(f"{{{string(a.label)}u, {string(a.entry)}u, {string(_archs(a))}u, {first}u, "
                         f"{len(a.binaries)}u, {len(requires)}u, {len(a.requirements)}u, "
                         f"{string(requires_text(a.requirements))}u}} /* {i} */")
            requires += [f"{{KP_DP_{n.upper()}, {string(n)}u, INT64_C({v})}}" for n, v in a.requirements]
            for b in a.binaries:
                ls, f = a.launch_for(b.arch), facts(a, b)
                flags = (LAUNCH_FLAGS["PDL"] if ls.pdl else 0) | (LAUNCH_FLAGS["COOPERATIVE"] if ls.cooperative else 0)
                launches.append(f"{{{_dims(ls.block)}, {ls.dynamic_smem or 0}u, {_dims(ls.cluster)}, {f.layout}u, "
                                f"{flags}u}} "
                                f"/* {a.label} {b.arch}{' PTX' if b.kind == 'ptx' else ''} */")
            first += len(a.binaries)
        sep = ",\n    "
        rows = desc_table(self.plans, string)
        descs = f"static const kp_desc_info kp_descs[KP_NDESC] = {{\n    {sep.join(rows)}\n}};\n" if rows else ""
        lrows = list_table(self.plans, string)
        if lrows:
            descs += f"static const kp_list_info kp_lists[KP_NLIST] = {{\n    {sep.join(lrows)}\n}};\n"
        if requires:
            descs += f"static const kp_require kp_requires[KP_NREQ] = {{\n    {sep.join(requires)}\n}};\n"
        strtab = "\n    ".join(_cstr(t)[:-1] + '\\0"' for t in pool)
        return f"""{c_declarations(self.lib)}
static const char kp_strtab[] =
    {strtab};
static const kp_spec_info kp_specs[KP_NSPEC] = {{
    {sep.join(specs)}
}};
static const kp_bin_launch kp_launches[KP_NBIN] = {{
    {sep.join(launches)}
}};
{descs}"""

    # ------------------------------------------------------------ wrappers

    def typed_signature(self, a: KernelArtifact) -> str:
        params = [f"const kp_launch* {LAUNCH}"] + [
            f"const kp_tensor* {c_name(p.name)}" if isinstance(p, DescArg)
            else f"const kp_tensor* {c_name(p.name)}, int32_t {p.count}" if isinstance(p, ListArg)
            else param_decl(self.names, p.type, c_name(p.name)) for p in self.plan(a).args]
        return f"kp_status {wrapper_name(self.lib, a)}({', '.join(params)})"

    def typed_wrapper(self, a: KernelArtifact, index: int) -> str:
        fn = wrapper_name(self.lib, a)
        if any(_aliased(f) and f.specs[0].index == index for f in self.families):
            fn = entry_name(self.lib, a.name)  # also reached as the family entry: name that in messages
        checks = "".join(
            f"    if (KP_UNLIKELY(!({cond})))\n        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "
            f"{_cstr(f'{fn}: kernel {a.label}: ' + msg)}{', ' + arg if arg else ''});\n"
            for cond, msg, arg in typed_constraint_checks(self.plan(a).args,
                                                          {x.name: x.ranges for x in self.plan(a).model.args}))
        lists = "".join(f"    if (KP_UNLIKELY((kp_s = kp_list_check(&kp_c, {index}, &kp_lists[{x.table}], "
                        f"{c_name(x.name)}, {x.count})) != KP_SUCCESS)) return kp_s;\n"
                        for x in self.plan(a).args if isinstance(x, ListArg))
        return (f"{self.lib.upper()}_API {self.typed_signature(a)} {{\n{checks}    kp_ctx kp_c;\n"
                f"    kp_status kp_s = kp_enter(\"{fn}\", {LAUNCH}, &kp_c);\n"
                f"    if (KP_UNLIKELY(kp_s != KP_SUCCESS)) return kp_s;\n"
                f"{lists}{self.plan(a).body(index, '    ', {})}}}\n")

    def family_signature(self, f: Family) -> str:
        params = [f"const kp_launch* {LAUNCH}"] + [fa.decl(self.names) for fa in f.args]
        return f"kp_status {entry_name(self.lib, f.name)}({', '.join(params)})"

    def family_entry(self, f: Family) -> str:
        fn = entry_name(self.lib, f.name)
        if _aliased(f):
            # nothing to dispatch or check: the family entry is the typed wrapper under a second name
            return (f"{self.lib.upper()}_API {self.family_signature(f)}\n"
                    f"    __attribute__((alias(\"{wrapper_name(self.lib, f.specs[0].artifact)}\")));\n")
        fparams = ", ".join(fa.decl(self.names) for fa in f.args)
        fargs = ", ".join(x for fa in f.args for x in fa.call_args())
        carried = "; ".join(
            f"{s.artifact.label} ({', '.join([c.text for c in s.constraints] or ['any arguments'])}; "
            f"{_archs(s.artifact)}{'; ' + requires_text(s.artifact.requirements) if s.artifact.requirements else ''})"
            for s in f.specs)
        describe = '\n    kp_sb_add(&kp_sb_, ", ");\n    '.join(describe_arg(fa) for fa in f.args) or ";"
        proto = f"static kp_status kp_nomatch_{f.name}(const kp_ctx* kp_c, int kp_cm{', ' if fparams else ''}{fparams})"
        head = f"{fn}: no specialization %s the arguments ("
        nomatch = (f"{proto} __attribute__((noinline, cold));\n{proto} {{\n    char kp_buf[2048];\n"
                   f"    kp_sb kp_sb_ = {{kp_buf, sizeof kp_buf, 0}};\n    kp_buf[0] = 0;\n"
                   f"    kp_sb_add(&kp_sb_, {_cstr(head)}, kp_cm ? \"with a binary for this device accepts\" : "
                   f"\"accepts\");\n    {describe}\n"
                   f"    return kp_no_match(kp_c, &kp_sb_, kp_cm, {_cstr(carried)});\n}}\n")
        nulls = "".join(
            f"    if (KP_UNLIKELY({v} == NULL))\n        return kp_fail(KP_ERROR_INVALID_ARGUMENT, "
            f"{_cstr(f'{fn}: {what} is NULL')});\n" for v, what in null_checks(f.args))
        nulls += "".join(
            f"    {{\n        kp_status kp_v = kp_tensor_valid({_cstr(fn)}, {_cstr(fa.name)}, {fa.cname});\n"
            f"        if (KP_UNLIKELY(kp_v != KP_SUCCESS)) return kp_v;\n    }}\n"
            for fa in f.args if fa.kind in ("tensor", "desc"))
        nulls += "".join(
            f"    {{\n        kp_status kp_v = kp_list_valid({_cstr(fn)}, {_cstr(fa.name)}, {fa.cname}, "
            f"{fa.cname}_count);\n        if (KP_UNLIKELY(kp_v != KP_SUCCESS)) return kp_v;\n    }}\n"
            for fa in f.args if fa.kind == "list")
        body = [f"{self.lib.upper()}_API {self.family_signature(f)} {{\n{nulls}    kp_ctx kp_c;\n"
                f"    kp_status kp_s = kp_enter(\"{fn}\", {LAUNCH}, &kp_c);\n"
                f"    if (KP_UNLIKELY(kp_s != KP_SUCCESS)) return kp_s;\n"]
        body.append(self._choose(f))
        body.append(f"    if (KP_UNLIKELY(kp_best < 0))\n        return kp_nomatch_{f.name}(&kp_c, kp_cm"
                    f"{', ' if fargs else ''}{fargs});\n")
        body.append(self._launch(f))
        return nomatch + "".join(body)

    def _launch(self, f: Family) -> str:
        """Statements launching specialization ``kp_best``: one block per distinct launch body -- specializations
        that differ only in their spec table entry (a tuning table's configs, a range family) share one, indexed
        by ``kp_bi`` -- chosen by a switch where there are several."""
        bodies: dict[str, list[int]] = {}
        for k, s in enumerate(f.specs):
            text = self._convert(f, s.artifact) + self.plan(s.artifact).body("kp_bi", "        ", self._renames(f))
            bodies.setdefault(text, []).append(k)
        head = "        const uint32_t kp_bi = (uint32_t)kp_best;\n"
        if len(bodies) == 1:
            labels = _labels([s.artifact.label for s in f.specs])
            return f"    {{ /* {labels} */\n{head}{next(iter(bodies))}    }}\n}}\n"
        out = ["    switch (kp_best) {\n"]
        last = len(f.specs) - 1
        for text, ks in bodies.items():
            labels = "".join("default: " if k == last else f"case {f.specs[k].index}: " for k in ks)
            out.append(f"    {labels}{{ /* {_labels([f.specs[k].artifact.label for k in ks])} */\n{head}{text}    }}\n")
        out.append("    }\n}\n")
        return "".join(out)

    @staticmethod
    def _choose(f: Family) -> str:
        """Statements setting ``kp_best`` (the chosen spec, -1: none) and ``kp_cm`` (some specialization's
        constraints held): through the family's range index, else by walking the specializations in dispatch
        order, group by group (a more specific group that has a match with a binary for the device wins)."""
        idx = f.range_index()
        if idx is not None:
            expr, text = f.key_c(idx)
            return dispatch_c(idx, f.index_candidates(), expr, text)
        body = ["    int kp_best = -1, kp_cm = 0;\n    int32_t kp_q, kp_bq = 0;\n"]
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
        return "".join(body)

    @staticmethod
    def _renames(f: Family) -> dict[str, str]:
        return {fa.name: f"kp_t_{fa.name}" for fa in f.args if fa.kind == "tensor"}

    def _convert(self, f: Family, a: KernelArtifact) -> str:
        out = []
        for fa, p in zip(f.args, self.plan(a).args, strict=True):
            if fa.kind != "tensor" or isinstance(p, (DescArg, ListArg)):
                continue
            t = p.type
            assert isinstance(t, Struct) and t.tensor is not None
            v, arg = f"kp_t_{p.name}", c_name(p.name)
            out.append(f"        {self.names.c_type(t)} {v};\n        memset(&{v}, 0, sizeof {v});\n"
                       f"        {v}.data = ({t.fields[0].type.c_type}){arg}->data;\n")
            for fld in t.fields[1:]:
                kind, idx = ("shape", fld.name[5:]) if fld.name.startswith("shape") else ("stride", fld.name[6:])
                out.append(f"        {v}.{fld.name} = ({fld.type.c_type}){arg}->{kind}[{idx}];\n")
        return "".join(out)

    # ------------------------------------------------------------ files

    def _host_hook(self) -> str:
        if not self.programs:
            return ""
        return (f"\n/* CuTe host programs (linked in; cute_host/entry.py) report their failures through this. */\n"
                f"__attribute__((visibility(\"hidden\"))) void {self.lib}_kp_host_error(int cuda, const char* msg);\n"
                f"void {self.lib}_kp_host_error(int cuda, const char* msg) {{\n"
                f"    kp_fail_cuda(cuda ? KP_ERROR_CUDA : KP_ERROR_INVALID_ARGUMENT, cuda, \"%s\", msg);\n}}")

    def tu(self) -> str:
        api = self.lib.upper() + "_API"
        lib = self.lib
        runtime_h = _csrc("kp_model.h", "kp_cuda.h", "kp_runtime.h")
        runtime_c = _csrc("kp_error.c", "kp_inflate.c", "kp_runtime.c", "kp_launch.c", "kp_args.c")
        public = f"""{api} const char* {lib}_last_error(void) {{ return kp_tls_msg; }}
{api} int {lib}_last_cuda_error(void) {{ return kp_tls_cuerr; }}
{api} const char* {lib}_status_name(kp_status status) {{
{status_name_body()}}}
{api} kp_status {lib}_preload(int device) {{ return kp_preload(device); }}
{api} kp_status {lib}_binary_for_device(const char* kernel, int major, int minor, char* buf, size_t size) {{
    return kp_binary_for_device(kernel, major, minor, buf, size);
}}{self._host_hook()}
{api} const void* {lib}_bundle(size_t* size) {{
    if (size != NULL) *size = (size_t)KP_BUNDLE_SIZE;
    return kp_bundle;
}}
{c_definitions(lib, api)}"""
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
#define KP_NDESC {self.ndesc}
#define KP_NLIST {self.nlist}
#define KP_GRID {int(any(a.launch.grid is not None for a in self.arts))}
#define KP_SCRATCH {int(any(p.scratch for p in self.plans))}
#define KP_NREQ {self.nreq}

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


def _labels(labels: list[str]) -> str:
    """Specialization labels for a comment: a few, then how many."""
    return ", ".join(labels) if len(labels) <= 4 else f"{', '.join(labels[:3])}, ... ({len(labels)} specializations)"


def _unique(items: list[tuple[str, str]], where: str) -> None:
    """Refuse two different things (``what``) that would share one generated name, naming both."""
    seen: dict[str, str] = {}
    for name, what in items:
        if name in seen and seen[name] != what:
            raise KernelpackError(f"{where}: {seen[name]} and {what} would both be named {name} in the generated "
                                  f"code (reserved names are renamed, see kernelpack.core.names); rename one of them")
        seen.setdefault(name, what)


def generate(name: str, bundle: Bundle, programs: Sequence[HostProgram] = (), *, data: bytes | None = None,
             memo: CompileCache | None = None) -> Sources:
    """Generate the sources of library ``name`` from ``bundle`` and the declarations of the CuTe host ``programs``
    linked into it (raises KernelpackError on an unusable set). ``data``: ``bundle.to_bytes()`` when the caller has
    it. ``memo``: a compile cache holding the texts generated for bundles of the same structure (``clib/memo.py``):
    only the binaries' facts are read again and the texts reused when they agree; the result is the same."""
    if memo is None or not memo.enabled or programs or not bundle.artifacts:
        g = _Gen(name, bundle, programs, data)
        return Sources(name, c_header(g), cpp_header(g), g.tu(), g.data, g.names,
                       data_asm(name, g.arts, g.manifest, len(g.data)))
    check_library_name(name)
    data = bundle.to_bytes() if data is None else data
    manifest = read_manifest(data, source=f"the bundle of library {name}")
    structure = memos.structure_digest(manifest)
    old = memos.load(memo, name, structure)
    known = old.facts if old is not None else {}
    blobs = manifest["blobs"]
    facts: dict[str, memos.CubinFacts] = {}
    views: list[Any] = []
    for a, m in zip(bundle.artifacts, manifest["artifacts"], strict=True):
        for b, mb in zip(a.binaries, m["binaries"], strict=True):
            if b.kind == "cubin":
                k = f"{blobs[mb['blob']]['sha256']}:{a.entry}"
                f = facts.get(k) or known.get(k) or memos.CubinFacts.read(a, b)
                facts[k] = f
                views.append(f.header_view)

    def facts_of(a: KernelArtifact, b: Binary, blob: int) -> RowFacts:
        if b.kind != "cubin":
            return launch_facts(a, b, blob)
        f = facts[f"{blobs[blob]['sha256']}:{a.entry}"]
        return f.reqntid, f.cluster, f.max_threads, f.static_smem

    if old is not None and old.header_views == views:  # same structure, same facts in NAME.h: the same texts
        return Sources(name, old.header, old.cpp_header, old.tu, data, None,
                       data_asm(name, bundle.artifacts, manifest, len(data), facts_of))
    g = _Gen(name, bundle, (), data, manifest)
    src = Sources(name, c_header(g), cpp_header(g), g.tu(), data, g.names,
                  data_asm(name, g.arts, manifest, len(data), facts_of))
    memos.store(memo, name, structure, memos.Memo(src.tu, src.header, src.cpp_header, facts, views))
    return src
