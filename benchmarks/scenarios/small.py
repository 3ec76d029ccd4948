"""Small worlds: a 3-system churn tick against esper and tcod-ecs at 10 to 10,000 entities.

Most Python games hold a few hundred entities, where fixed per-call costs decide, not
bandwidth. Every entity has a position, a velocity and a lifetime; half also have
gravity. One tick runs three systems, as each library's users write them:

- movement: ``position += velocity * dt`` on everything that moves;
- gravity: ``velocity.y -= g * dt`` on the entities with gravity (a query the engine's
  owning group over (position, velocity) does not serve: it gathers);
- lifetimes: count down, despawn the expired and spawn as many fresh ones (half of
  them with gravity), so the world keeps its size.

All contenders hold the same entities (float64 fields, so Python floats and numpy
columns agree bit for bit), tick interleaved in one process, and must end with the same
entity count and position sums. A timed call runs at least ``MIN_TICKS`` ticks in a row
(more in small worlds, so microsecond ticks are not lost in timer noise), as a game ticks;
records carry ``ticks`` to turn medians into per-tick times.

At the largest size the suite also times single ticks (variant ``first tick``): each one
runs right after the other contenders' ticks and the runner's full garbage collection,
with every cache cold. numpy pays for that far more than pure Python: the first call of
each kind of numpy operation after the caches were flushed costs tens of microseconds (a
3-element add ~40 us against ~1 us warm), so that row shows what a tick costs when the
rest of a frame has pushed the engine's code and numpy's out of the caches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.fingerprint import sums
from benchmarks.runner import Op, Record, Timing, timed_records
from benchmarks.scenarios import Job, Plan
from ecs_engine import World, component

NAME = "small"
TITLE = "Small worlds: 3-system churn tick vs esper and tcod-ecs"
SIZES = (10, 30, 100, 300, 1_000, 10_000)
QUICK_SIZES = (10, 100, 1_000)
DT = 1 / 60
G = 9.8
LIFE = 1.0  # seconds a respawned entity lives
TICKS_PER_CALL = 4000  # ticks x entities per timed call, at least MIN_TICKS ticks
MIN_TICKS = 4  # consecutive ticks per timed call at every size
COLD_SIZES = (10_000,)  # sizes where single cold ticks are timed too


def plan(cfg: Any) -> Plan:
    for n in QUICK_SIZES if cfg.quick else SIZES:
        yield Job(NAME, "engine+esper+tcod-ecs", n)


@component(name="SmallPos")
class SmallPos:
    x: float = 0.0
    y: float = 0.0


@component(name="SmallVel")
class SmallVel:
    x: float = 0.0
    y: float = 0.0


@component(name="SmallGravity")
class SmallGravity:
    g: float = G


@component(name="SmallLife")
class SmallLife:
    remaining: float = LIFE


@dataclass
class EPos:
    x: float = 0.0
    y: float = 0.0


@dataclass
class EVel:
    x: float = 0.0
    y: float = 0.0


@dataclass
class EGravity:
    g: float = G


@dataclass
class ELife:
    remaining: float = LIFE


def initial(n: int) -> list[tuple[float, float, float, float, float, bool]]:
    """(x, y, vx, vy, remaining, gravity) per entity: lifetimes spread so that about
    one entity in 60 expires per tick."""
    rows = []
    for i in range(n):
        rows.append((float(i), float(i % 7), 1.0 + (i % 5), 0.5 * (i % 3),
                     0.05 + (i % 60) / 60, i % 2 == 0))
    return rows


def respawn_values(i: int) -> tuple[float, float, float, float]:
    """(x, y, vx, vy) of the i-th entity respawned in one tick (gravity when i is even)."""
    return 0.0, 10.0, 1.0 + i % 3, 2.0


def respawn_columns(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``respawn_values(i)`` for i in range(k), as columns (how the engine side builds them:
    no per-entity loop)."""
    i = np.arange(k)
    return np.zeros(k), np.full(k, 10.0), 1.0 + i % 3, np.full(k, 2.0)


def engine_world(n: int) -> World:
    world = World()
    for x, y, vx, vy, remaining, gravity in initial(n):
        comps: list[Any] = [SmallPos(x=x, y=y), SmallVel(x=vx, y=vy),
                            SmallLife(remaining=remaining)]
        if gravity:
            comps.append(SmallGravity())
        world.spawn(*comps)
    return world


def engine_tick(world: World) -> None:
    """The three systems, as an engine user writes them."""
    with world.query(SmallPos, SmallVel, readonly=(SmallVel,)) as q:
        pos = q.unstructured(SmallPos)  # x and y in one op (README: quick start)
        pos += q.unstructured(SmallVel) * DT
    with world.query(SmallVel, SmallGravity, readonly=(SmallGravity,)) as q:
        q[SmallVel]["y"] -= q[SmallGravity]["g"] * DT
    with world.query(SmallLife) as q:
        life = q[SmallLife]
        life["remaining"] -= DT
        expired = q.entities[life["remaining"] <= 0]
    k = len(expired)
    if k:
        world.despawn_batch(expired)
        x, y, vx, vy = respawn_columns(k)
        with_gravity = world.spawn_batch(SmallPos(x=x[0::2], y=y[0::2]),
                                         SmallVel(x=vx[0::2], y=vy[0::2]), SmallLife(),
                                         SmallGravity(), count=len(x[0::2]))
        del with_gravity
        if k > 1:
            world.spawn_batch(SmallPos(x=x[1::2], y=y[1::2]), SmallVel(x=vx[1::2], y=vy[1::2]),
                              SmallLife(), count=len(x[1::2]))


def esper_world(n: int, name: str) -> Any:
    import esper

    esper.switch_world(name)
    esper.clear_database()
    for x, y, vx, vy, remaining, gravity in initial(n):
        comps: list[Any] = [EPos(x, y), EVel(vx, vy), ELife(remaining)]
        if gravity:
            comps.append(EGravity())
        esper.create_entity(*comps)
    return esper


def esper_tick(esper: Any) -> None:
    """The three systems, as an esper user writes them."""
    for _ent, (pos, vel) in esper.get_components(EPos, EVel):
        pos.x += vel.x * DT
        pos.y += vel.y * DT
    for _ent, (vel, grav) in esper.get_components(EVel, EGravity):
        vel.y -= grav.g * DT
    expired = []
    for ent, life in esper.get_component(ELife):
        life.remaining -= DT
        if life.remaining <= 0:
            expired.append(ent)
    for ent in expired:
        esper.delete_entity(ent, immediate=True)
    for i in range(len(expired)):
        x, y, vx, vy = respawn_values(i)
        if i % 2 == 0:
            esper.create_entity(EPos(x, y), EVel(vx, vy), ELife(), EGravity())
        else:
            esper.create_entity(EPos(x, y), EVel(vx, vy), ELife())


def tcod_world(n: int) -> Any:
    import tcod.ecs

    registry = tcod.ecs.Registry()
    for x, y, vx, vy, remaining, gravity in initial(n):
        comps: dict[type, Any] = {EPos: EPos(x, y), EVel: EVel(vx, vy),
                                  ELife: ELife(remaining)}
        if gravity:
            comps[EGravity] = EGravity()
        registry.new_entity(comps)
    return registry


def tcod_tick(registry: Any) -> None:
    """The three systems, as a tcod-ecs user writes them."""
    for ent in registry.Q.all_of(components=[EPos, EVel]):
        pos, vel = ent.components[EPos], ent.components[EVel]
        pos.x += vel.x * DT
        pos.y += vel.y * DT
    for ent in registry.Q.all_of(components=[EVel, EGravity]):
        ent.components[EVel].y -= ent.components[EGravity].g * DT
    expired = []
    for ent in registry.Q.all_of(components=[ELife]):
        life = ent.components[ELife]
        life.remaining -= DT
        if life.remaining <= 0:
            expired.append(ent)
    for ent in expired:
        ent.clear()
    for i in range(len(expired)):
        x, y, vx, vy = respawn_values(i)
        comps: dict[type, Any] = {EPos: EPos(x, y), EVel: EVel(vx, vy), ELife: ELife()}
        if i % 2 == 0:
            comps[EGravity] = EGravity()
        registry.new_entity(comps)


def _object_motion(pairs: list[tuple[Any, Any]]) -> tuple[Any, ...]:
    """Every entity has both: positions, and each paired with its own velocity."""
    xs, ys = [p.x for p, _ in pairs], [p.y for p, _ in pairs]
    return sums(len(pairs), xs, ys, (xs, ys, [v.x for _, v in pairs], [v.y for _, v in pairs]))


def tcod_motion(registry: Any) -> tuple[Any, ...]:
    return _object_motion([(e.components[EPos], e.components[EVel])
                           for e in registry.Q.all_of(components=[EPos])])


def engine_motion(world: World) -> tuple[Any, ...]:
    with world.query(SmallPos, SmallVel, readonly=(SmallPos, SmallVel)) as q:
        pos, vel = q[SmallPos], q[SmallVel]
        return sums(len(pos), pos["x"], pos["y"], (pos["x"], pos["y"], vel["x"], vel["y"]))


def esper_motion(esper: Any) -> tuple[Any, ...]:
    return _object_motion([(p, esper.component_for_entity(e, EVel))
                           for e, p in esper.get_component(EPos)])


def job(n: int, params: dict[str, Any], timing: Timing) -> list[Record]:
    world = engine_world(n)
    esper = esper_world(n, f"small-{n}")
    registry = tcod_world(n)

    def timed(ticks: int, variant: str) -> list[Record]:
        def run_engine() -> World:
            for _ in range(ticks):
                engine_tick(world)
            return world

        def run_esper() -> Any:
            esper.switch_world(f"small-{n}")
            for _ in range(ticks):
                esper_tick(esper)
            return esper

        def run_tcod() -> Any:
            for _ in range(ticks):
                tcod_tick(registry)
            return registry

        # every contender runs as often as the others: the worlds stay in step
        ops = {"engine": Op(run_engine, fingerprint=engine_motion),
               "esper": Op(run_esper, fingerprint=esper_motion),
               "tcod-ecs": Op(run_tcod, fingerprint=tcod_motion)}
        names = {k: ("churn_tick", variant, k) for k in ops}
        out = timed_records(NAME, n, ops, timing, names)
        for r in out:
            r["ticks"] = ticks
            if "median_s" in r:
                r["per_tick_us"] = round(r["median_s"] / ticks * 1e6, 3)
        return out

    out = timed(max(MIN_TICKS, TICKS_PER_CALL // n), "")
    if n in COLD_SIZES:
        out += timed(1, "first tick")
    return out


JOBS = {"engine+esper+tcod-ecs": job}
