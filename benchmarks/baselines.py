"""The contenders: esper 3.x, tcod-ecs and a thesis-style dict-of-dicts store.

Each gets the same entity mix as the engine (position and velocity on all, health on half,
a reference to a random other entity on a tenth), written the way their users write it:
dataclass components, per-entity Python loops for systems, ``copy.deepcopy`` / ``pickle``
for snapshots and saves.
"""

from __future__ import annotations

import copy
import itertools
import pickle
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["BASELINES", "Baseline", "DictStore", "EsperStore", "TcodStore"]

PICKLE = pickle.HIGHEST_PROTOCOL


# Components as their users write them (module level, so pickle finds them).
@dataclass
class Position:
    x: float = 0.0
    y: float = 0.0


@dataclass
class Velocity:
    x: float = 0.0
    y: float = 0.0


@dataclass
class Health:
    hp: int = 3
    max_hp: int = 3
    invulnerable: float = 0.0


@dataclass
class Target:
    entity: Any = None


def _plan(n: int, rng: np.random.Generator) -> Iterator[tuple[float, float, float, float, bool,
                                                                bool]]:
    """Per entity: x, y, vx, vy, has health, has target (the engine's mix proportions)."""
    xy = rng.random((4, n)).tolist()
    n_target = n // 10
    n_health = n // 2
    for i in range(n):
        yield xy[0][i] * 1000, xy[1][i] * 1000, xy[2][i] - 0.5, xy[3][i] - 0.5, \
            i < n_health, i < n_target


class Baseline(Protocol):
    """What the scenarios need from a contender."""

    name: str

    def state(self) -> Any: ...
    def install(self, state: Any) -> None: ...
    def tick(self, dt: float) -> None: ...
    def spawn(self, count: int, rng: np.random.Generator,
              pool: list[Any] | None = None) -> list[Any]: ...
    def spawn_motion(self, columns: list[list[float]]) -> None: ...
    def despawn(self, ids: list[Any]) -> None: ...
    def ids(self) -> list[Any]: ...
    def motion(self, state: Any) -> Motion: ...


Motion = tuple[int, list[float], list[float],
               tuple[list[float], list[float], list[float], list[float]]]
"""What ``fingerprint.sums`` takes: count, x and y of every position, then x, y, vx and vy
of the entities that also have a velocity."""


def _motion(pairs: list[tuple[Any, Any]]) -> Motion:
    """``Motion`` of (position, velocity or None) objects with .x and .y."""
    moving = [(p, v) for p, v in pairs if v is not None]
    return (len(pairs), [p.x for p, _ in pairs], [p.y for p, _ in pairs],
            ([p.x for p, _ in moving], [p.y for p, _ in moving],
             [v.x for _, v in moving], [v.y for _, v in moving]))


def _plan_columns(n: int, seed: int = 1) -> tuple[np.ndarray, ...]:
    """x, y, vx, vy of :func:`_plan` with ``default_rng(seed)``, as float64 arrays."""
    xy = np.random.default_rng(seed).random((4, n))
    return xy[0] * 1000, xy[1] * 1000, xy[2] - 0.5, xy[3] - 0.5


class EsperStore:
    """esper 3.x: module-level world state, switched with ``esper.switch_world``.

    The entity/component state is the four module globals below; a snapshot deep-copies
    (or pickles) them and a restore installs a copy back. The id counter is an
    ``itertools.count``, which CPython 3.14 can no longer deepcopy or pickle, so the state
    carries its next value as an int and a restore makes a new counter from it.
    """

    name = "esper"
    STATE = ("_entity_count", "_components", "_entities", "_dead_entities")

    def __init__(self, world_name: str = "bench") -> None:
        import esper

        self.esper = esper
        esper.switch_world(world_name)
        esper.clear_database()

    def spawn(self, count: int, rng: np.random.Generator,
              pool: list[Any] | None = None) -> list[int]:
        """Spawn ``count`` of the mix; references point into ``pool`` (default: the new ones)."""
        esper = self.esper
        ids = []
        for x, y, vx, vy, health, target in _plan(count, rng):
            comps: list[Any] = [Position(x, y), Velocity(vx, vy)]
            if health:
                comps.append(Health())
            if target:
                comps.append(Target(None))
            ids.append(esper.create_entity(*comps))
        pool = pool or ids
        for ent in ids[: count // 10]:
            esper.component_for_entity(ent, Target).entity = pool[int(rng.integers(len(pool)))]
        return ids

    def spawn_motion(self, columns: list[list[float]]) -> None:
        """Entities with just Position and Velocity (the bulk-spawn scenario)."""
        create = self.esper.create_entity
        for x, y, vx, vy in zip(*columns, strict=True):
            create(Position(x, y), Velocity(vx, vy))

    def despawn(self, ids: list[int]) -> None:
        for ent in ids:
            self.esper.delete_entity(ent, immediate=True)

    def ids(self) -> list[int]:
        return list(self.esper._entities)

    def tick(self, dt: float) -> None:
        # The idiomatic esper system loop.
        for _ent, (pos, vel) in self.esper.get_components(Position, Velocity):
            pos.x += vel.x * dt
            pos.y += vel.y * dt

    def state(self) -> tuple[Any, ...]:
        counter = self.esper._entity_count
        return (next_count(counter), *(getattr(self.esper, name) for name in self.STATE[1:]))

    def install(self, state: tuple[Any, ...]) -> None:
        self.esper._entity_count = itertools.count(state[0])
        for name, value in zip(self.STATE[1:], state[1:], strict=True):
            setattr(self.esper, name, value)
        self.esper.clear_cache()

    @staticmethod
    def motion(state: tuple[Any, ...]) -> Motion:
        """Count and positions of a state (the live one or a copy), and positions and
        velocities of the entities that have both (see ``fingerprint.sums``)."""
        return _motion([(c[Position], c.get(Velocity)) for c in state[2].values()
                        if Position in c])


class TcodStore:
    """tcod-ecs 5.x: a ``tcod.ecs.Registry``; a reference is the target ``Entity`` object."""

    name = "tcod-ecs"

    def __init__(self) -> None:
        import tcod.ecs

        self.registry = tcod.ecs.Registry()

    def spawn(self, count: int, rng: np.random.Generator,
              pool: list[Any] | None = None) -> list[Any]:
        """Spawn ``count`` of the mix; references point into ``pool`` (default: the new ones)."""
        reg = self.registry
        ents = []
        for x, y, vx, vy, health, target in _plan(count, rng):
            comps: dict[type, Any] = {Position: Position(x, y), Velocity: Velocity(vx, vy)}
            if health:
                comps[Health] = Health()
            if target:
                comps[Target] = Target(None)
            ents.append(reg.new_entity(comps))
        pool = pool or ents
        for ent in ents[: count // 10]:
            ent.components[Target].entity = pool[int(rng.integers(len(pool)))]
        return ents

    def spawn_motion(self, columns: list[list[float]]) -> None:
        new = self.registry.new_entity
        for x, y, vx, vy in zip(*columns, strict=True):
            new({Position: Position(x, y), Velocity: Velocity(vx, vy)})

    def despawn(self, ids: list[Any]) -> None:
        for ent in ids:
            ent.clear()

    def ids(self) -> list[Any]:
        return list(self.registry.Q.all_of(components=[Position]))

    def tick(self, dt: float) -> None:
        for ent in self.registry.Q.all_of(components=[Position, Velocity]):
            pos = ent.components[Position]
            vel = ent.components[Velocity]
            pos.x += vel.x * dt
            pos.y += vel.y * dt

    def state(self) -> Any:
        return self.registry

    def install(self, state: Any) -> None:
        self.registry = state

    @staticmethod
    def motion(state: Any) -> Motion:
        return _motion([(e.components[Position], e.components.get(Velocity))
                        for e in state.Q.all_of(components=[Position])])


class DictStore:
    """The thesis' store: entity id -> {component name -> {field -> value}}."""

    name = "dicts"

    def __init__(self) -> None:
        self.entities: dict[int, dict[str, dict[str, Any]]] = {}
        self.next_id = 1

    def spawn(self, count: int, rng: np.random.Generator,
              pool: list[Any] | None = None) -> list[int]:
        """Spawn ``count`` of the mix; references point into ``pool`` (default: the new ones)."""
        ents = self.entities
        ids = []
        for x, y, vx, vy, health, target in _plan(count, rng):
            comps: dict[str, dict[str, Any]] = {"Position": {"x": x, "y": y},
                                                "Velocity": {"x": vx, "y": vy}}
            if health:
                comps["Health"] = {"hp": 3, "max_hp": 3, "invulnerable": 0.0}
            if target:
                comps["Target"] = {"entity": 0}
            ents[self.next_id] = comps
            ids.append(self.next_id)
            self.next_id += 1
        pool = pool or ids
        for ent in ids[: count // 10]:
            ents[ent]["Target"]["entity"] = pool[int(rng.integers(len(pool)))]
        return ids

    def spawn_motion(self, columns: list[list[float]]) -> None:
        ents = self.entities
        next_id = self.next_id
        for x, y, vx, vy in zip(*columns, strict=True):
            ents[next_id] = {"Position": {"x": x, "y": y}, "Velocity": {"x": vx, "y": vy}}
            next_id += 1
        self.next_id = next_id

    def despawn(self, ids: list[int]) -> None:
        for ent in ids:
            del self.entities[ent]

    def ids(self) -> list[int]:
        return list(self.entities)

    def tick(self, dt: float) -> None:
        for comps in self.entities.values():
            vel = comps.get("Velocity")
            if vel is not None:
                pos = comps["Position"]
                pos["x"] += vel["x"] * dt
                pos["y"] += vel["y"] * dt

    def state(self) -> tuple[dict[int, dict[str, dict[str, Any]]], int]:
        return self.entities, self.next_id

    def install(self, state: tuple[dict[int, dict[str, dict[str, Any]]], int]) -> None:
        self.entities, self.next_id = state

    @staticmethod
    def motion(state: tuple[dict[int, dict[str, dict[str, Any]]], int]) -> Motion:
        ps = [(c["Position"], c.get("Velocity")) for c in state[0].values()
              if "Position" in c]
        count = len(ps)
        moving = [(p, v) for p, v in ps if v is not None]
        return (count, [p["x"] for p, _ in ps], [p["y"] for p, _ in ps],
                ([p["x"] for p, _ in moving], [p["y"] for p, _ in moving],
                 [v["x"] for _, v in moving], [v["y"] for _, v in moving]))

    @staticmethod
    def comprehension_copy(state: tuple[dict[int, dict[str, dict[str, Any]]], int]
                           ) -> tuple[dict[int, dict[str, dict[str, Any]]], int]:
        """Two-level copy by comprehension (what a hand-written snapshot would do)."""
        entities, next_id = state
        return ({e: {c: dict(f) for c, f in comps.items()} for e, comps in entities.items()},
                next_id)


BASELINES: dict[str, type] = {"esper": EsperStore, "tcod-ecs": TcodStore, "dicts": DictStore}


def next_count(counter: itertools.count[int]) -> int:
    """The value ``next(counter)`` would return, without advancing it."""
    match = re.fullmatch(r"count\((-?\d+)\)", repr(counter))
    if match is None:  # a step other than 1 or a float start: not esper's counter
        raise ValueError(f"cannot read the next value of {counter!r}")
    return int(match.group(1))


def deepcopy(obj: Any) -> Any:
    return copy.deepcopy(obj)


def dumps(obj: Any) -> bytes:
    return pickle.dumps(obj, PICKLE)


def loads(data: bytes) -> Any:
    return pickle.loads(data)
