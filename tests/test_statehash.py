"""``World.state_hash`` and canonical snapshot bytes.

The model is ``tests.world_state.world_state`` (every part of the state as plain values):
the hash must be equal exactly when the model says the states are equal, whatever order the
components were registered in; save bytes must be equal for equal states too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecs_engine import Entity, Snapshot, World
from tests.test_determinism import TYPES, Bag, Flag, Link, Pos, Vel, programs, run
from tests.world_state import world_state

EXAMPLES = int(os.environ.get("DETERMINISM_EXAMPLES", "1000"))


def model(world: World) -> Any:
    """The plain-values state (dict order included: iterating a dict is observable)."""
    return world_state(world)


def two_boxes(seed: int = 1) -> tuple[World, list[Entity]]:
    w = World(seed=seed)
    keys = [w.spawn(Pos(x=float(i), y=0.0), Vel()) for i in range(2)]
    return w, keys


def test_every_part_of_the_state_counts() -> None:
    a, _ = two_boxes()
    base = a.state_hash()
    assert len(base) == 32 and int(base, 16) >= 0
    assert two_boxes()[0].state_hash() == base

    b, keys = two_boxes()
    b.get(keys[0], Pos)["y"] = 1e-300  # one bit of one field
    assert b.state_hash() != base
    b.get(keys[0], Pos)["y"] = 0.0
    assert b.state_hash() == base

    c, keys = two_boxes()  # the same rows in another order
    c.remove(keys[0], Pos)
    c.add(keys[0], Pos(x=0.0, y=0.0))
    assert c.state_hash() != base

    d, _ = two_boxes()  # the same live entities, another slot table
    d.despawn(d.spawn(Pos()))
    assert d.state_hash() != base

    e, _ = two_boxes()
    e.resources["camera"] = {"x": 0.0}
    assert e.state_hash() != base
    e.resources["camera"]["x"] = -0.0
    assert e.state_hash() != base

    f, _ = two_boxes()
    f.rng.random()
    assert f.state_hash() != base

    g, _ = two_boxes()
    g.tick += 1
    assert g.state_hash() != base

    h, _ = two_boxes()
    h.group(Pos, Vel)  # same rows, now an owning group
    assert h.state_hash() != base


def test_free_list_order_counts() -> None:
    a, b = World(), World()
    ka, kb = a.spawn_batch(Flag(), count=3), b.spawn_batch(Flag(), count=3)
    a.despawn(ka[0])
    a.despawn(ka[1])
    b.despawn(kb[1])
    b.despawn(kb[0])
    assert sorted(a.slot_table().free) == sorted(b.slot_table().free)
    assert a.state_hash() != b.state_hash()


def test_keys_inside_components_count() -> None:
    a, keys = two_boxes()
    b, _ = two_boxes()
    a.add(keys[0], Link(to=keys[1]))
    b.add(keys[0], Link(to=keys[0]))
    assert a.state_hash() != b.state_hash()


def test_registration_order_and_empty_stores_do_not_count() -> None:
    a, b = World(seed=3), World(seed=3)
    a.register(*TYPES)
    b.register(*reversed(TYPES))
    for w in (a, b):
        w.spawn_batch(Pos(x=np.arange(4.0)), Bag(items=[1, 2, 3]), count=4)
        w.spawn(Vel(dx=2.0), Link())
        w.resources["x"], w.resources["y"] = 1, {"p": 1, "q": 2}
    assert a.state_hash() == b.state_hash()
    assert bytes(a.snapshot().to_bytes()) == bytes(b.snapshot().to_bytes())
    assert a.component_types == b.component_types  # stores are kept in name order
    assert [s.name for s in a.snapshot().stores] == sorted(t.__name__ for t in TYPES)
    c = World(seed=3)  # never registered Flag: an empty store is no state
    for t in (Vel, Bag, Pos, Link):
        c.register(t)
    c.spawn_batch(Pos(x=np.arange(4.0)), Bag(items=[1, 2, 3]), count=4)
    c.spawn(Vel(dx=2.0), Link())
    c.resources.update(x=1, y={"p": 1, "q": 2})
    assert c.state_hash() == a.state_hash()
    c.resources["y"] = {"q": 2, "p": 1}  # dict order is observable: it counts
    assert c.state_hash() != a.state_hash()


def test_save_files_are_canonical(tmp_path: Any) -> None:
    worlds = []
    for order in (TYPES, tuple(reversed(TYPES))):
        w = World(seed=5)
        w.register(*order)
        w.spawn_batch(Pos(x=np.arange(3.0)), Vel(dx=1.0), count=3)
        with w.query(Vel, Pos) as q:  # creates an owning group
            q[Pos]["y"] += 1
        w.group(Bag, Link)
        worlds.append(w)
    paths = [tmp_path / "a.sav", tmp_path / "b.sav"]
    for w, p in zip(worlds, paths, strict=True):
        w.save(p)
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_hash_refuses_open_queries_and_unsavable_resources() -> None:
    w, _ = two_boxes()
    with w.query(Pos) as q:
        assert len(q) == 2
        try:
            w.state_hash()
        except RuntimeError as exc:
            assert "query is open" in str(exc)
        else:
            raise AssertionError("hashing inside a query must fail")
    w.resources["bad"] = object()
    try:
        w.state_hash()
    except TypeError as exc:
        assert "resources['bad']" in str(exc)
    else:
        raise AssertionError("an unsavable resource must be named")


@settings(max_examples=max(20, EXAMPLES // 4), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs, st.integers(0, 2**32 - 1))
def test_hash_equal_exactly_when_states_equal(program: list[Any], seed: int) -> None:
    """States after every prefix of a random program (many are equal: ops that change
    nothing), in two worlds with opposite registration orders: hashes are equal exactly
    when the model states are, and save bytes and loads agree."""
    a, b = World(seed=seed), World(seed=seed)
    a.register(*TYPES)
    b.register(*reversed(TYPES))
    seen: dict[str, Any] = {}
    for i in range(len(program) + 1):
        step = program[i - 1 : i]
        run(a, step)
        run(b, step)
        ha, hb = a.state_hash(), b.state_hash()
        assert ha == hb
        assert bytes(a.snapshot().to_bytes()) == bytes(b.snapshot().to_bytes())
        state = model(a)
        if ha in seen:
            assert seen[ha] == state, "two different states with one hash"
        seen[ha] = state
        assert list(seen.values()).count(state) == 1, "one state with two hashes"
    loaded = World(seed=seed + 1)
    loaded.register(*TYPES)
    loaded.restore(Snapshot.from_bytes(a.snapshot().to_bytes()), source="file")
    assert loaded.state_hash() == a.state_hash()


def test_resources_that_cannot_be_hashed_say_what_to_use() -> None:
    import pytest

    from ecs_engine.savevalues import parse_dtype

    world = World()
    for value, name in (((1, 2), "builtins.tuple"), ({1, 2}, "builtins.set"),
                        (np.longdouble(1.5), "numpy.longdouble")):
        world.resources["arena"] = value
        with pytest.raises(TypeError, match=rf"resources\['arena'\]: a {name} cannot be saved "
                                            rf"or state-hashed .*a tuple or set: use a list"):
            world.state_hash()
    for text in ("<f16", "<c32"):
        with pytest.raises(ValueError, match="long doubles are not portable"):
            parse_dtype(text, "ndarray ext")


def test_a_tick_outside_int64_is_refused_by_save_and_hash(tmp_path: Any) -> None:
    """A tick of 2**63 saved fine and then failed its own load (and the hash raised a
    struct.error); a float tick was truncated."""
    import pytest

    world = World()
    world.spawn()
    for tick, error, message in ((2**63, ValueError, "outside int64"),
                                 (-(2**63) - 1, ValueError, "outside int64"),
                                 (1.5, TypeError, "must be an int")):
        world.tick = tick  # type: ignore[assignment]
        for call in (world.state_hash, lambda: world.save(tmp_path / "t.sav"),
                     lambda: world.snapshot().to_bytes()):
            with pytest.raises(error, match=message):
                call()
    world.tick = np.int64(2**63 - 1)  # type: ignore[assignment]
    world.save(tmp_path / "t.sav")
    other = World()
    other.load(tmp_path / "t.sav")
    assert other.tick == 2**63 - 1 and other.state_hash() == world.state_hash()


def test_resources_sharing_one_object_are_refused_by_hashes_and_saves(tmp_path: Path) -> None:
    """Two names for one list are one list in the world but two in a file, and a hash of
    the values cannot tell them from two lists: refused, naming both places."""
    world = World(seed=1)
    shared: list[int] = []
    world.resources["spawned"] = shared
    world.resources["log"] = {"entries": shared}
    for call in (world.state_hash, lambda: world.save(tmp_path / "a.sav"),
                 lambda: world.snapshot().to_bytes()):
        with pytest.raises(ValueError, match=r"resources\['log'\]\['entries'\] is the same "
                                             r"list object as resources\['spawned'\]"):
            call()
    assert not (tmp_path / "a.sav").exists()
    world.resources["log"] = {"entries": list(shared)}  # a copy: fine
    world.save(tmp_path / "a.sav")
    twin = World(seed=1)
    twin.resources["spawned"], twin.resources["log"] = [], {"entries": []}
    assert world.state_hash() == twin.state_hash()
