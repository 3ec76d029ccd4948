"""Random programs mixing every path that re-resolves or reuses query rows (plan memo,
prefix resizes, gathers made outside a step, small and big spawns and despawns, stores
crossing the memo's 1024-row content limit, hierarchy cascades, snapshot restores,
save/load, Rollback restores, nested queries in a step, an outer block's run view or
gathered copy around an inner block writing the same store), checked after every operation
against a plain-Python model: a stale plan shows up as wrong keys or values."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ecs_engine import Rollback, Snapshot, World, component
from ecs_engine.hierarchy import ChildOf


@component
class A:
    v: np.int64 = 0


@component
class B:
    v: np.int64 = 0


@component
class C:
    v: np.int64 = 0


@component
class P:  # one field dtype: q.unstructured(P) is served from the store's flat view
    x: np.float64 = 0.0
    y: np.float64 = 0.0


TYPES: tuple[type, ...] = (A, B, C, P)
# (types, without, readonly)
SHAPES: list[tuple[tuple[type, ...], tuple[type, ...], tuple[type, ...]]] = [
    ((A, B), (), ()), ((A, B, C), (), ()), ((A, C), (B,), ()), ((B,), (), ()),
    ((C, A), (), ()), ((A,), (C,), ()), ((A, P), (), ()), ((P,), (), ()),
    ((A, B), (), (A,)), ((B, P), (C,), (B,)), ((P, C), (), (P, C))]
Model = dict[int, dict[type, Any]]  # key -> component -> value (ChildOf: the parent)


def _value(t: type, v: float) -> Any:
    return P(x=float(v)) if t is P else t(v=int(v))


def _check(world: World, model: Model) -> None:
    for types, without, readonly in SHAPES:
        with world.query(*types, without=without, readonly=readonly) as q:
            keys = q.entities.tolist()
            assert sorted(keys) == sorted(
                k for k, c in model.items()
                if all(t in c for t in types) and not any(t in c for t in without))
            for t in types:
                column = q[t]["x"] if t is P else q[t]["v"]
                assert column.tolist() == [model[k][t] for k in keys], t
            if P in types:
                assert q.unstructured(P)[:, 0].tolist() == [model[k][P] for k in keys]
    assert sorted(world.entities().tolist()) == sorted(model)


def _copy(model: Model) -> Model:
    return {k: dict(c) for k, c in model.items()}


def run(seed: int, ops: int, tmp: Path) -> None:
    rnd = random.Random(seed)
    world = World(auto_group=rnd.random() < 0.6)
    if rnd.random() < 0.4:
        world.group(A, B)
    world.register(*TYPES)
    model: Model = {}
    counter = 0
    snaps: list[tuple[Snapshot, Model]] = []
    rollback: Rollback | None = None
    recorded: dict[int, Model] = {}

    def system(w: World, dt: float) -> None:
        # a gathered or grouped outer query with a nested writing one
        with w.query(A, without=(C,)) as q:
            q[A]["v"] += 1
            for k in q.entities.tolist():
                model[k][A] += 1
            with w.query(A, B) as inner:
                inner[B]["v"] += 2
                for k in inner.entities.tolist():
                    model[k][B] += 2
        # An outer block over C (a gathered copy, or a run view of the store when its
        # rows are one run) around an inner block over other rows of the same store:
        # the outer writes before and after the inner one, then a record writes a row
        # neither block wrote. (Whole-column write-backs and run views must keep every
        # write and move the versions snapshots share by.)
        with w.query(B, C) as q:
            keys = q.entities.tolist()
            q[C]["v"][0::2] += 3
            with w.query(C, without=(B,)) as inner:
                inner[C]["v"] += 5
                mine = inner.entities.tolist()
            q[C]["v"][1::2] += 7
            for i, k in enumerate(keys):
                model[k][C] += 3 if i % 2 == 0 else 7
            for k in mine:
                model[k][C] += 5
            if mine:
                w.get(mine[0], C).v = 1000 + w.tick
                model[mine[0]][C] = 1000 + w.tick
        with w.query(P, A, readonly=(A,)) as q:
            q.unstructured(P)[:, 0] += 1.0
            for k in q.entities.tolist():
                model[k][P] += 1.0
        if rnd.random() < 0.3:
            _check(w, model)  # inside the step: writing queries may align rows

    world.add_system(system)
    for _ in range(ops):
        op = rnd.choice(["spawn", "few", "many", "despawn", "despawn_few", "despawn_many",
                         "add", "remove", "snap", "restore", "save", "step", "step",
                         "parent", "advance", "rewind"])
        keys = list(model)
        if op == "spawn":
            types = [t for t in TYPES if rnd.random() < 0.5] or [A]
            counter += 1
            key = int(world.spawn(*(_value(t, counter) for t in types)))
            model[key] = {t: float(counter) if t is P else counter for t in types}
        elif op in ("few", "many"):  # row by row up to SMALL_SPAWN, else the batch path
            n = rnd.randint(0, 6) if op == "few" else rnd.randint(300, 1100)
            types = [t for t in TYPES if rnd.random() < 0.5] or [B]
            values = np.arange(counter + 1, counter + 1 + n)
            counter += n
            new = world.spawn_batch(*(P(x=values.astype(np.float64)) if t is P else t(v=values)
                                      for t in types), count=n)
            for key, v in zip(new.tolist(), values.tolist(), strict=True):
                model[key] = {t: float(v) if t is P else v for t in types}
        elif op.startswith("despawn") and keys:
            n = {"despawn": 1, "despawn_few": rnd.randint(1, 25),
                 "despawn_many": rnd.randint(20, 600)}[op]
            doomed = rnd.sample(keys, min(n, len(keys)))
            if op == "despawn":
                world.despawn(doomed[0])
            else:
                world.despawn_batch(doomed if rnd.random() < 0.5 else np.array(doomed, np.uint64))
            dead = set(doomed)
            grew = True
            while grew:  # children go with their parents
                below = {k for k, c in model.items() if k not in dead and c.get(ChildOf) in dead}
                dead |= below
                grew = bool(below)
            for key in dead:
                del model[key]
        elif op == "add" and keys:
            key, t = rnd.choice(keys), rnd.choice(TYPES)
            counter += 1
            world.add(key, _value(t, counter))
            model[key][t] = float(counter) if t is P else counter
        elif op == "remove" and keys:
            key, t = rnd.choice(keys), rnd.choice(TYPES)
            if t in model[key]:
                world.remove(key, t)
                del model[key][t]
        elif op == "snap":
            snaps.append((world.snapshot(), _copy(model)))
        elif op == "restore" and snaps:
            snap, saved = rnd.choice(snaps)
            world.restore(snap)
            model = _copy(saved)
        elif op == "save":
            world.save(tmp / "world.sav")
            world.load(tmp / "world.sav")
        elif op == "step":
            world.step(1 / 60)
        elif op == "parent" and len(keys) >= 2:
            child, parent = rnd.sample(keys, 2)
            up: int | None = parent
            while up is not None and up != child:
                up = model[up].get(ChildOf)
            if up is None and ChildOf not in model[child]:  # no cycle, no second parent
                world.set_parent(child, parent)
                model[child][ChildOf] = parent
        elif op == "advance":
            if rollback is None:
                rollback = Rollback(world, frames=6)
            for _ in range(rnd.randint(1, 4)):
                recorded[world.tick] = _copy(model)
                rollback.advance()
        elif op == "rewind" and rollback is not None:
            held = [f for f in recorded if rollback.held(f)]
            if held:
                frame = rnd.choice(held)
                rollback.restore(frame)
                model = _copy(recorded[frame])
                recorded = {f: m for f, m in recorded.items() if f <= frame}
        _check(world, model)


@pytest.mark.parametrize("seed", range(6))
def test_queries_match_the_model_through_every_path(seed: int, tmp_path: Path) -> None:
    run(seed, 50, tmp_path)
