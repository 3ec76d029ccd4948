"""animate over every kind of sprite matches the plain per-kind formulation (one query
per kind of row), also as entities come and go."""

from __future__ import annotations

import numpy as np

from ecs_engine import World
from ecs_engine.components import Grounded, Health, Sprite, Velocity
from ecs_engine.components.render import FRAME_WALK
from ecs_engine.systems.animation import BLINK_HZ, MOVING, _frames, animate


def reference(world: World, dt: float) -> None:
    """The sprites that are not bodies (Velocity and Grounded), one query per kind."""
    step = np.float32(dt)
    with world.query(Sprite, Velocity, without=(Grounded,), readonly=(Velocity,)) as q:
        sprite, vx = q[Sprite], q[Velocity]["x"]
        sprite["clock"] += step
        sprite["frame"] = FRAME_WALK + _frames(sprite["clock"])
        sprite["flip"] = np.where(vx < -MOVING, True, np.where(vx > MOVING, False,
                                                               sprite["flip"]))
    with world.query(Sprite, without=(Velocity,)) as q:
        q[Sprite]["clock"] += step
        q[Sprite]["frame"] = FRAME_WALK + _frames(q[Sprite]["clock"])
    with world.query(Sprite, Health, readonly=(Health,)) as q:
        left = q[Health]["invulnerable"]
        q[Sprite]["blink"] = (left > 0) & ((left * BLINK_HZ).astype(np.int32) % 2 == 0)


def world_of(seed: int) -> World:
    rng = np.random.default_rng(seed)
    w = World(auto_group=False)
    n = 60
    keys = w.spawn_batch(Sprite(clock=rng.random(n, dtype=np.float32)), count=n)
    for ctype, share in ((Velocity, 0.6), (Grounded, 0.5), (Health, 0.3)):
        chosen = keys[rng.random(n) < share]
        if ctype is Velocity:
            w.add_batch(chosen, Velocity(x=rng.uniform(-3, 3, len(chosen)),
                                         y=rng.uniform(-3, 3, len(chosen))))
        elif ctype is Health:
            w.add_batch(chosen, Health(invulnerable=rng.uniform(-0.5, 1, len(chosen))))
        else:
            w.add_batch(chosen, Grounded(on_ground=rng.random(len(chosen)) < 0.5))
    return w


def test_one_pass_equals_the_reference_each_tick() -> None:
    """Each tick from the same state: animate's one pass over the non-body rows gives
    the same bytes as one query per kind, also after despawns move rows."""
    w = world_of(11)
    for tick in range(10):
        before = w.snapshot()
        animate(w, 1 / 60)
        got = w.store(Sprite).data[: w.store(Sprite).n].copy()
        w.restore(before)
        animate_bodies_only(w, 1 / 60)  # what animate does first, then the rest by kind
        reference(w, 1 / 60)
        want = w.store(Sprite).data[: w.store(Sprite).n]
        assert got.tobytes() == want.tobytes(), f"tick {tick}"
        if tick % 4 == 3:
            keys = w.store(Sprite).entities[: w.store(Sprite).n]
            w.despawn(int(keys[tick % len(keys)]))


def animate_bodies_only(world: World, dt: float) -> None:
    """animate's first block (bodies with Velocity and Grounded), unchanged."""
    from ecs_engine.components.render import FRAME_FALL, FRAME_IDLE, FRAME_JUMP
    from ecs_engine.systems.animation import _face
    step = np.float32(dt)
    with world.query(Sprite, Velocity, Grounded, readonly=(Velocity, Grounded)) as q:
        if len(q):
            sprite, vel, ground = q[Sprite], q[Velocity], q[Grounded]
            walking = ground["on_ground"] & (np.abs(vel["x"]) > MOVING)
            sprite["clock"] = np.where(walking, sprite["clock"] + step, 0)
            cycle = _frames(sprite["clock"])
            airborne = np.where(vel["y"] > 0, FRAME_JUMP, FRAME_FALL)
            sprite["frame"] = np.where(walking, FRAME_WALK + cycle,
                                       np.where(ground["on_ground"], FRAME_IDLE, airborne))
            _face(sprite, vel)
