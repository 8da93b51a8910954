"""HostProgram as bytes: what a build worker hands back and what ``kernelpack build`` keeps between builds.

JSON (canonical: sorted keys, ASCII), binary parts in base64: each arch's export object, and each kernel the program
launches as a one-artifact ``.kpack`` bundle (the bundle format checks its own hashes and shapes). Lossless:
``from_bytes(to_bytes(p)) == p``. Reading executes nothing and checks every field it reads; anything malformed is a
:class:`~kernelpack.core.errors.BundleError` naming the source and the field, never another exception.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from ..core.abi import Pointer, Struct, type_from_json, type_to_json
from ..core.arch import Arch
from ..core.errors import BundleError, KernelpackError
from .artifact import Provenance
from .host_program import HostObject, HostParam, HostProgram
from .kpack import Bundle

FORMAT = "kernelpack-host-program"
VERSION = 1
MAX_BYTES = 1 << 31  # a host program's JSON (objects included) larger than this is not one we wrote


def to_bytes(p: HostProgram) -> bytes:
    doc = {
        "format": FORMAT, "version": VERSION, "name": p.name, "variant": p.variant, "zero_extent": p.zero_extent,
        "provenance": p.provenance.to_json(),
        "params": [{"name": q.name, "type": type_to_json(q.type), "stream": q.stream,
                    "checks": [[f, n] for f, n in q.checks]} for q in p.params],
        "objects": [{"arch": str(o.arch), "prefix": o.prefix, "data": _b64(o.data)} for o in p.objects],
        "kernels": [_b64(Bundle.of(k).to_bytes()) for k in p.kernels],
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def from_bytes(data: bytes, *, source: str = "<bytes>") -> HostProgram:
    if not isinstance(data, bytes) or len(data) > MAX_BYTES:
        raise BundleError(f"{source}: not a serialized host program")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise BundleError(f"{source}: a host program must be JSON: {e!r:.200}") from None
    r = _Reader(source)
    try:
        program = r.program(doc)
        r.canonical(doc, program)
        return program
    except BundleError:
        raise
    except KernelpackError as e:  # a field that passed the shape checks but not the constructors' own
        raise BundleError(f"{source}: {e.message}") from None
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, RecursionError) as e:
        raise BundleError(f"{source}: malformed host program: {e!r:.300}") from None  # a check this file lacks


def _canonical(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _difference(a: Any, b: Any, path: str) -> str:
    """The first place where two JSON documents differ (as ``a.b[2]``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b or _canonical(a[k]) != _canonical(b[k]):
                return _difference(a.get(k), b.get(k), f"{path}.{k}") if k in a and k in b else f"{path}.{k}"
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if _canonical(x) != _canonical(y):
                return _difference(x, y, f"{path}[{i}]")
    return path


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, expected: str, got: Any) -> BundleError:
        return BundleError(f"{self.source}: host program field {where}: expected {expected}, got "
                           f"{type(got).__name__} {got!r:.80}")

    def field(self, d: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
        if key not in d:
            raise BundleError(f"{self.source}: host program field {where}.{key} is missing")
        v = d[key]
        if not isinstance(v, kind) or (isinstance(v, bool) and kind is int):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.fail(f"{where}.{key}", names, v)
        return v

    def strings(self, v: Any, where: str) -> list[str]:
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(where, "a list of strings", v)
        return v

    def blob(self, text: Any, where: str) -> bytes:
        if isinstance(text, str):
            try:
                return base64.b64decode(text.encode("ascii"), validate=True)
            except (binascii.Error, UnicodeEncodeError):
                pass
        raise self.fail(where, "base64 text", text)

    def canonical(self, doc: dict[str, Any], program: HostProgram) -> None:
        """What was read must be what :func:`to_bytes` writes for the program it made (no value of a type the
        constructors would coerce, no unknown key); kernels are compared by the bundle reader, not here."""
        again = json.loads(to_bytes(program))
        again["kernels"] = doc["kernels"]
        if _canonical(again) != _canonical(doc):
            where = _difference(doc, again, "program")
            raise BundleError(f"{self.source}: host program field {where} is not as kernelpack writes it (a value of "
                              f"another type, or a key it does not write)")

    def program(self, doc: Any) -> HostProgram:
        if not isinstance(doc, dict):
            raise self.fail("(top)", "an object", doc)
        if doc.get("format") != FORMAT or doc.get("version") != VERSION or type(doc.get("version")) is not int:
            raise BundleError(f"{self.source}: not a host program of format {FORMAT} version {VERSION} (format "
                              f"{doc.get('format')!r:.40}, version {doc.get('version')!r:.20}); rebuild it")
        top = "program"
        params = self.field(doc, "params", list, top)
        objects = self.field(doc, "objects", list, top)
        kernels = self.field(doc, "kernels", list, top)
        return HostProgram(
            self.field(doc, "name", str, top),
            tuple(self.param(q, f"params[{i}]") for i, q in enumerate(params)),
            tuple(self.object(o, f"objects[{i}]") for i, o in enumerate(objects)),
            self.provenance(self.field(doc, "provenance", dict, top)),
            self.field(doc, "variant", str, top),
            tuple(self.kernel(k, f"kernels[{i}]") for i, k in enumerate(kernels)),
            self.field(doc, "zero_extent", str, top),
        )

    def param(self, q: Any, where: str) -> HostParam:
        if not isinstance(q, dict):
            raise self.fail(where, "an object", q)
        name = self.field(q, "name", str, where)
        if not name.isidentifier():
            raise self.fail(f"{where}.name", "an identifier", name)
        t = type_from_json(self.field(q, "type", dict, where))
        stream = self.field(q, "stream", bool, where)
        if stream and not isinstance(t, Pointer):
            raise self.fail(f"{where}.stream", "false (the parameter is not a pointer)", stream)
        self.struct_values(t, f"{where}.type")
        members = {"data", *(f.name for f in t.fields)} if isinstance(t, Struct) else {"data"}
        checks = []
        for i, c in enumerate(self.field(q, "checks", list, where)):
            ok = isinstance(c, list) and len(c) == 2 and c[0] in members and type(c[1]) is int and c[1] >= 1
            if not ok:
                raise self.fail(f"{where}.checks[{i}]", f"a [field, divisor >= 1] pair, field one of {sorted(members)}",
                                c)
            checks.append((c[0], c[1]))
        return HostParam(name, t, stream, tuple(checks))

    def struct_values(self, t: Any, where: str) -> None:
        """What the ABI types leave unchecked: alignments >= 1, static extents and strides integers >= 0."""
        if not isinstance(t, Struct):
            return
        if t.min_align < 1:
            raise self.fail(f"{where}.min_align", "an integer >= 1", t.min_align)
        spec = t.tensor
        if spec is not None:
            if spec.align < 1:
                raise self.fail(f"{where}.tensor.align", "an integer >= 1", spec.align)
            if not all(x is None or (type(x) is int and x >= 0) for x in spec.shape + spec.stride):
                raise self.fail(f"{where}.tensor", "static extents and strides as integers >= 0 or null",
                                [spec.shape, spec.stride])
        for i, f in enumerate(t.fields):
            self.struct_values(f.type, f"{where}.fields[{i}].type")

    def object(self, o: Any, where: str) -> HostObject:
        if not isinstance(o, dict):
            raise self.fail(where, "an object", o)
        return HostObject(Arch.parse(self.field(o, "arch", str, where)), self.blob(o.get("data"), f"{where}.data"),
                          self.field(o, "prefix", str, where))

    def provenance(self, d: dict[str, Any]) -> Provenance:
        where = "provenance"
        return Provenance(self.field(d, "frontend", str, where), self.field(d, "frontend_version", str, where),
                          self.field(d, "compiler", str, where),
                          tuple(self.strings(self.field(d, "options", list, where), f"{where}.options")),
                          self.field(d, "source_sha256", str, where))

    def kernel(self, k: Any, where: str) -> Any:
        bundle = Bundle.from_bytes(self.blob(k, where), source=f"{self.source}: {where}")
        if len(bundle) != 1:
            raise self.fail(where, "a bundle of one kernel", f"{len(bundle)} kernels")
        return bundle.artifacts[0]
