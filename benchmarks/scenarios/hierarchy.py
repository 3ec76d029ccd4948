"""Blueprints and subtrees in a live world.

``instantiate``: a blueprint of B entities (Position plus a component with 3 ``Entity``
fields pointing at random members of the blueprint) spawned into a world of N entities,
against ``spawn_batch`` of the same rows (which needs no remapping: the price of the remap
is the ratio). ``despawn``: one ``despawn(root)`` of a B-entity subtree (root, sqrt(B)
children, the rest grandchildren) against ``despawn_batch`` of the same keys in a tree of
the same shape. The four ops run interleaved in one process; every result is checked: an
instance's references must point at the right copies (by blueprint position), a spawn must
hold the input rows, a despawn must leave exactly the static world.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xxhash

from benchmarks.fingerprint import sums
from benchmarks.runner import Fingerprint, Op, Record, Timing, timed_records
from benchmarks.scenarios import Job, Plan
from ecs_engine import NULL, ChildOf, Entity, World, component
from ecs_engine.components import Position

NAME = "hierarchy"
TITLE = "Blueprints and subtrees"


@component(name="BenchRefs")
class Refs:
    """Three references, as a unit has to its target, leader and home."""

    a: Entity = NULL
    b: Entity = NULL
    c: Entity = NULL


def plan(cfg: Any) -> Plan:
    world_n, blueprint_n = cfg.hierarchy
    yield Job(NAME, "engine", world_n, {"blueprint": blueprint_n})


def _refs_fingerprint(keys: np.ndarray, refs: np.ndarray) -> Fingerprint:
    """Each reference as the index (in ``keys``) of the entity it points at: the same for
    every correct copy, whatever keys it got."""
    order = np.argsort(keys)
    h = xxhash.xxh3_64()
    for name in ("a", "b", "c"):
        col = refs[name]
        at = np.minimum(np.searchsorted(keys[order], col), len(keys) - 1)
        pos = np.where(keys[order][at] == col, order[at], -1)
        h.update(pos.astype("<i8").tobytes())
    return ("refs", len(keys), h.intdigest())


def _rows_of(world: World, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pos_store, ref_store = world.store(Position), world.store(Refs)
    slots = (keys & np.uint64(0xFFFF_FFFF)).astype(np.int64)
    return pos_store.data[pos_store.rows_of(slots)], ref_store.data[ref_store.rows_of(slots)]


def _tree(world: World, size: int) -> np.ndarray:
    """A subtree of ``size`` entities: a root, ~sqrt(size) children, grandchildren."""
    fan = max(1, int(size**0.5) - 1)
    root = world.spawn(Position())
    kids = world.spawn_batch(Position(), ChildOf(parent=root), count=fan)
    rest = size - 1 - fan
    grand = world.spawn_batch(Position(), ChildOf(parent=np.resize(kids, rest)), count=rest)
    return np.concatenate([[np.uint64(root)], kids, grand]).astype(np.uint64)


def engine(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    size = int(params["blueprint"])
    rng = np.random.default_rng(7)
    world = World(seed=7)
    world.spawn_batch(Position(x=rng.random(n, dtype=np.float32)))
    xs = rng.random(size, dtype=np.float32)
    src = world.spawn_batch(Position(x=xs))
    picks = rng.integers(0, size, (3, size))
    world.add_batch(src, Refs(a=src[picks[0]], b=src[picks[1]], c=src[picks[2]]))
    bp = world.extract(src)
    world.despawn_batch(src)
    base = len(world)
    expect_refs = _refs_fingerprint(src, world_rows(bp))
    expect_pos = sums(size, xs, np.zeros(size))
    held: dict[str, Any] = {}

    def clear(key: str) -> None:
        keys = held.pop(key, None)
        if keys is not None and len(keys) and world.is_alive(keys[0]):
            world.despawn_batch(keys)

    def instantiate() -> np.ndarray:
        held["inst"] = world.instantiate(bp).keys
        return held["inst"]

    def spawn() -> np.ndarray:
        held["spawned"] = world.spawn_batch(
            Position(x=xs), Refs(a=src[picks[0]], b=src[picks[1]], c=src[picks[2]]))
        return held["spawned"]

    def spawned_rows(keys: np.ndarray) -> Fingerprint:
        pos, refs = _rows_of(world, keys)
        same = all(np.array_equal(refs[f], src[picks[i]]) for i, f in enumerate("abc"))
        return (*sums(len(pos), pos["x"], pos["y"]), "refs as given" if same else "refs lost")

    def tree(key: str) -> None:
        clear("inst")
        clear("spawned")
        held[key] = _tree(world, size)

    def plain() -> None:  # as many entities with no parent links: what a batch costs
        clear("inst")
        clear("spawned")
        held["plain"] = world.spawn_batch(Position(), count=size)

    ops = {
        "instantiate": Op(instantiate, lambda: clear("inst"),
                          fingerprint=lambda keys: _refs_fingerprint(keys, _rows_of(world,
                                                                                    keys)[1]),
                          expect=lambda: expect_refs),
        "spawn_batch": Op(spawn, lambda: clear("spawned"), fingerprint=spawned_rows,
                          expect=lambda: (*expect_pos, "refs as given")),
        "despawn": Op(lambda: world.despawn(held["tree"][0]), lambda: tree("tree"),
                      fingerprint=lambda _: (len(world), world.count(ChildOf)),
                      expect=lambda: (base, 0)),
        "despawn_batch": Op(lambda: world.despawn_batch(held["flat"]), lambda: tree("flat"),
                            fingerprint=lambda _: (len(world), world.count(ChildOf)),
                            expect=lambda: (base, 0)),
        "despawn_plain": Op(lambda: world.despawn_batch(held["plain"]), plain,
                            fingerprint=lambda _: (len(world), world.count(ChildOf)),
                            expect=lambda: (base, 0)),
    }
    names = {"instantiate": ("instantiate", "3 refs", "engine"),
             "spawn_batch": ("instantiate", "3 refs", "spawn_batch"),
             "despawn": ("despawn_subtree", "", "engine"),
             "despawn_batch": ("despawn_subtree", "", "despawn_batch"),
             "despawn_plain": ("despawn_subtree", "", "despawn_batch, no links")}
    return timed_records(NAME, n, ops, timing, names)


def world_rows(bp: Any) -> np.ndarray:
    """The blueprint's Refs rows in blueprint order."""
    ents, rows = bp.rows(Refs)
    order = np.argsort(ents)
    at = np.searchsorted(ents[order], bp.keys)
    return rows[order[at]]


JOBS = {"engine": engine}
