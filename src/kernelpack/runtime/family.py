"""A kernel family: the specializations sharing one name, dispatched per call like the generated C library.

Dispatch order: the most specific specialization first (how many constraints narrow it, then how much: static
tensor modes, alignment and divisibility; then the narrower range constraints), then on each device the better fit
-- device requirements met (kernelpack.launch.device), then the better binary (arch-specific SASS, plain SASS, PTX)
-- then bundle order. Each launch uses the facts and parameter layout of the binary chosen for its device
(kernelpack.launch.facts). A specialization is chosen when every argument fits it; when none fits, the error names
every specialization and why it did not fit.

:meth:`KernelFamily.call` is the complete launch path in Python (every kind of argument, every check, every
error). The C extension handles the common case itself and calls it for everything else.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import field
from functools import cached_property
from itertools import compress
from operator import add, itemgetter, not_
from typing import TYPE_CHECKING, Any, NoReturn, cast

from ..bundle.index import SpecSource
from ..core import verify as _verify  # noqa: F401 - a first launch verifies its binary: imported with the runtime
from ..core._reprs import clip, listing
from ..core.binary import Binary
from ..core.errors import AbiMismatch, BundleError, KernelpackError, LaunchError
from ..core.launchspec import LaunchSpec
from ..core.names import py_arg_names
from ..core.records import record
from ..launch import device as dev_model
from ..launch.binaries import describe_binaries, device_arch, family_choice, quality
from ..launch.codes import PDL_MIN_MAJOR, SMEM_DEFAULT_LIMIT
from ..launch.facts import binary_facts
from ..launch.family import LAUNCH_KEYWORDS, Specialization, order_key, ordered_specs
from ..launch.plan import OP_LIST, Plan, Slot, grid_program
from . import streams
from .driver import DeviceInfo, Driver

if TYPE_CHECKING:
    from .adapters import ListView, TensorView

    View = TensorView | ListView
from ..launch.record import FamilyRecord
from .errors import (
    ArgumentTypeError,
    ArgumentValueError,
    DescriptorArgumentError,
    DriverError,
    NoBinaryForDevice,
    NoMatchingSpecialization,
)
from .fast import prepare_fast_path
from .loader import LaunchFacts, Loader


class _PythonPath:
    """The modules only the Python launch path uses (argument checks, tensor adapters, the packer, the grid, tensor maps
    and scratch around a launch): imported on its
    first use, not with the runtime (the C path launches without them)."""

    def __getattr__(self, name: str) -> Any:
        mod: Any
        if name == "checks":
            from . import checks as mod
        elif name == "adapters":
            from . import adapters as mod  # type: ignore[no-redef]
        elif name == "packer":
            from . import packer as mod  # type: ignore[no-redef]
        elif name == "pylaunch":
            from . import pylaunch as mod  # type: ignore[no-redef]
        elif name == "precheck":
            from . import precheck as mod  # type: ignore[no-redef]
        else:
            raise AttributeError(name)
        setattr(self, name, mod)
        return mod


_rt: Any = _PythonPath()

@record
class DeviceEntry:
    spec: Specialization | None  # None until the family is built from its entries (a family started from its record)
    bin_index: int  # which of its binaries this device runs
    quality: int
    plan: Plan | None  # the chosen binary's parameter layout (with spec)
    launch: LaunchSpec | None  # the chosen binary's LaunchSpec (with spec)
    label: str  # the specialization's
    pos: int  # its place in the family's dispatch order
    c_plan: int  # the C launcher's index of its layout
    roles: tuple[str, ...]  # the device roles its layout's hidden device-derived params take, in order
    pdl: bool  # its launch spec's
    cooperative: bool
    row: int  # its place in the device's dispatch order (the C launcher's table row)
    binary: Binary | None = None  # the rest is filled when the entry is first chosen (load_entry)
    kernel: int = 0
    facts: LaunchFacts | None = None
    smem_raised: int = SMEM_DEFAULT_LIMIT
    values: dict[str, int] = field(default_factory=dict)  # device-derived role -> value on this device
    error: KernelpackError | None = None  # a device-derived value could not be read: launches raise it
    ready: bool = False  # loaded (load_entry)

    @property
    def layout(self) -> Plan:
        assert self.plan is not None  # the Python path builds the family first (KernelFamily.specs)
        return self.plan

    @property
    def spec_launch(self) -> LaunchSpec:
        assert self.launch is not None
        return self.launch


Row = tuple[int, int, int, int, bool, bool]  # a specialization (its place in the family's order), the binary it runs
#                                            there, how well it fits, its C plan, PDL, cooperative
Verdict = tuple[int, int, int, int, bool, bool]  # of a specialization on a device: its best binary's quality, that
#                                                binary, how well it fits (<= 0: it cannot run there), its layout, PDL,
#                                                cooperative


class _Rows(Sequence[Row]):
    """A device's rows: ``order`` (each row's specialization, by its place in the family's order), from each
    specialization's verdict (``vids``: its index in ``verdicts``, the distinct :data:`Verdict` s) and first C plan;
    a row is made when asked for (a first launch asks for one), and the C launcher's plans are read as columns."""

    def __init__(self, order: Sequence[int], vids: Sequence[int], verdicts: Sequence[Verdict],
                 firsts: Sequence[int]) -> None:
        self.order, self.vids, self.verdicts, self.firsts = order, vids, verdicts, firsts

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, j: Any) -> Any:
        if isinstance(j, slice):
            return [self[k] for k in range(*j.indices(len(self)))]
        pos = self.order[j]
        _, best, fit, layout, pdl, coop = self.verdicts[self.vids[pos]]
        return (pos, best, fit, self.firsts[pos] + layout, pdl, coop)

    def c_plans(self) -> list[int]:
        """Each row's C plan."""
        layouts = [v[3] for v in self.verdicts]
        layout = map(layouts.__getitem__, map(self.vids.__getitem__, self.order))
        return list(map(add, map(self.firsts.__getitem__, self.order), layout))

    def launch_flags(self) -> set[tuple[bool, bool]]:
        """The rows' (PDL, cooperative) pairs."""
        return {(v[4], v[5]) for v in self.verdicts if v[2] > 0}


class _Entries(Sequence[DeviceEntry]):
    """A device's dispatch order: ``rows`` (:data:`Row`), each :class:`DeviceEntry` made when first asked for
    (:meth:`KernelFamily._entry`; a first launch asks for one) and kept in ``made`` (by row); the C launcher's table
    is made from the rows."""

    def __init__(self, family: KernelFamily, rows: _Rows) -> None:
        self.family, self.rows = family, rows
        self.made: dict[int, DeviceEntry] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, j: Any) -> Any:
        if isinstance(j, slice):
            return [self[k] for k in range(*j.indices(len(self)))]
        got = self.made.get(j)
        if got is None:
            with self._lock:
                got = self.made.get(j)
                if got is None:
                    row = self.rows[j]  # IndexError past the end
                    j = range(len(self.rows))[j]
                    got = self.made[j] = self.family._entry(j, *row)
        return got

    def __iter__(self) -> Iterator[DeviceEntry]:
        return (self[j] for j in range(len(self.rows)))


@record
class DeviceState:
    info: DeviceInfo
    entries: _Entries  # dispatch order
    missing: list[int] = field(default_factory=list)  # the specializations (dispatch positions) it cannot run
    unmet: dict[int, str] = field(default_factory=dict)  # spec index -> "": its device requirements fail here


class KernelFamily:
    """The Python side of one callable kernel: specializations, per-device state, the full launch path."""

    def __init__(self, name: str, sources: Any, loader: Loader, record: FamilyRecord | None = None,
                 index: Any = None) -> None:
        """``sources``: the specializations (SpecSources or artifacts, bundle order), or a callable giving them,
        called when the family is first needed whole; ``record``: its dispatch record (:mod:`.record`): the family's
        C-path launches need nothing else, the Python launch path, docs and errors build it whole; ``index``: the
        BundleIndex the record's binaries are read from."""
        self.name = name
        self.loader = loader
        self.record = record
        self._index = index
        self._sources = sources
        self._specs: tuple[Specialization, ...] | None = None
        self._lock = threading.RLock()  # reentrant: a first load may need the family whole (load_entry)
        # Python keyword names: a parameter called like a launch option or a Python keyword gets a trailing _
        self.arg_names: tuple[str, ...] = record.arg_names if record is not None else py_arg_names(
            [s.name for s in self.specs[0].plan.args], LAUNCH_KEYWORDS)
        self._states: dict[int, DeviceState] = {}
        self.fast: Any = None  # the C launcher, when the extension is present
        self._tmaps: OrderedDict[tuple[Any, ...], tuple[Driver, list[Any]]] = OrderedDict()  # pylaunch.encode_descs
        self._tmap_lock = threading.Lock()
        self.python_calls = 0  # launches (and refusals) that took this Python path; tests read it

    @property
    def specs(self) -> tuple[Specialization, ...]:
        """The specializations in dispatch order (built from the family's entries on first use)."""
        specs = self._specs
        if specs is None:
            with self._lock:
                specs = self._specs
                if specs is None:
                    specs = self._specs = self._build_specs()
        return specs

    def _build_specs(self) -> tuple[Specialization, ...]:
        sources = self._sources() if callable(self._sources) else self._sources
        srcs = [s if isinstance(s, SpecSource) else SpecSource.of(s, i) for i, s in enumerate(sources)]
        specs = ordered_specs(self.name, srcs)
        record = self.record
        if record is not None:  # what the family's first launches used must be what its entries give
            names = py_arg_names([s.name for s in specs[0].plan.args], LAUNCH_KEYWORDS)
            if (names != record.arg_names or [(s.label, s.index, s.first_plan) for s in specs]
                    != list(zip(record.label, record.index, record.first))
                    or any(record.plan_slots(s.first_plan + k) != p.c_form for s in specs
                           for k, p in enumerate(s.layouts))):
                raise BundleError(f"{self._index.source}: kernel {self.name}: its dispatch record disagrees with "
                                  f"its manifest entries (the file was altered)")
            for state in self._states.values():  # the device entries made from the record get the whole objects
                for e in state.entries.made.values():
                    _link(e, specs)
        return specs

    @property
    def label(self) -> str:
        labels = self.record.label if self.record is not None else [s.label for s in self.specs]
        return labels[0] if len(labels) == 1 else self.name

    @cached_property
    def plan_roles(self) -> tuple[tuple[str, ...], ...]:
        """Per C plan (:meth:`c_tables`), the device roles of its hidden device-derived params, in order."""
        if self.record is not None:
            return self.record.roles
        return tuple(tuple(d.param.role for d in p.device_slots) for s in self.specs for p in s.layouts)

    def c_tables(self) -> tuple[tuple[Any, ...], tuple[str, ...], tuple[Any, ...], tuple[Any, ...] | None]:
        """The C launcher's plans (each specialization's layouts, in dispatch order), each one's specialization's
        label, its grid program, and the table of slots the plans index (None: each plan holds its slots)."""
        r = self.record
        if r is not None:
            return r.plans, r.labels, r.grids, r.slots
        layouts = [(s, p) for s in self.specs for p in s.layouts]  # Specialization.first_plan indexes this
        return (tuple(p.c_form for _, p in layouts), tuple(s.label for s, _ in layouts),
                tuple(grid_program(p, s.src.launch.grid) for s, p in layouts), None)

    def __repr__(self) -> str:
        return (f"<KernelFamily {clip(self.name, 64)}({listing(self.arg_names, 100)}): {len(self.specs)} "
                f"specialization{'s' * (len(self.specs) != 1)} ({listing((s.label for s in self.specs), 80)})>")

    # ------------------------------------------------------------ per-device state

    def device_state(self, ordinal: int) -> DeviceState:
        state = self._states.get(ordinal)
        if state is not None:
            return state
        with self._lock:
            state = self._states.get(ordinal)
            if state is None:
                state = self._load_device(ordinal)
                self._states[ordinal] = state
                self._publish(ordinal, state)
        return state

    def _load_device(self, ordinal: int) -> DeviceState:
        """The device's dispatch order (from the family's record, or from its specializations); each entry's binary
        is loaded when a launch first chooses it. Each distinct set of binaries and requirements is judged once:
        the first of its best binaries, and how well the device fits it (<= 0: it cannot run there)."""
        info = self.loader.driver.device(ordinal)
        props = device_properties(info)

        def pick(bins: Any) -> tuple[int, int]:  # the first of the best binaries, and its quality
            q, best = max((quality(b[0], b[1] == "ptx", info.major, info.minor), -i) for i, b in enumerate(bins))
            return q, -best

        r = self.record
        verdicts: list[Verdict] = []  # the distinct verdicts; vids: each specialization's (the family's order)
        if r is not None:  # a specialization's (binset, requires) pair, as one int
            pairs = list(map(add, map(len(r.requirements).__mul__, r.bins), r.requires))
            picked = {i: pick(r.binsets[i]) for i in set(r.bins)}
            vid: dict[int, int] = {}
            for k in set(pairs):
                bi, ri = divmod(k, len(r.requirements))
                q, best = picked[bi]
                b = r.binsets[bi][best]
                vid[k] = len(verdicts)
                verdicts.append((q, best, dev_model.device_quality(q, r.requirements[ri], props), b[3],
                                 *r.launch[b[4]]))
            vids = list(map(vid.__getitem__, pairs))
            firsts, index = r.first, r.index
        else:
            specs = self.specs
            seen: dict[tuple[int, int], tuple[int, int, int]] = {}
            vid2: dict[Verdict, int] = {}
            vids = []
            for s in specs:
                src = s.src
                key = (id(src.bins), id(src.requirements))
                got = seen.get(key)
                if got is None:
                    q, best = pick(src.bins)
                    got = seen[key] = (q, best, dev_model.device_quality(q, src.requirements, props))
                ls = src.launch_of(got[1])
                v = (*got, src.layout_of[got[1]], ls.pdl, ls.cooperative)
                vids.append(vid2.setdefault(v, len(vid2)))
            verdicts = list(vid2)
            firsts, index = [s.first_plan for s in specs], [s.index for s in specs]
        # the device's order: the family's (by rank, then bundle index) but by how well each fits within a rank, less
        # what cannot run there. Written with map, zip and compress over verdict ids: a first launch orders
        # thousands of specializations, and a Python loop over them would cost it a millisecond
        n = len(vids)
        runs = [v[2] > 0 for v in verdicts]
        keep = None if all(runs) else list(map(runs.__getitem__, vids))  # None: every one runs here
        missing = [] if keep is None else list(compress(range(n), map(not_, keep)))
        built = [v[0] > 0 for v in verdicts]  # a binary runs: its device requirements fail (say why on demand)
        unmet = dict.fromkeys(compress(map(index.__getitem__, missing),
                                       map(built.__getitem__, map(vids.__getitem__, missing))), "")
        order: Sequence[int]
        if len({v[2] for v in verdicts if v[2] > 0}) > 1:
            rank: Sequence[Any] = r.rank if r is not None else [order_key(s.specificity) for s in self.specs]
            unfit = [-v[2] for v in verdicts]
            keys = zip(rank, map(unfit.__getitem__, vids), index, range(n))
            order = list(map(itemgetter(3), sorted(keys if keep is None else compress(keys, keep))))
        else:
            order = range(n) if keep is None else list(compress(range(n), keep))
        return DeviceState(info, _Entries(self, _Rows(order, vids, verdicts, firsts)), missing, unmet)

    def _entry(self, row: int, pos: int, best: int, fit: int, c_plan: int, pdl: bool, coop: bool) -> DeviceEntry:
        """Row ``row`` of a device's dispatch order: specialization ``pos`` (the family's order) running its binary
        ``best``."""
        r, roles = self.record, self.plan_roles[c_plan]
        if r is not None:
            e = DeviceEntry(None, best, fit, None, None, r.label[pos], pos, c_plan, roles, pdl, coop, row)
            if self._specs is not None:
                _link(e, self._specs)
            return e
        s = self.specs[pos]
        return DeviceEntry(s, best, fit, s.layouts[s.src.layout_of[best]], s.src.launch_of(best), s.label, pos,
                           c_plan, roles, pdl, coop, row)

    def load_entry(self, state: DeviceState, entry: DeviceEntry) -> None:
        """Build, verify and load the entry's binary on its device (once; the first launch that chooses it), and
        hand the C launcher the device's table again. Errors name the kernel."""
        if entry.ready:
            return
        with self._lock:
            if entry.ready:
                return
            info = state.info
            i = entry.bin_index
            if self.record is not None:  # what the build verified, read from the record; the blob hash-checked
                r = self.record
                _, kind, blob, layout, facts, arch = r.binsets[r.bins[entry.pos]][i]
                name = r.entry[entry.pos]
                b = self._index.record_binary(entry.label, self.name, blob, arch, kind)
                entry.kernel = self.loader.kernel(entry.label, name, b, info)
                # the record's plan is what launches hand the driver: its parameters must be the kernel's. The
                # driver says (cuKernelGetParamInfo, ~1 us); without it, the cubin is checked against the entries
                same = self.fast._check_layout(entry.c_plan, entry.kernel) if self.fast is not None else -1
                if same == 0:
                    raise AbiMismatch(f"{self._index.source}: kernel {entry.label} ({arch}): the parameters of its "
                                      f"dispatch record are not the kernel's (the file was altered)")
                if same < 0:  # the family from its entries: the record agrees with them
                    src = self.specs[entry.pos].src
                    src.verify_binary(i, *src.binary(i))
                block, reqntid, threads, cluster, spec_cluster, static, dyn = self.record.facts[facts]
                f = entry.facts = LaunchFacts(block, reqntid, threads, cluster, spec_cluster, static, dyn, layout)
            else:
                assert entry.spec is not None
                src = entry.spec.src
                name, b = src.binary(i)  # its blob checked (not its whole artifact built): BundleError naming it
                src.verify_binary(i, name, b)  # deferred when the bundle was loaded lazily: AbiMismatch naming it
                entry.kernel = self.loader.kernel(src.label, name, b, info)
                f = entry.facts = binary_facts(name, src.launch_of(i), src.layout_of[i], b)
            entry.binary = b
            if entry.smem_raised < f.dyn_smem and f.dyn_smem + f.static_smem <= info.smem_optin:
                # its launches' default dynamic shared memory allowed now, so they can take the C path
                self.loader.driver.set_max_dynamic_smem(entry.kernel, info.ordinal, f.dyn_smem,
                                                        f"kernel {entry.label} on device {info.ordinal}")
                entry.smem_raised = f.dyn_smem
            self._device_values(entry, info, device_properties(info))
            entry.ready = True
            self._publish(info.ordinal, state, entry)

    def _fast_load(self, ordinal: int, j: int) -> bool:
        """The C launcher chose entry ``j`` of device ``ordinal``, not loaded yet: load it (True when the C path
        can launch it now)."""
        if ordinal < 0:  # the process's first launch: the driver's entry points (fast.prepare_fast_path)
            try:
                prepare_fast_path()
            except Exception:  # noqa: BLE001 - no driver: the Python path reports it, naming the kernel
                return False
            return True
        if j < 0:  # no table for the device yet: make it (any error: the Python path reports it, naming the kernel)
            try:
                self.device_state(ordinal)
            except Exception:  # noqa: BLE001 - reported by the launch's Python path
                return False
            return ordinal in self.fast._fast_devices()
        state = self._states.get(ordinal)
        if state is None or not 0 <= j < len(state.entries):
            return False
        entry = state.entries[j]
        self.load_entry(state, entry)
        return entry.error is None

    def _device_values(self, e: DeviceEntry, info: DeviceInfo, props: dict[str, int]) -> None:
        """Read the device-derived values the entry's layout needs, once (an error is kept for its launches)."""
        for role in e.roles:
            if role in e.values:
                continue
            prop, size = dev_model.role_property(role)  # type: ignore[misc]
            if prop.attribute is not None:
                e.values[role] = props[prop.name]
                continue
            where = f"kernel {e.label} on device {info.ordinal}"
            try:
                e.values[role] = self._max_active_clusters(e, info, size, where)
            except KernelpackError as err:
                e.error = err

    def _max_active_clusters(self, e: DeviceEntry, info: DeviceInfo, size: int, where: str) -> int:
        """``max_active_clusters:size`` for the entry's kernel on its device (kernelpack.launch.device): its fixed
        block, one block per SM (the kernel's dynamic shared memory limit raised to that first)."""
        d = self.loader.driver
        assert e.facts is not None  # loaded (load_entry)
        smem = dev_model.mac_smem(info.smem_optin, e.facts.static_smem)
        if smem > e.smem_raised:
            d.set_max_dynamic_smem(e.kernel, info.ordinal, smem, where)
            e.smem_raised = smem
        block = e.facts.block or (dev_model.MAC_BLOCK, 1, 1)
        n = d.max_active_clusters(e.kernel, info.context, size, block, smem, where)
        if n < 1:
            raise LaunchError(f"{where}: no cluster of {size} blocks of {block} threads fits on the device "
                              f"(cuOccupancyMaxActiveClusters gave {n}) for its max_active_clusters parameter")
        return n

    def _publish(self, ordinal: int, state: DeviceState, loaded: DeviceEntry | None = None) -> None:
        """Hand the device's dispatch table to the C launcher (``loaded``: the one entry that changed, its row
        replaced in place when the C launcher holds the table)."""
        if self.fast is None:
            return
        prepare_fast_path()
        if loaded is not None and self.fast._set_entry(ordinal, loaded.row, _c_row(loaded)):
            return
        info = state.info
        ents = state.entries
        if any(coop or (pdl and info.major < PDL_MIN_MAJOR) for pdl, coop in ents.rows.launch_flags()):
            return  # a cooperative grid is checked against the occupancy, an unsupported PDL refused, in Python
        # an entry not loaded yet (or unusable) is its plan alone: C asks _fast_load when dispatch chooses it
        rows: list[Any] = ents.rows.c_plans()
        for j, e in list(ents.made.items()):  # a copy: another thread may make an entry meanwhile
            rows[j] = _c_row(e)
        self.fast._set_device(ordinal, info.context, info.max_grid, info.max_block, info.max_threads,
                              info.smem_optin, int(info.cluster_launch), tuple(rows))

    def preload(self, ordinal: int) -> None:
        state = self.device_state(ordinal)
        for e in state.entries:
            self.load_entry(state, e)

    def binary_for(self, device: str | int, specialization: str | None = None) -> str:
        """Which binary runs on ``device`` (an arch such as ``"sm_120"``, for a GPU that need not be here, or a
        device index): ``"sm_90a"``, ``"sm_100f"`` or ``"compute_80 PTX"`` (JIT-compiled by the driver on first
        load), by the launch model's rule (kernelpack.launch.binaries), as the C library's NAME_binary_for_device
        answers. A family answers when all its specializations get the same binary; else name one
        (``specialization``: its label ``"scale[f32]"`` or variant ``"f32"``). NoBinaryForDevice when none runs
        there, naming the arch and what the kernel carries; ArgumentValueError for a malformed device."""
        if isinstance(device, bool) or not isinstance(device, (str, int)):
            raise ArgumentTypeError(f"kernel {self.label}: binary_for takes an arch such as 'sm_120' or a device "
                                    f"index (got {type(device).__name__} {device!r:.40})")
        if isinstance(device, int):
            info = self.loader.driver.device(device)
            major, minor = info.major, info.minor
        else:
            try:
                major, minor = device_arch(device)
            except KernelpackError as e:
                raise ArgumentValueError(f"kernel {self.label}: {e.message}") from None
        specs = sorted(self.specs, key=lambda s: s.index)  # bundle order, as the C library's spec table
        if specialization is not None:
            named = [s for s in specs if specialization in (s.label, s.src.variant)]
            if not named:
                raise ArgumentValueError(f"kernel {self.name}: no specialization {specialization!r:.60} (it has "
                                         f"{listing((s.label for s in specs), 200)})")
            specs = named[:1]
        name, why, agreed = family_choice(self.name if specialization is None else specs[0].label,
                                          [(s.label, [(arch, kind == "ptx") for arch, kind in s.src.bins])
                                           for s in specs], major, minor)
        if name is not None:
            return name
        raise (NoBinaryForDevice if agreed else ArgumentValueError)(why)

    # ------------------------------------------------------------ the full launch path

    def call(self, *args: Any, grid: Any = None, block: Any = None, smem: Any = None, stream: Any = None,
             cluster: Any = None, pdl: bool | None = None, cooperative: bool | None = None, **named: Any) -> None:
        self.python_calls += 1
        self.specs  # noqa: B018 - the Python path reads the family whole (built from its entries on first use)
        values = self._bind(args, named)
        try:
            d = self.loader.driver
        except DriverError as e:  # no driver / one too old: the arguments first, then which launch could not happen
            _rt.precheck.check_without_device(self, values, grid, block, smem, cluster, pdl, cooperative)
            raise DriverError(f"kernel {self.label}: {e}", code=e.code, name=e.name, status=e.status) from None
        views = [self._view(i, v, d) for i, v in enumerate(values)]
        ordinal = self._device(values, views, d)
        state = self.device_state(ordinal)
        entry, packed = self._dispatch(state, values, views)
        kernel = entry.label
        assert entry.spec is not None  # the family is whole (above)
        info = state.info
        self.load_entry(state, entry)
        if entry.error is not None:
            raise entry.error
        if grid is None and entry.spec.src.launch.grid is not None:
            grid = _rt.pylaunch.grid_from_rule(entry, packed)
            if min(grid) <= 0:
                return  # the C library's rule: a dimension <= 0 means nothing to launch
        g = _rt.checks.check_grid(grid, info, kernel)
        b = _rt.checks.check_block(block, entry.facts, info, kernel)
        n = _rt.checks.check_smem(smem, entry.facts, info, kernel)
        c = _rt.checks.check_cluster(cluster, g, entry.facts, info, kernel)
        flags = _rt.checks.check_flags(pdl, cooperative, entry.spec_launch, info, kernel)
        saw_torch = any(v is not None and v.source == "torch" for v in views)
        handle = streams.resolve(stream, ordinal, saw_torch, kernel)
        if saw_torch:
            _install_torch_bridge()
        self._launch(d, state, entry, g, b, n, c, handle, packed, flags)

    def _bind(self, args: tuple[Any, ...], named: dict[str, Any]) -> list[Any]:
        n = len(self.arg_names)
        sig = ", ".join(self.arg_names)
        if len(args) > n:
            raise ArgumentTypeError(f"kernel {self.label}: takes {n} arguments ({sig}), got {len(args)}")
        values = list(args) + [_MISSING] * (n - len(args))
        for key, v in named.items():
            if key not in self.arg_names:
                raise ArgumentTypeError(f"kernel {self.label}: unknown keyword argument '{key}' (arguments: {sig}; "
                                        f"launch options: {', '.join(LAUNCH_KEYWORDS)})")
            i = self.arg_names.index(key)
            if values[i] is not _MISSING:
                raise ArgumentTypeError(f"kernel {self.label}: argument '{key}' given twice")
            values[i] = v
        missing = [self.arg_names[i] for i, v in enumerate(values) if v is _MISSING]
        if missing:
            raise ArgumentTypeError(f"kernel {self.label}: takes {n} arguments ({sig}), got {n - len(missing)}: "
                                    f"missing {', '.join(missing)}")
        return values

    @cached_property
    def _lists(self) -> frozenset[int]:
        """The tensor-list arguments (the same in every specialization: launch.family.family_args)."""
        return frozenset(s.arg for s in self.specs[0].plan.args if s.op == OP_LIST)

    def _view(self, i: int, value: Any, d: Driver) -> View | None:
        if i in self._lists:  # read whole before dispatch: a malformed list is no specialization's to refuse
            return _rt.adapters.list_view(value, d.pointer_device, f"kernel {self.label}",
                                          f"parameter {i} '{self.arg_names[i]}'")
        if value is None or isinstance(value, (int, float, bytes, bytearray, memoryview, str)):
            return None
        try:
            return _rt.adapters.as_view(value, d.pointer_device)
        except _rt.adapters.PRODUCER_ERRORS as e:
            err = _rt.adapters.refusal(e, value, f"kernel {self.label}", f"parameter {i} '{self.arg_names[i]}'")
            raise err from err.__cause__

    def _device(self, values: list[Any], views: list[View | None], d: Driver) -> int:
        ordinal = _rt.adapters.launch_device(f"kernel {self.label}", zip(self.arg_names, views))
        if ordinal is None:
            current = d.current_device()
            ordinal = current if current is not None else 0
        return ordinal

    def _dispatch(self, state: DeviceState, values: list[Any], views: list[View | None]) -> tuple[
            DeviceEntry, list[Any]]:
        reasons: list[tuple[str, KernelpackError]] = []
        for e in state.entries:
            try:
                return e, self._fit(e.label, e.layout, values, views)
            except DescriptorArgumentError:
                raise
            except (ArgumentTypeError, ArgumentValueError) as err:
                if len(self.specs) == 1:
                    raise _no_match(err) from None
                reasons.append((e.label, err))
        for pos in state.missing:
            s = self.specs[pos]
            try:
                self._fit(s.label, s.plan, values, views)
            except DescriptorArgumentError:
                raise
            except (ArgumentTypeError, ArgumentValueError) as err:
                if len(self.specs) == 1:
                    raise _no_match(err) from None
                reasons.append((s.label, err))
                continue
            info = state.info
            if s.index in state.unmet:
                raise NoBinaryForDevice(_unmet_text(s, info, device_properties(info)))
            carried = describe_binaries([(arch, kind == "ptx") for arch, kind in s.src.bins])
            raise NoBinaryForDevice(f"kernel {s.label}: no binary runs on device {info.ordinal} ({info.arch_name}); it "
                              f"carries {carried}")
        self.refuse(reasons, values, views)

    def refuse(self, reasons: list[tuple[str, KernelpackError]], values: list[Any],
               views: list[View | None]) -> NoReturn:
        """No specialization took the arguments: raise the one reason, or each specialization's."""
        if len(reasons) == 1 or (reasons and all(type(r[1]) is ArgumentTypeError for r in reasons)):
            raise _no_match(reasons[0][1]) from None
        detail = "; ".join(f"{label}: {err.message.split(': ', 1)[-1]}" for label, err in reasons)
        raise NoMatchingSpecialization(f"kernel {self.name}: no specialization accepts these arguments ("
                                       f"{self._describe_args(values, views)}); {detail}")

    def _fit(self, kernel: str, plan: Plan, values: list[Any], views: list[View | None]) -> list[Any]:
        return [_rt.checks.check_arg(kernel, s, values[s.arg], views[s.arg]) for s in plan.args]

    def _describe_args(self, values: list[Any], views: list[View | None]) -> str:
        out = []
        for name, v, view in zip(self.arg_names, values, views):
            if isinstance(view, _rt.adapters.ListView):
                out.append(f"{name}: {view.describe()}")
            elif view is not None:
                view = cast("TensorView", view)
                aligned = min(view.ptr & -view.ptr, 256) if view.ptr else 256
                out.append(f"{name}: {view.dtype_name}{list(view.shape)} ({aligned}-byte aligned)")
            elif isinstance(v, int) and not isinstance(v, bool):
                out.append(f"{name} = {v}")
            else:
                out.append(f"{name}: {type(v).__name__}")
        return ", ".join(out)

    def _launch(self, d: Driver, state: DeviceState, entry: DeviceEntry, grid: tuple[int, int, int],
                block: tuple[int, int, int], smem: int, cluster: tuple[int, int, int] | None, stream: int,
                packed: list[Any], flags: tuple[bool, bool] = (False, False)) -> None:
        info = state.info
        where = f"kernel {entry.label} on device {info.ordinal}"
        if flags[1]:
            per_sm = d.max_blocks_per_sm(entry.kernel, info.context, block[0] * block[1] * block[2], smem, where)
            _rt.checks.check_cooperative_grid(grid, block, smem, per_sm, info, entry.label)
        if smem > entry.smem_raised:
            with self._lock:
                if smem > entry.smem_raised:
                    d.set_max_dynamic_smem(entry.kernel, info.ordinal, smem, where)
                    entry.smem_raised = smem
                    self._publish(info.ordinal, state)
        plan = entry.layout
        if plan.derived:
            with self._tmap_lock:
                packed = _rt.pylaunch.encode_descs(d, plan, packed, entry.label, where, self._tmaps)
        saved = d.current_context()
        if saved != info.context:
            d.set_current(info.context)
        if d.dryrun:
            d.note(entry.label)
        try:
            with _rt.pylaunch.staged_lists(d, plan, packed, stream, where) if plan.lists else _as_is(packed) as packed:
                if plan.derived and _rt.pylaunch.scratch_sizes(entry.spec_launch):
                    _rt.pylaunch.launch_with_scratch(d, entry, grid, block, smem, cluster, stream, packed, where,
                                                     flags)
                else:
                    buf, ptrs = _rt.packer.pack(plan, packed, entry.values)
                    d.launch(entry.kernel, grid, block, smem, stream, ptrs, cluster, where, *flags)
                    del buf
        finally:
            if saved and saved != info.context:
                d.set_current(saved)


_as_is = nullcontext  # the arguments of a launch without tensor lists, as they are


def _c_row(e: DeviceEntry) -> Any:
    """The C launcher's row of a device entry: its plan alone until it is loaded (and usable), then its kernel and
    launch facts."""
    f = e.facts
    if f is None or not e.ready or e.error is not None:
        return e.c_plan
    return (e.c_plan, e.kernel, f.fixed_block or (0, 0, 0), f.reqntid or (0, 0, 0), f.max_threads,
            f.cluster or (0, 0, 0), f.spec_cluster or (0, 0, 0), f.static_smem, f.dyn_smem, e.smem_raised,
            tuple(e.values[r] for r in e.roles), e.pdl)


def _link(e: DeviceEntry, specs: Sequence[Specialization]) -> None:
    """A device entry made from the family's dispatch record, given the specialization it stands for."""
    sp = e.spec = specs[e.pos]
    e.plan = sp.layouts[sp.src.layout_of[e.bin_index]]
    e.launch = sp.src.launch_of(e.bin_index)


def device_properties(info: DeviceInfo) -> dict[str, int]:
    """The device-wide properties a requirement or a device-derived parameter reads (kernelpack.launch.device)."""
    return {"sm_count": info.sm_count, "max_dynamic_smem": info.smem_optin}


def _unmet_text(s: Specialization, info: DeviceInfo, props: dict[str, int]) -> str:
    why = "; ".join(f"{n} is {have}, it needs {want}" for n, want, have in
                    dev_model.unmet(s.src.requirements, props))
    return (f"kernel {s.label} is built for devices with {dev_model.requires_text(s.src.requirements)}"
            f"; device {info.ordinal} ({info.arch_name}) does not fit: {why}")


def _no_match(err: KernelpackError) -> KernelpackError:
    """A family's dispatch found no specialization for a value (the C library's KP_ERROR_NO_MATCHING_SPECIALIZATION,
    even for one specialization): the one reason, as a NoMatchingSpecialization. A wrong kind of argument stays an
    ArgumentTypeError (C's prototypes refuse those, or its NULL checks: KP_ERROR_INVALID_ARGUMENT)."""
    if isinstance(err, ArgumentValueError) and not isinstance(err, NoMatchingSpecialization):
        return NoMatchingSpecialization(err.message)
    return err


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()
_bridge_state = {"tried": False}


def _install_torch_bridge() -> None:
    """Let the C launcher read torch tensors (once torch is loaded)."""
    if _bridge_state["tried"]:
        return
    _bridge_state["tried"] = True
    from .fast import install_torch_bridge

    install_torch_bridge()


def slot_summary(slots: tuple[Slot, ...]) -> str:
    return ", ".join(s.describe() for s in slots)


def is_tensor_arg(value: Any) -> bool:
    return (_rt.adapters.is_torch_tensor(value) or hasattr(value, "__cuda_array_interface__")
            or hasattr(value, "__dlpack__"))
