"""The per-body collision loops for a few bodies (``systems.collision_few``: in C where
built, in Python) against the vectorised move: on random levels and bodies all must write
the same Position and Velocity bytes and report the same hit rows and sides in the same
order."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ecs_engine.systems import collision_few, overlaps_few
from ecs_engine.systems.colliders import LevelColliders
from ecs_engine.systems.collision import SKIN, _move
from tests.test_collision_grids import SETTINGS, cell_boxes, levels, movers

POS = [("x", np.float32), ("y", np.float32)]
SIZE = [("w", np.float32), ("h", np.float32)]


def bodies(rng: np.random.Generator, n: int, x0: float, x1: float, y0: float,
           y1: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Position, Velocity and Collider rows around the level: some on whole and half
    units, some inside walls, some over no grid row or more than two, some still."""
    x, y, hw, hh, _ = movers(rng, n, x0, x1, y0, y1)
    pos, vel, col = np.zeros(n, POS), np.zeros(n, POS), np.zeros(n, SIZE)
    pos["x"], pos["y"] = x, y
    col["w"], col["h"] = hw * 2, hh * 2
    vel["x"] = rng.uniform(-70, 70, n)
    vel["y"] = rng.uniform(-70, 70, n)
    vel["x"][rng.random(n) < 0.15] = 0
    vel["y"][rng.random(n) < 0.1] = 0
    return pos, vel, col


def spying(calls: list[bool]) -> Callable[..., object]:
    """``move_few`` that also notes whether it took each call (False: it declined)."""
    real = collision_few.move_few

    def spy(*args: Any) -> object:
        got = real(*args)
        calls.append(got is not None)
        return got

    return spy


def both_ways(colliders: LevelColliders, parts: list, dt: float) -> list:
    """(hits, written parts) from the vectorised move and from the loop (None when the
    loop declined)."""
    out = []
    for few in (0, collision_few.FEW_BODIES):
        copies = [(p.copy(), v.copy(), c) for p, v, c in parts]
        with mock.patch.object(collision_few, "FEW_BODIES", few):
            calls: list[bool] = []
            with mock.patch.object(collision_few, "move_few", spying(calls)):
                hits = _move(colliders, copies, dt, None)
        out.append((hits, copies, calls == [True]))
    return out


@contextmanager
def python_loops() -> Iterator[None]:
    """The Python loops, as where the extension is not built."""
    with mock.patch.object(collision_few, "_C_MOVE", None), \
            mock.patch.object(overlaps_few, "_C_OVERLAP", None):
        yield


def copies(parts: list) -> list:
    return [(p.copy(), v.copy(), c) for p, v, c in parts]


def moved_by_each(colliders: LevelColliders, parts: list, dt: Any) -> dict[str, Any]:
    """{way: (hits or None, the parts it wrote)} for the C loop, the Python loop and the
    vectorised move (the loops on copies; None: declined, nothing written)."""
    out = {}
    mine = copies(parts)
    out["c"] = (collision_few.move_few(colliders, mine, dt, SKIN), mine)
    mine = copies(parts)
    with python_loops():
        out["python"] = (collision_few.move_few(colliders, mine, dt, SKIN), mine)
    mine = copies(parts)
    with mock.patch.object(collision_few, "FEW_BODIES", 0):
        out["vectorised"] = (_move(colliders, mine, dt, None), mine)
    return out


def level_with_odd_boxes(level: tuple, n_odd: int) -> LevelColliders:
    """The level's cells as boxes plus ``n_odd`` unaligned ones (some far outside)."""
    solid, ox, oy, rng = level
    h, w = solid.shape
    l0, b0 = rng.uniform(ox - 30, ox + w + 30, n_odd), rng.uniform(oy - 30, oy + h + 30, n_odd)
    odd = np.stack([l0, b0, l0 + rng.uniform(0.2, 3, n_odd), b0 + rng.uniform(0.2, 3, n_odd)],
                   axis=1)
    boxes = np.concatenate([cell_boxes(solid, ox, oy, rng), odd]).astype(np.float32)
    return LevelColliders.build(*boxes.T)


def assert_same_moves(want: tuple, got: tuple) -> None:
    """Two (hits, moved parts) the same: hit arrays of one dtype and values, and the
    same Position and Velocity bytes."""
    (want_hits, want_parts), (got_hits, got_parts) = want, got
    for a, b in zip(want_hits, got_hits, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    for (p, v, _), (q, u, _) in zip(want_parts, got_parts, strict=True):
        assert p.tobytes() == q.tobytes()
        assert v.tobytes() == u.tobytes()



@SETTINGS
@given(levels(), st.integers(0, 3), st.integers(1, collision_few.FEW_BODIES_PYTHON),
       st.integers(0, 5),
       st.sampled_from([1 / 60, 1 / 30, 0.0125, "float32"]))
def test_the_c_loop_moves_exactly_as_the_python_loop_and_the_vectorised_move(
        level: tuple, n_odd: int, n: int, second: int, dt: Any) -> None:
    """The C loop (where built), the Python loop and the vectorised move: the same bytes
    written, the same hits, and the same calls declined."""
    solid, ox, oy, rng = level
    h, w = solid.shape
    colliders = level_with_odd_boxes(level, n_odd)
    k = min(second, n - 1)  # a second set of rows (collide's bodies without Grounded)
    pos, vel, col = bodies(rng, n, ox, ox + w, oy, oy + h)
    parts = [(pos[: n - k], vel[: n - k], col[: n - k])]
    if k:
        parts.append((pos[n - k :], vel[n - k :], col[n - k :]))
    if dt == "float32":  # a numpy scalar dt: both loops take float(dt), as numpy does
        dt = np.float32(1 / 60)
    ways = moved_by_each(colliders, parts, dt)
    # Both loops decline the same calls (a body that may reach an unaligned box).
    assert (ways["c"][0] is None) == (ways["python"][0] is None)
    if ways["c"][0] is None:
        for (p, v, _), (q, u, _) in zip(parts, ways["c"][1], strict=True):
            assert (p.tobytes(), v.tobytes()) == (q.tobytes(), u.tobytes())  # unwritten
        return
    assert_same_moves(ways["vectorised"], ways["c"])
    assert_same_moves(ways["vectorised"], ways["python"])


def test_the_demo_level_takes_the_loop_and_moves_as_the_vectorised_move() -> None:
    """The demo level's dozen bodies go through the loop (its one unaligned box is far
    from them at the start), and 120 ticks of the demo end in the same state whichever
    way they move: the C loop (where built), the Python loops (also the patrols' probes
    for ledges), the vectorised move."""
    import os

    os.environ.setdefault("ARCADE_HEADLESS", "1")
    from ecs_engine.demo.game import DT, Game

    hashes = []
    for way in ("c", "python", "vectorised"):
        game = Game("demo", history_seconds=DT, save_dir=os.devnull)
        calls: list[bool] = []
        few = 0 if way == "vectorised" else collision_few.FEW_BODIES
        with mock.patch.object(collision_few, "FEW_BODIES", few), \
                mock.patch.object(collision_few, "move_few", spying(calls)), \
                python_loops() if way == "python" else contextlib.nullcontext():
            for tick in range(120):
                game.world.resources["input"] = {"right": tick % 40 < 30, "left": False,
                                                 "jump": tick % 25 == 0,
                                                 "shoot": tick % 10 == 0}
                game.world.step(DT)
        hashes.append(game.world.state_hash())
        if few:
            assert calls and sum(calls) >= len(calls) * 0.9  # the loop, nearly every tick
        else:
            assert calls == []
    assert hashes[0] == hashes[1] == hashes[2]


def test_a_non_finite_body_takes_the_vectorised_move() -> None:
    """floor() of inf or nan raises: the loop declines and the vectorised move runs."""
    solid = np.ones((2, 6), np.bool_)
    rng = np.random.default_rng(0)
    colliders = LevelColliders.build(*cell_boxes(solid, 0, 0, rng).astype(np.float32).T)
    for bad in (np.inf, -np.inf, np.nan):
        pos, vel, col = bodies(rng, 3, 0, 6, 0, 2)
        vel["y"][1] = bad
        assert collision_few.move_few(colliders, [(pos, vel, col)], 1 / 60, 1e-3) is None
        (want, moved, _), (got, looped, took_loop) = both_ways(colliders, [(pos, vel, col)],
                                                               1 / 60)
        assert not took_loop
        assert moved[0][0].tobytes() == looped[0][0].tobytes()


def test_a_float32_dt_moves_as_the_vectorised_move() -> None:
    """``world.step(np.float32(1 / 60))``: numpy computes a Python float with a float32
    scalar in float32 (NEP 50), so the loop moved bodies by float32 products where the
    vectorised move multiplies in float64 (positions a float32 ulp apart)."""
    solid = np.ones((3, 8), np.bool_)
    rng = np.random.default_rng(1)
    colliders = LevelColliders.build(*cell_boxes(solid, 0, 0, rng).astype(np.float32).T)
    for seed in range(20):
        pos, vel, col = bodies(np.random.default_rng(seed), 6, -4, 12, -3, 6)
        (want, moved, _), (got, looped, took_loop) = both_ways(
            colliders, [(pos, vel, col)], np.float32(1 / 60))  # type: ignore[arg-type]
        assert took_loop
        for a, b in zip(want, got, strict=True):
            np.testing.assert_array_equal(a, b)
        assert moved[0][0].tobytes() == looped[0][0].tobytes()
        assert moved[0][1].tobytes() == looped[0][1].tobytes()
