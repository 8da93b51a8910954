"""A small scanner for generated C/C++ headers: every public declaration must carry a Doxygen comment.

Public declarations are those at file/namespace/``extern "C"`` scope, in the public part of a class, struct fields
and enumerators: functions, types, templates, aliases, data members, namespaces and ``#define``s (include guards
aside). A declaration is documented when the comment above it (blank lines allowed) is a ``///`` line or a
``/** */`` block, or when its line carries a ``///<`` / ``/**<`` comment. Function bodies and private sections are
not looked into. Generated headers only: one declaration starts per line.
"""

from __future__ import annotations

import re

_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')
PUBLIC = ("ns", "class-public", "struct", "enum")


def _code(line: str, in_block: bool) -> tuple[str, bool]:
    """The line without comments and string contents; whether a block comment is still open after it."""
    out, i = [], 0
    line = _STRING.sub('""', line)
    while i < len(line):
        if in_block:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out), True
            i, in_block = end + 2, False
        elif line.startswith("//", i):
            break
        elif line.startswith("/*", i):
            in_block, i = True, i + 2
        else:
            out.append(line[i])
            i += 1
    return "".join(out).strip(), in_block


def _strip_template(decl: str) -> str:
    decl = decl.strip()
    if not decl.startswith("template"):
        return decl
    depth, start = 0, decl.find("<")
    for i in range(start, len(decl)):
        depth += {"<": 1, ">": -1}.get(decl[i], 0)
        if depth == 0:
            return decl[i + 1:]
    return decl


def _scope_kind(decl: str) -> str:
    """What a line opening a brace starts: a namespace, a class, a struct, an enum or a body (functions)."""
    d = _strip_template(decl)
    if re.search(r'\bnamespace\b|\bextern\s+""', d):
        return "ns"
    if re.search(r"\benum\b", d):
        return "enum"
    head = d.split("(")[0]
    if re.search(r"\bclass\b", head):
        return "class-private"
    if re.search(r"\b(struct|union)\b", head):
        return "struct"
    return "body"


def undocumented(text: str) -> list[str]:
    """The public declarations of a header that lack a doc comment (each as 'line N: text')."""
    scopes = ["ns"]
    missing: list[str] = []
    in_block = documented = False
    pending: str | None = None  # a declaration continued over lines (its code so far)
    guard = None  # the macro of the #ifndef just above
    for n, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        was_block = in_block
        code, in_block = _code(raw, in_block)
        if not code:
            if stripped and not was_block:  # a comment line (or the first line of a block)
                documented = stripped.startswith(("///", "/**"))
            continue
        scope = scopes[-1]
        if code.startswith("#"):
            m = re.match(r"#\s*define\s+(\w+)(.*)", code)
            if m and scope == "ns" and not documented and not (m.group(1) == guard and not m.group(2).strip()):
                missing.append(f"line {n}: {stripped}")
            g = re.match(r"#\s*ifndef\s+(\w+)", code)
            guard, documented = (g.group(1) if g else None), False
            continue
        guard = None
        if pending is None and scope.startswith("class") and re.fullmatch(r"(public|protected|private)\s*:", code):
            scopes[-1] = "class-public" if code.startswith("public") else "class-private"
            documented = False
            continue
        if pending is None and scope in PUBLIC:
            exempt = code.startswith("}") or re.fullmatch(r'extern\s+""\s*\{', code)
            if not exempt and not documented and not re.search(r"///|/\*\*", raw):
                missing.append(f"line {n}: {stripped}")
        if pending is None and not scope == "body":
            pending = ""
        if pending is not None:
            pending += " " + code
        opens, closes = code.count("{"), code.count("}")
        if opens > closes:
            scopes += [_scope_kind(pending or code)] + ["body"] * (opens - closes - 1)
            pending = None
        elif closes > opens:
            del scopes[len(scopes) - (closes - opens):]
            pending = None
        elif pending is not None and (code.endswith((";", ",", "}")) or scope == "enum"):
            pending = None
        documented = False
    return missing
