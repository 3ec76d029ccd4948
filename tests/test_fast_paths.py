"""The per-call fast paths give the same results and errors as the general ones.

Single spawns/despawns and small batches go row by row, keyword components skip numpy
for fitting Python scalars, queries reuse their resolved rows and records their row:
each is checked here against the general path or a plain model.
"""

from __future__ import annotations

import numpy as np
import pytest

from ecs_engine import World, component, field
from ecs_engine.entity import Entity
from ecs_engine.world import SMALL_DESPAWN, SMALL_SPAWN


@component
class Pos:
    x: np.float32 = 0.0
    y: np.float32 = 0.0


@component
class Vel:
    dx: float = 0.0


@component
class Hp:
    hp: np.int16 = 5
    alive: bool = True


@component
class Bag:
    items: np.ndarray = field(np.uint8, shape=3)
    owner: Entity = 0


def values_by_key(world: World) -> dict[int, tuple]:
    """Every entity's component values, by key (independent of row order)."""
    out: dict[int, tuple] = {}
    for key in world.entities().tolist():
        row = []
        for t in (Pos, Vel, Hp, Bag):
            row.append(world.get(key, t).tolist() if world.has(key, t) else None)
        out[key] = tuple(map(str, row))
    return out


def build(world: World, n: int, grouped: bool) -> np.ndarray:
    if grouped:
        world.group(Pos, Vel)
    keys = world.spawn_batch(Pos(x=np.arange(n), y=2), Vel(dx=np.arange(n) * 0.5),
                             Hp(hp=np.arange(n) % 7), Bag(items=[1, 2, 3]))
    return keys


@pytest.mark.parametrize("grouped", [False, True])
def test_small_batches_match_big_batches(grouped: bool) -> None:
    """The same spawns and despawns in batches of SMALL_SPAWN/SMALL_DESPAWN or fewer (row
    by row) and as one big batch end in the same keys, values and free list."""
    small, big = World(), World()
    for world in (small, big):
        build(world, 60, grouped)
    doomed = np.random.default_rng(3).permutation(60)[:2 * SMALL_DESPAWN - 2].tolist()
    assert len(doomed) > SMALL_DESPAWN >= len(doomed) // 2
    keys = small.entities()
    half = len(doomed) // 2
    small.despawn_batch(keys[doomed[:half]])
    small.despawn_batch(keys[doomed[half:]])
    big.despawn_batch(keys[doomed])
    # the free list is a stack: release order must match for the same keys to come back
    assert small.slot_table().free.tolist() == big.slot_table().free.tolist()
    sizes = (1, 2, 3, 4)
    assert max(sizes) <= SMALL_SPAWN < sum(sizes)
    xs = [7.0, 8.0, 9.0, 10.0]
    got_small = [small.spawn_batch(Pos(x=xs[:k], y=1), Vel(), Hp(hp=2), count=k)
                 for k in sizes]
    got_big = big.spawn_batch(Pos(x=[x for k in sizes for x in xs[:k]], y=1), Vel(),
                              Hp(hp=2), count=sum(sizes))
    assert np.concatenate(got_small).tolist() == got_big.tolist()
    assert values_by_key(small) == values_by_key(big)
    for world in (small, big):
        with world.query(Pos, Vel) as q:
            assert sorted(q.entities.tolist()) == sorted(
                k for k in world.entities().tolist() if world.has(k, Vel))
            assert (q[Pos]["x"] * 0.5 == q[Vel]["dx"]).sum() >= 10  # build()'s survivors


def test_small_batch_returns_read_only_keys_and_bag_rows() -> None:
    world = World()
    keys = world.spawn_batch(Bag(items=[[1, 2, 3], [4, 5, 6]], owner=0), count=2)
    assert len(keys) == 2 <= SMALL_SPAWN and not keys.flags.writeable
    assert world.get(keys[1], Bag)["items"].tolist() == [4, 5, 6]
    assert world.spawn_batch(Pos(), count=0).tolist() == []


def test_small_despawn_batch_errors_change_nothing() -> None:
    world = World()
    keys = world.spawn_batch(Pos(x=np.arange(5)))
    world.despawn(keys[4])
    before = values_by_key(world)
    with pytest.raises(KeyError, match="1 of 2 keys are not alive"):
        world.despawn_batch([int(keys[0]), int(keys[4])])
    with pytest.raises(ValueError, match="more than once"):
        world.despawn_batch(keys[[1, 1]])
    with pytest.raises(TypeError):
        world.despawn_batch([1.5])
    assert values_by_key(world) == before and len(world) == 4


def test_single_spawn_and_despawn_keep_groups_aligned() -> None:
    world = World()
    world.group(Pos, Vel)
    keys = [world.spawn(Pos(x=float(i)), Vel(dx=float(i))) if i % 3 else world.spawn(
        Pos(x=float(i))) for i in range(12)]
    for k in keys[::4]:
        world.despawn(k)
    world.spawn(Vel(dx=99.0), Pos(x=99.0))
    with world.query(Pos, Vel) as q:
        assert q.aligned
        assert (q[Pos]["x"] == q[Vel]["dx"]).all()
        assert sorted(q[Pos]["x"].tolist()) == sorted(
            [float(i) for i in range(12) if i % 3 and i % 4] + [99.0])


def test_keyword_fast_path_errors_match_the_general_path() -> None:
    with pytest.raises(ValueError, match="overflows float32"):
        Pos(x=1e39)
    with pytest.raises(ValueError, match="out of range"):
        Hp(hp=40000)
    with pytest.raises(ValueError, match="out of range"):
        Bag(owner=-1)
    with pytest.raises(TypeError, match="has no field 'z'"):
        Pos(**{"z": 1.0})
    assert np.isnan(Pos(x=float("nan")).x) and Pos(x=float("inf")).x == np.inf
    assert Hp(alive=1).alive == np.True_ and Hp(alive=False).alive == np.False_
    p = Pos(x=1.5, y=2)
    assert p.x.dtype == np.float32 and p.y == np.float32(2.0)
    assert Hp(hp=-32768).hp == -32768 and Vel(dx=3).dx == 3.0


def test_record_row_cache_follows_moves_restores_and_death() -> None:
    world = World()
    keys = world.spawn_batch(Pos(x=np.arange(6)))
    rec = world.get(keys[5], Pos)
    assert rec["x"] == 5
    snap = world.snapshot()
    world.despawn(keys[0])  # swap-remove moves keys[5] into row 0
    assert rec["x"] == 5
    rec["x"] = 50.0
    assert world.get(keys[5], Pos)["x"] == 50
    world.restore(snap)  # back to the layout (and value) of the snapshot
    assert rec["x"] == 5
    world.despawn(keys[5])
    with pytest.raises(KeyError, match="despawned"):
        rec["x"]
    world.restore(snap)
    assert rec["x"] == 5


def test_cached_query_plans_see_every_structural_change() -> None:
    world = World()
    a = world.spawn(Pos(x=1.0))
    with world.query(Pos, without=(Vel,)) as q:  # Vel has no store yet
        assert q.entities.tolist() == [a]
    snap = world.snapshot()
    b = world.spawn(Pos(x=2.0), Vel())
    world.add(a, Vel())
    with world.query(Pos, without=(Vel,)) as q:
        assert q.entities.tolist() == []
    world.remove(a, Vel)
    with world.query(Pos, without=(Vel,)) as q:
        assert q.entities.tolist() == [a]
    world.restore(snap)
    assert not world.is_alive(b)
    with world.query(Pos, without=(Vel,)) as q:
        assert q.entities.tolist() == [a]
    with world.query(Pos, Vel) as q:
        assert len(q) == 0
    c = world.spawn(Pos(x=3.0), Vel(dx=1.0))
    with world.query(Pos, Vel) as q:
        assert q.entities.tolist() == [c]
        q[Pos]["x"] += q[Vel]["dx"]
    assert world.get(c, Pos)["x"] == 4.0


@component
class Wide:
    a: float = 0.0
    b: float = 0.0
    c: float = 0.0  # 24-byte rows: three words, not a power of two


def test_record_fast_writes_check_like_the_general_path() -> None:
    world = World()
    key = world.spawn(Hp(), Pos(), Bag())
    rec, pos = world.get(key, Hp), world.get(key, Pos)
    rec["hp"] = 7  # fast: an int that fits
    assert rec["hp"] == 7 and rec.hp == 7
    with pytest.raises(ValueError, match="Hp.hp"):
        rec["hp"] = 40_000  # out of int16 range: the checked path refuses it
    with pytest.raises(ValueError, match="Hp.hp"):
        rec["hp"] = 2.5
    with pytest.raises(ValueError, match="one value expected"):
        rec["hp"] = [1, 2]
    assert rec["hp"] == 7
    pos["x"] = float("nan")  # NaN goes the checked path and is stored
    assert np.isnan(pos["x"])
    pos["y"] = 3  # an int into a float field
    assert pos["y"] == 3.0
    rec["alive"] = False
    assert not rec["alive"]
    with pytest.raises(ValueError, match="Hp.alive"):
        rec["alive"] = 2
    bag = world.get(key, Bag)
    bag["items", 1] = 9  # subarray fields keep their element path
    assert bag["items"].tolist() == [0, 9, 0]
    before = world.store(Hp).data_version
    rec["hp"] = 8
    assert world.store(Hp).data_version != before  # the write is tracked


def test_record_fast_reads_follow_rows_that_move() -> None:
    world = World()
    a, b = world.spawn(Hp(hp=1)), world.spawn(Hp(hp=2))
    rec = world.get(b, Hp)
    assert rec["hp"] == 2
    world.despawn(a)  # b's row moves into the hole
    assert rec["hp"] == 2
    rec["hp"] = 3
    assert world.get(b, Hp)["hp"] == 3
    world.despawn(b)
    with pytest.raises(KeyError):
        rec["hp"]
    with pytest.raises(KeyError):
        rec["hp"] = 1


@pytest.mark.parametrize("n", [3, 64, 65, 1000, 5000])  # 5000: past the bytes compare
@pytest.mark.parametrize("ctype", [Pos, Vel, Wide, Bag])
def test_gathered_write_back_scatters_exactly_the_changed_rows(n: int, ctype: type) -> None:
    """Both change detectors (one compare per row for few rows, word compares for many)
    write back the rows the block changed and keep writes made meanwhile elsewhere."""
    world = World(auto_group=False)  # every two-type query below gathers
    keys = world.spawn_batch(Pos(x=np.arange(n)), Hp(), Vel(dx=1.0), Wide(a=1.0), Bag(),
                             count=n)
    field_name = {Pos: "y", Vel: "dx", Wide: "c", Bag: "owner"}[ctype]
    other = Wide if ctype is not Wide else Vel
    changed = np.arange(0, n, 3)
    meanwhile = int(keys[1])  # row 1 is not changed by the block
    expected = world.get_batch(keys, ctype)[field_name].astype(float)
    with world.query(ctype, other) as q:
        assert not q.aligned
        col = q[ctype]
        col[field_name][changed] = 7
        world.get(meanwhile, ctype)[field_name] = 5  # a write elsewhere during the block
    values = world.get_batch(keys, ctype)[field_name]
    expected[changed] = 7
    expected[1] = 5
    assert values.tolist() == expected.tolist()


def test_gathered_columns_only_read_are_not_written_back() -> None:
    world = World(auto_group=False)
    keys = world.spawn_batch(Pos(), Hp(), Vel(dx=np.arange(10.0)), count=10)
    with world.query(Pos, Vel) as q:
        assert not q.aligned
        q[Pos]
        world.get(int(keys[4]), Pos)["x"] = 9.0
    assert world.get(int(keys[4]), Pos)["x"] == 9.0


def test_single_spawn_and_despawn_rows_follow_the_group_model() -> None:
    """Row by row, a single spawn joining a group lands where an append followed by a
    swap into the group's end puts it, and a single despawn of a member leaves the rows
    a swap to the group's end followed by a swap-remove leaves (rows of 8, 3, 11 and 24
    bytes: every way a row is moved)."""
    rng = np.random.default_rng(7)
    world = World()
    world.group(Pos, Wide)
    types: tuple[type, ...] = (Pos, Wide, Hp, Bag)
    group: tuple[type, ...] = (Pos, Wide)
    model: dict[type, list[int]] = {t: [] for t in types}  # keys in row order
    size = 0  # the group's prefix in Pos and Wide
    values: dict[int, float] = {}
    live: list[int] = []
    for step in range(400):
        if live and rng.random() < 0.45:
            key = live.pop(int(rng.integers(len(live))))
            row = model[Pos].index(key) if key in model[Pos] else -1
            if 0 <= row < size:  # a member: to the group's end first
                for t in group:
                    rows = model[t]
                    rows[row], rows[size - 1] = rows[size - 1], rows[row]
                size -= 1
            for t in types:
                rows = model[t]
                if key in rows:
                    i = rows.index(key)
                    rows[i] = rows[-1]
                    rows.pop()
            world.despawn(key)
            continue
        picked = [t for t in types if rng.random() < 0.6] or [Hp]
        value = float(step)
        comps = {Pos: Pos(x=value, y=1.0), Wide: Wide(a=value, c=2.0),
                 Hp: Hp(hp=step % 100), Bag: Bag(items=[step % 7, 1, 2], owner=3)}
        key = world.spawn(*(comps[t] for t in picked))
        live.append(key)
        values[key] = value
        for t in picked:
            model[t].append(key)
        if Pos in picked and Wide in picked:  # joins the group: swap into its end
            for t in group:
                rows = model[t]
                rows[-1], rows[size] = rows[size], rows[-1]
            size += 1
        for t in types:
            store = world.store(t)
            assert store.entities[: store.n].tolist() == model[t], (step, t)
            assert (store.sparse[np.asarray(model[t], np.int64) & 0xFFFF_FFFF]
                    == np.arange(store.n)).all()
        assert world.store(Pos).group_size == world.store(Wide).group_size == size
    for key in live:
        if world.has(key, Pos):
            assert world.get(key, Pos)["x"] == values[key]
        if world.has(key, Wide):
            assert world.get(key, Wide).tolist() == (values[key], 0.0, 2.0)
        if world.has(key, Bag):
            assert world.get(key, Bag)["owner"] == 3
    assert not any(world.store(t).views_outstanding() for t in types)
