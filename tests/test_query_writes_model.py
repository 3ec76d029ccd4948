"""Random programs of writes through every kind of column a query hands out (run views of
gathered queries, gathered copies, aligned views, ``q.unstructured``), nested blocks over
the same stores, record writes inside blocks, exceptions leaving blocks and structural
changes deferred inside them, checked against a plain-Python model. After every program
step the world must equal the model three ways: live, in a snapshot taken sharing
unchanged chunks with the previous one (a write whose version did not move leaves a
stale shared chunk, seen through the snapshot's bytes loaded into a fresh world), and
after restoring an older snapshot and then the new one (a restore copies only what the
versions say differs). The same program run with run slices turned off (gathered copies
only) must end in the same state hash."""

from __future__ import annotations

import random
from typing import Any
from unittest import mock

import numpy as np
import pytest

from ecs_engine import Snapshot, World
from ecs_engine import query as query_module
from tests.test_query_paths_model import TYPES, A, B, C, P, _value  # the same components

Model = dict[int, dict[type, float]]
SHAPES: list[tuple[tuple[type, ...], tuple[type, ...], tuple[type, ...]]] = [
    ((A, B), (), ()), ((B, A), (), ()), ((A, C), (), ()), ((A, B, C), (), ()),
    ((A,), (), ()), ((B,), (C,), ()), ((A, P), (), ()), ((P, B), (), (B,)),
    ((C, A), (B,), ()), ((P,), (A,), ()), ((A, B), (), (B,))]


def _field(t: type) -> str:
    return "x" if t is P else "v"


def _state(world: World) -> Model:
    out: Model = {int(k): {} for k in world.entities().tolist()}
    for t in TYPES:
        with world.query(t) as q:
            for k, v in zip(q.entities.tolist(), q[t][_field(t)].tolist(), strict=True):
                out[int(k)][t] = v
    return out


def _fresh(snap: Snapshot) -> Model:
    other = World()
    other.register(*TYPES)
    other.restore(Snapshot.from_bytes(snap.to_bytes()))
    return _state(other)


class Boom(Exception):
    pass


def run(seed: int, steps: int) -> str:
    rnd = random.Random(seed)
    world = World(seed=seed, auto_group=rnd.random() < 0.3)
    world.register(*TYPES)
    if rnd.random() < 0.3:
        world.group(A, B)
    model: Model = {}
    counter = [0]

    def fresh_value() -> int:
        counter[0] += 1
        return counter[0]

    def spawn_some(k: int) -> list[tuple[list[int], list[type], list[int]]]:
        types = [t for t in TYPES if rnd.random() < 0.6] or [A]
        values = [fresh_value() for _ in range(k)]
        if k == 1 and rnd.random() < 0.5:
            keys = [int(world.spawn(*(_value(t, values[0]) for t in types)))]
        else:
            arr = np.array(values, np.int64)
            keys = world.spawn_batch(*(P(x=arr.astype(np.float64)) if t is P else t(v=arr)
                                       for t in types)).tolist()
        return [(keys, types, values)]

    def apply_spawns(spawned: list[tuple[list[int], list[type], list[int]]]) -> None:
        for keys, types, values in spawned:
            for key, v in zip(keys, values, strict=True):
                model[int(key)] = {t: float(v) for t in types}

    for _ in range(rnd.randint(1, 6)):
        apply_spawns(spawn_some(rnd.randint(1, 4)))

    snaps: list[tuple[Snapshot, Model]] = [(world.snapshot(), {k: dict(c) for k, c in
                                                               model.items()})]
    for _ in range(steps):
        op = rnd.choice(["block", "block", "block", "spawn", "despawn", "add", "remove"])
        keys = list(model)
        if op == "spawn":
            apply_spawns(spawn_some(rnd.randint(1, 5)))
        elif op == "despawn" and keys:
            doomed = rnd.sample(keys, rnd.randint(1, min(3, len(keys))))
            world.despawn_batch(doomed)
            for k in doomed:
                del model[k]
        elif op == "add" and keys:
            k, t = rnd.choice(keys), rnd.choice(TYPES)
            v = fresh_value()
            world.add(k, _value(t, v))
            model[k][t] = float(v)
        elif op == "remove" and keys:
            k, t = rnd.choice(keys), rnd.choice(TYPES)
            if t in model[k]:
                world.remove(k, t)
                del model[k][t]
        elif op == "block":
            deferred: list[Any] = []  # structural changes, applied when the block ends
            try:
                block(world, rnd, model, fresh_value, deferred, depth=0, taken=set(),
                      doomed=set())
            except Boom:
                pass
            for change in deferred:
                change()
        live = _state(world)
        assert live == model
        snap = world.snapshot()
        assert _fresh(snap) == model, "a snapshot shared a chunk a write changed"
        old, old_model = rnd.choice(snaps)
        world.restore(old)
        assert _state(world) == old_model
        world.restore(snap)
        assert _state(world) == model, "a restore skipped rows a write changed"
        snaps.append((snap, {k: dict(c) for k, c in model.items()}))
        if len(snaps) > 4:
            snaps.pop(0)
    return world.state_hash()


def block(world: World, rnd: random.Random, model: Model, fresh_value: Any,
          deferred: list[Any], depth: int, taken: set[tuple[int, type]],
          doomed: set[int]) -> None:
    """One query block writing some rows, maybe around a nested block, record writes and
    deferred changes. ``taken``: (key, type) pairs an enclosing block wrote or will
    write; this block leaves them alone (a gathered copy and a view disagree about
    whose write wins on one row)."""
    types, without, readonly = rnd.choice(SHAPES)
    mine: set[tuple[int, type]] = set()
    with world.query(*types, without=without, readonly=readonly) as q:
        keys = q.entities.tolist()
        assert sorted(keys) == sorted(
            k for k, c in model.items()
            if all(t in c for t in types) and not any(t in c for t in without))
        writable = [t for t in types if t not in readonly]
        plan = []
        for t in writable:  # pick this block's rows now: an inner block avoids them
            rows = [i for i, k in enumerate(keys)
                    if (k, t) not in taken and rnd.random() < 0.5]
            mine.update((keys[i], t) for i in rows)
            plan.append((t, rows))
        for t in types:  # every column reads the model's values (but rows an enclosing
            # gathered block wrote: its copy holds them until it ends)
            got = q[t][_field(t)].tolist()
            assert [v for k, v in zip(keys, got, strict=True) if (k, t) not in taken] == [
                model[k][t] for k in keys if (k, t) not in taken]

        def write(half: int) -> None:
            for t, rows in plan:
                part = rows[half::2]
                if not part:
                    continue
                values = [fresh_value() for _ in part]
                if t is P and rnd.random() < 0.5:
                    q.unstructured(P)[part, 0] = values
                else:
                    column = q[t][_field(t)]
                    column[part] = values
                for i, v in zip(part, values, strict=True):
                    model[keys[i]][t] = float(v)

        write(0)
        if depth < 2 and rnd.random() < 0.6:
            block(world, rnd, model, fresh_value, deferred, depth + 1, taken | mine, doomed)
        if rnd.random() < 0.3:  # a record write inside the block, on a row no block writes
            free = [(k, t) for k, c in model.items() for t in c
                    if (k, t) not in taken and (k, t) not in mine and k not in doomed]
            if free:
                k, t = rnd.choice(free)
                v = fresh_value()
                world.get(k, t)[_field(t)] = v
                model[k][t] = float(v)
        if rnd.random() < 0.2 and keys:  # deferred: the model changes after the block
            k = rnd.choice(keys)
            if k not in doomed:  # (not despawned by an enclosing block already)
                world.despawn(k)
                doomed.add(k)
                deferred.append(lambda k=k: model.pop(k))
        if rnd.random() < 0.2:
            v = fresh_value()
            new = int(world.spawn(A(v=v), B(v=v)))
            deferred.append(lambda new=new, v=v: model.__setitem__(new, {A: float(v),
                                                                         B: float(v)}))
        write(1)
        if rnd.random() < 0.1:
            raise Boom  # the writes made so far still count


@pytest.mark.parametrize("seed", range(12))
def test_writes_through_every_column_kind_match_the_model(seed: int) -> None:
    runs = run(seed, 25)
    with mock.patch.object(query_module, "_as_run", lambda rows: rows):
        gathered = run(seed, 25)
    assert runs == gathered
