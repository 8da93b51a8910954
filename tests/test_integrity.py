"""Bundle integrity: one altered byte anywhere (header, each blob, padding, manifest) is refused; a newer format
version is refused naming both versions; loading never executes code from the file (dynamic and static checks).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import marshal
import pickle
import struct
from pathlib import Path

import pytest

import fuzz_support as fz
import kernelpack
from kernelpack.bundle.embedded import read_embedded_bundle
from kernelpack.bundle.kpack import HEADER_SIZE, Bundle, read_manifest
from kernelpack.core.errors import BundleError
from toolchain_support import needs_cuda_compiler

pytestmark = needs_cuda_compiler
SRC = Path(kernelpack.__file__).parent


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> fz.Seeds:
    return fz.make_seeds(tmp_path_factory.mktemp("integrity"))


def position_classes(data: bytes) -> dict[str, list[int]]:
    """Every byte position of a bundle by what it belongs to."""
    moff, msize = struct.unpack_from("<QQ", data, 16)
    blobs = read_manifest(data)["blobs"]
    classes: dict[str, list[int]] = {
        "header.magic": list(range(0, 8)), "header.version": list(range(8, 12)), "header.flags": list(range(12, 16)),
        "header.manifest_offset": list(range(16, 24)), "header.manifest_size": list(range(24, 32)),
        "header.manifest_sha256": list(range(32, 64)), "manifest": list(range(moff, moff + msize)),
    }
    covered = set(range(HEADER_SIZE)) | set(range(moff, moff + msize))
    for i, b in enumerate(blobs):
        span = range(b["offset"], b["offset"] + b["size"])
        classes[f"blob{i}"] = list(span)
        covered |= set(span)
    manifest = read_manifest(data)
    for key in ("entries", "dispatch"):  # the chunks of the families' entries and of their records (format 2)
        spans = [manifest["chunks"][c] for c in sorted(set(manifest["families"][key])) if c >= 0]
        classes[key] = [p for sp in spans for p in range(sp["offset"], sp["offset"] + sp["size"])]
        covered |= set(classes[key])
    classes["padding"] = [p for p in range(len(data)) if p not in covered]
    return classes


def test_one_altered_byte_in_any_position_class_is_refused(seeds):
    data = seeds.bundle
    classes = position_classes(data)
    assert classes["padding"], "the test bundle has alignment padding between its blobs"
    tried = 0
    for positions in classes.values():
        for pos in positions:
            for mask in (0x01, 0x80):
                bad = bytearray(data)
                bad[pos] ^= mask
                with pytest.raises(BundleError):
                    Bundle.from_bytes(bytes(bad))
                tried += 1
    assert tried > 10_000
    assert Bundle.from_bytes(data) is not None


@pytest.mark.parametrize("where,match", [
    (lambda c: c["blob0"][7], r"blob 0 .*\(the binary was altered\)"),
    (lambda c: c["blob1"][-1], r"blob 1 .*\(the binary was altered\)"),
    (lambda c: c["manifest"][3], "manifest SHA-256 mismatch"),
    (lambda c: c["entries"][5], r"kernel \w+: manifest entries: SHA-256 mismatch \(the file was altered\)"),
    (lambda c: c["dispatch"][-1], r"kernel \w+: dispatch record: SHA-256 mismatch \(the file was altered\)"),
    (lambda c: c["header.manifest_sha256"][0], "manifest SHA-256 mismatch"),
    (lambda c: c["header.flags"][0], "manifest is not valid JSON"),  # the zlib flag cleared
    (lambda c: c["header.flags"][1], "header flags 0x103 are not defined"),
    (lambda c: c["padding"][0], "non-zero padding"),
    (lambda c: c["header.magic"][2], "bad magic"),
    (lambda c: c["header.manifest_size"][0], "truncated or padded"),
])
def test_each_class_says_what_was_altered(seeds, where, match):
    bad = bytearray(seeds.bundle)
    bad[where(position_classes(seeds.bundle))] ^= 0x01
    with pytest.raises(BundleError, match=match):
        Bundle.from_bytes(bytes(bad))


@pytest.mark.parametrize("version", [3, 7, 2**32 - 1])
def test_a_newer_format_version_is_refused_naming_both_versions(seeds, version, tmp_path):
    data = bytearray(seeds.bundle)
    struct.pack_into("<I", data, 8, version)
    msg = f"format version {version} is newer than the supported version 2"
    with pytest.raises(BundleError, match=msg):
        Bundle.from_bytes(bytes(data))
    lib = seeds.shared.replace(seeds.bundle, bytes(data))  # the same inside a built library
    (tmp_path / "libx.so").write_bytes(lib)
    with pytest.raises(BundleError, match=msg):
        read_embedded_bundle(tmp_path / "libx.so")
    with pytest.raises(BundleError, match=msg):
        kernelpack.load(tmp_path / "libx.so")


PAYLOADS = [
    "cos\nsystem\n(S'touch /tmp/kp_pwned'\ntR.",  # a protocol-0 pickle
    pickle.dumps(Exception("x")).decode("latin-1"),
    "__import__('os').system('touch /tmp/kp_pwned')",
    "{'__reduce__': (eval, ('1',))}",
    "!!python/object/apply:os.system ['touch /tmp/kp_pwned']",
]


class _Forbidden(AssertionError):
    pass


def _forbid(name):  # type: ignore[no-untyped-def]
    def call(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise _Forbidden(f"{name} called while loading a bundle")

    return call


def test_loading_executes_nothing_from_the_file(seeds, tmp_path, monkeypatch):
    manifest = fz.manifest_of(seeds.bundle)
    manifest["generator"] = PAYLOADS[0]
    for art, payload in zip(manifest["artifacts"], PAYLOADS * 3, strict=False):
        art["provenance"]["options"] = [payload, "__reduce__"]
        art["provenance"]["compiler"] = payload
    data = fz.repack(seeds.bundle, manifest)
    (tmp_path / "p.kpack").write_bytes(data)
    for mod, name in [(builtins, "eval"), (builtins, "exec"), (builtins, "compile"), (pickle, "loads"),
                      (pickle, "load"), (marshal, "loads"), (importlib, "import_module")]:
        monkeypatch.setattr(mod, name, _forbid(f"{mod.__name__}.{name}"))
    bundle = Bundle.from_bytes(data)
    module = kernelpack.load(tmp_path / "p.kpack")
    monkeypatch.undo()
    assert "axpy" in module.__all__
    got = {o for a in bundle for o in a.provenance.options}
    assert set(PAYLOADS) <= got | {manifest["generator"]}, "payloads come back as plain strings"
    assert not Path("/tmp/kp_pwned").exists()


# the modules on the load path: bytes -> manifest -> artifacts -> loaded module (driver calls are ctypes, not code)
LOAD_PATH = ["bundle/kpack.py", "bundle/artifact.py", "core/abi.py", "core/arch.py", "core/cubin.py", "core/tma.py",
             "bundle/embedded.py", "runtime/module.py", "runtime/loader.py", "core/files.py", "core/config.py"]
FORBIDDEN_MODULES = {"pickle", "cPickle", "marshal", "shelve", "dill", "yaml", "importlib", "runpy", "code",
                     "subprocess"}
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__", "execfile"}  # as bare names (re.compile is fine)
FORBIDDEN_OWNERS = {"builtins", "importlib", "pickle", "marshal", "runpy"}  # any call through these


def code_primitives(rel: str, modules: set[str], calls: set[str], owners: set[str]) -> list[tuple[str, int, str]]:
    """(file, line, what) for each import of ``modules``, bare call of ``calls`` and call through ``owners``."""
    tree = ast.parse((SRC / rel).read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(rel, node.lineno, f"import {a.name}") for a in node.names if a.name.split(".")[0] in modules]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in modules:
            found.append((rel, node.lineno, f"from {node.module} import"))
        elif isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Name) and fn.id in calls:
                found.append((rel, node.lineno, fn.id))
            elif isinstance(fn, ast.Attribute):
                owner = fn.value.id if isinstance(fn.value, ast.Name) else ast.unparse(fn.value)
                if owner.split(".")[0] in owners or fn.attr in calls - {"compile"}:
                    found.append((rel, node.lineno, f"{owner}.{fn.attr}"))
    return found


@pytest.mark.parametrize("rel", LOAD_PATH)
def test_no_code_loading_primitive_on_the_load_path(rel):
    assert code_primitives(rel, FORBIDDEN_MODULES, FORBIDDEN_CALLS, FORBIDDEN_OWNERS) == []
    if rel == "bundle/kpack.py":
        assert "json.loads" in (SRC / rel).read_text()


# The whole package (build state, caches, project files, CLI...): no serializer that can run code, no evaluation of
# text as code, and dynamic imports only where listed here, each with why it cannot come from a file kernelpack
# reads (a bundle, a library, a cache entry, the build directory).
CODE_SERIALIZERS = {"pickle", "cPickle", "_pickle", "cloudpickle", "dill", "marshal", "shelve", "jsonpickle", "yaml",
                    "runpy", "code", "codeop"}
CODE_CALLS = {"eval", "exec", "compile", "__import__", "execfile", "exec_module", "import_module", "find_spec",
              "spec_from_file_location", "module_from_spec", "load_module", "run_path", "run_module"}
ALLOWED = {
    ("frontends/refs.py", "importlib.util.spec_from_file_location"):
        "import_file: the user's own project module or kernel file, named by their kernelpack.toml / Python project "
        "(their code, run on purpose like a setup.py); never a path from build state",
    ("frontends/refs.py", "importlib.util.module_from_spec"): "import_file (as above)",
    ("frontends/refs.py", "spec.loader.exec_module"): "import_file (as above)",
    ("frontends/refs.py", "importlib.import_module"):
        "resolve: a 'package.module:attr' reference written in the user's project file (their code)",
    ("frontends/refs.py", "importlib.util.find_spec"):
        "_module_file: locating the module a project reference names, to fingerprint it (the user's code)",
    ("frontends/refs.py", "compile"):
        "_RenamedSource: a module under the user's own project root (as import_file), compiled under the driver's "
        "path on a Ray worker so Triton's line info matches a local build; never a path from build state",
    ("frontends/prebuilt/decompress.py", "importlib.import_module"): "the reference decoders zstandard and lz4, from a "
                                                                     "constant table",
    ("frontends/refs.py", "importlib.machinery.PathFinder.find_spec"):
        "_RenamingFinder: finds the siblings of such a module (the user's project files) for that renaming loader",
    ("core/_lazy.py", "importlib.import_module"): "kernelpack's own submodules, from a constant table in the package",
    ("bundle/__init__.py", "importlib.import_module"): "kernelpack.bundle's own submodules, from the constant table "
                                                      "_SUBMODULES (and .kpack)",
    ("capture/session.py", "import runpy"): "kernelpack capture runs the command the user gives (python SCRIPT or "
                                            "python -m MODULE), as python would",
    ("capture/session.py", "runpy.run_module"): "the user's own -m MODULE, given on the capture command line",
    ("capture/session.py", "runpy.run_path"): "the user's own SCRIPT, given on the capture command line",
    ("__init__.py", "importlib.import_module"): "the public classes' own modules, from the constant table _CLASSES",
    ("_aliases.py", "importlib.import_module"): "kernelpack's own modules at their new homes, from the constant table "
                                                "MOVED",
    ("frontends/cute/types.py", "importlib.import_module"):
        "the constant module name cutlass._mlir.ir (CuTe's bindings)",
}


def test_no_code_from_data_anywhere_in_the_package():
    found = [f for p in sorted(SRC.rglob("*.py"))
             for f in code_primitives(str(p.relative_to(SRC)), CODE_SERIALIZERS, CODE_CALLS, set())]
    unexpected = [f for f in found if (f[0], f[2]) not in ALLOWED]
    assert unexpected == [], "code-loading primitives outside the allow-list (add one only with a reason)"
    stale = set(ALLOWED) - {(f[0], f[2]) for f in found}
    assert not stale, f"allow-list entries no longer needed: {sorted(stale)}"
    assert len(list(SRC.rglob("*.py"))) > 60


def test_json_manifest_stays_data_even_with_object_hooks_spelled_inside(seeds):
    manifest = fz.manifest_of(seeds.bundle)
    manifest["__class__"] = "kernelpack.bundle.Bundle"
    manifest["__reduce__"] = ["os.system", ["true"]]
    loaded = Bundle.from_bytes(fz.repack(seeds.bundle, manifest))
    assert isinstance(loaded, Bundle) and len(loaded) == len(Bundle.from_bytes(seeds.bundle))
