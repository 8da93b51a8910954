"""Names and strings that reach generated files: what a user may call things, how a user name is spelled in
generated C/C++, and how a user string is quoted in each output language.

User names are data. A name that is a keyword or a reserved identifier somewhere a generated file uses it (C99-C23,
C++17-C++23, a standard macro or typedef, kernelpack's own ``kp_`` prefix) is renamed deterministically
(:func:`c_name`: ``default`` -> ``default_``, ``__x`` -> ``u_x``, ``kp_n`` -> ``u_kp_n``); the generated header
comments show the original. Two names that still collide after renaming are refused by the generator, naming both.
Strings that are not names (versions, messages, paths) are escaped for the language they land in.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Collection, Sequence

from .errors import KernelpackError

# the patterns are compiled on first use (re caches them): loading a library needs none of them
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"  # use with fullmatch ("$" would let a trailing newline in)

# C keywords, C99 through C23 (including the underscore spellings and C23's new keywords)
C_KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline int long register
restrict return short signed sizeof static struct switch typedef union unsigned void volatile while _Alignas _Alignof
_Atomic _BitInt _Bool _Complex _Decimal128 _Decimal32 _Decimal64 _Generic _Imaginary _Noreturn _Static_assert
_Thread_local alignas alignof bool constexpr false nullptr static_assert thread_local true typeof typeof_unqual
""".split())

# C++ keywords and alternative tokens, C++17 through C++23
CPP_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class compl
concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype default delete
do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable
namespace new noexcept not not_eq nullptr operator or or_eq private protected public register reinterpret_cast
requires return short signed sizeof static static_assert static_cast struct switch template this thread_local throw
true try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
""".split())

# Object-like macros and typedefs of the standard C/C++ headers a generated header includes or a consumer commonly
# does (stdbool, stddef, stdint, stdio, stdlib, errno, limits, math, complex, stdalign, stdnoreturn, assert), and the
# GNU dialects' predefined macros (gcc -std=gnu* defines `linux` and `unix` as 1).
STD_NAMES = frozenset("""
NULL errno EOF BUFSIZ FILENAME_MAX FOPEN_MAX L_tmpnam TMP_MAX SEEK_SET SEEK_CUR SEEK_END stdin stdout stderr
EXIT_SUCCESS EXIT_FAILURE RAND_MAX MB_CUR_MAX CHAR_BIT SCHAR_MIN SCHAR_MAX UCHAR_MAX CHAR_MIN CHAR_MAX MB_LEN_MAX
SHRT_MIN SHRT_MAX USHRT_MAX INT_MIN INT_MAX UINT_MAX LONG_MIN LONG_MAX ULONG_MAX LLONG_MIN LLONG_MAX ULLONG_MAX
INFINITY NAN HUGE_VAL HUGE_VALF HUGE_VALL FP_NAN FP_INFINITE FP_ZERO FP_SUBNORMAL FP_NORMAL MATH_ERRNO MATH_ERREXCEPT
math_errhandling I complex imaginary noreturn linux unix i386 __STDC__ size_t ptrdiff_t wchar_t wint_t max_align_t
nullptr_t intptr_t uintptr_t intmax_t uintmax_t FILE fpos_t va_list div_t ldiv_t lldiv_t time_t clock_t off_t
ssize_t pid_t float_t double_t offsetof assert std
""".split())

_STD_PATTERNS = (
    r"(E[0-9A-Z]\w*"  # <errno.h> reserves E followed by a digit or an uppercase letter
    r"|u?int(_least|_fast)?\d+_t"  # <stdint.h> typedefs
    r"|U?INT(_LEAST|_FAST|PTR|MAX)?\d*_(MIN|MAX|C)|(PTRDIFF|SIZE|SIG_ATOMIC|WCHAR|WINT)_(MIN|MAX)"
    r"|PRI[a-zX]\w*|SCN[a-zX]\w*|LC_[A-Z]\w*|SIG_?[A-Z]\w*|(FLT|DBL|LDBL)_[A-Z]\w*)")

# kernelpack's own prefix: every generated local, static, type and macro starts with one of these
GENERATED_PREFIXES = ("kp_", "KP_")

# what a library name must not be, beyond the identifier rule: standard headers (include/NAME.h would shadow
# <NAME.h> for every consumer that adds include/ to its path) and kernelpack's own prefix
STD_HEADERS = frozenset("""
assert complex ctype errno fenv float inttypes iso646 limits locale math setjmp signal stdalign stdarg stdatomic
stdbit stdbool stdckdint stddef stdint stdio stdlib stdnoreturn string tgmath threads time uchar wchar wctype
dlfcn pthread unistd fcntl cuda cuda_runtime cuda_runtime_api cudaTypedefs cuda_fp16 cuda_bf16 kernelpack
""".split())

LIBRARY_NAME_MAX = 64  # lib<name>.so, <name>Config.cmake and friends stay far below NAME_MAX (255)


def reserved(name: str) -> bool:
    """Whether ``name`` cannot appear as written in generated C or C++ (keyword, reserved identifier, standard
    macro or typedef, or kernelpack's generated prefix)."""
    return (name in C_KEYWORDS or name in CPP_KEYWORDS or name in STD_NAMES or bool(re.fullmatch(_STD_PATTERNS, name))
            or name.startswith("_") or "__" in name or name.startswith(GENERATED_PREFIXES))


def c_name(name: str) -> str:
    """How a user's name is spelled in generated C/C++: itself, unless :func:`reserved`; then a deterministic
    rename that is not reserved (``default`` -> ``default_``, ``__class__`` -> ``u_class_``, ``kp_n`` ->
    ``u_kp_n``, ``EINVAL`` -> ``EINVAL_``)."""
    if not reserved(name):
        return name
    out = name
    if out.startswith("_") or "__" in out:
        out = "u_" + re.sub(r"_+", "_", out).lstrip("_")
    elif out.startswith(GENERATED_PREFIXES):
        out = "u_" + out
    else:
        out += "_"
    if reserved(out):  # e.g. "E" + digits stays reserved with a suffix only in theory; never leave it reserved
        out = "u_" + out
    return out


def py_name(name: str, reserved: Collection[str] = ()) -> str:
    """How a user's name is spelled in Python (a module attribute, a keyword argument): itself, unless it is a
    Python keyword, a dunder, or in ``reserved`` (what the object itself defines: launch keywords, the module's
    own attributes); then renamed as :func:`c_name` does (``lambda`` -> ``lambda_``, ``__class__`` -> ``u_class_``,
    ``grid`` -> ``grid_``)."""
    if keyword.iskeyword(name) or name in reserved:
        return name + "_"
    if name.startswith("__") and name.endswith("__"):
        return "u_" + re.sub(r"_+", "_", name).strip("_") + "_"
    return name


def py_arg_names(names: Sequence[str], reserved: Collection[str] = ()) -> tuple[str, ...]:
    """The Python (keyword-argument) names of a callable's parameters: :func:`py_name` of each, made unique by
    further trailing ``_`` where a rename meets another parameter's own name (``lambda``, ``lambda_`` ->
    ``lambda__``, ``lambda_``: a name that needs no rename keeps it)."""
    out = [py_name(n, reserved) for n in names]
    own = {n for n, o in zip(names, out) if n == o}
    taken: set[str] = set()
    for i, (n, o) in enumerate(zip(names, out)):
        while o in taken or (o != n and o in own):
            o += "_"
        out[i] = o
        taken.add(o)
    return tuple(out)


# the library's own entry points (NAME_preload, ...): an entry a user's name would give the same name gets a trailing _
LIBRARY_API = ("preload", "last_error", "last_cuda_error", "status_name", "bundle", "set_default_device",
               "binary_for_device", "build_id", "check_build_id", "check_build")


def entry_name(lib: str, name: str) -> str:
    """The exported C function of a family, specialization or host program called ``name`` in library ``lib``:
    ``lib_name``. The library prefix keeps keywords harmless there (``lib_int``); what could still clash is
    renamed: a double underscore (reserved in C++: ``_x`` -> ``lib_u_x``), the library's own API (``preload`` ->
    ``lib_preload_``) and kernelpack's hidden ``lib_kp_*`` symbols (``kp_bundle`` -> ``lib_kp_bundle_``)."""
    n = name
    if n.startswith("_") or "__" in n:
        n = "u_" + re.sub(r"_+", "_", n).lstrip("_")
    if n in LIBRARY_API or n.startswith(GENERATED_PREFIXES):
        n += "_"
    return f"{lib}_{n}"


# namespaces C++ reserves or a program already has at global scope: a library so named gets a trailing _ there
CPP_GLOBAL_NAMES = frozenset(("main", "std", "posix", "kp"))


def cpp_namespace(lib: str) -> str:
    """The C++ namespace of library ``lib`` (``int`` -> ``int_``, ``main`` -> ``main_``, ``std`` -> ``std_``)."""
    n = c_name(lib)
    return n + "_" if n in CPP_GLOBAL_NAMES or re.fullmatch(r"std[0-9]+", n) else n


def check_identifier(name: object, what: str) -> str:
    """``name`` if it is an ASCII identifier (letters, digits, ``_``; not starting with a digit), else
    KernelpackError naming ``what``."""
    if not isinstance(name, str) or not re.fullmatch(IDENT, name):
        raise KernelpackError(f"{what} must be an identifier (ASCII letters, digits and _, not starting with a digit); "
                              f"got {name!r}")
    return name


def check_library_name(name: object, what: str = "library name") -> str:
    """A library name is used bare in file names (``libNAME.so``, ``NAME.h``, ``NAMEConfig.cmake``), as the C
    symbol prefix (``NAME_``) and as the C++ namespace: an identifier of at most LIBRARY_NAME_MAX characters that
    is not a standard header's name nor starts with kernelpack's prefix. A C/C++ keyword is fine (the namespace
    is renamed, :func:`c_name`)."""
    name = check_identifier(name, what)
    if name.startswith("_") or "__" in name:
        raise KernelpackError(f"{what} {name!r} starts with _ or holds __: its symbols ({name}_...) would be reserved "
                              f"identifiers in C and C++; choose another name")
    if len(name) > LIBRARY_NAME_MAX:
        raise KernelpackError(f"{what} {name[:20]}... is {len(name)} characters long; at most {LIBRARY_NAME_MAX}")
    if name in STD_HEADERS or name.lower() in STD_HEADERS:
        raise KernelpackError(f"{what} {name!r} is the name of a standard or CUDA header: include/{name}.h would "
                              f"shadow <{name}.h> for every program that uses the library; choose another name")
    if name.lower() == "kp" or name.lower().startswith("kp_"):
        raise KernelpackError(f"{what} {name!r} is or starts with kp_, the prefix of kernelpack's own generated names "
                              f"(its symbols would collide with them); choose another name")
    return name


# PEP 440 public versions (and the SemVer subset that is also one): N(.N)*[{a|b|rc}N][.postN][.devN], plus a
# SemVer-style "-rc.1" / "-beta2" pre-release. No spaces, quotes, backslashes, semicolons or newlines can pass.
_VERSION = (r"(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*)){0,3}"  # matched with re.IGNORECASE
            r"([-.]?(a|b|c|rc|alpha|beta|pre|preview)[-.]?[0-9]*)?"
            r"([-.]?(post|rev|r)[-.]?[0-9]*)?([-.]?dev[-.]?[0-9]*)?")


def check_version(version: object, what: str = "version") -> str:
    """``version`` if it is a PEP 440 version (or a SemVer version that is also one): ``1``, ``1.2.3``,
    ``2.0.0rc1``, ``1.0.0-beta.2``, ``1.4.post1``; else KernelpackError naming ``what`` and the value."""
    if not isinstance(version, str) or len(version) > 64 or not re.fullmatch(_VERSION, version, re.IGNORECASE):
        raise KernelpackError(f"{what} must be a version such as 1.2.3, 2.0.0rc1 or 1.0.0-beta.2 (PEP 440); got "
                              f"{version!r}")
    return version


def version_major(version: str) -> str:
    """The leading number of a checked version."""
    return re.match(r"^[0-9]+", version).group(0)  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------------------ quoting


def c_string(text: str) -> str:
    """``text`` as a C/C++ string literal: printable ASCII as is, everything else (quotes, backslashes, newlines,
    NUL, non-ASCII as UTF-8 bytes) as octal escapes; ``?`` escaped against trigraphs."""
    out = []
    for b in text.encode("utf-8", "surrogateescape"):
        c = chr(b)
        if c in '"\\?' or not 0x20 <= b < 0x7F:
            out.append(f"\\{b:03o}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def c_comment(text: str) -> str:
    """``text`` safe inside a C block comment or a ``//`` comment: no comment terminator, no line break, no
    trigraph or line splice, printable ASCII only."""
    t = "".join(c if 0x20 <= ord(c) < 0x7F else "?" for c in text)
    t = t.replace("\\", "/")  # first: a backslash turned slash must not close the comment (``*\`` -> ``*/``)
    while "*/" in t or "/*" in t:
        t = t.replace("*/", "* /").replace("/*", "/ *")
    while "??" in t:  # no trigraph can form (??/ would splice the next line into the comment)
        t = t.replace("??", "?-?")
    return t


def py_docstring(text: str, indent: str = "") -> str:
    """``text`` as a triple-quoted Python (or stub) docstring: backslashes, quotes and anything not printable ASCII
    escaped, so no user string can end it early, splice lines or hide characters; a line break stays one, and each
    non-empty line after it starts with ``indent`` (which ``inspect.cleandoc`` and ``help()`` remove again)."""
    lines = []
    for line in text.split("\n"):
        out = []
        for c in line:
            if c in "\\\"":
                out.append("\\" + c)
            elif 0x20 <= ord(c) < 0x7F:
                out.append(c)
            else:
                out.append(c.encode("unicode_escape").decode("ascii") if ord(c) > 0xFF else f"\\x{ord(c):02x}")
        lines.append("".join(out))
    body = lines[0] + "".join("\n" + (indent + x if x else "") for x in lines[1:])
    return '"""' + body + '"""'


def cmake_string(text: str) -> str:
    """``text`` as a CMake quoted argument (``"..."``): backslash, quote and ``$`` escaped (no variable reference or
    generator expression can form), newlines as ``\\n`` (a quoted argument is never split at ``;``)."""
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    out = out.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in out):
        raise KernelpackError(f"a string for a CMake file holds control characters: {text!r}")
    return f'"{out}"'
