"""The demo's game logic, free of arcade so tests can drive it without a GL context.

A :class:`Game` owns one :class:`~ecs_engine.World` loaded from a level, runs the stock
platformer systems on a fixed 60 Hz timestep, and performs the player's actions: quicksave
and quickload into four in-memory slots, save/load a file, rewind through a
:class:`~ecs_engine.History` (one snapshot recorded per tick, one restored per frame), and
restart. Reaching the level's flag wins, losing all hearts is game over: either freezes the
world (:attr:`Game.outcome`) until a quickload, a rewind or a restart.

Each live tick's events (``jump``, ``coin``, ``hurt``...) are queued in :attr:`Game.cues` for
the window to play as sounds; rewinding restores states without ticking, so nothing is
queued twice.

Actions are named by strings (:data:`HOLD_ACTIONS`, :data:`TRIGGER_ACTIONS`); the window's key
map and the headless input scripts use the same names.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import xxhash

from ecs_engine import History, PrefabRegistry, SaveFileError, Snapshot, SyncTest, World
from ecs_engine.components import (
    Ammo,
    Bouncer,
    Collider,
    Color,
    Enemy,
    Goal,
    Gravity,
    Grounded,
    Health,
    Layer,
    Lifetime,
    LocalOffset,
    Patrol,
    Pickup,
    Player,
    Position,
    Projectile,
    Score,
    Solid,
    Spawner,
    Sprite,
    Tile,
    Velocity,
    sheet_index,
    stock_prefabs,
)
from ecs_engine.entity import key_slots
from ecs_engine.levels import LevelSummary, load_level, shipped_level
from ecs_engine.levels.editor_names import stock_editor_names
from ecs_engine.systems import (
    add_platformer_systems,
    events,
    follow_parents,
    static_grid,
)
from ecs_engine.systems.gameplay import PICKUP_COIN, WON_AT

__all__ = [
    "ACTIONS",
    "DT",
    "HOLD_ACTIONS",
    "INPUT_ACTIONS",
    "SLOTS",
    "TICK_RATE",
    "TRIGGER_ACTIONS",
    "Game",
    "PlayerStatus",
    "add_stress_bodies",
    "default_zoom",
    "fall_out",
    "level_bounds",
    "Timing",
    "resolve_level",
    "state_hash",
]

TICK_RATE = 60  # simulation ticks per second
DT = 1.0 / TICK_RATE  # seconds per tick
MAX_TICKS_PER_FRAME = 5  # a slow frame runs at most this many ticks, then drops the backlog
SLOTS = 4
INPUT_ACTIONS = ("left", "right", "jump", "shoot")  # copied into world.resources["input"]
HOLD_ACTIONS = (*INPUT_ACTIONS, "rewind")
TRIGGER_ACTIONS = ("quicksave", "quickload", "save_file", "load_file", "restart",
                   *(f"slot{i}" for i in range(1, SLOTS + 1)))
ACTIONS = (*HOLD_ACTIONS, *TRIGGER_ACTIONS)
KILL_DEPTH = 10.0  # world units below y = 0 where fallen bodies respawn or despawn
DEFAULT_HISTORY_BYTES = 256 * 1024 * 1024
DEFAULT_SAVE_DIR = Path("saves")
VIEW_HEIGHT_UNITS = 30.0  # world units visible vertically at the default zoom
MESSAGE_SECONDS = 2.0  # how long a message shows
MAX_CUES = 256  # queued sound cues kept when nobody drains them (headless runs)

# "Is any set?" on small masks: count_nonzero takes ~0.2 us, ndarray.any() ~1 us.
_count = np.count_nonzero

ALL_COMPONENTS = (Ammo, Bouncer, Collider, Color, Enemy, Goal, Gravity, Grounded, Health, Layer,
                  Lifetime, Patrol, Pickup, Player, Position, Projectile, Score, Solid, Spawner,
                  Sprite, Tile, Velocity, LocalOffset)


# ----------------------------------------------------------------------------------------
# state hash


def state_hash(world: World) -> str:
    """The world's canonical state digest (:meth:`ecs_engine.World.state_hash`): slot table,
    every store's rows in row order, groups, resources, tick and rng state."""
    return world.state_hash()


# ----------------------------------------------------------------------------------------
# level setup


def resolve_level(level: str | os.PathLike[str]) -> Path:
    """A level folder (or ``.lvl``) path, or a shipped level's name, as a path.

    A folder holding ``level.lvl`` wins over a shipped level of the same name (``demo`` is
    also this package's folder, which is not a level). ``KeyError`` (naming the shipped
    levels) if it is neither.
    """
    path = Path(level)
    if path.is_file() or (path / "level.lvl").is_file():
        return path
    try:
        return shipped_level(str(level))
    except KeyError:
        if path.exists():  # let the loader say what is wrong with the folder
            return path
        if len(path.parts) > 1 or path.suffix:  # meant as a path, not a shipped name
            raise KeyError(f"no such level folder or file: {str(level)!r}") from None
        raise


def level_geometry(world: World) -> str:
    """The level's static geometry as an xxh3 digest (hex): every solid's position and
    size, in load order. A save of this level carries it, so loading one of another
    level's version, or of a world this game did not make, is refused."""
    with world.query(Solid, Position, Collider, readonly=(Solid, Position, Collider)) as q:
        digest = xxhash.xxh3_64(q[Position].tobytes())
        digest.update(q[Collider].tobytes())
    return digest.hexdigest()


def fall_out(world: World, dt: float) -> None:
    """Bodies that fell out of the level: the player respawns at the start, bouncers drop
    back in from the top at a random x, everything else despawns.

    One pass over the Position column finds the fallen (usually none or a handful); only
    those are looked up and written, never every body."""
    del dt
    if world.count(Position):
        # Every Position row, as the query over Position alone hands them out, read from
        # the store: the common case (nobody fell) then opens no query (~2 us a tick).
        store = world.store(Position)
        if not _count(store.columns["y"][: store.n] < -KILL_DEPTH):
            return  # the common case touches (and so versions) nothing
    with world.query(Position, readonly=(Position,)) as q:
        fell = q[Position]["y"] < -KILL_DEPTH
        if not _count(fell):
            return
        fallen = q.entities[fell].copy()
    slots = key_slots(fallen)
    # The rows of each store once (the fallen come straight from a query: alive, and
    # every write below goes to rows they have).
    rows = {ctype: world.store(ctype).rows_of(slots) for ctype in (Velocity, Player, Bouncer)}
    moving = rows[Velocity] >= 0
    player = (rows[Player] >= 0) & moving
    bouncer = (rows[Bouncer] >= 0) & moving & ~player
    if _count(player):  # values written in place: no structural change
        start = world.resources.get("player_start") or [1.0, 1.0]
        _write(world, slots[player], Position, x=start[0], y=start[1])
        _write(world, slots[player], Velocity, x=0.0, y=0.0)
    n = int(np.count_nonzero(bouncer))
    if n:
        width, height = world.resources.get("level_size") or [2, 0]
        xs = world.rng.uniform(1.0, max(2.0, float(width) - 1.0), n)
        _write(world, slots[bouncer], Position, x=xs, y=float(height) + 2.0)
        _write(world, slots[bouncer], Velocity, x=0.0, y=0.0)
    gone = fallen[(rows[Player] < 0) & (rows[Bouncer] < 0)]
    if len(gone):
        world.despawn_batch(gone)


def _write(world: World, slots: np.ndarray, ctype: type, **values: object) -> None:
    """Write field values into the ``ctype`` rows of live entities (by slot) that have
    it: ``set_batch``'s write without its per-call key and value checks (a bouncer
    falls out on most ticks of a stress run)."""
    store = world.store(ctype)
    rows = store.rows_of(slots)
    for name, value in values.items():
        store.columns[name][rows] = value
    store.touch(rows)


def level_bounds(world: World, summary: LevelSummary) -> tuple[float, float, float, float]:
    """(left, bottom, right, top) in world units around the level's solids and visuals."""
    grid = static_grid(world)
    boxes = [(float(v.rect[0]), float(v.rect[1]), float(v.rect[0] + v.rect[2]),
              float(v.rect[1] + v.rect[3])) for v in summary.visuals]
    if len(grid.left):
        boxes.append((float(grid.left.min()), float(grid.bottom.min()),
                      float(grid.right.max()), float(grid.top.max())))
    if not boxes:
        w, h = summary.size
        return 0.0, 0.0, float(w), float(h)
    arr = np.array(boxes)
    return (float(arr[:, 0].min()), float(arr[:, 1].min()), float(arr[:, 2].max()),
            float(arr[:, 3].max()))


def attach_bounties(world: World) -> np.ndarray:
    """Give every enemy a coin riding above its head: a child entity (``ChildOf``) placed by
    ``follow_parents`` each tick, which disappears with its enemy (despawn takes the
    subtree). Returns the new keys."""
    with world.query(Enemy, Position, readonly=(Enemy, Position)) as q:
        enemies = q.entities.copy()
    if enemies.size == 0:
        return enemies
    coins = world.spawn_batch(Position(), LocalOffset(y=0.85), Collider(w=0.45, h=0.45),
                              Sprite(sheet=sheet_index("coin")), Layer(z=3),
                              count=len(enemies))
    world.set_parent(coins, enemies)
    return coins


def add_stress_bodies(world: World, count: int, level_size: tuple[int, int],
                      size: float = 0.3) -> np.ndarray:
    """Spawn ``count`` bouncing boxes (``size`` world units) at random free spots of the
    level; returns their keys. Uses ``world.rng``, so it is reproducible from the seed."""
    if count <= 0:
        return np.zeros(0, np.uint64)
    width, height = level_size
    grid = static_grid(world)
    rng = world.rng
    x = rng.uniform(1.0, width - 1.0, count)
    y = rng.uniform(1.0, height - 1.0, count)
    half = size / 2
    for _ in range(32):  # resample the ones that start inside a wall
        bad = grid.overlaps(x - half, y - half, x + half, y + half)
        if not _count(bad):
            break
        nb = int(bad.sum())
        x[bad] = rng.uniform(1.0, width - 1.0, nb)
        y[bad] = rng.uniform(1.0, height - 1.0, nb)
    rgba = rng.integers(40, 256, (count, 4), dtype=np.uint8)
    rgba[:, 3] = 255
    return world.spawn_batch(
        Position(x=x, y=y), Velocity(x=rng.uniform(-8.0, 8.0, count), y=np.zeros(count)),
        Collider(w=size, h=size), Gravity(), Grounded(), Bouncer(), Color(rgba=rgba),
        Layer(z=1), count=count)


def default_zoom(height_px: int) -> float:
    """Pixels per world unit that show :data:`VIEW_HEIGHT_UNITS` units vertically."""
    return max(1.0, height_px / VIEW_HEIGHT_UNITS)


# ----------------------------------------------------------------------------------------
# the game


@dataclass(frozen=True)
class PlayerStatus:
    """What the player HUD shows: hearts (hit points), coins and ammo."""

    hp: int
    max_hp: int
    coins: int
    ammo: int


@dataclass(frozen=True)
class Timing:
    """One measured snapshot or restore: wall time in microseconds, bytes of state."""

    what: str
    us: float
    nbytes: int


class Game:
    """A level in a world, the fixed-step loop and the player's actions.

    ``level``: a shipped level name, a folder, an LDtk project (``editor_level`` picks its
    level) or a Tiled map; ``prefabs``/``names``/``strict`` as for ``load_level`` (default:
    the stock prefabs and editor names). ``seed`` seeds ``world.rng``. ``stress``
    adds that many bouncing bodies. ``synctest`` checks every tick is deterministic (see
    :class:`~ecs_engine.SyncTest`; ticks cost about three times as much).
    ``history_seconds`` of ticks are kept for rewind (fewer if they would exceed
    ``history_bytes``). Save files go to ``save_dir``/slot<N>.sav.
    """

    def __init__(
        self,
        level: str | os.PathLike[str] = "demo",
        *,
        seed: int = 0,
        stress: int = 0,
        save_dir: str | os.PathLike[str] = DEFAULT_SAVE_DIR,
        history_seconds: float = 10.0,
        history_bytes: int | None = DEFAULT_HISTORY_BYTES,
        method: Literal["greedy", "exact"] = "greedy",
        clock: Callable[[], float] = time.perf_counter,
        synctest: bool = False,
        prefabs: PrefabRegistry | None = None,
        names: Mapping[str, str | None] | None = None,
        editor_level: str | int | None = None,
        strict: bool = True,
    ) -> None:
        self.level_path = resolve_level(level)
        self.save_dir = Path(save_dir)
        self._clock = clock
        if prefabs is None:  # the stock prefabs know the stock editor names too
            prefabs, names = stock_prefabs(), stock_editor_names() if names is None else names
        self.prefabs = prefabs
        # The stock systems group the moving-body columns themselves; with no incidental
        # groups, Sprite stays free and follows that group, so the animation queries over
        # every body are views (a (Sprite, Health) group would make them gather).
        self.world = World(seed=seed, auto_group=False)
        # Every type known by name up front: a save file may hold stores (projectiles,
        # bouncers) this world has not created yet.
        self.world.register(*ALL_COMPONENTS)
        self.summary: LevelSummary = load_level(self.world, self.level_path, self.prefabs,
                                                method, level=editor_level, strict=strict,
                                                names=names)
        w, h = self.summary.size
        start = self.summary.player_start or (w / 2, h / 2)
        res = self.world.resources
        res["player_start"] = [float(start[0]), float(start[1])]
        res["camera"] = {"x": float(start[0]), "y": float(start[1])}
        res["input"] = dict.fromkeys(INPUT_ACTIONS, False)
        res["level_size"] = [int(w), int(h)]
        res["level"] = self.summary.name  # a save file knows which level it belongs to
        res["level_geometry"] = level_geometry(self.world)  # ... and which version of it
        add_platformer_systems(self.world)  # (with follow_parents, before camera_follow)
        self.world.add_system(fall_out, before=follow_parents)
        attach_bounties(self.world)
        self.bounds = level_bounds(self.world, self.summary)
        self.stress = add_stress_bodies(self.world, stress, (w, h)).size
        # Sync test mode: every tick re-simulates the last 2 ticks and compares state
        # hashes (DesyncError names the tick, component and field on a mismatch).
        self.sync = SyncTest(self.world, rewind=2, dt=DT) if synctest else None
        self.history = History(capacity=max(1, round(history_seconds * TICK_RATE)),
                               max_bytes=history_bytes)
        self.slots: dict[int, Snapshot] = {}
        self.slot = 1
        self.held: set[str] = set()
        self.elapsed = 0.0  # seconds of frames shown (real time in a window, DT per frame
        # headless): messages expire by it
        self._message = ""
        self._message_at = 0.0
        self.message = f"level {self.summary.name!r}: {len(self.world)} entities"
        self.cues: deque[tuple[str, float, float]] = deque(maxlen=MAX_CUES)
        with self.world.query(Pickup, readonly=(Pickup,)) as q:
            self.total_coins = int((q[Pickup]["kind"] == PICKUP_COIN).sum())
        self._start = self.world.snapshot()  # what restart goes back to
        self.last_snapshot: Timing | None = None  # any snapshot, mostly the per-tick one
        self.last_save: Timing | None = None  # the last quicksave or save file
        self.last_restore: Timing | None = None
        self.tick_ms: deque[float] = deque(maxlen=600)  # wall time of recent ticks
        self._accumulator = 0.0  # seconds of simulation owed to real time
        self._record()  # the start is a rewind target too

    # -- input -------------------------------------------------------------------------
    def press(self, action: str) -> None:
        """Start holding a hold action, or perform a trigger action now."""
        if action in HOLD_ACTIONS:
            self.held.add(action)
        elif action in TRIGGER_ACTIONS:
            self.trigger(action)
        else:
            raise ValueError(f"unknown action {action!r}; actions are {list(ACTIONS)}")

    def release(self, action: str) -> None:
        """Stop holding an action (releasing a trigger action does nothing)."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; actions are {list(ACTIONS)}")
        if action == "rewind" and action in self.held:
            self._accumulator = 0.0  # play resumes from now: no backlog either way
            if self._message.startswith("rewinding"):
                self.message = ""  # (it said where the rewind was, not where play is)
        self.held.discard(action)

    def trigger(self, action: str) -> None:
        """Perform a one-shot action by name."""
        if action.startswith("slot") and action[4:].isdigit():
            self.select_slot(int(action[4:]))
        elif action == "quicksave":
            self.quicksave()
        elif action == "quickload":
            self.quickload()
        elif action == "save_file":
            self.save_file()
        elif action == "load_file":
            self.load_file()
        elif action == "restart":
            self.restart()
        else:
            raise ValueError(f"{action!r} is not a trigger action; they are "
                             f"{list(TRIGGER_ACTIONS)}")

    @property
    def rewinding(self) -> bool:
        return "rewind" in self.held

    # -- messages ----------------------------------------------------------------------
    @property
    def message(self) -> str:
        """The last message (see :attr:`visible_message` for what the screen shows)."""
        return self._message

    @message.setter
    def message(self, text: str) -> None:
        self._message = text
        self._message_at = self.elapsed

    @property
    def visible_message(self) -> str:
        """The last message while it is younger than :data:`MESSAGE_SECONDS`, else ""."""
        return self._message if self.elapsed - self._message_at < MESSAGE_SECONDS else ""

    # -- outcome -----------------------------------------------------------------------
    @property
    def outcome(self) -> Literal["won", "lost"] | None:
        """"won" once a player reached the goal, "lost" when the player is down (0 hp),
        else None (playing). Derived from the world, so a quickload, rewind or restart
        brings play back."""
        if self.world.resources.get(WON_AT) is not None:
            return "won"
        status = self.player_status()
        if status is not None and status.hp <= 0:
            return "lost"
        return None

    @property
    def won_seconds(self) -> float | None:
        """Game time in seconds at which the goal was reached (None before)."""
        won = self.world.resources.get(WON_AT)
        return None if won is None else float(won) * DT

    def player_status(self) -> PlayerStatus | None:
        """The first player's hearts, coins and ammo (None without a player)."""
        with self.world.query(Player, Health, Score, Ammo,
                              readonly=(Player, Health, Score, Ammo)) as q:
            if len(q) == 0:
                return None
            return PlayerStatus(int(q[Health]["hp"][0]), int(q[Health]["max_hp"][0]),
                                int(q[Score]["coins"][0]), int(q[Ammo]["count"][0]))

    # -- time --------------------------------------------------------------------------
    def tick(self) -> bool:
        """Run exactly one simulation tick (``DT`` seconds) with the held input, record it
        in the history and queue its events as :attr:`cues`. Does nothing (False) once the
        game is won or lost: the world stays frozen on the end screen."""
        if self.outcome is not None:
            return False
        inputs = {k: k in self.held for k in INPUT_ACTIONS}
        start = self._clock()
        if self.sync is not None:
            self.sync.step(inputs)  # sets the input resource, ticks, re-simulates, checks
        else:
            self.world.resources["input"] = inputs
            self.world.step(DT)
        self.tick_ms.append((self._clock() - start) * 1000.0)
        self.cues.extend(events(self.world))  # live ticks only: never on rewind or load
        self._record()
        outcome = self.outcome
        if outcome == "won":
            self.message = "goal reached!"
        elif outcome == "lost":
            self.message = "game over"
        return True

    def step_frame(self) -> None:
        """One deterministic frame (headless, ``DT`` seconds): a rewind step while
        "rewind" is held, else exactly one tick."""
        self.elapsed += DT
        if self.rewinding:
            self.rewind_step()
        else:
            self.tick()

    def advance(self, seconds: float) -> int:
        """One real-time frame of ``seconds``: run the ticks real time owes (fixed ``DT``),
        or while rewinding step back as many (so a second held rewinds a second of play
        at any frame rate). Returns ticks run."""
        seconds = max(0.0, seconds) if math.isfinite(seconds) else 0.0  # (a bad clock read)
        self.elapsed += seconds
        self._accumulator += seconds
        if self.rewinding:
            steps = 0
            while self._accumulator >= DT and steps < MAX_TICKS_PER_FRAME:
                if not self.rewind_step():
                    self._accumulator = 0.0  # at the oldest state: owe nothing
                    break
                self._accumulator -= DT
                steps += 1
            if steps == MAX_TICKS_PER_FRAME:
                self._accumulator = min(self._accumulator, DT)
            return 0
        ticks = 0
        while self._accumulator >= DT and ticks < MAX_TICKS_PER_FRAME:
            if not self.tick():
                self._accumulator = 0.0  # frozen on an end screen: owe nothing
                break
            self._accumulator -= DT
            ticks += 1
        if ticks == MAX_TICKS_PER_FRAME:
            # Too slow to keep up: drop the backlog rather than spiral into longer frames.
            self._accumulator = min(self._accumulator, DT)
        return ticks

    def _record(self, timed: bool = True) -> None:
        start = self._clock()
        snap = self.history.record(self.world)
        if timed:
            self.last_snapshot = Timing("history", (self._clock() - start) * 1e6, snap.nbytes)

    def _restore(self, snap: Snapshot, what: str, source: str = "memory") -> Timing:
        """Restore ``snap`` (timed); ``SaveFileError`` leaves the world unchanged."""
        start = self._clock()
        self.world.restore(snap, source=source)
        timing = Timing(what, (self._clock() - start) * 1e6, snap.nbytes)
        self.last_restore = timing
        return timing

    # -- actions -----------------------------------------------------------------------
    def select_slot(self, slot: int) -> None:
        if not 1 <= slot <= SLOTS:
            raise ValueError(f"slot must be 1..{SLOTS}, got {slot}")
        self.slot = slot
        state = "empty" if slot not in self.slots else f"tick {self.slots[slot].tick}"
        self.message = f"slot {slot} ({state})"

    def quicksave(self) -> Snapshot:
        """Snapshot the world into the current slot (in memory)."""
        start = self._clock()
        snap = self.world.snapshot()
        self.last_snapshot = self.last_save = Timing("quicksave", (self._clock() - start) * 1e6,
                                                     snap.nbytes)
        self.slots[self.slot] = snap
        self.message = f"saved slot {self.slot}"
        return snap

    def quickload(self) -> bool:
        """Restore the current slot; False (and a message) if it is empty or does not fit."""
        snap = self.slots.get(self.slot)
        if snap is None:
            self.message = f"slot {self.slot} is empty"
            return False
        try:
            self._restore(snap, "quickload")
        except SaveFileError as exc:
            self.message = f"load failed: {exc}"
            return False
        self.message = f"loaded slot {self.slot}"
        # The loaded frame is on screen now: rewinding from here goes back to what was
        # shown before the load, one frame at a time.
        self._record()
        return True

    def restart(self) -> None:
        """Back to the level's start (slots, save files and history are kept: F9 or a
        rewind still reach earlier states)."""
        self._restore(self._start, "restart")
        self.message = "restarted"
        self._record()

    def save_path(self, slot: int | None = None) -> Path:
        """The save file of a slot (default: the current one)."""
        return self.save_dir / f"slot{slot or self.slot}.sav"

    def save_file(self, path: str | os.PathLike[str] | None = None) -> bool:
        """Write the world to a save file (atomic); False and a message on failure."""
        target = Path(path) if path is not None else self.save_path()
        if target.parent.exists() and not target.parent.is_dir():
            self.message = f"save failed: {target.parent} is a file, not a folder for saves"
            return False
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            start = self._clock()
            snap = self.world.save(target)
        except (OSError, SaveFileError) as exc:
            self.message = f"save failed: {exc}"
            return False
        self.last_snapshot = self.last_save = Timing("save file", (self._clock() - start) * 1e6,
                                                     snap.nbytes)
        self.message = f"saved {target}"
        return True

    def load_file(self, path: str | os.PathLike[str] | None = None) -> bool:
        """Load a save file; on any problem the world is unchanged and the message says
        why (``load failed: ...``). Returns True on success."""
        target = Path(path) if path is not None else self.save_path()
        try:
            snap = Snapshot.load(target)
            level = snap.resources.get("level")
            if level != self.summary.name:
                # Entities of another level under this level's pictures and bounds would
                # look like a corrupt game: refuse, keep playing.
                self.message = (f"load failed: {target} is a save of level {level!r}, "
                                f"not {self.summary.name!r}")
                return False
            if snap.resources.get("level_geometry") != \
                    self.world.resources.get("level_geometry"):
                self.message = (f"load failed: {target} was not saved in this level "
                                f"{self.summary.name!r} (another version of it, or a save "
                                f"this game did not make)")
                return False
            # world.load re-derives prefab-owned fields from the current prefabs, so a
            # re-balanced prefab reaches old saves (the file was just checked above).
            start = self._clock()
            self.world.load(target, prefabs=self.prefabs)
            self.last_restore = Timing("load file", (self._clock() - start) * 1e6, snap.nbytes)
        except SaveFileError as exc:
            self.message = f"load failed: {exc}"
            return False
        except OSError as exc:
            self.message = f"load failed: {exc.strerror or exc}: {target}"
            return False
        self.message = f"loaded {target}"
        self._record()
        return True

    def rewind_step(self) -> bool:
        """Go back one recorded tick; False when only the oldest state is left."""
        if len(self.history) <= 1:
            self.message = "rewind: oldest recorded state reached"
            return False
        start = self._clock()
        snap = self.history.rewind(self.world)
        if snap is None:
            return False
        self.last_restore = Timing("rewind", (self._clock() - start) * 1e6, snap.nbytes)
        self.message = f"rewinding: tick {self.world.tick}"
        return True

    # -- read-outs ---------------------------------------------------------------------
    @property
    def mean_tick_ms(self) -> float:
        return float(np.mean(self.tick_ms)) if self.tick_ms else 0.0

    @property
    def median_tick_ms(self) -> float:
        return float(np.median(self.tick_ms)) if self.tick_ms else 0.0

    def player_position(self) -> tuple[float, float] | None:
        """The first player's centre in world units, or None."""
        with self.world.query(Player, Position, readonly=(Player, Position)) as q:
            if len(q) == 0:
                return None
            return float(q[Position]["x"][0]), float(q[Position]["y"][0])

    def state_hash(self) -> str:
        return state_hash(self.world)
