"""Blueprints: extract, bytes/files in the save format, instantiate with remapped keys."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import xxhash
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ecs_engine import (
    NULL,
    Blueprint,
    ChildOf,
    DanglingRef,
    Entity,
    SaveFileError,
    SchemaChangeWarning,
    Snapshot,
    StoreSnapshot,
    World,
    component,
    field,
    schema_of,
)
from ecs_engine.blueprint import BLUEPRINT_MARKER
from ecs_engine.entity import KEY_DTYPE, make_key


@component(name="BPos")
class Pos:
    x: np.float32 = 0.0
    y: np.float32 = 0.0


@component(name="BLink")
class Link:
    target: Entity = NULL
    others: field(Entity, shape=2)  # type: ignore[valid-type]


@component(name="BTag")
class Tag: ...


POS_DTYPE = schema_of(Pos).dtype


def fresh() -> World:
    w = World()
    w.register(Pos, Link, Tag)
    return w


def room(w: World) -> tuple[Entity, Entity, Entity, Entity]:
    """A room with a table and a lamp (a child of the table); the lamp points at a door
    outside the room."""
    door = w.spawn(Pos(x=-1))
    r = w.spawn(Pos(x=10, y=1), Tag())
    table = w.spawn(Pos(x=11), ChildOf(parent=r), Link(target=r))
    lamp = w.spawn(Pos(x=12), ChildOf(parent=table), Link(target=door, others=[r, table]))
    return door, r, table, lamp


def world_fingerprint(w: World) -> tuple[object, ...]:
    table = w.slot_table()
    stores = tuple((t.__name__, w.store(t).entities[: w.store(t).n].tobytes(),
                    w.store(t).data[: w.store(t).n].tobytes()) for t in w.component_types)
    return (table.generations.tobytes(), table.alive.tobytes(), table.free.tobytes(), stores)


def test_extract_and_instantiate_remap_references_and_report_dangling_ones() -> None:
    w = fresh()
    door, r, table, lamp = room(w)
    bp = w.extract([r])
    assert bp.keys.tolist() == [r, table, lamp] and len(bp) == 3
    inst = w.instantiate(bp)
    r2, table2, lamp2 = inst.keys.tolist()
    assert not {r2, table2, lamp2} & {r, table, lamp}
    assert inst.map(r) == r2 and inst.map(np.array([lamp, door], np.uint64)).tolist() == [lamp2, 0]
    assert w.get(table2, Link)["target"] == r2
    assert w.get(lamp2, Link)["target"] == NULL  # the door is outside the room
    assert w.get(lamp2, Link)["others"].tolist() == [r2, table2]
    assert inst.dangling == [DanglingRef("BLink", "target", door)]
    assert w.parent(table2) == r2 and w.parent(lamp2) == table2 and w.parent(r2) == NULL
    assert w.has(r2, Tag) and float(w.get(lamp2, Pos)["x"]) == 12
    assert w.descendants(r).tolist() == [table, lamp]  # the original is untouched
    again = w.instantiate(bp)
    assert not set(again.keys.tolist()) & set(inst.keys.tolist())


def test_instantiate_under_a_parent_and_despawn_it_with_the_parent() -> None:
    w = fresh()
    door, r, table, _ = room(w)
    ship = w.spawn(Pos())
    deck = w.spawn(ChildOf(parent=ship))
    inst = w.instantiate(w.extract([table]), parent=deck)  # a subtree: the table and lamp
    table2, lamp2 = inst.keys.tolist()
    assert w.parent(table2) == deck and w.children(deck).tolist() == [table2]
    assert int(w.get(table2, ChildOf)["depth"]) == 2 and int(w.get(lamp2, ChildOf)["depth"]) == 3
    assert w.get(table2, Link)["target"] == NULL  # the room was not extracted
    assert inst.dangling == [DanglingRef("BLink", "target", r),
                             DanglingRef("BLink", "target", door),
                             DanglingRef("BLink", "others", r)]
    assert w.get(lamp2, Link)["others"].tolist() == [NULL, table2]
    w.despawn(ship)
    assert not w.is_alive(table2) and not w.is_alive(lamp2) and w.is_alive(table)


def test_extract_without_descendants_and_entities_without_components() -> None:
    w = fresh()
    _, r, table, lamp = room(w)
    empty = w.spawn()
    bp = w.extract([table, empty], descendants=False)
    assert bp.keys.tolist() == [table, empty]
    assert "ChildOf" not in bp.components  # its parent stayed behind
    inst = w.instantiate(bp)
    assert len(inst.keys) == 2 and w.components_of(inst.keys[1]) == ()
    assert w.parent(inst.keys[0]) == NULL
    assert len(w.instantiate(w.extract([])).keys) == 0
    del r, lamp


def test_bytes_and_files_round_trip(tmp_path: Path) -> None:
    w = fresh()
    _, r, _, _ = room(w)
    bp = w.extract([r])
    data = bp.to_bytes()
    assert bytes(data) == bytes(w.extract([r]).to_bytes())  # deterministic
    back = Blueprint.from_bytes(data)
    assert back.keys.tolist() == bp.keys.tolist()
    assert sorted(back.components) == sorted(bp.components)  # files list them by name
    bp.save(tmp_path / "room.bp")
    loaded = Blueprint.load(tmp_path / "room.bp")
    other = fresh()  # another world (another session)
    other.spawn_batch(count=5)
    inst = other.instantiate(loaded)
    r2, table2, lamp2 = inst.keys.tolist()
    assert other.children(r2).tolist() == [table2] and other.parent(lamp2) == table2
    assert other.get(table2, Link)["target"] == r2
    assert [p.name for p in tmp_path.iterdir()] == ["room.bp"]


def test_blueprints_and_world_saves_are_not_confused(tmp_path: Path) -> None:
    w = fresh()
    room(w)
    with pytest.raises(SaveFileError, match="not a blueprint"):
        Blueprint.from_bytes(w.snapshot().to_bytes())
    w.extract(w.entities()).save(tmp_path / "all.bp")
    with pytest.raises(SaveFileError, match=r"all\.bp: this is a blueprint"):
        w.load(tmp_path / "all.bp")
    # A world without the blueprint's types hears the same, not "register Room first".
    with pytest.raises(SaveFileError, match=r"all\.bp: this is a blueprint"):
        World().load(tmp_path / "all.bp")
    (tmp_path / "junk.bp").write_bytes(b"GIF89a")
    with pytest.raises(SaveFileError, match=r"junk\.bp: not an ecs-engine save file"):
        Blueprint.load(tmp_path / "junk.bp")


def test_instantiate_is_all_or_nothing() -> None:
    w = fresh()
    _, r, _, _ = room(w)
    bp = w.extract([r])
    ghost = w.spawn()
    w.despawn(ghost)
    before = world_fingerprint(w)
    with pytest.raises(KeyError, match="instantiate"):
        w.instantiate(bp, parent=ghost)
    assert world_fingerprint(w) == before

    @component(name="BUnknown")
    class Unknown:
        v: np.int32 = 0

    src = World()
    src.spawn(Unknown(v=1), Pos())
    data = src.extract(src.entities()).to_bytes()
    with pytest.raises(SaveFileError, match="unknown component 'BUnknown'"):
        w.instantiate(Blueprint.from_bytes(data))
    assert world_fingerprint(w) == before


def test_schema_migration_applies_to_blueprints() -> None:
    @component(name="Gauge")
    class OldGauge:
        level: np.int16 = 0
        dropped: np.uint8 = 1

    src = World()
    src.spawn(OldGauge(level=7))
    data = src.extract(src.entities()).to_bytes()

    @component(name="Gauge")
    class NewGauge:
        level: np.int32 = 0  # widened
        cap: np.int32 = 100  # added

    w = World()
    w.register(NewGauge)
    with pytest.warns(SchemaChangeWarning, match="dropped"):
        inst = w.instantiate(Blueprint.from_bytes(data))
    rec = w.get(inst.keys[0], NewGauge)
    assert (int(rec["level"]), int(rec["cap"])) == (7, 100)


def test_instantiate_inside_a_query_block_is_deferred() -> None:
    w = fresh()
    _, r, _, _ = room(w)
    bp = w.extract([r])
    with w.query(Pos):
        inst = w.instantiate(bp, parent=r)
        assert all(w.is_alive(k) for k in inst.keys)  # keys exist at once ...
        assert not w.has(inst.keys[0], Pos)  # ... components arrive at the end of the block
    assert w.has(inst.keys[0], Pos) and w.parent(inst.keys[0]) == r
    with pytest.raises(RuntimeError, match="query is open"), w.query(Pos):
        w.extract([r])


def test_groups_stay_aligned_after_instantiate() -> None:
    w = fresh()
    w.group(Pos, Link)
    _, r, _, _ = room(w)
    inst = w.instantiate(w.extract([r]))
    with w.query(Pos, Link) as q:
        assert q.aligned and set(inst.keys[1:].tolist()) <= set(q.entities.tolist())


def _blueprint(stores: list[StoreSnapshot], groups: tuple[tuple[str, ...], ...] = ()) -> bytes:
    snap = Snapshot(tuple(stores), World().slot_table(), groups, {}, 0,
                    dict(np.random.PCG64(0).state))
    return bytes(snap.to_bytes())


def _keys(*slots: int) -> np.ndarray:
    return np.array([make_key(s, 1) for s in slots], KEY_DTYPE)


def _marker(keys: np.ndarray) -> StoreSnapshot:
    return StoreSnapshot(BLUEPRINT_MARKER, (np.zeros(len(keys), np.dtype([])),), keys)


def _child_of(entities: np.ndarray, parents: np.ndarray) -> StoreSnapshot:
    rows: np.ndarray = np.zeros(len(entities), schema_of(ChildOf).dtype)
    rows["parent"] = parents
    return StoreSnapshot("ChildOf", (rows,), entities)


@pytest.mark.parametrize(("stores", "match"), [
    ([_marker(_keys(1, 1))], "listed twice"),
    ([_marker(np.array([0], KEY_DTYPE))], "NULL is listed"),
    ([_marker(_keys(1)), StoreSnapshot("BPos", (np.zeros(1, POS_DTYPE),),
                                       _keys(2))], "not one of the blueprint's entities"),
    ([_marker(_keys(1, 2)), _child_of(_keys(1, 2), _keys(2, 1))], "cycle"),
    ([_marker(_keys(1)), _child_of(_keys(1), _keys(1))], "cycle"),
    ([StoreSnapshot("BPos", (np.zeros(0, POS_DTYPE),), _keys())],
     "not a blueprint"),
])
def test_forged_blueprints_are_rejected(stores: list[StoreSnapshot], match: str) -> None:
    with pytest.raises(SaveFileError, match=match):
        Blueprint.from_bytes(_blueprint(stores))


def test_a_parent_outside_a_forged_blueprint_is_dangling_and_the_child_a_root() -> None:
    data = _blueprint([_marker(_keys(1, 2)), _child_of(_keys(2), _keys(9))])
    w = World()
    inst = w.instantiate(Blueprint.from_bytes(data))
    assert inst.dangling == [DanglingRef("ChildOf", "parent", make_key(9, 1))]
    assert all(w.parent(k) == NULL for k in inst.keys)


# -- fuzzing: the same treatment as save files ---------------------------------------------


def _sample() -> bytes:
    w = fresh()
    _, r, _, _ = room(w)
    return bytes(w.extract([r]).to_bytes())


def _resealed(data: bytearray) -> bytes:
    """Recompute the checksum so the damage reaches the parser and the validation."""
    body = bytes(data[:-9])
    return body + b"\xcf" + xxhash.xxh3_64_intdigest(body).to_bytes(8, "big")


def _check_world(w: World) -> None:
    """Every store holds live entities once; parents are alive with consistent depths."""
    from ecs_engine.hierarchy import check_loaded

    alive = np.sort(w.entities())
    for t in w.component_types:
        store = w.store(t)
        ents = store.entities[: store.n]
        assert np.isin(ents, alive).all() and len(np.unique(ents)) == len(ents)
    store = w.store(ChildOf)
    assert check_loaded(store.entities[: store.n], store.data[: store.n], alive) is None


def test_every_truncation_and_thousands_of_corruptions_are_rejected() -> None:
    data = _sample()
    w = fresh()
    before = world_fingerprint(w)
    for cut in range(len(data)):
        with pytest.raises(SaveFileError):
            Blueprint.from_bytes(data[:cut])
    rng = random.Random(99)
    for _ in range(2000):
        bad = bytearray(data)
        bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        with pytest.raises(SaveFileError):
            w.instantiate(Blueprint.from_bytes(bytes(bad)))
    assert world_fingerprint(w) == before


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", "1500")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.filterwarnings("ignore::ecs_engine.SchemaChangeWarning")
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1,
                max_size=4))
@example(edits=[(135, 99)])  # rows refused by migration after stores were registered
def test_random_mutations_with_a_valid_checksum_never_escape(
    edits: list[tuple[int, int]],
) -> None:
    """Damage anywhere but the checksum, then reseal: parsing and instantiating either
    work (and leave a consistent world) or raise SaveFileError with the world unchanged."""
    data = bytearray(_SAMPLE)
    for pos, value in edits:
        data[24 + pos % (len(data) - 33)] = value  # past the magic, before the checksum
    w = fresh()
    w.spawn_batch(Pos(x=np.arange(3, dtype=np.float32)))
    before = world_fingerprint(w)
    try:
        inst = w.instantiate(Blueprint.from_bytes(_resealed(data)))
    except SaveFileError:
        assert world_fingerprint(w) == before
    else:
        assert all(w.is_alive(k) for k in inst.keys)
        _check_world(w)


_SAMPLE = _sample()
