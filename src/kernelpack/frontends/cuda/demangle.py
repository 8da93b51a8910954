"""A small Itanium C++ ABI demangler for CUDA kernel symbols, returning a typed tree rather than a string.

The CUDA C++ frontend reads each kernel's parameter C types from its mangled name (``_Z6axpy_kfPKfPfi`` is
``axpy_k(float, const float*, float*, int)``), and those of an ``extern "C"`` kernel from a probe kernel
instantiated with ``decltype(kernel)`` (``_Z10__kp_probeILi0EFvPKfPfiEEvv``).

Covered: plain, nested, ``std::`` and local names, the substitution table (``S_``, ``S0_``...), template
parameters and packs (``T_``, ``J``, ``Dp``), integer literals (also as ``X..E`` and array bounds), functions and
variables as template arguments (``L_Z..E``, ``XadL_Z..EE``), function,
array, pointer, reference and qualified types, builtin and vendor types, anonymous namespaces, lambdas, ABI tags
and clone suffixes (``.constprop.0``). Refused with :class:`DemangleError`: other expressions, ``decltype``,
pointers to members, operator and constructor names, vector types, floating-point literals, special names.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, cast

from ...core.errors import KernelpackError


class DemangleError(KernelpackError):
    """A symbol is not an Itanium-mangled function name this demangler understands."""


@dataclass(frozen=True)
class Builtin:
    name: str  # canonical C spelling: "unsigned int", "__bf16", "..."


@dataclass(frozen=True)
class Named:
    name: str  # qualified: "ns::Foo", "cute::Tensor", "(anonymous namespace)::Args"
    template_args: tuple[TemplateArg, ...] = ()


@dataclass(frozen=True)
class PointerTo:
    pointee: CxxType


@dataclass(frozen=True)
class ReferenceTo:
    referee: CxxType
    rvalue: bool = False


@dataclass(frozen=True)
class Qualified:
    inner: CxxType
    const: bool = False
    volatile: bool = False
    restrict: bool = False


@dataclass(frozen=True)
class FunctionType:
    ret: CxxType
    params: tuple[CxxType, ...]


@dataclass(frozen=True)
class ArrayOf:
    element: CxxType
    size: int | None


@dataclass(frozen=True)
class Literal:
    type: CxxType  # a non-type template argument: integer, bool, char or enumerator
    value: int


@dataclass(frozen=True)
class Entity:
    name: str  # a function or variable as a non-type template argument: "silu" (L_Z4siluRKfE), "&silu" (XadL...EE)


CxxType = Builtin | Named | PointerTo | ReferenceTo | Qualified | FunctionType | ArrayOf
TemplateArg = CxxType | Literal | Entity


@dataclass(frozen=True)
class Demangled:
    name: str  # qualified function name, "ns::gemm"
    template_args: tuple[TemplateArg, ...]  # of the function itself, packs flattened
    params: tuple[CxxType, ...]  # () for "(void)"

    def __str__(self) -> str:
        targs = f"<{', '.join(map(spell, self.template_args))}>" if self.template_args else ""
        return f"{self.name}{targs}({', '.join(map(spell, self.params))})"


@dataclass(frozen=True)
class _Pack:  # a template argument pack (J...E); flattened into the argument list that holds it
    items: tuple[_Node, ...]


@dataclass(frozen=True)
class _Expansion:  # Dp <pattern>: one type per element of the pack inside the pattern
    pattern: _Node


_Node = CxxType | Literal | Entity | _Pack | _Expansion
_BUILTINS = {
    "v": "void", "w": "wchar_t", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char",
    "s": "short", "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long", "m": "unsigned long",
    "x": "long long", "y": "unsigned long long", "n": "__int128", "o": "unsigned __int128", "f": "float",
    "d": "double", "e": "long double", "g": "__float128", "z": "...", "Dn": "std::nullptr_t", "Du": "char8_t",
    "Ds": "char16_t", "Di": "char32_t", "Da": "auto", "DF16b": "__bf16",
}  # fmt: skip
_FLOAT_N = re.compile(r"DF(\d{1,3})([_x])")  # _FloatN, _FloatNx
_STD_ABBREVIATIONS = {
    "a": "std::allocator", "b": "std::basic_string", "s": "std::string",
    "i": "std::istream", "o": "std::ostream", "d": "std::iostream",
}  # fmt: skip
_LITERAL_SUFFIX = {
    "int": "", "unsigned int": "u", "long": "l", "unsigned long": "ul", "long long": "ll", "unsigned long long": "ull",
}  # fmt: skip
_QUALIFIERS = ("const", "volatile", "__restrict__")
_DIGITS = "0123456789"
_SEQ_DIGITS = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_MAX_DEPTH = 96  # of a result tree: keeps spell(), == and hash() clear of Python's recursion limit
_MAX_WEIGHT = 1 << 16  # nodes with substitutions expanded: garbage cannot make the result exponentially large


def is_mangled(symbol: str) -> bool:
    """Whether ``symbol`` looks like an Itanium-mangled name (an ``extern "C"`` kernel name does not)."""
    return symbol.startswith("_Z") and len(symbol) > 2


def demangle(symbol: str) -> Demangled:
    """Demangle a kernel symbol into its qualified name, template arguments and parameter types."""
    if not is_mangled(symbol):
        raise DemangleError(f"cannot demangle {symbol!r}: not an Itanium-mangled name (no '_Z' prefix)")
    parser = _Parser(symbol, symbol.split(".", 1)[0])  # "_Z...<.suffix>": a clone suffix such as .constprop.0
    parser.pos = 2
    try:
        name, targs, params = parser.encoding()
        if parser.pos != len(parser.s):
            parser.fail("unexpected trailing characters")
        return Demangled(name, parser.finish_args(targs or ()), tuple(parser.finish_type(p) for p in params or ()))
    except RecursionError:  # the input nests deeper than any real symbol; results are bounded by _MAX_DEPTH
        parser.fail("nesting too deep")


def spell(t: TemplateArg) -> str:
    """C++ spelling of a type or template argument: ``const float*``, ``void (*)(int)``, ``cute::Tensor<float, 4>``."""
    return _declare(t, "")


def _spell_literal(lit: Literal) -> str:
    t = lit.type
    if t == Builtin("bool") and lit.value in (0, 1):
        return "true" if lit.value else "false"
    if t == Builtin("std::nullptr_t"):
        return "nullptr"
    if isinstance(t, Builtin) and t.name in _LITERAL_SUFFIX:
        return f"{lit.value}{_LITERAL_SUFFIX[t.name]}"
    return f"({spell(t)}){lit.value}"


def _declare(t: _Node, inner: str) -> str:
    """Spell ``t`` around the declarator ``inner`` ("*", "(*)", "[4]"...), in C declarator style."""
    if isinstance(t, PointerTo | ReferenceTo):
        target = t.pointee if isinstance(t, PointerTo) else t.referee
        inner = ("*" if isinstance(t, PointerTo) else "&&" if t.rvalue else "&") + inner
        return _declare(target, f"({inner})" if isinstance(target, FunctionType | ArrayOf) else inner)
    if isinstance(t, Qualified):
        quals = " ".join(q for q, on in zip(_QUALIFIERS, (t.const, t.volatile, t.restrict), strict=True) if on)
        if isinstance(t.inner, PointerTo | ReferenceTo):
            return _declare(t.inner, f" {quals}{inner}")
        return f"{quals} {_declare(t.inner, inner)}"
    if isinstance(t, FunctionType):
        return _declare(t.ret, f"{inner}({', '.join(map(spell, t.params))})")
    if isinstance(t, ArrayOf):
        return _declare(t.element, f"{inner}[{'' if t.size is None else t.size}]")
    if isinstance(t, Named):
        base = t.name + (f"<{', '.join(_declare(a, '') for a in t.template_args)}>" if t.template_args else "")
    elif isinstance(t, Builtin | Literal | Entity):
        base = _spell_literal(t) if isinstance(t, Literal) else t.name
    else:
        base = ", ".join(_declare(i, "") for i in t.items) if isinstance(t, _Pack) else f"{_declare(t.pattern, '')}..."
    return base if not inner else base + inner if inner[0] in "*&[ " else f"{base} {inner}"


def _children(node: _Node) -> list[_Node]:
    values = [getattr(node, f.name) for f in dataclasses.fields(node)]
    return [
        cast(_Node, c) for v in values for c in (v if isinstance(v, tuple) else (v,)) if dataclasses.is_dataclass(c)
    ]


def _rebuild(node: _Node, fn: Callable[[_Node], _Node]) -> _Node:
    """``node`` with ``fn`` applied to each child (and to each element of a tuple of them)."""
    values: dict[str, Any] = {f.name: getattr(node, f.name) for f in dataclasses.fields(node)}
    for key, value in values.items():
        if isinstance(value, tuple):
            values[key] = tuple(fn(v) for v in value)
        elif dataclasses.is_dataclass(value):
            values[key] = fn(cast(_Node, value))
    return type(node)(**values)


class _Parser:
    def __init__(self, symbol: str, text: str) -> None:
        self.symbol, self.s, self.pos = symbol, text, 0
        self.subs: list[_Node] = []  # the substitution table: S_, S0_, S1_...
        self.targs: tuple[_Node, ...] | None = None  # what T_, T0_... refer to
        self.sizes: dict[int, tuple[int, int, _Pack | None, _Node]] = {}  # id -> weight, depth, a pack inside, node
        self.memo: dict[tuple[int, int], tuple[_Node, _Node]] = {}  # (id, pack index or -1 for finish) -> result

    def fail(self, what: str) -> NoReturn:
        raise DemangleError(f"cannot demangle {self.symbol!r}: {what} at position {self.pos}")

    def at(self, chars: str) -> bool:
        return self.pos < len(self.s) and self.s[self.pos] in chars

    def eat(self, token: str) -> bool:
        if self.s.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.eat(token):
            self.fail(f"expected {token!r}")

    def number(self) -> int:
        start = self.pos
        while self.at(_DIGITS):
            self.pos += 1
        if not 0 < self.pos - start <= 18:
            self.fail("expected a number")
        return int(self.s[start : self.pos])

    def measure(self, node: _Node) -> tuple[int, int, _Pack | None, _Node]:
        """Weight, depth and a pack inside ``node`` (memoized); fails past the bounds."""
        hit = self.sizes.get(id(node))
        if hit is None:
            parts = [self.measure(c) for c in _children(node)]
            pack = node if isinstance(node, _Pack) else next((p[2] for p in parts if p[2]), None)
            hit = (1 + sum(p[0] for p in parts), 1 + max((p[1] for p in parts), default=0), pack, node)
            self.sizes[id(node)] = hit
        if hit[0] > _MAX_WEIGHT or hit[1] > _MAX_DEPTH:
            self.fail("name too large or too deeply nested")
        return hit

    def add(self, node: _Node) -> _Node:
        self.measure(node)
        self.subs.append(node)
        return node

    def spelled(self, node: _Node) -> str:
        self.measure(node)
        return _declare(node, "")

    def as_named(self, node: _Node) -> Named:
        if isinstance(node, Literal | Entity | _Pack | _Expansion):
            self.fail("expected a type or template name")
        return node if isinstance(node, Named) else Named(self.spelled(node))

    # <encoding> ::= <name> [<return type>] <parameter types>; a local name's function may have no types (main)
    def encoding(self, local: bool = False) -> tuple[str, tuple[_Node, ...] | None, tuple[_Node, ...] | None]:
        name, targs = self.name()
        outer, self.targs = self.targs, targs if targs is not None else self.targs
        if targs is not None:
            self.type()  # template functions mangle their return type
        params = None if local and self.at("E") else self.type_list()
        self.targs = outer
        return name, targs, params

    def type_list(self) -> tuple[_Node, ...]:
        out: list[_Node] = []
        start = self.pos
        while self.pos < len(self.s) and not self.at("E"):
            out.extend(self.list_item(self.type()))
        if self.pos == start:
            self.fail("expected parameter types")
        return () if out == [Builtin("void")] else tuple(out)

    def list_item(self, node: _Node) -> list[_Node]:
        if not isinstance(node, _Expansion):
            return [node]
        pack = self.measure(node.pattern)[2]
        if pack is None:
            self.fail("pack expansion without a template parameter pack")
        return [self.expand(node.pattern, i) for i in range(len(pack.items))]

    def expand(self, node: _Node, i: int) -> _Node:
        """``node`` with every pack inside it replaced by its ``i``-th element."""
        hit = self.memo.get((id(node), i))
        if hit is None:
            if isinstance(node, _Pack):
                done = node.items[i] if i < len(node.items) else node
            else:
                done = _rebuild(node, lambda child: self.expand(child, i))
            hit = self.memo[(id(node), i)] = (node, done)
        return hit[1]

    def name(self) -> tuple[str, tuple[_Node, ...] | None]:
        if self.at("N"):
            return self.nested()
        if self.at("Z"):
            return self.local()
        if self.at("S") and not self.s.startswith("St", self.pos):
            base = self.spelled(self.as_named(self.substitution()))
            return base, self.template_args() if self.at("I") else self.fail("expected template arguments")
        name = ("std::" if self.eat("St") else "") + self.unqualified()
        if not self.at("I"):
            return name, None
        self.add(Named(name))  # an unscoped template name is substitutable
        return name, self.template_args()

    # <nested-name> ::= N [<CV-qualifiers>] [<ref-qualifier>] <prefix> <unqualified-name> E
    def nested(self) -> tuple[str, tuple[_Node, ...] | None]:
        self.expect("N")
        while self.at("rVKRO"):
            self.pos += 1  # qualifiers of a member function: irrelevant to its parameters
        cur: Named | None = None
        while not self.eat("E"):
            substitutable = True  # every prefix is, except the whole name and std:: or a substitution itself
            if self.eat("St"):
                cur, substitutable = Named("std"), False
            elif self.at("S"):
                cur, substitutable = self.as_named(self.substitution()), False
            elif self.at("T"):
                cur = self.as_named(self.template_param())
            elif self.at("I") and cur is not None and not cur.template_args:
                cur = Named(cur.name, self.template_args())
            else:
                component = self.unqualified()
                cur = Named(component if cur is None else f"{self.spelled(cur)}::{component}")
            if substitutable and not self.at("E"):
                self.add(cur)
        if cur is None or cur == Named("std"):
            self.fail("empty nested name")
        return cur.name, cur.template_args or None

    # <local-name> ::= Z <function encoding> E <entity name> [<discriminator>] | Z <encoding> E s [<discriminator>]
    def local(self) -> tuple[str, tuple[_Node, ...] | None]:
        self.expect("Z")
        name, targs, params = self.encoding(local=True)
        self.expect("E")
        name += f"<{', '.join(map(self.spelled, targs))}>" if targs else ""
        name += f"({', '.join(map(self.spelled, params))})" if params is not None else ""
        entity, entity_args = ("string literal", None) if self.eat("s") else self.name()
        if self.eat("__"):
            self.number()
            self.expect("_")
        elif self.at("_") and self.s[self.pos + 1 : self.pos + 2].isdigit():
            self.pos += 2
        return f"{name}::{entity}", entity_args

    def unqualified(self) -> str:
        self.eat("L")  # internal linkage
        if self.at(_DIGITS):
            n = self.number()
            if n > len(self.s) - self.pos:
                self.fail(f"identifier of length {n} runs past the end")
            name = self.s[self.pos : self.pos + n]
            self.pos += n
            name = "(anonymous namespace)" if name.startswith("_GLOBAL__N") else name
        elif self.eat("Ut"):
            name = f"{{unnamed type#{self.discriminator()}}}"
        elif self.eat("Ul"):
            sig = self.type_list()
            self.expect("E")
            name = f"{{lambda({', '.join(map(self.spelled, sig))})#{self.discriminator()}}}"
        else:
            self.fail("unsupported or missing name")
        while self.eat("B"):
            name += f"[abi:{self.unqualified()}]"
        return name

    def discriminator(self) -> int:
        n = 1 if self.at("_") else self.number() + 2
        self.expect("_")
        return n

    def substitution(self) -> _Node:
        self.expect("S")
        if self.at("".join(_STD_ABBREVIATIONS)):
            self.pos += 1
            return Named(_STD_ABBREVIATIONS[self.s[self.pos - 1]])
        start = self.pos
        while self.pos < len(self.s) and self.s[self.pos] in _SEQ_DIGITS and self.pos - start < 8:
            self.pos += 1
        index = int(self.s[start : self.pos], 36) + 1 if self.pos > start else 0
        self.expect("_")
        if index >= len(self.subs):
            self.fail(f"substitution S{self.s[start : self.pos]}_ refers past the {len(self.subs)} entries")
        return self.subs[index]

    def template_param(self, value: bool = False) -> _Node:
        self.expect("T")
        index = 0 if self.at("_") else self.number() + 1
        self.expect("_")
        if self.targs is None or index >= len(self.targs):
            self.fail(f"template parameter {index} is not bound")
        arg = self.targs[index]
        if isinstance(arg, Literal) != value and not isinstance(arg, _Pack):
            self.fail(f"template parameter {index} is not a {'value' if value else 'type'}")
        return arg

    def template_args(self, opener: str = "I") -> tuple[Any, ...]:  # packs stay inside until finish_type
        self.expect(opener)
        out: list[_Node] = []
        while not self.eat("E"):
            out.extend(self.template_arg())
        return tuple(out)

    def template_arg(self) -> list[_Node]:
        if self.eat("L"):
            return [self.literal()]
        if self.at("J"):
            return [_Pack(self.template_args("J"))]
        if self.eat("X"):
            node = self.expression()
            self.expect("E")
            return [node]
        return self.list_item(self.type())

    def expression(self) -> _Node:
        """The expressions supported: literals, external names and their address (``XadL_Z4siluRKfEE``), non-type
        template parameters (``XT0_E``, ``AT_``)."""
        if self.eat("ad"):
            operand = self.expression()
            return Entity(f"&{operand.name}") if isinstance(operand, Entity) else self.fail("unsupported expression")
        if self.eat("L"):
            return self.literal()
        return self.template_param(value=True) if self.at("T") else self.fail("unsupported expression")

    def literal(self) -> Literal | Entity:
        if self.eat("_Z"):  # L <mangled-name> E: a function or variable; its name's parts enter the substitutions
            outer = self.targs
            name, targs, _ = self.encoding(local=True)
            self.targs = outer
            self.expect("E")
            return Entity(name + (f"<{', '.join(map(self.spelled, targs))}>" if targs else ""))
        if self.at("_"):
            self.fail("unsupported external name")
        t = self.type_only()
        if t == Builtin("std::nullptr_t") and self.eat("E"):
            return Literal(t, 0)
        negative = self.eat("n")
        value = self.number()
        self.expect("E")
        return Literal(t, -value if negative else value)

    def type_only(self) -> CxxType:
        node = self.type()
        if isinstance(node, Literal | _Expansion):
            self.fail("expected a type")
        return cast(CxxType, node)  # or a pack inside a Dp pattern, until finish_type

    def type(self) -> _Node:
        c = self.s[self.pos : self.pos + 1]
        code = self.s[self.pos : self.pos + (5 if self.s.startswith("DF16b", self.pos) else 2 if c == "D" else 1)]
        if code in _BUILTINS:
            self.pos += len(code)
            return Builtin(_BUILTINS[code])
        if m := _FLOAT_N.match(self.s, self.pos):
            self.pos = m.end()
            return Builtin(f"_Float{m[1]}{'x' if m[2] == 'x' else ''}")
        if c and c in "rVK":  # one substitution for all the qualifiers together
            restrict, volatile, const = self.eat("r"), self.eat("V"), self.eat("K")
            inner = self.type_only()
            if isinstance(inner, Qualified):  # const T with T = const float: the qualifiers merge
                const, volatile, restrict = const or inner.const, volatile or inner.volatile, restrict or inner.restrict
                inner = inner.inner
            return self.add(Qualified(inner, const=const, volatile=volatile, restrict=restrict))
        if c and c in "PRO":
            self.pos += 1
            inner = self.type_only()
            if c == "P":
                return self.add(PointerTo(inner))
            if isinstance(inner, ReferenceTo):  # reference collapsing: & wins
                return self.add(ReferenceTo(inner.referee, rvalue=inner.rvalue and c == "O"))
            return self.add(ReferenceTo(inner, rvalue=c == "O"))
        if self.eat("A"):
            size = None if self.at("_") else self.number() if self.at(_DIGITS) else self.expression()
            if isinstance(size, Literal) and size.value >= 0:
                size = size.value
            if not (size is None or isinstance(size, int)):
                self.fail("unsupported array bound")
            self.expect("_")
            return self.add(ArrayOf(self.type_only(), size))
        if c == "F" or self.eat("Do") or self.eat("Dx"):  # noexcept, transaction_safe: irrelevant here
            return self.add(self.function_type())
        if self.eat("Dp"):
            return self.add(_Expansion(self.type()))
        if c == "u":  # vendor extended type
            self.pos += 1
            return self.add(Named(self.unqualified()))
        if c == "T" and self.s[self.pos + 1 : self.pos + 2] not in ("s", "u", "e"):
            return self.with_args(self.add(self.template_param()))
        if c == "S" and not self.s.startswith("St", self.pos):
            return self.with_args(self.substitution())
        if c and c in "NZLST0123456789":
            self.pos += 2 if c == "T" else 0  # Ts/Tu/Te: elaborated struct/union/enum
            name, args = self.name()
            return self.add(Named(name, cast(tuple[TemplateArg, ...], args or ())))
        self.fail("unsupported or missing type")

    def with_args(self, node: _Node) -> _Node:
        """A template name (template parameter, substitution) and its arguments, if they follow."""
        if not self.at("I"):
            return node
        return self.add(Named(self.as_named(node).name, self.template_args()))

    def function_type(self) -> FunctionType:
        self.expect("F")
        self.eat("Y")  # extern "C"
        ret = self.type_only()
        params = self.type_list()
        if self.at("RO"):
            self.pos += 1  # ref-qualifier of a member function type
        self.expect("E")
        return FunctionType(ret, cast(tuple[CxxType, ...], params))  # packs are refused by finish_type

    def finish_type(self, node: _Node) -> CxxType:
        """Flatten packs into the template argument lists that hold them; refuse them anywhere else."""
        hit = self.memo.get((id(node), -1))
        if hit is None:
            if isinstance(node, Literal | Entity | _Pack | _Expansion):
                self.fail("template argument pack or value where a type belongs")
            if isinstance(node, Named):
                done: _Node = Named(node.name, self.finish_args(node.template_args))
            else:
                done = _rebuild(node, self.finish_type)
            self.measure(done)
            hit = self.memo[(id(node), -1)] = (node, done)
        return cast(CxxType, hit[1])

    def finish_args(self, args: tuple[_Node, ...]) -> tuple[TemplateArg, ...]:
        out: list[TemplateArg] = []
        for a in args:
            if isinstance(a, _Pack):
                out.extend(self.finish_args(a.items))
            else:
                out.append(
                    Literal(self.finish_type(a.type), a.value) if isinstance(a, Literal)
                    else a if isinstance(a, Entity) else self.finish_type(a)
                )
        return tuple(out)
