"""What the corpus records: per kernel, whether it was reached, compiled and linked, and every failure's reason."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# reason classes (the table in docs/corpus.md counts failures by these)
NOT_REACHED = "not reached"  # no corpus case launches it (a wrapper path the corpus does not take)
CAPTURE = "capture"  # the package's wrapper failed on CPU tensors before launching it
DSL = "DSL limit"  # the DSL's own compiler refuses it (reproduced with the DSL alone)
KERNELPACK = "kernelpack"  # kernelpack refuses or mishandles it
LINK = "link"  # compiled, but the library would not link with it
NOT_DSL = "not a kernel of this DSL"  # listed where the lead's count expects kernels, but none are compiled here
ENVIRONMENT = "environment"  # a missing dependency or tool on this machine


@dataclass
class Failure:
    kernel: str  # the kernel (or launcher) this failure is about; "" for a case that failed as a whole
    stage: str  # capture / compile / link / header
    reason_class: str
    reason: str
    where: str = ""  # case[point] or arch

    def line(self) -> str:
        at = f" ({self.where})" if self.where else ""
        return f"{self.kernel or '-'}{at}: [{self.reason_class}] {self.reason}"


@dataclass
class Section:
    """One package and DSL: the kernels it defines and what became of each."""

    package: str
    dsl: str
    defined: list[str] = field(default_factory=list)  # every kernel the package defines (scanned)
    reached: set[str] = field(default_factory=set)
    compiled: set[str] = field(default_factory=set)  # every captured specialization compiled for every arch
    linked: set[str] = field(default_factory=set)
    specializations: int = 0  # artifacts in the library
    families: int = 0
    host_programs: int = 0  # CuTe launchers linked whole (host programs), counted in specializations
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def fail(self, kernel: str, stage: str, reason_class: str, reason: str, where: str = "") -> None:
        self.failures.append(Failure(kernel, stage, reason_class, _one_line(reason), where))

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["reached"], d["compiled"], d["linked"] = sorted(self.reached), sorted(self.compiled), sorted(self.linked)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Section:
        d = dict(d)
        d["failures"] = [Failure(**f) for f in d.get("failures", [])]
        for k in ("reached", "compiled", "linked"):
            d[k] = set(d.get(k, []))
        return cls(**d)


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def write_results(path: Path, sections: list[Section], meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "sections": [s.to_json() for s in sections]}, indent=1,
                               default=str) + "\n")


def read_results(path: Path) -> tuple[dict[str, Any], list[Section]]:
    data = json.loads(path.read_text())
    return data.get("meta", {}), [Section.from_json(s) for s in data.get("sections", [])]
