"""``kernelpack.core.records.record`` against ``dataclasses.dataclass`` itself: each class below is made twice, once
by each decorator, from the same body, and every behaviour a user or kernelpack reaches is compared. Then: the
runtime's path (load a library of host programs, reach a program's entries) compiles no dataclass method."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
import operator
import pickle
import subprocess
import sys
from dataclasses import FrozenInstanceError, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kernelpack.core.records import record


def _point(deco: Any) -> Any:
    @deco
    class Point:
        """A point."""

        x: int
        y: int = 2
        tags: tuple[str, ...] = field(default_factory=tuple)
        note: str = field(default="n", compare=False, repr=False)
        kind: ClassVar[str] = "point"

    return Point


def _post(deco: Any) -> Any:
    @deco
    class Post:
        a: int
        b: list[int] = field(default_factory=list)
        total: int = field(init=False, default=0)

        def __post_init__(self) -> None:
            object.__setattr__(self, "total", self.a + sum(self.b))

    return Post


def _own(deco: Any) -> Any:
    @deco
    class Own:
        """Writes its own repr and hash."""

        v: int

        def __repr__(self) -> str:
            return f"<own {self.v}>"

        def __hash__(self) -> int:
            return 7

    return Own


def _empty(deco: Any) -> Any:
    @deco
    class Empty:
        pass

    return Empty


def _hashless(deco: Any) -> Any:
    @deco
    class H:
        """Fields left out of the hash."""

        a: int
        b: int = field(hash=False)
        c: int = field(compare=False, hash=True, default=0)

    return H


OPTIONS = [dict(), dict(frozen=True), dict(frozen=True, repr=False), dict(eq=False), dict(frozen=True, eq=False),
           dict(slots=True), dict(order=True), dict(frozen=True, order=True)]
SHAPES = [_point, _post, _own, _empty, _hashless]


def _pair(shape: Any, opts: dict[str, Any]) -> tuple[Any, Any]:
    return shape(record(**opts)), shape(dataclasses.dataclass(**opts))


def _calls(shape: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    return {
        _point: [((1,), {}), ((1, 5), {}), ((), {"x": 3, "tags": ("a",)}), ((1, 2, ("t",), "m"), {}),
                 ((), {"y": 4, "x": -1})],
        _post: [((1,), {}), ((2, [3, 4]), {}), ((), {"a": 5, "b": [1]})],
        _own: [((1,), {}), ((), {"v": 9})],
        _empty: [((), {})],
        _hashless: [((1, 2), {}), ((1, 3, 4), {}), ((), {"a": 0, "b": 0, "c": 9})],
    }[shape]


def _described(c: Any) -> list[tuple[Any, ...]]:
    return [(f.name, f.default, f.default_factory, f.init, f.repr, f.compare, f.hash) for f in dataclasses.fields(c)]


def _outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    try:
        return ("returned", fn(*args))
    except Exception as e:  # noqa: BLE001 - the exception itself is compared
        return ("raised", type(e), str(e))


BAD_CALLS = [((), {}), ((1, 2, 3, 4, 5, 6), {}), ((1,), {"x": 2}), ((1,), {"zz": 1}), ((), {"y": 1}),
             ((), {"b": 1}), ((1,), {"a": 2, "zz": 3})]


def _three(deco: Any) -> Any:
    @deco
    class Three:
        x: int
        y: int
        a: int
        b: int = 0

    return Three


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.__name__.strip("_"))
def test_a_record_behaves_as_the_dataclass_of_the_same_body(shape: Any, opts: dict[str, Any]) -> None:
    """Signature, doc, fields, params, match args, construction (defaults, factories, __post_init__), repr, ==,
    hash (or unhashable), frozen assignment and deletion, replace/asdict/astuple, copy and pickle."""
    rec, dc = _pair(shape, opts)
    assert dataclasses.is_dataclass(rec)
    assert str(inspect.signature(rec)) == str(inspect.signature(dc))
    assert rec.__doc__ == dc.__doc__
    assert _described(rec) == _described(dc)
    assert getattr(rec, "__match_args__", None) == getattr(dc, "__match_args__", None)
    for name in ("init", "repr", "eq", "frozen"):
        assert getattr(rec.__dataclass_params__, name) == getattr(dc.__dataclass_params__, name), name
    assert hasattr(rec, "__slots__") == hasattr(dc, "__slots__")
    assert (rec.__hash__ is None) == (dc.__hash__ is None)
    made = [(rec(*a, **k), dc(*a, **k)) for a, k in _calls(shape)]
    for r, d in made:
        if opts.get("repr", True):
            assert repr(r) == repr(d)
        assert dataclasses.asdict(r) == dataclasses.asdict(d) and dataclasses.astuple(r) == dataclasses.astuple(d)
        if opts.get("eq", True):  # else both hash by identity
            assert _outcome(hash, r) == _outcome(hash, d)
        assert (r == copy.copy(r)) == (d == copy.copy(d))
        assert (r == object()) is False and (d == object()) is False
        if dataclasses.fields(r):
            first = dataclasses.fields(r)[0].name
            if opts.get("frozen"):
                for obj in (r, d):
                    with pytest.raises(FrozenInstanceError, match=f"cannot assign to field '{first}'"):
                        setattr(obj, first, 1)
                    with pytest.raises(FrozenInstanceError, match=f"cannot delete field '{first}'"):
                        delattr(obj, first)
                    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'other'"):
                        obj.other = 1
            changed = {first: 11} if dataclasses.fields(r)[0].init else {}
            assert dataclasses.asdict(dataclasses.replace(r, **changed)) == dataclasses.asdict(
                dataclasses.replace(d, **changed))
    pairs = [(x == y, u == v) for (x, u) in made for (y, v) in made]
    assert [p for p, _ in pairs] == [q for _, q in pairs]
    for op in (operator.lt, operator.le, operator.gt, operator.ge):  # ordered, or TypeError without order=True
        got = [_outcome(op, x, y) for (x, _) in made for (y, _) in made] + [_outcome(op, made[0][0], 1)]
        want = [_outcome(op, u, v) for (_, u) in made for (_, v) in made] + [_outcome(op, made[0][1], 1)]
        assert [g[:2] if g[0] == "raised" else g for g in got] == [w[:2] if w[0] == "raised" else w for w in want]


@pytest.mark.parametrize("opts", [dict(), dict(frozen=True)], ids=["plain", "frozen"])
def test_records_pickle_and_copy_as_dataclasses_do(opts: dict[str, Any]) -> None:
    global Pickled  # pickle finds a class by its module and name
    Pickled = _point(record(**opts))
    Pickled.__qualname__ = "Pickled"
    p = Pickled(1, 2, ("a",), "m")
    assert pickle.loads(pickle.dumps(p)) == p and copy.deepcopy(p) == p


@pytest.mark.parametrize("args,kwargs", BAD_CALLS)
@pytest.mark.parametrize("shape", [_point, _hashless, _three], ids=lambda s: s.__name__.strip("_"))
def test_a_record_refuses_the_calls_its_dataclass_refuses(shape: Any, args: tuple[Any, ...],
                                                          kwargs: dict[str, Any]) -> None:
    """Missing, extra, repeated and unknown arguments: the TypeError the generated ``__init__`` raises, word for
    word (Python's own wording)."""
    rec, dc = _pair(shape, {"frozen": True})
    with pytest.raises(TypeError) as want:
        dc(*args, **kwargs)
    with pytest.raises(TypeError) as got:
        rec(*args, **kwargs)
    assert str(got.value) == str(want.value)


def test_what_record_does_not_build_goes_to_dataclasses() -> None:
    """Keyword-only fields, InitVar pseudo-fields and dataclass bases: the class is dataclasses' own."""

    @record(frozen=True)
    class Base:
        a: int

    @record(frozen=True)
    class Child(Base):
        b: int = 0

    assert Child(1, 2) == Child(a=1, b=2) and str(inspect.signature(Child)) == "(a: 'int', b: 'int' = 0) -> None"

    @record
    class KeywordOnly:
        a: int
        b: int = field(kw_only=True, default=3)

    assert KeywordOnly(1).b == 3 and "b" in inspect.signature(KeywordOnly).parameters
    with pytest.raises(TypeError):
        KeywordOnly(1, 2)  # type: ignore[misc]

    @record
    class WithInitVar:
        a: int
        scale: dataclasses.InitVar[int] = 1

        def __post_init__(self, scale: int) -> None:
            self.a *= scale

    assert WithInitVar(2, 3).a == 6


def test_order_refuses_a_class_that_writes_its_own_comparison_as_dataclasses_does() -> None:
    for deco in (record(order=True), dataclasses.dataclass(order=True)):
        with pytest.raises(TypeError, match="Cannot overwrite attribute __lt__ in class Ordered"):
            @deco
            class Ordered:
                a: int

                def __lt__(self, other: Any) -> bool:
                    return True


def test_a_class_that_writes_its_own_init_keeps_it() -> None:
    @record(slots=True)
    class View:
        ptr: int
        shape: tuple[int, ...]

        def __init__(self, ptr: int, shape: tuple[int, ...]) -> None:
            self.ptr, self.shape = ptr, shape

    v = View(1, (2,))
    assert v == View(1, (2,)) and repr(v).endswith("View(ptr=1, shape=(2,))")
    with pytest.raises(AttributeError):
        v.other = 1  # slotted: no __dict__


HOST_PATH = r"""
import dataclasses, json, sys
compiled = []
real = exec
def counting(src, *a, **k):  # dataclasses compiles each generated method with exec
    compiled.append(src.splitlines()[0] if isinstance(src, str) else repr(src))
    return real(src, *a, **k)
dataclasses.exec = counting
import kernelpack
mod = kernelpack.load(sys.argv[1])
mod.scale.host_program.calls
print(json.dumps(compiled))
"""


def test_the_host_program_path_compiles_no_dataclass_method(tmp_path: Any) -> None:
    """``kernelpack.load`` of a library of host programs and its first program's entries (what a first call does
    before the driver): every class on that path is a record, so no method is compiled (before: 24 classes, ~1 ms
    each, most of a fresh process's first FA4 call)."""
    from test_runtime_imports import _host_library, _scale_params
    from toolchain_support import CC

    if not CC:
        pytest.skip("no C compiler")
    lib = _host_library(tmp_path, [("scale", _scale_params())])
    out = subprocess.run([sys.executable, "-c", HOST_PATH, str(lib)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


FAMILY_PATH = r"""
import dataclasses, json, sys
compiled = []
real = exec
def counting(src, *a, **k):
    compiled.append(src.splitlines()[0] if isinstance(src, str) else repr(src))
    return real(src, *a, **k)
dataclasses.exec = counting
import kernelpack
mod = kernelpack.load(sys.argv[1])
family = mod.families["axpy"]
family.specs  # the family built whole: its specializations, binaries, plans and launch facts
print(json.dumps(compiled))
"""


def test_the_kernel_family_path_compiles_no_dataclass_method() -> None:
    """Loading a ``.kpack`` and building a family whole (what a wheel's or a service's first use of a kernel does
    before the driver) compiles no dataclass method either (before: 80 ``exec`` calls, ~16 classes)."""
    bundle = Path(__file__).parent / "fixtures" / "built-2026-12-01" / "demo.kpack"
    out = subprocess.run([sys.executable, "-c", FAMILY_PATH, str(bundle)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
