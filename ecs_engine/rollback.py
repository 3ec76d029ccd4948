"""GGPO-style rollback: keep the last frames in recycled buffers, restore one and
re-simulate to the present with corrected inputs; and a sync test built on it.

A *frame* is the world's state at the start of a tick (``world.tick == frame``) plus the
input that tick ran with. :class:`Rollback` records a frame before every tick it runs, into
one of ``frames`` buffer sets that are reused round-robin: recording copies only the stores
(and chunks of stores) whose version differs from what the reused buffer already holds, so
static level geometry costs nothing per tick and nothing is allocated once the buffers fit.

:class:`SyncTest` checks a simulation is deterministic: every tick it rewinds ``rewind``
frames, re-simulates them with the same inputs and compares state hashes; on a mismatch it
raises :class:`DesyncError` naming the tick, component and field that differ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ecs_engine.entity import KEY_DTYPE, key_str
from ecs_engine.memcopy import as_bytes
from ecs_engine.plaincopy import copy_resources
from ecs_engine.slotmap import SlotTable
from ecs_engine.snapshot import (
    RestoreCallbackError,
    RestoreEvent,
    Snapshot,
    StoreSnapshot,
    keeps_index,
    restore_snapshot,
    run_restore_callbacks,
)
from ecs_engine.statehash import canonical_value
from ecs_engine.storage import CHUNK_ROWS, ComponentStore, row_word_dtype

if TYPE_CHECKING:
    from ecs_engine.world import World

__all__ = ["DesyncError", "Difference", "InputFn", "Rollback", "SyncTest", "first_difference",
           "set_input_resource"]

InputFn = Callable[["World", Any], None]
"""``apply_input(world, inputs)``: make ``inputs`` what the next tick reads."""


def set_input_resource(world: World, inputs: Any) -> None:
    """The default ``apply_input``: ``world.resources["input"]`` = a deep copy of
    ``inputs`` (a system changing the resource cannot change a recorded frame); ``None``
    keeps the resource as it is."""
    if inputs is not None:
        world.resources["input"] = copy_resources(inputs)


def _grow(buf: np.ndarray, size: int) -> np.ndarray:
    """``buf`` if it holds ``size`` items, else a new array of the same dtype (doubled)."""
    if len(buf) >= size:
        return buf
    return np.empty(max(size, 2 * len(buf), 16), buf.dtype)


def _frozen_view(arr: np.ndarray) -> np.ndarray:
    view = arr.view()
    view.flags.writeable = False
    return view


class _StoreBuffer:
    """Recycled copy of one store: rows, keys, slot index and the versions they hold.

    A frame reuses its buffers ``frames`` ticks later, so recording is mostly checks:
    a store whose versions still match the buffer costs nothing, and one whose values
    changed but not its rows re-copies the changed chunks. The StoreSnapshot over the
    buffers is made only when a restore asks for it (most frames are never restored)."""

    def __init__(self, store: ComponentStore, ctype: type) -> None:
        self.ctype = ctype
        self.dtype = store.data.dtype
        self.data = np.empty(0, store.data.dtype)
        self.entities = np.empty(0, KEY_DTYPE)
        self.sparse = np.empty(0, np.int32)
        self._data_bytes = as_bytes(self.data)  # ``data`` as one flat byte view
        # Read-only views of the whole buffers: their slices are read-only for free.
        self._frozen = {"data": _frozen_view(self.data),
                        "entities": _frozen_view(self.entities),
                        "sparse": _frozen_view(self.sparse)}
        self.n = 0
        self._words = _frozen_view(self.data.view(row_word_dtype(self.data.dtype)))
        self._data_words = self.data.view(row_word_dtype(self.data.dtype))  # writable
        self.has_sparse = False
        self.sparse_len = 0
        self.group_size = 0
        self._made: StoreSnapshot | None = None  # None: not made since the last copy
        # The frozen views a StoreSnapshot of the current rows is made of (None: stale).
        self._views: tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray | None,
                           np.ndarray] | None = None
        self.data_version = -1
        self.layout_version = -1
        self.chunk_versions = np.zeros(0, np.int64)

    def _reserve(self, name: str, size: int) -> None:
        """Room for ``size`` items in buffer ``name`` (a new buffer, contents undefined,
        when the old one is too small)."""
        buf = getattr(self, name)
        grown = _grow(buf, size)
        if grown is not buf:
            setattr(self, name, grown)
            self._frozen[name] = _frozen_view(grown)

    def record(self, store: ComponentStore, high_water: int, group_size: int) -> None:
        """Copy what changed since the buffer last recorded ``store`` (the caller has
        checked that something did)."""
        self._made = None
        self.group_size = group_size
        n = store.n
        if self.layout_version != store.layout_version:
            # (keys and the index are plain integer arrays: a slice assignment is a memcpy)
            if len(self.entities) < n:
                self._reserve("entities", n)
            self.entities[:n] = store.entities[:n]
            self.has_sparse = keeps_index(n, high_water)  # as take_snapshot does
            if self.has_sparse:
                if len(self.sparse) < high_water:
                    self._reserve("sparse", high_water)
                self.sparse[:high_water] = store.sparse[:high_water]
                self.sparse_len = high_water
            same_rows = False
        else:
            same_rows = self.n == n
        if self.data_version != store.data_version:
            if len(self.data) < n:
                self._reserve("data", n)
                self._data_bytes = as_bytes(self.data)
                self._data_words = self.data.view(row_word_dtype(self.data.dtype))
                self._words = _frozen_view(self._data_words)
                same_rows = False
            end = n * self.dtype.itemsize
            if n <= CHUNK_ROWS:  # one chunk (most stores): one memcpy, no version checks
                if n:
                    # Rows as plain words (the store's own view of them): numpy copies
                    # structured rows field by field (~20x slower).
                    self._data_words[:n] = store.row_words[:n]
                mine = self.chunk_versions
                if len(mine) == 1:  # (in place: a StoreSnapshot over this buffer is
                    mine[0] = store.chunk_marks[0]  # remade after every record anyway)
                else:
                    self.chunk_versions = store.chunk_versions[:1].copy()
            else:
                count = -(-n // CHUNK_ROWS)
                live = store.chunk_versions[:count]
                src, dst = store.data.view(np.uint8), self._data_bytes
                step = CHUNK_ROWS * self.dtype.itemsize
                mine = self.chunk_versions
                for i in range(count):
                    if same_rows and i < len(mine) and mine[i] == live[i]:
                        continue  # this chunk already holds that state
                    stop = min(end, (i + 1) * step)
                    dst[i * step : stop] = src[i * step : stop]
                self.chunk_versions = live.copy()
            self.data_version = store.data_version
        if not same_rows:
            self._views = None
        self.n = n
        self.layout_version = store.layout_version

    def snapshot(self, name: str) -> StoreSnapshot:
        """The buffer as a StoreSnapshot (the same object again while nothing changed)."""
        made = self._made
        if made is not None:
            return made
        n = self.n
        if self._views is None:
            count = max(1, -(-n // CHUNK_ROWS))
            frozen = self._frozen
            data = frozen["data"]
            self._views = (
                tuple(data[i * CHUNK_ROWS : min(n, (i + 1) * CHUNK_ROWS)] for i in range(count)),
                frozen["entities"][:n],
                frozen["sparse"][: self.sparse_len] if self.has_sparse else None,
                self._words[:n])  # every row at once: a restore copies it in one memcpy
        chunks, entities, sparse, rows = self._views
        self._made = StoreSnapshot(name, chunks, entities, self.group_size, self.data_version,
                                   self.layout_version, self.ctype, sparse,
                                   self.chunk_versions, rows)
        return self._made


class _Frame:
    """One recorded frame in recycled buffers. ``frame`` is -1 while it holds nothing.

    Recording copies the state into the buffers; the :class:`Snapshot` over them is
    made the first time it is asked for (a restore, a sync test's comparison)."""

    def __init__(self) -> None:
        self.frame = -1
        self.inputs: Any = None
        self.stores: dict[str, _StoreBuffer] = {}
        # (store, buffer, name) per store (see _match), and the stores they were
        # matched against
        self._pairs: list[tuple[ComponentStore, _StoreBuffer, str]] = []
        self._order: tuple[ComponentStore, ...] = ()
        self.generations = np.empty(0, np.uint32)
        self.alive = np.empty(0, np.bool_)
        self.free = np.empty(0, np.int64)
        self.slot_version = -1
        self._slot_counts = (-1, 0)  # (high water, free) the slot buffers hold; -1: none
        self._slots: SlotTable | None = None  # their SlotTable, made when asked
        self._snapshot: Snapshot | None = None
        self._parts: dict[str, Any] = {}  # the snapshot's fields besides stores and slots
        self.jumps = -1  # world._jumps when recorded: a later restore or load voids it

    @property
    def snapshot(self) -> Snapshot | None:
        """The recorded state (None while nothing is recorded)."""
        if self._snapshot is None and self._parts:
            self._snapshot = Snapshot(
                stores=tuple(buf.snapshot(name) for _, buf, name in self._pairs),
                slots=self.slots, **self._parts)
        return self._snapshot

    @property
    def slots(self) -> SlotTable:
        """The recorded slot table (read-only views of the buffers)."""
        if self._slots is None:
            hw, n_free = self._slot_counts
            self._slots = SlotTable(_frozen_view(self.generations[:hw]),
                                    _frozen_view(self.alive[:hw]),
                                    _frozen_view(self.free[:n_free]))
        return self._slots

    def forget(self) -> None:
        self.frame = -1
        self._snapshot = None
        self._parts = {}

    def _match(self, world: World) -> list[tuple[ComponentStore, _StoreBuffer, str]]:
        """Each store of the world with its buffer (made on first sight) and its name, in
        the world's store order; the same list while the stores stay."""
        stores = tuple(world._stores.values())
        if stores == self._order:  # (a tuple compare is by identity first: cheap)
            return self._pairs
        bufs = self.stores
        pairs = []
        for ctype, store in world._stores.items():
            name = store.schema.name
            buf = bufs.get(name)
            if buf is None or buf.ctype is not ctype:
                buf = bufs[name] = _StoreBuffer(store, ctype)
            pairs.append((store, buf, name))
        self._pairs = pairs
        self._order = stores
        return pairs

    def record(self, world: World, inputs: Any) -> None:
        slots = world._slots
        hw = slots.high_water
        if self.slot_version != slots.version or self._slot_counts[0] < 0:
            self.generations = _grow(self.generations, hw)
            self.alive = _grow(self.alive, hw)
            self.free = _grow(self.free, slots.n_free)
            self.generations[:hw] = slots.generations[:hw]
            self.alive[:hw] = slots.alive[:hw]
            self.free[: slots.n_free] = slots.free[: slots.n_free]
            self._slot_counts = (hw, slots.n_free)
            self._slots = None
            self.slot_version = slots.version
        groups = world._groups
        pairs = self._match(world)
        for i, (store, buf, name) in enumerate(pairs):
            owner = store.owner
            # a store counts as grouped if its owner is one of the world's groups
            group_size = store.group_size if owner is not None and owner in groups else 0
            viewed = store.views_outstanding()
            if viewed or (buf.data_version != store.data_version
                          or buf.layout_version != store.layout_version
                          or buf.group_size != group_size):
                if buf.dtype is not store.data.dtype and buf.dtype != store.data.dtype:
                    buf = self.stores[name] = _StoreBuffer(store, buf.ctype)  # migrated
                    pairs[i] = (store, buf, name)
                buf.dtype = store.data.dtype
                if viewed:  # a kept view may have written any row: copy them all (as
                    store.touch()  # take_snapshot does) ...
                buf.record(store, hw, group_size)
                if viewed:  # ... and may write again before it dies: the versions must
                    store.touch()  # not claim this frame's rows when the buffer is reused
        self._snapshot = None
        self._parts = {
            "groups": tuple(tuple(s.schema.name for s in g.stores) for g in groups),
            "resources": copy_resources(world.resources), "tick": world.tick,
            "rng_state": dict(world.rng.bit_generator.state), "slot_version": slots.version,
            "origin": world._versions}
        self.frame = world.tick
        self.jumps = world._jumps
        # A copy: callers reuse one input dict from frame to frame, and a re-simulation
        # must replay what each frame was given.
        self.inputs = copy_resources(inputs)


class Rollback:
    """The last ``frames`` frames of a world, for GGPO-style rollback.

    ``advance(inputs)`` records the current frame and runs one tick of ``dt`` seconds with
    ``inputs`` (applied by ``apply_input``, default :func:`set_input_resource`);
    ``rollback(to_frame, inputs)`` restores frame ``to_frame`` and re-simulates to the
    present with corrected inputs. While re-simulating, ``world.resimulating`` is True so
    systems with effects outside the state (sounds) can skip them. A ``History`` keeps
    what the world showed: a rollback does not rewrite the snapshots it took of the
    frames re-simulated (rewinding it afterwards shows them as they were predicted).
    """

    def __init__(self, world: World, *, frames: int = 8, dt: float = 1 / 60,
                 apply_input: InputFn = set_input_resource) -> None:
        if frames < 1:
            raise ValueError(f"Rollback frames must be >= 1, got {frames}")
        self.world = world
        self.frames = frames
        self.dt = dt
        self.apply_input = apply_input
        self._ring = [_Frame() for _ in range(frames)]
        self.resimulated = 0  # ticks re-run by rollback() in total

    @property
    def present(self) -> int:
        """The frame the world is at now (``world.tick``)."""
        return self.world.tick

    @property
    def oldest(self) -> int:
        """The oldest frame ``rollback`` can go back to (``present`` if none is held)."""
        jumps = self.world._jumps
        held = [f.frame for f in self._ring
                if 0 <= f.frame < self.present and f.jumps == jumps]
        return min(held) if held else self.present

    def _slot(self, frame: int) -> _Frame:
        return self._ring[frame % self.frames]

    def held(self, frame: int) -> bool:
        """True if ``frame`` (before the present) can be rolled back to."""
        slot = self._slot(frame)
        # A restore or load since it was recorded (world.restore, world.load, a History
        # rewind) puts the world on another path, also at a tick whose frames are held.
        return (0 <= frame < self.present and slot.frame == frame
                and slot.jumps == self.world._jumps)

    def inputs(self, frame: int) -> Any:
        """The input recorded for ``frame`` (a copy)."""
        if not self.held(frame):
            raise KeyError(f"frame {frame} is not held (held: {self.oldest}..{self.present - 1})")
        return copy_resources(self._slot(frame).inputs)

    def clear(self) -> None:
        """Forget every frame (after loading a save, say: the past no longer leads here)."""
        for f in self._ring:
            f.forget()

    def _tick(self, frame: _Frame, inputs: Any) -> None:
        frame.record(self.world, inputs)
        self.apply_input(self.world, inputs)
        self.world.step(self.dt)

    def advance(self, inputs: Any = None) -> None:
        """Record the present frame with ``inputs`` and run one tick with them."""
        tick = self.world.tick
        if not self.held(tick - 1):
            self.clear()  # the world jumped (a load, a rewind): older frames lead elsewhere
        self._tick(self._slot(tick), inputs)

    def restore(self, frame: int) -> None:
        """Bring the world back to a held frame (no re-simulation); later frames are
        dropped."""
        if not self.held(frame):
            raise ValueError(f"rollback: frame {frame} is not held; frames "
                             f"{self.oldest}..{self.present - 1} are (the last {self.frames})")
        snap = self._slot(frame).snapshot
        assert snap is not None
        # Not world.restore: the snapshot lives in recycled buffers, so it must never become
        # the world's "previous snapshot" that later snapshots share arrays with ...
        restored = restore_snapshot(self.world, snap, "rollback")
        for f in self._ring:
            if f.frame > frame:
                f.frame = -1
        # ... nor be handed to callbacks, which may keep it: they get the state as a
        # snapshot of the world taken when first asked (as after a load; nothing unless
        # asked), not the buffers the next frames overwrite.
        event = RestoreEvent(None, restored.source, restored.previous_tick, self.world)
        run_restore_callbacks(self.world, event)  # last: a failing callback is reported
        # after the rollback's own bookkeeping is done

    def rollback(self, to_frame: int,
                 inputs: Sequence[Any] | Mapping[int, Any] | None = None) -> None:
        """Restore frame ``to_frame`` and re-simulate to the present.

        ``inputs``: the corrected input of every frame ``to_frame .. present - 1`` (a
        sequence of that length), or ``{frame: input}`` for the frames that changed (the
        others keep their recorded input), or None to re-run the recorded inputs.
        """
        present = self.present
        if to_frame > present:
            raise ValueError(f"rollback: frame {to_frame} is in the future; the present is "
                             f"frame {present} (held: {self.oldest}..{present - 1})")
        count = present - to_frame
        if isinstance(inputs, Mapping):
            bad = [f for f in inputs if not to_frame <= f < present]
            if bad:
                raise ValueError(f"rollback: inputs for frames {bad} outside "
                                 f"{to_frame}..{present - 1}")
            plan = [inputs.get(f, self._slot(f).inputs) if self.held(f) else inputs.get(f)
                    for f in range(to_frame, present)]
        elif inputs is None:
            plan = [self._slot(f).inputs if self.held(f) else None
                    for f in range(to_frame, present)]
        else:
            plan = list(inputs)
            if len(plan) != count:
                raise ValueError(f"rollback: {len(plan)} inputs for the {count} frames "
                                 f"{to_frame}..{present - 1}")
        if count == 0:
            return
        gaps = [f for f in range(to_frame, present) if not self.held(f)]
        # Frames missing only before the oldest held one: to_frame is just too old, and
        # restore says which frames are held. A gap after a held frame means the world
        # ticked outside advance.
        if gaps and gaps != list(range(to_frame, to_frame + len(gaps))):
            raise ValueError(f"rollback: frames {gaps[0]}..{gaps[-1]} were not recorded "
                             f"(the world ticked outside Rollback.advance); held frames "
                             f"must reach the present")
        world = self.world
        jumps = world._jumps
        failed: RestoreCallbackError | None = None
        try:
            self.restore(to_frame)
        except RestoreCallbackError as exc:  # the restore stands: finish the rollback
            failed = exc
        if world.tick != to_frame or world._jumps != jumps:
            # A callback stepped, restored or loaded: re-simulating from there would run
            # the frames' inputs on other ticks (and record a path that never happened).
            raise RuntimeError(
                f"rollback: an on_restore callback moved the world (to tick {world.tick}) "
                f"while rolling back to frame {to_frame}; callbacks may rebuild derived "
                f"state but not step, restore or load. Nothing was re-simulated: the "
                f"world is where the callback left it") from failed
        self._resimulate(plan)
        if failed is not None:
            failed.add_note(f"raised by on_restore callbacks after rolling back to frame "
                            f"{to_frame}; the re-simulation to frame {present} ran after it")
            raise failed

    def _resimulate(self, plan: list[Any]) -> None:
        world = self.world
        was = world.resimulating
        world.resimulating = True
        try:
            for inputs in plan:
                self._tick(self._slot(world.tick), inputs)
                self.resimulated += 1
        finally:
            world.resimulating = was


@dataclass(frozen=True)
class Difference:
    """Where two states first differ: ``component`` (or ``"slot table"``, ``"resources"``,
    ``"rng"``, ``"groups"``, ``"tick"``) and ``field``, with a readable ``detail``."""

    component: str
    field: str
    detail: str


class DesyncError(AssertionError):
    """A re-simulation did not reproduce the state: the simulation is not deterministic."""

    def __init__(self, tick: int, difference: Difference, frames: tuple[int, int]) -> None:
        self.tick = tick
        self.component = difference.component
        self.field = difference.field
        self.detail = difference.detail
        self.frames = frames
        super().__init__(
            f"sync test: desync at tick {tick}: {difference.component}.{difference.field} "
            f"differs after re-simulating frames {frames[0]}..{frames[1]} with the same "
            f"inputs ({difference.detail})")


def _field_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rows where two equal-length field columns differ bitwise."""
    n = len(a)
    if n == 0:
        return np.zeros(0, np.int64)
    ab = np.ascontiguousarray(a).view(np.uint8).reshape(n, -1)
    bb = np.ascontiguousarray(b).view(np.uint8).reshape(n, -1)
    return np.flatnonzero((ab != bb).any(axis=1))


def first_difference(world: World, snap: Snapshot) -> Difference | None:
    """The first part in which ``world`` differs from ``snap`` (None if none does): slot
    table, then stores by name (keys, then fields), groups, resources, rng, tick."""
    table = snap.slots
    slots = world._slots
    hw = slots.high_water
    for label, live, saved in (("generations", slots.generations[:hw], table.generations),
                               ("alive", slots.alive[:hw], table.alive),
                               ("free list", slots.free[: slots.n_free], table.free)):
        if len(live) != len(saved) or not np.array_equal(live, saved):
            return Difference("slot table", label, f"{len(saved)} entries first run, "
                              f"{len(live)} re-run")
    saved_stores = {s.name: s for s in snap.stores if s.n}
    live_stores = {s.schema.name: s for s in world._stores.values() if s.n}
    for name in sorted(saved_stores.keys() | live_stores.keys()):
        s, store = saved_stores.get(name), live_stores.get(name)
        if s is None or store is None or s.n != store.n:
            return Difference(name, "entities", f"{s.n if s else 0} rows first run, "
                              f"{store.n if store else 0} re-run")
        keys = store.entities[: store.n]
        rows = _field_rows(keys, s.entities)
        if len(rows):
            r = int(rows[0])
            return Difference(name, "entities", f"row {r}: {key_str(int(s.entities[r]))} "
                              f"first run, {key_str(int(keys[r]))} re-run")
        data = s.data
        current = store.data[: store.n]
        for fname in current.dtype.names or ():
            rows = _field_rows(current[fname], data[fname])
            if len(rows):
                r = int(rows[0])
                return Difference(name, fname, f"{len(rows)} rows differ; first row {r} "
                                  f"({key_str(int(keys[r]))}): {data[fname][r]!r} first run, "
                                  f"{current[fname][r]!r} re-run")
    groups = tuple(tuple(st.schema.name for st in g.stores) for g in world._groups)
    sizes = tuple(g.size for g in world._groups)
    saved_sizes = tuple(saved_stores[g[0]].group_size if g[0] in saved_stores else 0
                        for g in snap.groups)
    if groups != snap.groups or sizes != saved_sizes:
        return Difference("groups", "members", f"{snap.groups} first run, {groups} re-run")
    saved_res, live_res = snap.resources, world.resources
    for key in list(dict.fromkeys([*saved_res, *live_res])):
        a = canonical_value(saved_res.get(key), "resources")
        b = canonical_value(live_res.get(key), "resources")
        if a != b or ((key in saved_res) != (key in live_res)):
            return Difference("resources", key, f"{saved_res.get(key)!r} first run, "
                              f"{live_res.get(key)!r} re-run")
    if list(saved_res) != list(live_res):
        return Difference("resources", "order", f"{list(saved_res)} first run, "
                          f"{list(live_res)} re-run")
    if canonical_value(world.rng.bit_generator.state, "rng") != canonical_value(snap.rng_state,
                                                                               "rng"):
        return Difference("rng", "state", "the rng was drawn from a different number of times")
    if world.tick != snap.tick:
        return Difference("tick", "tick", f"{snap.tick} first run, {world.tick} re-run")
    return None


class SyncTest:
    """Run a world tick by tick, checking every tick that re-simulating the last
    ``rewind`` frames with the same inputs reproduces the state hash exactly.

    ``step(inputs)`` runs one tick (like :meth:`Rollback.advance`), then rewinds ``rewind``
    frames, re-simulates them and compares hashes; a mismatch raises :class:`DesyncError`
    naming the tick, component and field. Catches systems that read anything outside the
    world's state: a global rng, the clock, a counter in a closure, state kept between
    ticks outside ``world.resources``. It cannot catch what differs only between
    processes: the iteration order of a set of strings (string hashing is seeded per
    process; ``PYTHONHASHSEED``) or of objects hashed by address is the same in a first
    run and its re-run. Sort such sets, or compare ``world.state_hash()`` across runs.
    """

    def __init__(self, world: World, *, rewind: int = 2, dt: float = 1 / 60,
                 apply_input: InputFn = set_input_resource) -> None:
        if rewind < 1:
            raise ValueError(f"SyncTest rewind must be >= 1, got {rewind}")
        self.world = world
        self.rewind = rewind
        self.rollback = Rollback(world, frames=rewind, dt=dt, apply_input=apply_input)
        self._first_run = _Frame()
        self.checked = 0  # ticks whose re-simulation was compared

    def step(self, inputs: Any = None) -> str:
        """One tick, then the check. Returns the state hash after the tick."""
        rb = self.rollback
        rb.advance(inputs)
        world = self.world
        expected = world.state_hash()
        start = world.tick - self.rewind
        if not rb.held(start):
            return expected  # the first ticks: not enough history yet
        self._first_run.record(world, None)
        rb.rollback(start)
        got = world.state_hash()
        self.checked += 1
        if got != expected:
            snap = self._first_run.snapshot
            assert snap is not None
            diff = first_difference(world, snap) or Difference(
                "state", "hash", f"hashes {expected} first run, {got} re-run")
            raise DesyncError(world.tick, diff, (start, world.tick - 1))
        return got
