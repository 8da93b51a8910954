"""A format-2 bundle carries each family's dispatch record (kernelpack.launch.record): a process's first launch of a
family reads it and the one binary it runs, builds no family and parses no cubin, and launches exactly what the
family built from its manifest entries launches. Verification recomputes every record; an altered or malformed
record is refused naming the kernel, never a crash. On the fake driver."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kernelpack
from fuzz_support import edit_family_stream
from kernelpack.bundle.index import BundleIndex
from kernelpack.bundle.kpack import Bundle, read_manifest
from kernelpack.core.abi import Abi
from kernelpack.core.errors import AbiMismatch, BundleError
from kernelpack.launch import record as rec

P = 0x10000  # 256-byte aligned device addresses (the fake driver takes any)

# (family, positional arguments, launch keywords): calls that pick different specializations and launch facts
CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("add", (P, P + 0x100, P + 0x200, 8), {"grid": 1, "block": 32}),
    ("four", (P, P, P, 8), {"grid": 2, "block": 64}),
    ("four", (P, P, P, 6), {"grid": 1, "block": 32}),
    ("four", (P, P, P, 3), {"grid": 1, "block": 32}),
    ("vadd", (P, P + 0x40, P + 0x80, 64), {"grid": 1, "block": 64}),
    ("vadd", (P + 4, P + 4, P + 4, 60), {"grid": 1, "block": 64}),
    ("fixed_block", (P, P, P, 8), {"grid": 2}),
    ("spec_cluster", (P, P, P, 8), {"grid": 4, "block": 32}),
    ("smem_kernel", (P, 64), {"grid": 1, "block": 64}),
]


@pytest.fixture(scope="module")
def bundle(runtime_bundle: Bundle) -> Bundle:
    """The runtime test bundle plus ``four``: ``add`` as four specializations told apart by ``n``'s divisibility."""
    add = next(a for a in runtime_bundle if a.label == "add")
    four = []
    for k in range(4):
        params = tuple(dataclasses.replace(p, divisibility=2**k) if p.name == "n" else p for p in add.abi.params)
        four.append(dataclasses.replace(add, name="four", variant=f"d{2**k}", abi=Abi(params)))
    return Bundle((*runtime_bundle.artifacts, *four))


def _write(tmp_path: Any, name: str, data: bytes) -> Any:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _launch(fake: Any, mod: Any, family: str, args: tuple[Any, ...], kw: dict[str, Any]) -> tuple[Any, ...]:
    mod[family](*args, **kw)
    x = fake.last()
    return x["kernel"], x["grid"], x["block"], x["smem"], x["cluster"], x["params"]


def test_every_family_gets_a_record_and_verification_recomputes_each(bundle, tmp_path):
    data = bundle.to_bytes()
    fams = read_manifest(data)["families"]
    assert min(fams["dispatch"]) >= 0, "every family of a verified build is recorded"
    path = _write(tmp_path, "k.kpack", data)
    kernelpack.load(path, verify=True)  # recomputes every record from the entries: equal
    assert all(isinstance(BundleIndex(data, "k").family_record(n), rec.FamilyRecord) for n in fams["name"])


def test_a_first_launch_reads_the_record_builds_no_family_and_parses_no_cubin(fake, bundle, tmp_path):
    mod = kernelpack.load(_write(tmp_path, "k.kpack", bundle.to_bytes()))
    mod.four(P, P, P, 4, grid=1, block=32)
    fam = mod.four.family
    assert fake.last()["kernel"] == "add"
    assert fam.record is not None and fam._specs is None, "no specialization was built from its entries"
    assert mod._st.index._specs == {}
    assert not any("cubin" in vars(b) for b in mod._st.index._shared.values()), "no cubin was parsed"
    assert [e.label for e in fam.device_state(0).entries if e.ready] == ["four[d4]"]
    if fam.fast is not None:
        assert fam.python_calls == 0


def test_launches_from_the_record_are_the_launches_the_entries_give(fake, bundle, tmp_path):
    """Every call, through a format-2 file (dispatch record) and a format-1 file (the family built from its
    entries): the same specialization, grid, block, shared memory, cluster and packed parameters."""
    new = kernelpack.load(_write(tmp_path, "new.kpack", bundle.to_bytes()))
    old = kernelpack.load(_write(tmp_path, "old.kpack", bundle.to_bytes(version=1)))
    assert old.add.family.record is None and new.add.family.record is not None
    for family, args, kw in CALLS:
        assert _launch(fake, new, family, args, kw) == _launch(fake, old, family, args, kw), (family, args)
    assert [e.label for e in new.four.family.device_state(0).entries] == \
        [e.label for e in old.four.family.device_state(0).entries]
    assert new.four.family._specs is None


def test_the_python_path_builds_the_family_and_agrees_with_the_record(fake, bundle, tmp_path):
    mod = kernelpack.load(_write(tmp_path, "k.kpack", bundle.to_bytes()))
    mod.four(P, P, P, 2, grid=1, block=32)  # through the record
    fam = mod.four.family
    fam.call(P, P, P, 8, grid=1, block=32)  # the Python path: built whole, the device table linked to it
    assert fam._specs is not None and fake.last()["kernel"] == "add"
    assert all(e.spec is not None and e.spec.label == e.label for e in fam.device_state(0).entries)
    assert "four[d8]" in repr(fam) and mod.four.__doc__


def _edit_record(data: bytes, family: str, edit: Any) -> bytes:
    def apply(text: bytes) -> bytes:
        doc = json.loads(text)
        out = edit(doc)
        return out if isinstance(out, bytes) else json.dumps(doc).encode()

    return edit_family_stream(data, family, apply, key="dispatch")


def _swap_first_two(doc: dict[str, Any]) -> None:
    labels = doc["specs"]["label"]
    labels[0], labels[1] = labels[1], labels[0]  # four[d8] and four[d4] named the other way round


def test_a_record_altered_with_intact_hashes_fails_verification_and_the_whole_family(fake, bundle, tmp_path):
    path = _write(tmp_path, "bad.kpack", _edit_record(bundle.to_bytes(), "four", _swap_first_two))
    with pytest.raises(BundleError, match=r"bad.kpack: kernel four: its dispatch record differs from the one its "
                                          r"manifest entries give \(the file was altered\)"):
        kernelpack.load(path, verify=True)
    mod = kernelpack.load(path)
    with pytest.raises(BundleError, match=r"bad.kpack: kernel four: its dispatch record disagrees with its manifest "
                                          r"entries \(the file was altered\)"):
        _ = mod.four.family.specs
    mod.add(P, P, P, 8, grid=1, block=32)  # other families load
    assert fake.last()["kernel"] == "add"


def _slot_field(k: int, value: int) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        for s in doc["slots"]:
            s[k] = value

    return edit


def _int_value(column: str, text: str) -> Any:
    """An edit: the first value of integer column ``column`` (4 hex digits each in these records) made ``text``."""
    def edit(doc: dict[str, Any]) -> None:
        at = rec.INT_COLUMNS.index(column) * len(doc["specs"]["label"]) * 4
        ints = doc["specs"]["ints"]
        doc["specs"]["ints"] = ints[:at] + text + ints[at + 4:]

    return edit


MALFORMED = {
    "not_json": lambda doc: b"{not json",
    "not_an_object": lambda doc: b"[1, 2]",
    "no_plans": lambda doc: doc.pop("plans"),
    "slot_index_out_of_range": lambda doc: doc["plans"].__setitem__(0, doc["plans"][0] + "03e7"),
    "slot_index_as_list_out_of_range": lambda doc: doc["plans"].__setitem__(0, [0, 999]),
    "plan_text_not_hex": lambda doc: doc["plans"].__setitem__(0, "00zz"),
    "plan_text_cut": lambda doc: doc["plans"].__setitem__(0, doc["plans"][0][:-1]),
    "plan_neither": lambda doc: doc["plans"].__setitem__(0, 7),
    "blob_out_of_range": lambda doc: doc["binsets"][0][0].__setitem__(2, 10**6),
    "layout_out_of_range": lambda doc: doc["binsets"][0][0].__setitem__(3, 50),
    "facts_out_of_range": lambda doc: doc["binsets"][0][0].__setitem__(4, -1),
    "arch_not_an_arch": lambda doc: doc["binsets"][0][0].__setitem__(0, "sm_xx"),
    "label_not_a_string": lambda doc: doc["specs"]["label"].__setitem__(0, 7),
    "ints_short": lambda doc: doc["specs"].__setitem__("ints", doc["specs"]["ints"][:-4]),
    "ints_as_a_list": lambda doc: doc["specs"].__setitem__("ints", [0] * 5 * len(doc["specs"]["label"])),
    "ints_not_hex": _int_value("first", "zz00"),
    "ints_with_spaces": _int_value("index", " 000"),
    "ints_missing": lambda doc: doc["specs"].pop("ints"),
    "binset_out_of_range": _int_value("bins", "0063"),
    "requires_out_of_range": _int_value("requires", "ffff"),
    "requires_not_pairs": lambda doc: doc["requires"].append([["sm_count"]]),
    "grid_of_no_plan": lambda doc: doc["grids"].append([99, False]),
    "roles_not_names": lambda doc: doc["roles"].append([0, [1, 2]]),
    "facts_row_short": lambda doc: doc["facts"][0].pop(),
    "slot_not_ints": lambda doc: doc["slots"][0].__setitem__(2, "8"),
}

# plans the C launcher must not trust to pack in place: the launch takes the Python path (built from the entries)
UNSAFE = {
    "offset_negative": _slot_field(2, -64),
    "offset_past_buffer": _slot_field(2, 4093),
    "size_huge": _slot_field(3, 1 << 40),
    "arg_negative": _slot_field(1, -1),
    "op_unknown": _slot_field(0, 42),
}


@pytest.mark.parametrize("edit", sorted(MALFORMED))
def test_a_malformed_record_is_refused_naming_the_kernel(fake, bundle, tmp_path, edit):
    path = _write(tmp_path, "bad.kpack", _edit_record(bundle.to_bytes(), "four", MALFORMED[edit]))
    mod = kernelpack.load(path)
    with pytest.raises(BundleError, match=r"bad.kpack: kernel four: malformed dispatch record"):
        mod.four(P, P, P, 8, grid=1, block=32)
    mod.add(P, P, P, 8, grid=1, block=32)
    assert fake.last()["kernel"] == "add"


@pytest.mark.parametrize("edit", sorted(UNSAFE))
def test_a_record_whose_plans_would_write_outside_the_buffer_is_refused_and_never_packed(fake, bundle, tmp_path, edit):
    """The C launcher does not take such a plan (the launch goes to the Python path, which builds the family from its
    entries); the entries and the record then disagree, and the launch is refused naming the kernel: nothing is
    packed or launched."""
    path = _write(tmp_path, "odd.kpack", _edit_record(bundle.to_bytes(), "four", UNSAFE[edit]))
    mod = kernelpack.load(path)
    before = fake.count()
    with pytest.raises(BundleError, match=r"odd.kpack: kernel four: its dispatch record disagrees with its manifest "
                                          r"entries \(the file was altered\)"):
        mod.four(P, P, P, 8, grid=1, block=32)
    assert fake.count() == before
    if mod.four.family.fast is not None:
        assert mod.four.family.python_calls == 1, "the C launcher refused the plan: the Python path took the launch"
    mod.add(P, P, P, 8, grid=1, block=32)
    assert fake.last()["kernel"] == "add"


def _slot_at(k: int, field: int, value: Any) -> Any:
    """An edit: field ``field`` of the table's slot ``k`` (``add``: pointers a, b, out at 0-2, the int n at 3) set."""
    return lambda doc: doc["slots"][k].__setitem__(field, value)


# values a 64-bit check let through and a narrower field then turned into a bad one: each crashed the process
# (SIGSEGV) when the C launcher packed the family's first launch
CRASHED = {
    "arg_32768": _slot_at(3, 1, 2**15),  # int16 -32768: args[-32768] read
    "arg_98304": _slot_at(3, 1, 3 * 2**15),  # int16 -32768 too
    "offset_int64_max": _slot_at(0, 2, 2**63 - 1),  # offset + 8 overflowed the bound check: the pointer at 4 GiB
    "size_int64_max": lambda doc: doc["slots"][3].__setitem__(slice(0, 4), [0, -1, 24, 2**63 - 1]),  # a NULL slot
    # zeroing 2**32 - 1 bytes
    "range_of_an_int_reads_an_extent": _slot_at(3, 8, [[0, 0, 100]]),  # an int's range over mode 0: NULL shape read
}

# ... and values narrowed into ones that looked right: launched with another argument or launch fact than the file
# said (the record is what the family's first launches use)
NARROWED = {
    "arg_65537_read_argument_1": _slot_at(3, 1, 2**16 + 1),  # int16 1: the int n taken from the pointer b
    "divisor_negative": _slot_at(3, 6, -4),  # no divisor at all (> 1 only is one)
    "dtype_259": _slot_at(3, 4, 256 + 3),  # int8 3 (int32)
    "align_2_32_plus_16": _slot_at(0, 5, 2**32 + 16),  # uint32 16
    "range_mode_minus_2": _slot_at(3, 8, [[-2, 0, 100]]),  # taken as the value's range (mode -1)
}
# launch facts past 32 bits: the C launcher's table is 32-bit
FACTS = {
    "dyn_smem_2_32_plus_16": lambda doc: doc["facts"][0].__setitem__(8, 2**32 + 16),
    "fixed_block_2_32_plus_32": lambda doc: doc["facts"][0].__setitem__(2, [2**32 + 32, 1, 1]),
    "max_threads_2_32": lambda doc: doc["facts"][0].__setitem__(4, 2**32),
    "grid_of_plan_minus_1": lambda doc: doc["grids"].append([-1, False]),
    "role_unknown": lambda doc: doc["roles"].append([0, ["bogus"]]),
    "requirement_unknown": lambda doc: doc["requires"].append([["bogus", 1]]),
}

_CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import kernelpack
from fake_cuda import InProcessFake
from kernelpack.core.errors import KernelpackError
fake = InProcessFake(Path({lib!r}))
fake.reset()
P = 0x10000
with fake.installed():
    for path in {paths!r}:
        print("forgery", Path(path).stem, flush=True)
        try:
            kernelpack.load(path).add(P, P + 0x100, P + 0x200, 8, grid=1, block=32)
            print("launched", fake.count(), flush=True)
        except KernelpackError as e:
            print(type(e).__name__, e, flush=True)
"""


def test_a_record_whose_integers_wrap_in_their_fields_is_refused_not_a_crash(fake_cuda, bundle, tmp_path):
    """Integers of a hash-consistent forged record that pass a 64-bit check but not the field they are stored in
    (an argument index of 2**15 is int16 -32768): the C launcher read args[-32768] and the process died (SIGSEGV,
    exit 139). In a child process, so a crash fails this test: each forgery is refused naming the kernel, nothing
    launched."""
    data = bundle.to_bytes()
    paths = [str(_write(tmp_path, f"{name}.kpack", _edit_record(data, "add", edit))) for name, edit in CRASHED.items()]
    tests = str(Path(__file__).parent)
    child = _CHILD.format(tests=tests, lib=str(fake_cuda.library), paths=paths)
    env = dict(os.environ)
    if "KERNELPACK_TEST_SANITIZER_PRELOAD" in env:  # under tests/test_launch_asan.py: the child is sanitized too
        env["LD_PRELOAD"] = env["KERNELPACK_TEST_SANITIZER_PRELOAD"]
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300, check=False,
                         env=env)
    lines = out.stdout.splitlines()
    assert out.returncode == 0, f"exit {out.returncode} after {lines[-1:]}\n{out.stderr[-2000:]}"
    results = dict(zip(lines[::2], lines[1::2]))
    for name in CRASHED:
        got = results[f"forgery {name}"]
        assert got.startswith("BundleError") and f"{name}.kpack: kernel add: its dispatch record disagrees" in got, \
            (name, got)


@pytest.mark.parametrize("edit", sorted(NARROWED))
def test_a_record_integer_narrowed_into_a_plausible_one_is_refused_not_launched(fake, bundle, tmp_path, edit):
    path = _write(tmp_path, "n.kpack", _edit_record(bundle.to_bytes(), "add", NARROWED[edit]))
    before = fake.count()
    with pytest.raises(BundleError, match=r"n.kpack: kernel add: its dispatch record disagrees with its manifest"):
        kernelpack.load(path).add(P, P + 0x100, P + 0x200, 8, grid=1, block=32)
    assert fake.count() == before, "nothing was launched"


@pytest.mark.parametrize("edit", sorted(FACTS))
def test_launch_facts_and_indices_out_of_their_range_make_a_malformed_record(fake, bundle, tmp_path, edit):
    """Before: a dynamic shared memory of 2**32 + 16 launched with 16, a block of 2**32 + 32 with 32, a grid program
    for plan -1 went to the last plan; an unknown device role or requirement escaped as TypeError / KeyError."""
    path = _write(tmp_path, "f.kpack", _edit_record(bundle.to_bytes(), "add", FACTS[edit]))
    before = fake.count()
    with pytest.raises(BundleError, match=r"f.kpack: kernel add: malformed dispatch record"):
        kernelpack.load(path).add(P, P + 0x100, P + 0x200, 8, grid=1, block=32)
    assert fake.count() == before, "nothing was launched"


def test_a_record_of_another_version_is_not_read(fake, bundle, tmp_path):
    path = _write(tmp_path, "v9.kpack", _edit_record(bundle.to_bytes(), "four", lambda doc: doc.update(v=9)))
    mod = kernelpack.load(path)
    assert mod.four.family.record is None, "built from its entries"
    assert _launch(fake, mod, "four", (P, P, P, 8), {"grid": 1, "block": 32})[0] == "add"
    kernelpack.load(path, verify=True)  # not read, so not compared


def test_a_family_whose_binary_does_not_verify_gets_no_record_and_fails_at_its_first_launch(fake, tmp_path,
                                                                                            runtime_bundle):
    from kernelpack.bundle.artifact import deferred_verification
    from kernelpack.core.abi import DType, Param, Pointer

    add = next(a for a in runtime_bundle if a.label == "add")
    with deferred_verification():
        wrong = dataclasses.replace(add, name="wrong_abi", abi=Abi((*add.abi.params, Param("extra",
                                                                                          Pointer(DType.f32)))))
    data = Bundle((add, wrong)).to_bytes()
    fams = read_manifest(data)["families"]
    assert dict(zip(fams["name"], fams["dispatch"]))["wrong_abi"] == -1, "no record"
    assert dict(zip(fams["name"], fams["dispatch"]))["add"] >= 0
    mod = kernelpack.load(_write(tmp_path, "w.kpack", data))
    with pytest.raises(AbiMismatch, match=r"kernel wrong_abi \(sm_90a\): the ABI has 5 parameters"):
        mod.wrong_abi(P, P, P, 8, P, grid=1, block=32)


def test_records_are_small_next_to_the_entries(bundle):
    data = bundle.to_bytes()
    index = BundleIndex(data, "k")
    for name in index.names():
        record = index._fams.record(name)
        assert record is not None and json.loads(record)["v"] == rec.VERSION
        assert len(record) < max(2 * sum(map(len, index._fams.lines(name))), 4096), name


def test_small_families_share_their_chunks_and_a_large_one_has_its_own(runtime_bundle):
    """Entries and records are grouped in streams of ~16 KiB: a table of many one-specialization families stays
    small, and a family's first use expands one stream, not the whole manifest."""
    from kernelpack.bundle.kpack import CHUNK, RECORD_CHUNK

    add = next(a for a in runtime_bundle if a.label == "add")
    many = [dataclasses.replace(add, name=f"k{i}") for i in range(300)]
    big = [dataclasses.replace(add, name="big", variant=f"v{i}") for i in range(60)]
    m = read_manifest(Bundle((*many, *big)).to_bytes())
    fams, chunks = m["families"], m["chunks"]
    entries = {c for n, c in zip(fams["name"], fams["entries"]) if n != "big"}
    assert len(entries) < 300 // 10, "one-specialization families share chunks"
    assert all(chunks[c]["raw_size"] <= CHUNK for c in entries)
    (own,) = [c for n, c in zip(fams["name"], fams["entries"]) if n == "big"]
    assert fams["entries"].count(own) == 1 and chunks[own]["raw_size"] > CHUNK, "a family over a chunk is alone"
    records = [c for n, c in zip(fams["name"], fams["dispatch"]) if n != "big"]
    assert 0 <= min(records) and len(set(records)) < 300 // 3, "their records share chunks too"
    assert all(chunks[c]["raw_size"] <= RECORD_CHUNK for c in records)


@pytest.mark.parametrize("values", [[0], [3, 0, 65535, 7], [1, 65536, 2], [0xFFFFFFFF, 0]])
def test_integer_columns_are_hex_texts_of_4_or_8_digits_that_read_back(values):
    text = rec._hex_column(values)
    assert len(text) == (4 if max(values) <= 0xFFFF else 8) * len(values)
    assert rec._int_column(text, len(values), "rank") == values
    with pytest.raises(ValueError, match="rank is not a text of"):
        rec._int_column(text, len(values) + 1, "rank")


def test_a_device_table_is_published_once_and_its_loaded_row_replaced_in_place(fake, bundle, tmp_path):
    mod = kernelpack.load(_write(tmp_path, "b.kpack", bundle.to_bytes()))
    fam = mod.four.family
    if fam.fast is None:
        pytest.skip("the C extension is not built")
    calls: list[str] = []
    real = fam.fast

    class Spy:
        def __getattr__(self, name: str) -> Any:
            calls.append(name) if name in ("_set_device", "_set_entry") else None
            return getattr(real, name)

    fam.fast = Spy()
    try:
        mod.four(P, P, P, 8, grid=1, block=32)
        mod.four(P, P, P, 6, grid=1, block=32)  # a second specialization loads: one row again
    finally:
        fam.fast = real
    assert calls == ["_set_device", "_set_entry", "_set_entry"]
    assert fake.last()["kernel"] == "add"
    assert real._set_entry(5, 0, 0) is False, "a device with no table: the caller publishes the whole table"
    assert real._set_entry(0, 99, 0) is False, "no such row"
    with pytest.raises(ValueError, match="the row's plan is not the one it replaces"):
        real._set_entry(0, 0, 3)
    with pytest.raises(TypeError, match="a device table row"):
        real._set_entry(0, 0, [0])


def test_a_device_orders_a_record_by_fit_within_a_rank_and_leaves_out_what_it_cannot_run(fake, bundle, tmp_path):
    """Specializations alike but for device requirements: the one the device meets (132 SMs) goes first, the one it
    cannot meet is left out; the record and the family built from its entries agree, row for row."""
    add = next(a for a in bundle if a.label == "add")
    arts = [dataclasses.replace(add, name="req", variant=v, requires=r)
            for v, r in (("any", {}), ("sm108", {"sm_count": 108}), ("sm132", {"sm_count": 132}), ("any2", {}))]
    data = Bundle(tuple(arts)).to_bytes()
    mod = kernelpack.load(_write(tmp_path, "r.kpack", data))
    fam = mod.req.family
    assert fam.record is not None
    mod.req(P, P, P, 8, grid=1, block=32)
    state = fam.device_state(0)
    assert [fam.record.label[row[0]] for row in state.entries.rows] == ["req[sm132]", "req[any]", "req[any2]"]
    assert [fam.record.label[pos] for pos in state.missing] == ["req[sm108]"]
    v1 = kernelpack.load(_write(tmp_path, "r1.kpack", _edit_record(data, "req", lambda doc: doc.update(v=1))))
    other = v1.req.family
    assert other.record is None, "a version-1 record is not read: built from its entries"
    other_state = other.device_state(0)
    assert list(other_state.entries.rows) == list(state.entries.rows)
    assert other_state.missing == state.missing and other_state.unmet == state.unmet
    assert other_state.entries.rows.c_plans() == state.entries.rows.c_plans()


def _short_plans(doc: dict[str, Any]) -> None:
    """Every plan cut to its first slot: the kernel takes four parameters, the launch would pack one."""
    doc["plans"] = [p[:4] for p in doc["plans"]]


def test_a_record_whose_plan_is_not_the_kernels_parameters_is_refused_at_its_first_launch_not_launched(fake, bundle,
                                                                                                       tmp_path):
    """The driver reads every parameter of the kernel from what a launch hands it: a plan of fewer (or other) slots
    than the kernel's parameters, in an altered file whose hashes are intact, would have it read unpacked memory.
    The first load checks the plan against the driver's own parameter table (cuKernelGetParamInfo)."""
    mod = kernelpack.load(_write(tmp_path, "s.kpack", _edit_record(bundle.to_bytes(), "add", _short_plans)))
    before = fake.count()
    with pytest.raises(AbiMismatch, match=r"s.kpack: kernel add \(sm_90a\): the parameters of its dispatch record "
                                          r"are not the kernel's \(the file was altered\)"):
        mod.add(P, P + 0x100, P + 0x200, 8, grid=1, block=32)
    assert fake.count() == before, "nothing was launched"
    mod.four(P, P, P, 8, grid=1, block=32)  # other families launch
    assert fake.last()["kernel"] == "add"


def test_without_the_drivers_parameter_table_the_binary_is_checked_against_the_entries(fake, bundle, tmp_path):
    """A driver older than CUDA 12.4 cannot describe a kernel's parameters: a first launch from a record then builds
    the family from its entries (which must agree with the record, plan for plan) and verifies the binary against
    them, as a bundle without records does."""
    good = _write(tmp_path, "g.kpack", bundle.to_bytes())
    bad = _write(tmp_path, "s.kpack", _edit_record(bundle.to_bytes(), "add", _short_plans))
    fake.reset(missing="cuKernelGetParamInfo")
    with fake.installed():
        mod = kernelpack.load(good)
        mod.add(P, P + 0x100, P + 0x200, 8, grid=1, block=32)
        assert fake.last()["kernel"] == "add" and mod.add.family._specs is not None, "checked against its entries"
        mod = kernelpack.load(bad)
        with pytest.raises(BundleError, match=r"s.kpack: kernel add: its dispatch record disagrees with its "
                                              r"manifest entries \(the file was altered\)"):
            mod.add(P, P + 0x100, P + 0x200, 8, grid=1, block=32)


def test_the_drivers_parameter_offsets_are_compared_from_the_first_parameters(fake, bundle, tmp_path):
    """The H200's driver reports a Triton TMA kernel's parameter offsets from 48, not 0 (its sizes and count are the
    cubin's): the layout check compares offsets relative to the first parameter's, and still refuses a short plan."""
    good = _write(tmp_path, "g.kpack", bundle.to_bytes())
    bad = _write(tmp_path, "s.kpack", _edit_record(bundle.to_bytes(), "add", _short_plans))
    fake.reset(param_base=48)
    with fake.installed():
        mod = kernelpack.load(good)
        mod.add(P, P + 0x100, P + 0x200, 8, grid=1, block=32)
        assert fake.last()["kernel"] == "add" and mod.add.family._specs is None, "checked by the driver's table"
        with pytest.raises(AbiMismatch, match="the parameters of its dispatch record are not the kernel's"):
            kernelpack.load(bad).add(P, P + 0x100, P + 0x200, 8, grid=1, block=32)
