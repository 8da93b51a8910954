"""``kernelpack wheel --split arch``: one provider wheel per arch family and a small front wheel users import.

Precompiled-kernel wheels reach gigabytes when every arch is in one file, past what package indexes take; the split
keeps each file to one family's binaries::

    NAME-VERSION-py3-none-any.whl          the front: NAME/__init__.py, the stubs, no binary (a few KB)
    NAME_sm9x-VERSION-cp310-abi3-manylinux_2_17_<cpu>.whl
                                           a provider: NAME_sm9x/NAME.kpack (sm_9x binaries only), its runtime

An arch family is a major compute capability (``sm8x``: sm_80, sm_86, sm_89 and their PTX; ``sm9x``; ``sm10x``...),
as binary compatibility runs (SASS of sm_80 runs on sm_86, never on sm_90). The front's metadata names each provider
as an extra (``pip install 'NAME[sm9x]'``). At the first use of a kernel the front asks the driver (through ctypes:
the front carries no runtime) for device 0's compute capability and loads its family's provider -- else the highest
older family's provider that carries PTX (the driver compiles it) -- and refuses otherwise with an ImportError naming
the device and the provider wheel to install. A provider is a whole package (its own runtime, version-checked as any
generated package), so two families' providers may be installed side by side.
"""

from __future__ import annotations

from dataclasses import replace

from ..bundle.artifact import KernelArtifact
from ..bundle.kpack import Bundle
from ..core.arch import Arch
from ..core.names import py_docstring
from ..core.version import __version__ as KERNELPACK_VERSION
from .meta import WheelError, WheelMeta, check_package_name
from .package import HEADER, PackageFiles, runtime_check

PROVIDER_INIT = '''{header}
{doc}

__version__ = {version!r}
__kernelpack_family__ = {family!r}
__kernelpack_bundle__ = {bundle!r}
__kernelpack_version__ = {kv!r}  # the kernelpack that built this provider and the runtime it carries

{check}'''

FRONT_LOAD = '''

__kernelpack_providers__ = {providers!r}  # family -> (major compute capability, carries PTX)


def __kernelpack_device__():
    """(major, minor, name) of device 0, asked of the driver directly (the front carries no runtime), its entry
    points reached through cuGetProcAddress_v2 as kernelpack's runtime reaches them."""
    import ctypes

    try:
        gpa = ctypes.CDLL("libcuda.so.1").cuGetProcAddress_v2
    except (OSError, AttributeError) as e:
        raise ImportError(f"{{__name__}}: no CUDA 12+ driver to choose a provider wheel by ({{e}})") from None
    i, p = ctypes.c_int, ctypes.POINTER
    gpa.restype = i
    gpa.argtypes = (ctypes.c_char_p, p(ctypes.c_void_p), i, ctypes.c_uint64, p(i))

    def fn(name, *argtypes):
        ptr, found = ctypes.c_void_p(), i(-1)
        if gpa(name.encode(), ctypes.byref(ptr), 12000, 0, ctypes.byref(found)) != 0 or not ptr.value:
            return None
        return ctypes.CFUNCTYPE(i, *argtypes)(ptr.value)

    init, count_of, get = fn("cuInit", ctypes.c_uint), fn("cuDeviceGetCount", p(i)), fn("cuDeviceGet", p(i), i)
    attr, name_of = fn("cuDeviceGetAttribute", p(i), i, i), fn("cuDeviceGetName", ctypes.c_char_p, i, i)
    count, dev, major, minor = i(0), i(0), i(0), i(0)
    if None in (init, count_of, get, attr) or init(0) != 0 or count_of(ctypes.byref(count)) != 0 or count.value < 1:
        raise ImportError(f"{{__name__}}: no CUDA device to choose a provider wheel by")
    if (get(ctypes.byref(dev), 0) != 0 or attr(ctypes.byref(major), 75, dev) != 0
            or attr(ctypes.byref(minor), 76, dev) != 0):
        raise ImportError(f"{{__name__}}: the driver did not tell device 0's compute capability")
    name = ctypes.create_string_buffer(256)
    if name_of is None or name_of(name, 256, dev) != 0:
        name.value = b""
    return major.value, minor.value, name.value.decode("utf-8", "replace") or "?"


def __kernelpack_provider__():
    """The provider package for device 0: its family's, else (no provider of this release serves that family) the
    highest older family's that carries PTX."""
    import importlib
    import importlib.util

    major, minor, device = __kernelpack_device__()
    where = f"device 0 ({{device}}, sm_{{major}}{{minor}})"
    fams = sorted(__kernelpack_providers__.items(), key=lambda kv: -kv[1][0])
    usable = [f for f, (m, ptx) in fams if m == major] or [f for f, (m, ptx) in fams if m < major and ptx]
    if not usable:
        raise ImportError(f"{{__name__}} {{__version__}} has no kernels for {{where}}: its provider wheels serve "
                          f"{{', '.join(sorted(__kernelpack_providers__))}}")
    for family in usable:
        if importlib.util.find_spec(f"{{__name__}}_{{family}}") is not None:
            provider = importlib.import_module(f"{{__name__}}_{{family}}")
            if provider.__version__ != __version__:
                raise ImportError(f"{{__name__}} {{__version__}} found its provider {{provider.__name__}} "
                                  f"{{provider.__version__}}: install the same version (pip install "
                                  f"'{{__name__}}[{{family}}]=={{__version__}}')")
            return provider
    installed = [f"{{__name__}}_{{f}}" for f in sorted(__kernelpack_providers__)
                 if importlib.util.find_spec(f"{{__name__}}_{{f}}") is not None]
    raise ImportError(f"{{__name__}}: {{where}} needs the provider wheel {{__name__}}_{{usable[0]}} "
                      f"({{__name__}}_{{usable[0]}}-{{__version__}}-*.whl), which is not installed: pip install "
                      f"'{{__name__}}[{{usable[0]}}]=={{__version__}}' (installed providers: "
                      f"{{', '.join(installed) or 'none'}})")


def __kernelpack_load__():
    """kernelpack.load of the bundle of the provider for device 0 by the runtime it carries, once."""
    import os

    provider = __kernelpack_provider__()
    path = os.path.join(os.path.dirname(provider.__file__), provider.__kernelpack_bundle__)
    globals().setdefault("__kernelpack_runtime__", provider.__kernelpack_runtime__)
    return globals().setdefault("__kernelpack_module__", provider.__kernelpack_runtime__.load(path))


def __dir__():
    return sorted(set(globals()) | __kernelpack_names__)
'''

FRONT_RUNTIME_INIT = '''"""The types {package}'s stubs name (kernelpack.argtypes, kernelpack {version}); the runtime
itself is in the provider wheel of each arch family. Generated by kernelpack wheel --split arch; do not edit."""

__version__ = {version!r}
'''


def arch_family(arch: Arch) -> str:
    """``sm9x`` for sm_90, sm_90a and compute_90: the major compute capability, as binary compatibility runs."""
    return f"sm{arch.major}x"


def split_bundle(bundle: Bundle) -> dict[str, Bundle]:
    """family -> the bundle holding only that family's binaries (an artifact without any there is left out)."""
    out: dict[str, list[KernelArtifact]] = {}
    for art in bundle:
        for family in sorted({arch_family(Arch.parse(b.arch)) for b in art.binaries}):
            kept = tuple(b for b in art.binaries if arch_family(Arch.parse(b.arch)) == family)
            archs = {Arch.parse(b.arch) for b in kept}
            per_arch = {a: x for a, x in art.arch_launches.items() if a in archs}
            out.setdefault(family, []).append(replace(art, binaries=kept, per_arch=per_arch))
    return {f: Bundle.of(arts) for f, arts in sorted(out.items())}


def carries_ptx(bundle: Bundle) -> bool:
    return any(b.kind == "ptx" for art in bundle for b in art.binaries)


def provider_name(name: str, family: str) -> str:
    return check_package_name(f"{name}_{family}", "provider package name")


def front_init(gen: PackageFiles, providers: dict[str, tuple[int, bool]]) -> str:
    """The front's ``__init__.py``: the package's own (names, ``__getattr__``), loading through a provider."""
    head, sep, _ = gen.init.partition(f"\nfrom . import {gen.runtime} as __kernelpack_runtime__\n")
    getattr_at = gen.init.find("\n\ndef __getattr__(name):")
    load_at = gen.init.find("\n\ndef __kernelpack_load__():")
    if not sep or getattr_at < 0 or load_at < getattr_at:
        raise WheelError("kernelpack bug: the generated __init__.py has not the layout --split arch expects")
    getattr_def = gen.init[getattr_at:load_at].replace(
        "    if name not in __kernelpack_names__:",
        "    if name == \"__kernelpack_runtime__\":\n        __kernelpack_load__()\n        return "
        "globals()[name]\n    if name not in __kernelpack_names__:")
    return head.rstrip("\n") + "\n" + getattr_def + FRONT_LOAD.format(providers=providers)


def provider_init(name: str, family: str, version: str, bundle: str, runtime: str) -> str:
    doc = (f"{name}_{family} {version}: the {family} binaries of {name} (kernelpack wheel --split arch) and the "
           f"runtime that loads them; import {name}, which loads this package on a device of this family.")
    return PROVIDER_INIT.format(header=HEADER.format(kv=KERNELPACK_VERSION), doc=py_docstring(doc), version=version,
                                family=family, bundle=bundle, kv=KERNELPACK_VERSION, check=runtime_check(runtime))


def front_meta(meta: WheelMeta, families: list[str]) -> WheelMeta:
    """The front's metadata: each provider an extra (``pip install 'NAME[sm9x]'``) pinned to this version."""
    extra: list[tuple[str, str]] = list(meta.extra)
    for f in families:
        extra += [("Provides-Extra", f), ("Requires-Dist", f"{meta.name}_{f}=={meta.version}; extra == \"{f}\"")]
    return replace(meta, extra=tuple(extra))


def provider_meta(meta: WheelMeta, family: str, archs: list[str]) -> WheelMeta:
    summary = f"The {family} kernels ({', '.join(archs)}) of {meta.name}: install {meta.name}[{family}]"
    return WheelMeta(provider_name(meta.name, family), meta.version, summary, "", meta.description_type,
                     tuple(kv for kv in meta.extra if kv[0] in ("License", "Author", "Author-email")))


def front_runtime_files(package: str, argtypes: bytes, runtime: str) -> dict[str, bytes]:
    return {f"{package}/{runtime}/__init__.py": FRONT_RUNTIME_INIT.format(package=package,
                                                                           version=KERNELPACK_VERSION).encode(),
            f"{package}/{runtime}/argtypes.py": argtypes}
