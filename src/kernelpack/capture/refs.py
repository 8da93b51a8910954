"""How a captured project names a kernel: the module attribute the build imports it by."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def reference(obj: Any, module: str, unwrap: Callable[[Any], Any | None] = lambda v: None) -> tuple[str, Any]:
    """``("package.module:attr", the attribute)`` for the outermost module attribute that is ``obj`` or wraps it
    (``unwrap(v)`` gives what ``v`` wraps, or None); ``("/path/file.py:attr", ...)`` for a module the build cannot
    import by name (a script run as ``__main__``). LookupError when no module attribute holds it (a kernel made inside
    a function)."""
    mod = sys.modules.get(module)
    if mod is None:
        raise LookupError(f"its module {module} is not loaded")
    best: tuple[int, int, str, Any] | None = None
    for attr, value in list(vars(mod).items()):
        depth, v = 0, value
        while v is not None and v is not obj and depth < 8:
            v, depth = unwrap(v), depth + 1
        if v is obj:
            key = (depth, attr == getattr(obj, "__name__", None), attr, value)
            if best is None or key[:2] > best[:2]:
                best = key
    if best is None:
        raise LookupError(f"no attribute of module {module} holds it (a kernel made inside a function cannot be "
                          f"named by a project file)")
    attr, value = best[2], best[3]
    spec = getattr(mod, "__spec__", None)
    name = getattr(spec, "name", None)
    path = getattr(mod, "__file__", None)
    installed = bool(path) and _installed(str(path))
    if module == "__main__" or name != module or module.startswith("kp_project_") or (
            not installed and "." not in module):
        if not path:
            raise LookupError(f"module {module} has no file")
        return f"{path}:{attr}", value  # a script, or a module next to it: the build imports the file
    return f"{module}:{attr}", value


def _installed(path: str) -> bool:
    """A module the build can import by name wherever it runs: installed (site-packages, the standard library)."""
    import os
    import site
    import sysconfig

    roots = {sysconfig.get_paths().get(k, "") for k in ("purelib", "platlib", "stdlib", "platstdlib")}
    roots |= set(getattr(site, "getsitepackages", lambda: [])()) | {site.getusersitepackages()}
    p = os.path.realpath(path)
    return any(r and (p + os.sep).startswith(os.path.realpath(r) + os.sep) for r in roots) or \
        f"{os.sep}site-packages{os.sep}" in p or f"{os.sep}dist-packages{os.sep}" in p
