"""The host-program record a built library carries (section ``.kpack_host``): format 2 lists each distinct
parameter type once; libraries of format 1 (each type inline) still load; a forged index or format is refused with
the library and the section named."""

from __future__ import annotations

import json
import struct
from types import SimpleNamespace
from typing import Any

import pytest

from kernelpack.bundle import host_manifest as hm
from kernelpack.core.abi import DType, Pointer, Scalar, Struct, TensorSpec, type_to_json
from kernelpack.core.errors import BundleError


def _programs(count: int) -> list[Any]:
    """Programs as the builder describes them (name, variant, symbol, zero_extent, objects' archs, params): each
    takes the same two tensors, a scalar and the stream, as a library's variants do."""
    tensor = Struct.tensor_descriptor("tensor_bf16_dx4", TensorSpec(DType.bf16, (None,) * 4, (None, None, None, 1),
                                                                    align=16))
    params = (hm.HostParam("q", tensor, False, (("data", 16),)), hm.HostParam("out", tensor, False, (("data", 16),)),
              hm.HostParam("scale", Scalar(DType.f32)), hm.HostParam("stream", Pointer(None), True))
    return [SimpleNamespace(name=f"fwd{i}", variant="bf16", symbol=f"fwd{i}_bf16", zero_extent="skip",
                            objects=(SimpleNamespace(arch="sm_90a"),), params=params) for i in range(count)]


def _section(doc: dict[str, Any]) -> bytes:
    body = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    raw = hm.MAGIC + struct.pack("<Q", len(body)) + body
    return raw + b"\0" * (-len(raw) % 8)


def _format1(doc: dict[str, Any]) -> dict[str, Any]:
    """The same description as format 1 wrote it: each parameter's type in full."""
    programs = [{**p, "params": [{**q, "type": doc["types"][q["type"]]} for q in p["params"]]}
                for p in doc["programs"]]
    return {"format": 1, "kernelpack": doc["kernelpack"], "library": doc["library"], "programs": programs}


def test_format_2_lists_each_parameter_type_once() -> None:
    """48 programs of 4 parameters sharing 3 types: the record holds 3 types, each parameter its index; it is a
    fraction of format 1's size and reads back to the same programs."""
    programs = _programs(48)
    doc = hm.describe("fa", programs)
    assert doc["format"] == 2 and len(doc["types"]) == 3
    assert [q["type"] for q in doc["programs"][0]["params"]] == [0, 0, 1, 2]
    new, old = _section(doc), _section(_format1(doc))
    assert len(new) * 4 < len(old)
    read = hm.parse(new, "libfa.so")
    assert read == hm.parse(old, "libfa.so")  # equal fields, parameters included
    assert [i.params for i in read] == [p.params for p in programs]
    assert read[0].params[0].type is read[5].params[1].type  # one parse per distinct type


def test_a_library_of_format_1_still_loads() -> None:
    doc = _format1(hm.describe("fa", _programs(2)))
    read = hm.parse(_section(doc), "libold.so")
    assert [i.symbol for i in read] == ["fa_fwd0_bf16", "fa_fwd1_bf16"]
    assert read[1].params[3].stream and read[1].params[2].type == Scalar(DType.f32)


@pytest.mark.parametrize("index", [3, -1, True, "0", 1.0])
def test_a_forged_type_index_fails_at_that_programs_first_use(index: Any) -> None:
    """Loading reads names only; the index outside the table (or not an int) fails when the program's parameters
    are first read, naming the library and the section; the other programs stay usable."""
    doc = hm.describe("fa", _programs(2))
    doc["programs"][1]["params"][2]["type"] = index
    read = hm.parse(_section(doc), "libforged.so")
    assert read[0].params[2].type == Scalar(DType.f32)
    with pytest.raises(BundleError, match=r"libforged.so: malformed host-program record in section \.kpack_host: "
                                          r"ValueError\(.type index .* outside the record's 3 types"):
        read[1].params  # noqa: B018


@pytest.mark.parametrize("fmt", [3, 0, "2", 2.0, None])
def test_an_unknown_record_format_is_refused_naming_the_formats_read(fmt: Any) -> None:
    doc = hm.describe("fa", _programs(1))
    doc["format"] = fmt
    with pytest.raises(BundleError, match=r"libnew.so: host-program record of format .* is not supported \(this "
                                          r"kernelpack reads formats 1, 2\); rebuild the library"):
        hm.parse(_section(doc), "libnew.so")


def test_format_2_without_its_type_table_is_refused() -> None:
    doc = hm.describe("fa", _programs(1))
    doc["types"] = {"0": type_to_json(Scalar(DType.f32))}
    with pytest.raises(BundleError, match="types is dict, not a list"):
        hm.parse(_section(doc), "libx.so")
    del doc["types"]
    with pytest.raises(BundleError, match="KeyError\\('types'\\)"):
        hm.parse(_section(doc), "libx.so")
