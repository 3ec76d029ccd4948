"""Rollback (restore a recent frame, re-simulate with corrected inputs) and the sync test.

The model for rollback is a straight run: running with the wrong inputs and rolling back
with the right ones must end in exactly the state (hash and every column) of running with
the right inputs from the start.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecs_engine import (
    NULL,
    DesyncError,
    Entity,
    RestoreCallbackError,
    Rollback,
    SyncTest,
    World,
    component,
)
from ecs_engine.components import Bouncer, Health, Player, Velocity
from ecs_engine.demo.__main__ import main as demo_main
from ecs_engine.demo.game import DT, INPUT_ACTIONS, Game
from tests.gl import window_or_skip
from tests.world_state import check_invariants, world_state

EXAMPLES = int(os.environ.get("DETERMINISM_EXAMPLES", "1000"))


@component
class Body:
    x: np.float64 = 0.0
    v: np.float32 = 0.0


@component
class Tagged: ...


@component
class Follows:
    target: Entity = NULL


def toy_system(world: World, dt: float) -> None:
    """Input-driven structural changes and rng draws: a small game with every kind of
    state a rollback must bring back (spawns, despawns, adds, removes, keys in columns)."""
    cmd = int((world.resources.get("input") or {}).get("cmd", 0))
    with world.query(Body) as q:
        q[Body]["x"] += q[Body]["v"] * dt
        q[Body]["v"] += world.rng.normal(0, 1, len(q)).astype(np.float32)
    keys = world.entities()
    if cmd % 4 == 1:
        world.spawn_batch(Body(x=float(cmd), v=1.0), count=1 + cmd % 3)
    elif cmd % 4 == 2 and len(keys):
        world.despawn(int(keys[cmd % len(keys)]))
    elif cmd % 4 == 3 and len(keys):
        key = int(keys[cmd % len(keys)])
        if world.has(key, Tagged):
            world.remove(key, Tagged)
        else:
            world.add(key, Tagged())
            world.add(key, Follows(target=int(keys[0])))
    world.resources["last_cmd"] = cmd


def toy_world(seed: int = 7) -> World:
    world = World(seed=seed)
    world.spawn_batch(Body(x=np.arange(5.0), v=0.5), count=5)
    world.add_system(toy_system)
    return world


def straight(seed: int, cmds: list[int]) -> World:
    world = toy_world(seed)
    for c in cmds:
        world.resources["input"] = {"cmd": c}
        world.step(DT)
    return world


@settings(max_examples=max(20, EXAMPLES // 5), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.integers(0, 40), min_size=1, max_size=30), st.data(),
       st.integers(1, 10), st.integers(0, 2**32 - 1))
def test_rollback_with_corrected_inputs_equals_a_straight_run(
        guessed: list[int], data: st.DataObject, frames: int, seed: int) -> None:
    world = toy_world(seed)
    rb = Rollback(world, frames=frames, dt=DT)
    for c in guessed:
        rb.advance({"cmd": c})
    present = world.tick
    to_frame = data.draw(st.integers(max(0, present - frames), present), label="to_frame")
    fixed = data.draw(st.lists(st.integers(0, 40), min_size=present - to_frame,
                               max_size=present - to_frame), label="corrected")
    if data.draw(st.booleans(), label="as mapping"):
        rb.rollback(to_frame, {to_frame + i: {"cmd": c} for i, c in enumerate(fixed)})
    else:
        rb.rollback(to_frame, [{"cmd": c} for c in fixed])
    assert world.tick == present
    check_invariants(world)
    expected = straight(seed, guessed[:to_frame] + fixed)
    assert world.state_hash() == expected.state_hash()
    assert world_state(world) == world_state(expected)
    # Then the game goes on; a second rollback over the re-recorded frames still works.
    rb.advance({"cmd": 5})
    expected.resources["input"] = {"cmd": 5}
    expected.step(DT)
    back = max(rb.oldest, world.tick - 2)
    rb.rollback(back)
    assert world.state_hash() == expected.state_hash()


def test_rollback_bounds_and_input_checks() -> None:
    world = toy_world()
    rb = Rollback(world, dt=DT)
    assert rb.frames == 8
    for c in range(12):
        rb.advance({"cmd": c})
    assert (rb.oldest, rb.present) == (4, 12)
    with pytest.raises(ValueError, match=r"frame 3 is not held; frames 4\.\.11"):
        rb.rollback(3)
    for too_old in (2, 0, -1):  # further back: the same message, not "ticked outside"
        with pytest.raises(ValueError, match=rf"frame {too_old} is not held; frames 4\.\.11 "
                                             r"are \(the last 8\)"):
            rb.rollback(too_old, [{}] * (12 - too_old))
    with pytest.raises(ValueError, match=r"frame 13 is in the future; the present is frame 12"):
        rb.rollback(13, [])
    with pytest.raises(ValueError, match="2 inputs for the 3 frames 9..11"):
        rb.rollback(9, [{}, {}])
    with pytest.raises(ValueError, match=r"inputs for frames \[12\] outside 9\.\.11"):
        rb.rollback(9, {12: {}})
    before = world.state_hash()
    rb.rollback(12, [])  # the present: nothing to do
    rb.rollback(4)  # the same inputs: the same state
    assert world.state_hash() == before
    assert rb.inputs(4) == {"cmd": 4}
    world.step(DT)  # frame 12 not recorded: a gap after held frames
    with pytest.raises(ValueError, match=r"frames 12\.\.12 were not recorded \(the world "
                                         r"ticked outside Rollback\.advance\)"):
        rb.rollback(10)
    with pytest.raises(ValueError, match="frames must be >= 1"):
        Rollback(world, frames=0)


def test_frames_live_in_recycled_buffers() -> None:
    world = toy_world()
    rb = Rollback(world, frames=4, dt=DT)
    for _ in range(8):
        rb.advance({"cmd": 0})  # no structural change: buffers reach their size
    before = [id(buf.data) for f in rb._ring for buf in f.stores.values()]
    for _ in range(20):
        rb.advance({"cmd": 0})
        rb.rollback(world.tick - 3)
    assert [id(buf.data) for f in rb._ring for buf in f.stores.values()] == before


def test_a_loaded_or_rewound_world_forgets_the_old_frames() -> None:
    world = toy_world()
    rb = Rollback(world, frames=8, dt=DT)
    snap = world.snapshot()
    for c in range(5):
        rb.advance({"cmd": c})
    world.restore(snap)  # the world jumped back: frames 1..4 lead somewhere else now
    rb.advance({"cmd": 9})
    assert rb.oldest == 0 and not rb.held(1)
    with pytest.raises(ValueError, match="not held"):
        rb.rollback(-1)


@pytest.mark.parametrize("jump", ["load", "restore"])
def test_a_load_or_restore_to_a_tick_whose_frames_are_held_still_forgets_them(
        tmp_path: Path, jump: str) -> None:
    """Frames 0..5 are held; a save of another run at tick 3 must not let a rollback go
    back to frame 1 of the old run (which would undo the load without a word)."""
    other = toy_world(seed=8)
    for _ in range(3):
        other.resources["input"] = {"cmd": 1}
        other.step(DT)
    other.save(tmp_path / "other.sav")
    world = toy_world()
    rb = Rollback(world, frames=8, dt=DT)
    for c in range(6):
        rb.advance({"cmd": 2 + 4 * c})
    assert rb.held(1)
    if jump == "load":
        world.load(tmp_path / "other.sav")
    else:
        world.restore(other.snapshot())
    assert world.tick == 3 and not rb.held(1) and rb.oldest == 3
    with pytest.raises(ValueError, match="not"):
        rb.rollback(1)
    rb.advance({"cmd": 0})
    assert rb.oldest == 3
    rb.rollback(3)  # back to the loaded state, re-simulated: the straight run from it
    other.resources["input"] = {"cmd": 0}
    other.step(DT)
    assert world_state(world) == world_state(other)


def test_resimulating_marker_is_set_only_during_re_simulation() -> None:
    world = toy_world()
    seen: list[bool] = []
    world.add_system(lambda w, dt: seen.append(w.resimulating), name="sound")
    rb = Rollback(world, dt=DT)
    for _ in range(3):
        rb.advance({"cmd": 0})
    rb.rollback(1)
    assert seen == [False, False, False, True, True]
    assert world.resimulating is False


# ----------------------------------------------------------------------------------------
# sync test


def held_inputs(frame: int) -> dict[str, bool]:
    """A scripted player: run right, jump now and then, shoot in bursts."""
    return {"left": frame % 90 > 70, "right": frame % 90 < 60, "jump": frame % 37 == 0,
            "shoot": frame % 25 < 3}


def test_sync_test_passes_a_scripted_demo_run() -> None:
    game = Game(seed=3, save_dir="unused", stress=200)
    sync = SyncTest(game.world, rewind=2, dt=DT)
    hashes = [sync.step(held_inputs(f)) for f in range(150)]
    assert sync.checked == 149  # every tick from the second on
    assert len(set(hashes)) == 150
    # The checked run is the run: a plain run with the same inputs ends in the same state.
    plain = Game(seed=3, save_dir="unused", stress=200)
    for f in range(150):
        plain.world.resources["input"] = held_inputs(f)
        plain.world.step(DT)
    assert plain.world.state_hash() == hashes[-1] == game.world.state_hash()
    assert set(held_inputs(0)) == set(INPUT_ACTIONS)


def test_sync_test_names_the_tick_component_and_field_of_a_non_deterministic_system(
) -> None:
    game = Game(seed=3, save_dir="unused", stress=50)
    outside = np.random.default_rng(1)  # state outside the world: not rolled back

    def jitter(world: World, dt: float) -> None:
        if world.tick >= 20:
            with world.query(Bouncer, Velocity, readonly=(Bouncer,)) as q:
                q[Velocity]["x"] += outside.normal(0, 1, len(q)).astype(np.float32)

    game.world.add_system(jitter, before="gravity")
    sync = SyncTest(game.world, dt=DT)
    with pytest.raises(DesyncError) as info:
        for f in range(60):
            sync.step(held_inputs(f))
    err = info.value
    assert (err.tick, err.component, err.field) == (21, "Position", "x")
    assert "tick 21" in str(err) and "Position.x" in str(err)
    assert err.frames == (19, 20)


def test_sync_test_catches_state_kept_outside_the_world() -> None:
    world = toy_world()
    count = [0]

    def counter(w: World, dt: float) -> None:
        count[0] += 1  # a closure counter instead of a resource
        w.resources["score"] = count[0]

    world.add_system(counter)
    sync = SyncTest(world, dt=DT)
    sync.step({"cmd": 0})  # tick 1: nothing to rewind to yet
    with pytest.raises(DesyncError, match=r"tick 2: resources\.score differs") as info:
        sync.step({"cmd": 0})
    assert info.value.component == "resources" and info.value.field == "score"


# ----------------------------------------------------------------------------------------
# the demo's --synctest (CI runs these: a scripted demo run checked tick by tick)

TOUR = Path(__file__).resolve().parents[1] / "demo" / "scripts" / "tour.json"


def test_demo_synctest_over_the_scripted_tour(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    window_or_skip(64, 64, "gl probe").close()
    monkeypatch.setenv("ARCADE_HEADLESS", "1")
    monkeypatch.chdir(tmp_path)
    code = demo_main(["--headless", "--synctest", "--frames", "240", "--inputs", str(TOUR),
                      "--stress", "100", "--size", "320x180"])
    out = capsys.readouterr().out
    assert code == 0, out
    # The tour rewinds and quickloads too: after each jump the sync test needs 2 new ticks.
    checked = re.search(r"sync test\s+(\d+) ticks re-simulated and matched", out)
    assert checked and int(checked.group(1)) >= 150, out
    synced = re.search(r"state hash\s+([0-9a-f]{32})", out)
    assert synced
    # Checking changes nothing: the same script without --synctest ends in the same state.
    assert demo_main(["--headless", "--frames", "240", "--inputs", str(TOUR), "--stress",
                      "100", "--size", "320x180"]) == 0
    plain = re.search(r"state hash\s+([0-9a-f]{32})", capsys.readouterr().out)
    assert plain and plain.group(1) == synced.group(1)


def test_demo_synctest_reports_a_non_deterministic_system(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    window_or_skip(64, 64, "gl probe").close()
    import ecs_engine.demo.game as game_module

    clock = iter(range(10**9))  # wall-clock-like: a new value on every call

    def drifting_fall_out(world: World, dt: float) -> None:
        if world.tick >= 30:
            with world.query(Player, Health) as q:
                q[Health]["invulnerable"] = next(clock) * 1e-3

    monkeypatch.setattr(game_module, "fall_out", drifting_fall_out)
    monkeypatch.setenv("ARCADE_HEADLESS", "1")
    monkeypatch.chdir(tmp_path)
    code = demo_main(["--headless", "--synctest", "--frames", "100", "--size", "320x180"])
    err = capsys.readouterr().err
    assert code == 1
    assert "desync at tick 31: Health.invulnerable differs" in err, err


def test_writes_through_a_kept_view_between_ticks_reach_the_recorded_frame() -> None:
    """A frame's buffers are reused ``frames`` ticks later, and unchanged versions mean
    nothing to copy; a kept view writes without moving them, so it must count as a change
    (as it does for snapshots)."""
    world = World(seed=1)
    world.spawn_batch(Body(x=3.0), count=10)
    rb = Rollback(world, frames=2, dt=DT)
    with world.query(Body) as q:
        xs = q[Body]["x"]  # kept past the block
    rb.advance()
    rb.advance()  # frames 0 and 1: x = 3
    xs[:5] = 77.0  # between ticks, through the view
    del xs  # (gone before the frame is recorded, too)
    expected = world_state(world)
    rb.advance()  # frame 2, in frame 0's buffers
    with world.query(Body) as q:
        q[Body]["x"] += 1.0  # a tracked change for the restore to undo
    rb.advance()
    rb.restore(2)
    assert world_state(world) == expected


def test_restoring_frames_of_a_big_store_copies_back_only_the_chunks_that_moved() -> None:
    """Frames of a store bigger than one chunk where each tick writes one chunk: a
    restore copies the frame's rows back (all at once or chunk by chunk, from the
    frame's recycled buffer) and the world equals the frame, whichever frame it is."""
    from ecs_engine.storage import CHUNK_ROWS

    def nudge(world: World, dt: float) -> None:
        k = world.tick % 3  # one row of one chunk of three per tick (a record write
        world.get(int(keys[k * CHUNK_ROWS + 5]), Body)["x"] = -world.tick  # marks it only)

    world = World(seed=2)
    keys = world.spawn_batch(Body(x=np.arange(3 * CHUNK_ROWS, dtype=np.float64)),
                             count=3 * CHUNK_ROWS)
    world.add_system(nudge)
    rb = Rollback(world, frames=4, dt=DT)
    states = {}
    for _ in range(6):
        states[world.tick] = world_state(world)
        rb.advance()
    for frame in (5, 3, 2):  # later frames are dropped by each restore
        rb.restore(frame)
        assert world_state(world) == states[frame]
        check_invariants(world)



def test_a_reused_input_object_does_not_rewrite_recorded_frames() -> None:
    """Games update one input dict in place every frame. Each frame must keep the input
    it was given: a rollback re-running the recorded inputs reproduces the present, the
    sync test sees no desync, and ``inputs(f)`` reports what frame f got."""
    pad: dict[str, Any] = {"cmd": 0, "held": [0]}
    rb = Rollback(toy_world(3), frames=8)
    for frame in range(10):
        pad["cmd"] = frame % 4
        pad["held"][0] = frame  # nested values are the caller's too
        rb.advance(pad)
    present = rb.world.state_hash()
    assert rb.inputs(rb.world.tick - 3) == {"cmd": 7 % 4, "held": [7]}
    rb.inputs(rb.world.tick - 3)["cmd"] = 99  # a copy: the record stays
    assert rb.inputs(rb.world.tick - 3)["cmd"] == 3
    rb.rollback(rb.world.tick - 6)
    assert rb.world.state_hash() == present
    sync = SyncTest(toy_world(3), rewind=2)
    for frame in range(8):
        pad["cmd"] = frame % 4
        sync.step(pad)  # a desync would raise


def test_systems_changing_the_input_resource_do_not_change_the_record() -> None:
    def consume(world: World, dt: float) -> None:
        pressed = world.resources["input"]
        pressed["cmd"] = -1  # e.g. a system marking input as handled
        pressed["queue"].append("handled")

    world = toy_world(4)
    world.add_system(consume)
    rb = Rollback(world, frames=4)
    for frame in range(6):
        rb.advance({"cmd": frame % 4, "queue": []})
    assert [rb.inputs(f) for f in range(2, 6)] == [{"cmd": c, "queue": []} for c in (2, 3, 0, 1)]


def test_the_snapshot_a_rollback_hands_its_callbacks_stays_the_restored_state() -> None:
    """Frames live in recycled buffers: the event's snapshot must not be a view of them
    (a callback keeping it would see later frames' values, and restoring it later
    would bring those back)."""
    world = toy_world(3)
    rb = Rollback(world, frames=8, dt=DT)
    for c in range(6):
        rb.advance({"cmd": c})
    kept: list[Any] = []
    world.on_restore(lambda w, event: kept.append((event.snapshot, world_state(w),
                                                   w.state_hash())))
    rb.restore(2)
    snap, state, hashed = kept[0]
    for c in range(12):  # every buffer of the ring is written over (frame 2: by frame 10)
        rb.advance({"cmd": 9 + c})
    assert snap.tick == 2
    after = World(seed=3)
    after.restore(snap)
    assert world_state(after) == state and after.state_hash() == hashed


def test_a_failing_callback_does_not_cut_a_rollback_short() -> None:
    world = toy_world(5)
    rb = Rollback(world, frames=8, dt=DT)
    for c in range(6):
        rb.advance({"cmd": c})
    expected = straight(5, [0, 1, 2, 40, 41, 42])
    calls: list[str] = []

    def failing(w: World, event: Any) -> None:
        calls.append(event.source)
        raise KeyError("a callback's own bug")

    world.on_restore(failing)
    with pytest.raises(RestoreCallbackError) as info:
        rb.rollback(3, [{"cmd": c} for c in (40, 41, 42)])
    assert calls == ["rollback"]
    assert "re-simulation to frame 6 ran" in "".join(info.value.__notes__)
    assert world.tick == 6 and all(rb.held(f) for f in range(6))
    assert world.state_hash() == expected.state_hash()


@pytest.mark.parametrize("move", ["step", "advance", "restore"])
def test_a_callback_that_moves_the_world_stops_the_rollback_with_an_error(move: str) -> None:
    world = toy_world(6)
    rb = Rollback(world, frames=8, dt=DT)
    first = world.snapshot()
    for c in range(10):
        rb.advance({"cmd": c})
    moved: list[bool] = []

    def callback(w: World, event: Any) -> None:
        if not moved:
            moved.append(True)
            if move == "step":
                w.step(DT)
            elif move == "advance":
                rb.advance({"cmd": 1})
            else:
                w.restore(first)

    world.on_restore(callback)
    with pytest.raises(RuntimeError, match="an on_restore callback moved the world .* "
                                           "rolling back to frame 6"):
        rb.rollback(6)
    assert world.tick == (0 if move == "restore" else 7)  # where the callback left it
