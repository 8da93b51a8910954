"""Bundle integrity: one altered byte anywhere (header, each blob, padding, manifest) is refused; a newer format
version is refused naming both versions; loading never executes code from the file (dynamic and static checks).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import json
import marshal
import pickle
import struct
from pathlib import Path

import pytest

import fuzz_support as fz
import kernelpack
from kernelpack.bundle import HEADER_SIZE, Bundle, read_manifest
from kernelpack.clib.embedded import read_embedded_bundle
from kernelpack.errors import BundleError
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


@pytest.mark.parametrize("version", [2, 7, 2**32 - 1])
def test_a_newer_format_version_is_refused_naming_both_versions(seeds, version, tmp_path):
    data = bytearray(seeds.bundle)
    struct.pack_into("<I", data, 8, version)
    msg = f"format version {version} is newer than the supported version 1"
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
    body = fz.encode(manifest)
    data = fz.forge(seeds.bundle, body)
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
LOAD_PATH = ["bundle.py", "artifact.py", "abi.py", "arch.py", "cubin.py", "tma.py", "clib/embedded.py",
             "runtime/module.py", "runtime/loader.py", "files.py", "config.py"]
FORBIDDEN_MODULES = {"pickle", "cPickle", "marshal", "shelve", "dill", "yaml", "importlib", "runpy", "code",
                     "subprocess"}
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__", "execfile"}  # as bare names (re.compile is fine)
FORBIDDEN_OWNERS = {"builtins", "importlib", "pickle", "marshal", "runpy"}  # any call through these


@pytest.mark.parametrize("rel", LOAD_PATH)
def test_no_code_loading_primitive_on_the_load_path(rel):
    tree = ast.parse((SRC / rel).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not {a.name.split(".")[0] for a in node.names} & FORBIDDEN_MODULES, f"{rel}:{node.lineno}"
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            assert (node.module or "").split(".")[0] not in FORBIDDEN_MODULES, f"{rel}:{node.lineno}"
        elif isinstance(node, ast.Call):
            fn = node.func
            assert not (isinstance(fn, ast.Name) and fn.id in FORBIDDEN_CALLS), f"{rel}:{node.lineno} calls {fn.id}"
            owner = fn.value.id if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) else ""
            assert owner not in FORBIDDEN_OWNERS, f"{rel}:{node.lineno} calls {owner}.{fn.attr}"
    if rel == "bundle.py":
        assert "json.loads" in (SRC / rel).read_text()


def test_json_manifest_stays_data_even_with_object_hooks_spelled_inside(seeds):
    manifest = fz.manifest_of(seeds.bundle)
    manifest["__class__"] = "kernelpack.bundle.Bundle"
    manifest["__reduce__"] = ["os.system", ["true"]]
    loaded = Bundle.from_bytes(fz.forge(seeds.bundle, json.dumps(manifest).encode()))
    assert isinstance(loaded, Bundle) and len(loaded) == len(Bundle.from_bytes(seeds.bundle))
