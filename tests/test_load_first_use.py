"""A family's first use reads only what dispatch needs of its specializations; each specialization's artifact is
built, its binary verified and loaded, when a launch first chooses it (the C path asks Python through the family's
load callback, then launches in C); docs are made on first access. On the fake driver."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

import kernelpack
from kernelpack.bundle.kpack import Bundle
from kernelpack.core.abi import Abi
from kernelpack.launch.facts import plans
from kernelpack.launch.family import constraints, plan_specificity, specificity


def _family_of_four(runtime_bundle: Bundle) -> Bundle:
    """``add`` as four specializations told apart by the divisibility of ``n`` (1, 2, 4, 8)."""
    add = next(a for a in runtime_bundle if a.label == "add")
    arts = []
    for k in range(4):
        params = tuple(dataclasses.replace(p, divisibility=2**k) if p.name == "n" else p for p in add.abi.params)
        arts.append(dataclasses.replace(add, variant=f"d{2**k}", abi=Abi(params)))
    return Bundle(tuple(arts))


def test_a_launch_builds_and_loads_only_the_specialization_it_chooses(fake, runtime_bundle, tmp_path):
    mod = kernelpack.load(_family_of_four(runtime_bundle).write(tmp_path / "four.kpack"))
    fn = mod.add
    fam = fn.family
    assert not any(s.src.built for s in fam.specs), "the family's first use builds no artifact"
    fn(0x10000, 0x20000, 0x30000, 4, grid=1, block=32)  # fits d4 (the most specific that fits), d2, d1
    assert fake.last()["kernel"] == "add"
    assert not any(s.src.built for s in fam.specs), "a launch loads its binary without building the artifact"
    assert [e.spec.label for e in fam.device_state(0).entries if e.ready] == ["add[d4]"]
    fn(0x10000, 0x20000, 0x30000, 3, grid=1, block=32)  # only d1 fits
    assert sorted(e.spec.label for e in fam.device_state(0).entries if e.ready) == ["add[d1]", "add[d4]"]
    if fam.fast is not None:
        assert fam.python_calls == 0, "both launches (and the loads they needed) went through the C path"
    fam.preload(0)
    assert all(e.ready for e in fam.device_state(0).entries), "preload loads every specialization"


def test_the_lazy_family_dispatches_as_the_eager_one(fake, runtime_bundle, tmp_path):
    path = _family_of_four(runtime_bundle).write(tmp_path / "four.kpack")
    lazy, eager = kernelpack.load(path), kernelpack.load(path, verify=True)
    eager.preload(0)
    for fam in (lazy.add.family, eager.add.family):
        assert [s.label for s in fam.specs] == ["add[d8]", "add[d4]", "add[d2]", "add[d1]"]
    for n in (1, 2, 3, 4, 6, 8, 12, 16):
        for mod in (lazy, eager):
            mod.add(0x10000, 0x20000, 0x30000, n, grid=1, block=32)
        assert fake.launches()[-1] == fake.launches()[-2], n


def test_plan_specificity_is_the_constraints_rule(runtime_bundle):
    from kernelpack.launch.family import _args_of

    for art in runtime_bundle:
        for plan in plans(art):
            assert plan_specificity(plan) == specificity(constraints(_args_of(plan), plan)), art.label


def test_docs_are_made_on_first_access_and_say_the_same(fake, runtime_bundle, tmp_path, fake_cuda):
    path = runtime_bundle.write(tmp_path / "k.kpack")
    code = """import json, sys, inspect, kernelpack
from kernelpack.runtime import driver
driver.use_library(sys.argv[2])
m = kernelpack.load(sys.argv[1])
m.add(0x10000, 0x20000, 0x30000, 8, grid=1, block=32)
before = "kernelpack.runtime.docs" in sys.modules
out = {"before": before, "doc": m.add.__doc__, "sig": str(inspect.signature(m.add)), "repr": repr(m.add)}
out["after"] = "kernelpack.runtime.docs" in sys.modules
print(json.dumps(out))"""
    env = {**os.environ, **fake_cuda.env()}
    run = subprocess.run([sys.executable, "-c", code, str(path), str(fake_cuda.library)], capture_output=True,
                         text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert not got["before"] and got["after"], "loading, first use and a launch import no docs"
    import inspect

    eager = kernelpack.load(runtime_bundle)
    assert got["doc"] == eager.add.__doc__.replace("<bundle>", str(path))
    assert got["sig"] == str(inspect.signature(eager.add)) and got["repr"] == repr(eager.add)


@pytest.mark.parametrize("order", ["reversed", "split_family"])
def test_entry_lines_in_another_order_still_group_by_family(fake, runtime_bundle, tmp_path, order):
    """A format-1 manifest whose one-line entries are not sorted by name (another writer's, one JSON object) loads:
    families whose lines are one run each are found by one scan, a family in two runs makes the loader group the
    lines one by one."""
    from fuzz_support import forge
    from kernelpack.bundle.kpack import manifest_bytes

    data = runtime_bundle.to_bytes(version=1)
    lines = manifest_bytes(data).split(b"\n")
    body = [line.rstrip(b",") for line in lines[1:-1]]
    if order == "reversed":
        body.reverse()
    else:
        names = [line.split(b'"')[3] for line in body]
        twice = next(n for n in names if names.count(n) > 1)
        body.append(body.pop(names.index(twice)))
    text = b"\n".join([lines[0], b",\n".join(body), lines[-1]])
    path = tmp_path / "reordered.kpack"
    path.write_bytes(forge(data, text))
    mod = kernelpack.load(path)
    assert (mod._st.index._spans is None) == (order == "split_family")
    assert len(mod._st.index) == len(runtime_bundle)
    assert mod.bundle == runtime_bundle
    mod.add(0x10000, 0x20000, 0x30000, 8, grid=1, block=32)
    assert fake.last()["kernel"] == "add"
