"""Per-call fixed costs at 100 entities, against esper and plain attribute access.

Each timed call repeats one operation ``CALLS`` times (a single call is too short for the
timer); records carry ``calls`` and ``per_call_us``. Pairs, interleaved in one process:

- ``spawn``: ``world.spawn(Position(x=.., y=..), Velocity(x=.., y=..))`` against
  ``esper.create_entity(P(..), V(..))`` (component construction included on both sides);
  the spawned entities are despawned untimed before the next call;
- ``despawn``: ``world.despawn(e)`` against ``esper.delete_entity(e, immediate=True)``
  of entities spawned untimed before the call;
- ``query``: entering and leaving ``with world.query(Position, Velocity) as q`` (an
  owning group's query) against esper's cached ``get_components(P, V)``; variant
  ``columns`` also takes both columns (``q[Position]``, ``q[Velocity]``);
- ``record_read`` / ``record_write``: ``rec["x"]`` / ``rec["x"] = v`` on a record from
  ``world.get`` against reading / writing an attribute of a dataclass instance;
- ``get_set``: ``world.get(e, Position)["x"] = v`` against
  ``esper.component_for_entity(e, P).x = v``.

Every op's final state is fingerprinted (entity count and position sums, or the value
written last) and must match its partner's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.fingerprint import sums
from benchmarks.runner import Op, Record, Timing, timed_records
from benchmarks.scenarios import Job, Plan
from ecs_engine import World
from ecs_engine.components import Position, Velocity

NAME = "percall"
TITLE = "Per-call costs at 100 entities vs esper"
N = 100
CALLS = 1000


def plan(cfg: Any) -> Plan:
    yield Job(NAME, "engine+esper", N)


@dataclass
class P:
    x: float = 0.0
    y: float = 0.0


@dataclass
class V:
    x: float = 0.0
    y: float = 0.0


def _engine_world() -> tuple[World, list[int]]:
    world = World()
    keys = [world.spawn(Position(x=float(i), y=1.0), Velocity(x=1.0, y=0.0)) for i in range(N)]
    with world.query(Position, Velocity):  # the writing query creates the owning group
        pass
    return world, keys


def _esper(name: str) -> tuple[Any, list[int]]:
    import esper

    esper.switch_world(name)
    esper.clear_database()
    ents = [esper.create_entity(P(float(i), 1.0), V(1.0, 0.0)) for i in range(N)]
    esper.get_components(P, V)  # warm its cache
    return esper, ents


def _engine_motion(world: World) -> tuple[Any, ...]:
    pos = world.store(Position).live()
    with world.query(Position, Velocity, readonly=(Position, Velocity)) as q:
        p, v = q[Position], q[Velocity]
        return sums(len(pos), pos["x"], pos["y"], (p["x"], p["y"], v["x"], v["y"]))


def _esper_motion(esper: Any) -> tuple[Any, ...]:
    pos = [p for _e, p in esper.get_component(P)]
    moving = [(p, v) for _e, (p, v) in esper.get_components(P, V)]
    return sums(len(pos), [p.x for p in pos], [p.y for p in pos],
                ([p.x for p, _ in moving], [p.y for p, _ in moving],
                 [v.x for _, v in moving], [v.y for _, v in moving]))


def spawn_pair() -> dict[str, Op]:
    world, _ = _engine_world()
    esper, _ = _esper("percall-spawn")
    made: dict[str, list[int]] = {"engine": [], "esper": []}

    def clear_engine() -> None:
        for key in made["engine"]:
            world.despawn(key)
        made["engine"] = []

    def clear_esper() -> None:
        esper.switch_world("percall-spawn")
        for ent in made["esper"]:
            esper.delete_entity(ent, immediate=True)
        made["esper"] = []

    def engine() -> World:
        spawn = world.spawn
        made["engine"] = [spawn(Position(x=2.0, y=3.0), Velocity(x=1.0, y=0.5))
                          for _ in range(CALLS)]
        return world

    def esper_run() -> Any:
        create = esper.create_entity
        made["esper"] = [create(P(2.0, 3.0), V(1.0, 0.5)) for _ in range(CALLS)]
        return esper

    return {"engine": Op(engine, clear_engine, fingerprint=_engine_motion),
            "esper": Op(esper_run, clear_esper, fingerprint=_esper_motion)}


def despawn_pair() -> dict[str, Op]:
    world, _ = _engine_world()
    esper, _ = _esper("percall-despawn")
    made: dict[str, list[int]] = {"engine": [], "esper": []}

    def fill_engine() -> None:
        made["engine"] = [world.spawn(Position(x=2.0, y=3.0), Velocity(x=1.0, y=0.5))
                          for _ in range(CALLS)]

    def fill_esper() -> None:
        esper.switch_world("percall-despawn")
        made["esper"] = [esper.create_entity(P(2.0, 3.0), V(1.0, 0.5)) for _ in range(CALLS)]

    def engine() -> World:
        despawn = world.despawn
        for key in made["engine"]:
            despawn(key)
        return world

    def esper_run() -> Any:
        delete = esper.delete_entity
        for ent in made["esper"]:
            delete(ent, immediate=True)
        return esper

    return {"engine": Op(engine, fill_engine, fingerprint=_engine_motion),
            "esper": Op(esper_run, fill_esper, fingerprint=_esper_motion)}


def query_pair() -> dict[str, Op]:
    world, _ = _engine_world()
    esper, _ = _esper("percall-query")
    count = {"calls": 0}

    def engine() -> int:
        query = world.query
        for _ in range(CALLS):
            with query(Position, Velocity):
                pass
        return len(world)

    def engine_columns() -> int:
        query = world.query
        for _ in range(CALLS):
            with query(Position, Velocity) as q:
                q[Position]
                q[Velocity]
        return len(world)

    def esper_run() -> int:
        esper.switch_world("percall-query")
        get = esper.get_components
        for _ in range(CALLS):
            get(P, V)
        count["calls"] += 1
        return len(get(P, V))

    def size(found: int) -> tuple[Any, ...]:
        return ("entities", found)

    return {"engine": Op(engine, fingerprint=size),
            "engine columns": Op(engine_columns, fingerprint=size),
            "esper": Op(esper_run, fingerprint=size)}


def record_pairs() -> dict[str, Op]:
    world, keys = _engine_world()
    rec = world.get(keys[50], Position)
    obj = P(1.0, 2.0)
    esper, ents = _esper("percall-record")
    key, ent = keys[50], ents[50]

    def engine_read() -> float:
        total = 0.0
        for _ in range(CALLS):
            total = rec["x"]
        return float(total)

    def attr_read() -> float:
        total = 0.0
        for _ in range(CALLS):
            total = obj.x
        return total

    def engine_write() -> float:
        for i in range(CALLS):
            rec["y"] = float(i)
        return float(rec["y"])

    def attr_write() -> float:
        for i in range(CALLS):
            obj.y = float(i)
        return obj.y

    def engine_get_set() -> float:
        get = world.get
        for i in range(CALLS):
            get(key, Position)["x"] = float(i)
        return float(world.get(key, Position)["x"])

    def esper_get_set() -> float:
        esper.switch_world("percall-record")
        component_for_entity = esper.component_for_entity
        for i in range(CALLS):
            component_for_entity(ent, P).x = float(i)
        return component_for_entity(ent, P).x

    def value(v: float) -> tuple[Any, ...]:
        return ("value", v)

    return {"read": Op(engine_read, fingerprint=lambda v: ("read", v == rec["x"])),
            "attr read": Op(attr_read, fingerprint=lambda v: ("read", v == obj.x)),
            "write": Op(engine_write, fingerprint=value),
            "attr write": Op(attr_write, fingerprint=value),
            "get_set": Op(engine_get_set, fingerprint=value),
            "esper get_set": Op(esper_get_set, fingerprint=value)}


def job(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    out: list[Record] = []
    groups: list[tuple[dict[str, Op], dict[str, tuple[str, str, str]]]] = [
        (spawn_pair(), {"engine": ("spawn", "", "engine"), "esper": ("spawn", "", "esper")}),
        (despawn_pair(), {"engine": ("despawn", "", "engine"),
                          "esper": ("despawn", "", "esper")}),
        (query_pair(), {"engine": ("query", "", "engine"),
                        "engine columns": ("query", "columns", "engine"),
                        "esper": ("query", "", "esper")}),
    ]
    for ops, names in groups:
        out += timed_records(NAME, n, ops, timing, names)
    ops = record_pairs()
    # three pairs, each verified against its own partner
    for a, b, op_name in (("read", "attr read", "record_read"),
                          ("write", "attr write", "record_write"),
                          ("get_set", "esper get_set", "get_set")):
        contender_b = "esper" if b.startswith("esper") else "attribute"
        out += timed_records(NAME, n, {a: ops[a], b: ops[b]}, timing,
                             {a: (op_name, "", "engine"), b: (op_name, "", contender_b)})
    for r in out:
        r["calls"] = CALLS
        if "median_s" in r:
            r["per_call_us"] = round(r["median_s"] / CALLS * 1e6, 4)
    return out


JOBS = {"engine+esper": job}
