"""C spellings of the ABI model for one generated library: type names, struct definitions, enum names.

The ABI model (:mod:`kernelpack.core.abi`) is the single source of truth: sizes and offsets here come from it and the
generated translation unit static-asserts that the C compiler agrees.
"""

from __future__ import annotations

from ..bundle.artifact import KernelArtifact
from ..core.abi import DType, Opaque, ParamType, Struct, TensorSpec
from ..core.names import LIBRARY_API, c_comment, c_name, entry_name  # noqa: F401 - LIBRARY_API re-exported
from ..launch.codes import DTYPE_CODE, DTYPES, DTYPES_V1, LAUNCH_FLAGS, MAX_RANK, STATUS, STATUS_V1, dtype_enum_name
from ..launch.codes import INT64_RANGE as INT_RANGE  # noqa: E402,F401 - values a kp_tensor field can carry


def status_name_body() -> str:
    """The C body of NAME_status_name(kp_status status), from STATUS (the one table of status codes)."""
    cases = "".join(f'    case {st.name}: return "{st.name}";\n' for st in STATUS)
    # on int: statuses added after the kp_status enum (KP_STATUS_V2) are not in it (-Wswitch)
    return f'    switch ((int)status) {{\n{cases}    }}\n    return "KP_ERROR_UNKNOWN";\n'


LAUNCH_FLAG_DOCS = {
    "PDL": "programmatic dependent launch: may start while the previous kernel on the stream finishes (sm_90+)",
    "NO_PDL": "no programmatic dependent launch, although the kernel's launch flags ask for it",
    "COOPERATIVE": "cooperative launch: all blocks co-resident (grid sync); refused when the grid does not fit",
}


def dtype_enum(d: DType | None) -> str:
    return dtype_enum_name(d)


_FP8_DOC = {DType.f8e4m3: "FP8 E4M3 (__nv_fp8_e4m3)", DType.f8e5m2: "FP8 E5M2 (__nv_fp8_e5m2)"}


def common_header() -> str:
    """Types shared by every kernelpack library; guarded, so several libraries' headers can be included together."""
    status = "\n".join(f"    {st.name} = {st.value}, /**< {st.doc} */" for st in STATUS[:STATUS_V1])
    status_v2 = "\n".join(f"/** {st.doc} */\n#define {st.name} ((kp_status){st.value})" for st in STATUS[STATUS_V1:])
    dtypes = "\n".join(f"    {dtype_enum_name(d)} = {DTYPE_CODE[d]}, /**< {d.c_type} */" for d in DTYPES[:DTYPES_V1])
    fp8 = "\n".join(f"/** {d.c_type} elements holding the bits of an {_FP8_DOC[d]}. */\n"
                     f"#define {dtype_enum_name(d)} ((kp_dtype){DTYPE_CODE[d]})" for d in DTYPES[DTYPES_V1:])
    flags = "\n".join(f"/** kp_launch.flags: {LAUNCH_FLAG_DOCS[n]}. */\n#define KP_LAUNCH_{n} {v}u"
                      for n, v in LAUNCH_FLAGS.items())
    return f"""#ifndef KP_COMMON_TYPES_V1
#define KP_COMMON_TYPES_V1
/** Result of every kernelpack call. Values never change between kernelpack versions; new ones are appended. */
typedef enum kp_status {{
{status}
}} kp_status;

/** Element types, for family entries whose pointer arguments vary in type between specializations. */
typedef enum kp_dtype {{
    KP_DTYPE_ANY = 0, /**< untyped (void*) */
{dtypes}
}} kp_dtype;

/** IEEE half precision, as raw bits (layout-compatible with __half). */
typedef struct kp_f16 {{ uint16_t bits; }} kp_f16;
/** bfloat16, as raw bits (layout-compatible with __nv_bfloat16). */
typedef struct kp_bf16 {{ uint16_t bits; }} kp_bf16;

/** Highest tensor rank a kp_tensor describes. */
#define KP_MAX_RANK {MAX_RANK}

/** A tensor argument of a family entry; dispatch checks it against each specialization's static shape. */
typedef struct kp_tensor {{
    void* data;                   /**< device pointer to element [0, ..., 0] */
    kp_dtype dtype;               /**< element type */
    int32_t rank;                 /**< number of modes, at most KP_MAX_RANK */
    int64_t shape[KP_MAX_RANK];   /**< extent of each mode, >= 0 (a negative one is refused) */
    int64_t stride[KP_MAX_RANK];  /**< stride of each mode, in elements */
}} kp_tensor;

#endif /* KP_COMMON_TYPES_V1 */
#ifndef KP_DTYPE_FP8_V1
#define KP_DTYPE_FP8_V1
/* kp_dtype values added after the enum above (which every kernelpack library's header shares, unchanged). C has no
 *  fp8 type: such elements are passed as uint8_t, the raw bits (cuda_fp8.h's __nv_fp8_storage_t). */
{fp8}
#endif /* KP_DTYPE_FP8_V1 */
#ifndef KP_STATUS_V2
#define KP_STATUS_V2
/* kp_status values added after the enum above (which every kernelpack library's header shares, unchanged). */
{status_v2}
#endif /* KP_STATUS_V2 */
#ifndef KP_LAUNCH_TYPE_V2
#define KP_LAUNCH_TYPE_V2
{flags}

/** How to launch a kernel. Zero-initialize it and set what you need. In grid, block and cluster, x must be >= 1
 *  and a y or z of 0 means 1; block and cluster {{0,0,0}} ask for the kernel's own, and x = 0 with y or z set
 *  (block {{0,5,0}}) is refused with KP_ERROR_INVALID_LAUNCH. (Version 2: flags was added; a header of a library
 *  built before it defines kp_launch without flags, and including both in one translation unit does not compile.) */
typedef struct kp_launch {{
    uint32_t grid[3];      /**< blocks per grid; y and z of 0 mean 1 */
    uint32_t block[3];     /**< threads per block; {{0,0,0}} = the kernel's fixed block (REQNTID or launch spec) */
    uint32_t dynamic_smem; /**< dynamic shared memory bytes; 0 = what the kernel declares; > 48 KiB is opted into */
    uint32_t cluster[3];   /**< thread block cluster; {{0,0,0}} = the kernel's own cluster, or none */
    void* stream;          /**< CUstream or cudaStream_t; NULL = the legacy default stream */
    uint32_t flags;        /**< KP_LAUNCH_* bits; 0 = the kernel's own launch flags (PDL, cooperative) */
}} kp_launch;
#endif /* KP_LAUNCH_TYPE_V2 */
"""


class TypeNames:
    """C names for the structs and opaque types of one library, prefixed with the library name.

    Two different definitions under one ABI name get distinct C names (``name``, ``name_2``, ...); identical ones
    share a definition.
    """

    def __init__(self, lib: str) -> None:
        self.lib = lib
        self._names: dict[Struct | Opaque, str] = {}
        self._order: list[Struct | Opaque] = []

    def add(self, t: ParamType) -> None:
        if isinstance(t, Struct):
            for f in t.fields:
                self.add(f.type)
        if isinstance(t, (Struct, Opaque)) and t not in self._names:
            base = f"{self.lib}_{c_name(t.name) if isinstance(t, Struct) else t.c_type.removeprefix('kp_')}"
            taken = set(self._names.values())
            name, k = base, 2
            while name in taken:
                name, k = f"{base}_{k}", k + 1
            self._names[t] = name
            self._order.append(t)

    def structs(self) -> list[Struct]:
        """The structs, in definition order."""
        return [t for t in self._order if isinstance(t, Struct)]

    def types(self) -> list[Struct | Opaque]:
        """Every struct and opaque type, in definition order."""
        return list(self._order)

    def c_type(self, t: ParamType) -> str:
        if isinstance(t, (Struct, Opaque)):
            return self._names[t]
        return t.c_type

    def definitions(self) -> str:
        out = []
        for t in self._order:
            name = self._names[t]
            if isinstance(t, Opaque):
                out.append(f"/** Opaque {t.size}-byte parameter{f' ({t.name})' if t.name else ''}, {t.align}-byte "
                           f"aligned. */\ntypedef struct {name} {{\n    unsigned char bytes[{t.size}]; /**< the raw "
                           f"bytes */\n}} __attribute__((aligned({t.align}))) {name};")
                continue
            doc = _tensor_doc(t.tensor) if t.tensor is not None else f"By-value parameter struct {t.name}."
            fields = "\n".join(f"    {self.c_type(f.type)} {c_name(f.name)}; /**< {_field_doc(t, f.name)} */"
                               for f in t.fields)
            attr = f" __attribute__((aligned({t.min_align})))" if t.min_align > 1 else ""
            out.append(f"/** {doc} */\ntypedef struct {name} {{\n{fields}\n}}{attr} {name};")
        return "\n\n".join(out)

    def layout_asserts(self) -> str:
        """Static asserts that the C compiler lays out every struct as the ABI model says."""
        out = []
        for t in self._order:
            name = self._names[t]
            out.append(f"KP_STATIC_ASSERT(sizeof({name}) == {t.size} && __alignof__({name}) == {t.align}, "
                       f"layout_{name});")
            if isinstance(t, Struct):
                for f, off in zip(t.fields, t.field_offsets, strict=True):
                    out.append(f"KP_STATIC_ASSERT(offsetof({name}, {c_name(f.name)}) == {off}, "
                               f"off_{name}_{c_name(f.name)});")
        return "\n".join(out)


def _field_doc(t: Struct, field: str) -> str:
    if t.tensor is None:
        return f"field {field} of {t.name}" + renamed_note(field)
    if field == "data":
        return "device pointer to element [0, ..., 0]"
    if field.startswith("shape"):
        return f"extent of mode {field[5:]}"
    return f"stride of mode {field[6:]}, in elements"


def _tensor_doc(s: TensorSpec) -> str:
    def dims(v: tuple[int | None, ...]) -> str:
        return "[" + ", ".join("?" if d is None else str(d) for d in v) + "]"

    return (f"Tensor descriptor: {s.dtype.value} data, shape {dims(s.shape)} ({s.shape_dtype.value}), stride "
            f"{dims(s.stride)} ({s.stride_dtype.value}, in elements); ? = passed at run time.")


def param_decl(names: TypeNames, t: ParamType, name: str) -> str:
    """How a typed wrapper takes a parameter: opaque blobs by const pointer, everything else by value."""
    if isinstance(t, Opaque):
        return f"const {names.c_type(t)}* {name}"
    return f"{names.c_type(t)} {name}"


def wrapper_name(lib: str, art: KernelArtifact) -> str:
    """The typed entry of one specialization: ``lib_name_variant`` (``default`` when it has none)."""
    return entry_name(lib, f"{art.name}_{art.variant or 'default'}")


def archs_text(a: KernelArtifact) -> str:
    """What the kernel carries, as NO_BINARY messages say it (``sm_90a, compute_80 PTX``)."""
    from ..launch.binaries import describe_binaries

    return describe_binaries([(b.arch, b.kind == "ptx") for b in a.binaries])


def renamed_note(name: str) -> str:
    """`` (renamed: NAME is reserved in C/C++)`` when a user's name is spelled differently in generated code."""
    c = c_name(name)
    return "" if c == name else c_comment(f" ({c} = {name}, renamed: {name} is reserved in C/C++)")


def renamed_params(names: list[str]) -> str:
    """``; C names: default_ = default, ...`` for a doc comment, when any of ``names`` is renamed."""
    pairs = [f"{c_name(n)} = {n}" for n in names if c_name(n) != n]
    return c_comment(f"; renamed (reserved in C/C++): {', '.join(pairs)}") if pairs else ""
