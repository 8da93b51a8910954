"""``@record``: a dataclass made without compiling code when its module is imported.

``dataclasses.dataclass`` writes each generated method (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__``, ``__delattr__``) as source text and compiles it: about 1 ms per class on CPython 3.11/3.12, which
is most of what ``kernelpack.load`` costs in a fresh process (24 classes on the path of a host program's first
call; issue 27's first-call budget is 50 ms). ``record`` asks ``dataclasses`` for the class's fields only (no
method: nothing compiled) and installs the same methods built from closures, so the class is a dataclass in every
respect (``dataclasses.fields``, ``replace``, ``asdict``, ``is_dataclass``, ``__match_args__``) and behaves as the
generated one: same ``__init__`` signature, defaults, factories and ``__post_init__`` call, same ``==`` and hash
over the compared fields, same repr, ``FrozenInstanceError`` on assignment (``tests/test_records.py`` holds each
against ``dataclasses.dataclass`` itself). A method the class defines itself is kept, as dataclasses does.

Options: ``frozen``, ``repr``, ``eq``, ``order``, ``slots`` (not with ``frozen``). Anything else (``unsafe_hash``,
frozen slots, ``kw_only`` fields, ``InitVar``, dataclass bases) goes to ``dataclasses.dataclass`` unchanged. A
generated ``__init__`` is a little slower per call than the compiled one (about 1 us more): classes built on a
per-launch path write their own ``__init__``.
"""

from __future__ import annotations

import dataclasses
import inspect
import operator
import reprlib
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:  # type checkers read the fields as a dataclass's (PEP 681)
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**kwargs: Any) -> Callable[[T], T]:
        return lambda f: f

T = TypeVar("T")


@overload
@dataclass_transform()
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, frozen: bool = False, repr: bool = True, eq: bool = True,  # noqa: A002
           order: bool = False, slots: bool = False) -> Callable[[type[T]], type[T]]: ...


def record(cls: type[T] | None = None, /, *, frozen: bool = False, repr: bool = True,  # noqa: A002 - dataclass's name
           eq: bool = True, order: bool = False, slots: bool = False) -> Any:
    """``@record``, ``@record(frozen=True)``: ``@dataclass`` with the same options, nothing compiled at import."""

    def wrap(c: type[T]) -> type[T]:
        if (slots and frozen) or (order and not eq):  # dataclasses' own: pickling frozen slotted classes needs its
            # __getstate__/__setstate__; order without eq is its error to raise
            return dataclasses.dataclass(c, frozen=frozen, repr=repr, eq=eq, order=order, slots=slots)
        return _make(c, frozen=frozen, repr=repr, eq=eq, order=order, slots=slots)

    return wrap if cls is None else wrap(cls)


def _make(cls: Any, *, frozen: bool, repr: bool, eq: bool, order: bool, slots: bool) -> Any:  # noqa: A002
    own = dict(cls.__dict__)
    if _needs_dataclasses(cls, own):
        return dataclasses.dataclass(cls, frozen=frozen, repr=repr, eq=eq, order=order, slots=slots)
    has_doc = bool(cls.__doc__)
    # fields only: with every method off, dataclasses compiles nothing
    dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=False)
    fields = dataclasses.fields(cls)
    if slots:
        cls = _slotted(cls, fields)
    params = cls.__dataclass_params__
    params.init, params.repr, params.eq, params.order, params.frozen = True, repr, eq, order, frozen
    if "__init__" not in own:
        cls.__init__ = _init(cls, fields, frozen)
    if repr and "__repr__" not in own:
        cls.__repr__ = _repr(fields)
    compared = tuple(f.name for f in fields if f.compare)
    if eq and "__eq__" not in own:
        cls.__eq__ = _eq(compared)
    if order:
        for name, method in _order(compared).items():
            if name in own:
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}. Consider using "
                                f"functools.total_ordering")
            setattr(cls, name, method)
    class_hash = own.get("__hash__", MISSING)
    explicit_hash = not (class_hash is MISSING or (class_hash is None and "__eq__" in own))
    if eq and not explicit_hash:
        if frozen:
            hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
            cls.__hash__ = _hash(hashed)
        else:
            cls.__hash__ = None
    if frozen:
        if "__setattr__" in own or "__delattr__" in own:
            raise TypeError(f"cannot overwrite attribute __setattr__/__delattr__ in class {cls.__name__}")
        cls.__setattr__, cls.__delattr__ = _frozen(cls, tuple(f.name for f in fields))
    if not has_doc:
        cls.__doc__ = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
    return cls


def _slotted(cls: Any, fields: tuple[dataclasses.Field[Any], ...]) -> Any:
    """The class made again with ``__slots__`` for its fields (as ``dataclass(slots=True)`` does)."""
    body = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    names = tuple(f.name for f in fields)
    for name in names:
        body.pop(name, None)  # a field's default stays in its Field; the class attribute would shadow the slot
    body["__slots__"] = names
    new = type(cls)(cls.__name__, cls.__bases__, body)
    new.__qualname__ = cls.__qualname__
    return new


def _needs_dataclasses(cls: type, own: dict[str, Any]) -> bool:
    """What ``record`` leaves to ``dataclasses``: dataclass bases (their frozen/eq rules), keyword-only fields and
    ``InitVar`` pseudo-fields."""
    if any(hasattr(base, "__dataclass_fields__") for base in cls.__mro__[1:]):
        return True
    for annotation in own.get("__annotations__", {}).values():
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if "InitVar" in text or "KW_ONLY" in text:
            return True
    return any(isinstance(v, dataclasses.Field) and v.kw_only is True for v in own.values())


def _init(cls: type, fields: tuple[dataclasses.Field[Any], ...], frozen: bool) -> Callable[..., None]:
    names = tuple(f.name for f in fields if f.init)
    defaults = {f.name: f.default for f in fields if f.init and f.default is not MISSING}
    factories: dict[str, Any] = {f.name: f.default_factory for f in fields
                                 if f.init and f.default_factory is not MISSING}
    later: tuple[tuple[str, Any, Any], ...] = tuple((f.name, f.default, f.default_factory) for f in fields
                                                    if not f.init and (f.default is not MISSING
                                                                       or f.default_factory is not MISSING))
    post_init = getattr(cls, "__post_init__", None) is not None
    put = object.__setattr__ if frozen else setattr
    count = len(names)
    position = {name: i for i, name in enumerate(names)}
    qualname = f"{cls.__qualname__}.__init__()"
    required = sum(1 for name in names if name not in defaults and name not in factories)
    takes = f"{count + 1}" if required == count else f"from {required + 1} to {count + 1}"  # as Python words it

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        given = len(args)
        if given > count:
            raise TypeError(f"{qualname} takes {takes} positional arguments but {given + 1} were given")
        for name, value in zip(names, args):
            put(self, name, value)
        if given < count or kwargs:
            for name in kwargs:  # Python's order: each keyword checked before any missing argument
                at = position.get(name)
                if at is None:
                    raise TypeError(f"{qualname} got an unexpected keyword argument {name!r}")
                if at < given:
                    raise TypeError(f"{qualname} got multiple values for argument {name!r}")
            for name in names[given:]:
                value = kwargs.get(name, MISSING)
                if value is MISSING:
                    value = defaults.get(name, MISSING)
                    if value is MISSING:
                        factory = factories.get(name)
                        if factory is None:
                            raise TypeError(_missing(qualname, names[given:], kwargs, defaults, factories))
                        value = factory()
                put(self, name, value)
        for name, default, factory in later:
            put(self, name, factory() if default is MISSING else default)
        if post_init:
            self.__post_init__()

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=f.type,
                             default=(f.default if f.default is not MISSING else
                                      inspect.Parameter.empty if f.default_factory is MISSING else _FACTORY))
           for f in fields if f.init],
        return_annotation=None)
    return __init__


def _missing(qualname: str, rest: tuple[str, ...], kwargs: dict[str, Any], defaults: dict[str, Any],
             factories: dict[str, Any]) -> str:
    """Python's own words for the required arguments a call left out."""
    absent = [repr(n) for n in rest if n not in kwargs and n not in defaults and n not in factories]
    listed = absent[0] if len(absent) == 1 else (" and ".join(absent) if len(absent) == 2
                                                 else ", ".join(absent[:-1]) + ", and " + absent[-1])
    return f"{qualname} missing {len(absent)} required positional argument{'s' * (len(absent) > 1)}: {listed}"


class _Factory:
    """The default shown for a field with a ``default_factory`` (as dataclasses shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _repr(fields: tuple[dataclasses.Field[Any], ...]) -> Callable[[Any], str]:
    shown = tuple(f.name for f in fields if f.repr)

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        return (f"{type(self).__qualname__}("
                + ", ".join(f"{name}={getattr(self, name)!r}" for name in shown) + ")")

    return __repr__


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of those fields' values (what the generated methods compare and hash)."""
    if len(names) > 1:
        return attrgetter(*names)  # type: ignore[return-value]
    if names:
        name = names[0]
        return lambda self: (getattr(self, name),)
    return lambda self: ()


def _eq(names: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    key = _key(names)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _order(names: tuple[str, ...]) -> dict[str, Callable[[Any, Any], Any]]:
    """``__lt__``, ``__le__``, ``__gt__``, ``__ge__``: the compared fields as tuples, same class only."""
    key = _key(names)

    def make(name: str, compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
        def method(self: Any, other: Any) -> Any:
            if other.__class__ is self.__class__:
                return compare(key(self), key(other))
            return NotImplemented

        method.__name__ = method.__qualname__ = name
        return method

    return {name: make(name, op) for name, op in (("__lt__", operator.lt), ("__le__", operator.le),
                                                  ("__gt__", operator.gt), ("__ge__", operator.ge))}


def _hash(names: tuple[str, ...]) -> Callable[[Any], int]:
    key = _key(names)

    def __hash__(self: Any) -> int:
        return hash(key(self))

    return __hash__


def _frozen(cls: Any, names: tuple[str, ...]) -> tuple[Callable[..., None], Callable[..., None]]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__
