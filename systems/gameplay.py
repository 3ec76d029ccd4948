"""Gameplay systems: player control, patrols, spawners, lifetimes, hits, pickups, camera.

Each is a plain ``fn(world, dt)`` (dt in seconds). Input comes from the resource
``world.resources["input"]``: a dict of booleans ``left, right, jump, shoot``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ecs_engine import ComponentStore, Query, World
from ecs_engine.components import (
    Ammo,
    Bouncer,
    Collider,
    Color,
    Enemy,
    Goal,
    Grounded,
    Health,
    Layer,
    Lifetime,
    Patrol,
    Pickup,
    Player,
    Position,
    Projectile,
    Score,
    Spawner,
    Sprite,
    Velocity,
)
from ecs_engine.components.prefabs import PROJECTILE_RGBA
from ecs_engine.components.render import sheet_index
from ecs_engine.entity import key_slots
from ecs_engine.systems.collision import solid_at
from ecs_engine.systems.events import emit
from ecs_engine.systems.grid import box_edges
from ecs_engine.systems.versioned import derived, recall, remember

SHOOT_COOLDOWN = 0.25  # seconds between player shots
PROJECTILE_SPEED = 22.0  # units/s
INVULNERABLE_AFTER_HIT = 1.0  # seconds
PICKUP_HEALTH, PICKUP_AMMO, PICKUP_COIN = 0, 1, 2
PICKUP_EVENTS = {PICKUP_HEALTH: "heart", PICKUP_AMMO: "ammo", PICKUP_COIN: "coin"}
DOWN = -1.0  # Health.invulnerable of a player at 0 hp (down, out of the game)
WON_AT = "won_at"  # resource: the tick a player first reached a goal
# world.caches: store versions at which _handle_deaths found nothing to do
DEATHS_CHECKED = "systems.gameplay.deaths_checked"
# world.caches: the Position and Collider rows of players, enemies, pickups and goals (per
# layout), and which of those kinds any player box overlaps (per state of those rows)
CONTACT_ROWS = "systems.gameplay.contact_rows"
TOUCHING = "systems.gameplay.touching"
ENEMIES, PICKUPS, GOALS = 0, 1, 2  # indices into _touching's answer
# "Is any set?" on the systems' small masks: count_nonzero takes ~0.2 us where
# ndarray.any() goes through a Python wrapper (~1 us), a dozen times a tick.
_count = np.count_nonzero


def input_state(world: World) -> dict[str, bool]:
    """The current input resource (all False when absent)."""
    state = world.resources.get("input") or {}
    return {k: bool(state.get(k, False)) for k in ("left", "right", "jump", "shoot")}


def overlap_matrix(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> np.ndarray:
    """(len(a), len(b)) boolean matrix of overlapping boxes (left, bottom, right, top)."""
    return ((a[0][:, None] < b[2][None, :]) & (a[2][:, None] > b[0][None, :])
            & (a[1][:, None] < b[3][None, :]) & (a[3][:, None] > b[1][None, :]))


def spawn_projectiles(world: World, x: np.ndarray, y: np.ndarray, vx: np.ndarray,
                      owners: np.ndarray, lifetime: float = 2.0) -> np.ndarray:
    """Spawn projectiles at (x, y) moving at ``vx`` units/s; returns their keys."""
    n = len(x)
    if n == 0:
        return np.zeros(0, np.uint64)
    return world.spawn_batch(
        Position(x=x, y=y), Velocity(x=vx, y=np.zeros(n)), Collider(w=0.4, h=0.4),
        Projectile(damage=1, owner=owners), Lifetime(remaining=lifetime),
        Color(rgba=PROJECTILE_RGBA), Sprite(sheet=sheet_index("projectile"), flip=vx < 0),
        Layer(z=2), count=n)


def player_control(world: World, dt: float) -> None:
    """Run, jump and shoot from the input resource."""
    keys = input_state(world)
    direction = int(keys["right"]) - int(keys["left"])
    shots: list[np.ndarray] = []
    with world.query(Player, Velocity, Grounded, Position, Ammo, Health,
                     readonly=(Grounded, Position, Health)) as q:
        if len(q) == 0:
            return
        player, vel, ground = q[Player], q[Velocity], q[Grounded]
        up = q[Health]["hp"] > 0  # a player that is down does not move
        vel["x"] = direction * player["run_speed"] * up
        if direction:
            player["facing"][up] = direction
        if keys["jump"]:
            jumping = ground["on_ground"] & up
            vel["y"][jumping] = player["jump_speed"][jumping]
            if _count(jumping):
                emit(world, "jump", q[Position]["x"][jumping], q[Position]["y"][jumping])
        player["shoot_cooldown"] = np.maximum(player["shoot_cooldown"] - dt, 0)
        if keys["shoot"]:
            ammo = q[Ammo]
            firing = (player["shoot_cooldown"] <= 0) & (ammo["count"] > 0) & up
            if _count(firing):
                player["shoot_cooldown"][firing] = SHOOT_COOLDOWN
                ammo["count"][firing] -= 1
                pos = q[Position]
                facing = player["facing"][firing].astype(np.float32)
                shots = [pos["x"][firing] + facing * 0.8, pos["y"][firing] + 0.2,
                         facing * PROJECTILE_SPEED, q.entities[firing].copy()]
                emit(world, "shoot", pos["x"][firing], pos["y"][firing])
    if shots:
        x, y, vx, owners = shots
        spawn_projectiles(world, x, y, vx, owners)


def patrol(world: World, dt: float) -> None:
    """Walk at ``speed``; turn around at walls and before ledges."""
    # Patrol is read-only here and written below only where a walker turns: a column
    # handed out writable over the moving-body group's rows is a view, and taking it
    # moves the store's version, so Rollback copied Patrol again every frame while
    # nobody turned (most ticks).
    with world.query(Patrol, Velocity, Grounded, Position, Collider,
                     readonly=(Patrol, Grounded, Position, Collider)) as q:
        if len(q) == 0:
            return
        walker, vel, ground, pos, col = q[Patrol], q[Velocity], q[Grounded], q[Position], \
            q[Collider]
        direction = walker["direction"]
        turn = ground["wall"] == direction
        # Probe just ahead of the front foot, half a unit down: no ground means a ledge.
        ahead_x = pos["x"] + direction * (col["w"] * 0.5 + 0.05)
        below_y = pos["y"] - col["h"] * 0.5 - 0.5
        ledge = ground["on_ground"] & ~solid_at(world, ahead_x, below_y)
        turn |= ledge
        if _count(turn):
            direction = np.where(turn, -direction, direction)
            world.set_batch(q.entities[turn], Patrol, {"direction": direction[turn]})
        vel["x"] = walker["speed"] * direction


def spawners(world: World, dt: float) -> None:
    """Turrets fire a projectile every ``interval`` seconds."""
    with world.query(Spawner, Position, readonly=(Position,)) as q:
        if len(q) == 0:
            return
        spawner, pos = q[Spawner], q[Position]
        spawner["cooldown"] -= dt
        firing = spawner["cooldown"] <= 0
        if not _count(firing):
            return  # most ticks: cooling down, nothing to fire
        spawner["cooldown"][firing] += spawner["interval"][firing]
        direction = spawner["direction"][firing].astype(np.float32)
        shots = (pos["x"][firing] + direction * 0.8, pos["y"][firing].copy(),
                 direction * spawner["speed"][firing], q.entities[firing].copy())
    spawn_projectiles(world, *shots)


def lifetimes(world: World, dt: float) -> None:
    """Count ``Lifetime`` down and despawn what reaches zero."""
    with world.query(Lifetime) as q:
        life = q[Lifetime]
        life["remaining"] -= dt
        expired = q.entities[life["remaining"] <= 0].copy()
    if len(expired):
        world.despawn_batch(expired)


def _hits(shots: tuple[np.ndarray, ...], owners: np.ndarray, h: Query) -> np.ndarray:
    """(projectiles, targets) matrix: which projectile box overlaps which target of ``h``
    (Health, Position, Collider), never its owner."""
    hits = overlap_matrix(shots, box_edges(h[Position], h[Collider]))
    hits &= owners[:, None] != h.entities[None, :]
    return hits


def projectile_hits(world: World, dt: float) -> None:
    """Projectiles stop at walls (collision zeroed their speed) and damage what they hit
    (never their owner); entities at 0 hp despawn. A player takes a shot as it takes an
    enemy's touch: not while invulnerable (the shot is spent), then invulnerable for
    :data:`INVULNERABLE_AFTER_HIT`, knocked up, a ``hurt`` event (others: ``hit``)."""
    knocked = np.zeros(0, np.uint64)
    with world.query(Projectile, Position, Collider, Velocity,
                     readonly=(Projectile, Position, Collider, Velocity)) as p:
        if len(p) == 0:
            return
        shots = box_edges(p[Position], p[Collider])
        stopped = p[Velocity]["x"] == 0
        owners = p[Projectile]["owner"]
        # Look first (read-only): most ticks no projectile touches anything with Health,
        # and then Health is not written at all.
        with world.query(Health, Position, Collider, readonly=(Health, Position, Collider)) as h:
            hit_any = _hits(shots, owners, h).any(axis=1)
        if _count(hit_any):
            with world.query(Health, Position, Collider, readonly=(Position, Collider)) as h:
                hits = _hits(shots, owners, h)
                # One target per projectile: the first it overlaps.
                first = np.argmax(hits, axis=1)
                hit_any = hits.any(axis=1)
                target = first[hit_any]
                damage = p[Projectile]["damage"][hit_any].astype(np.int64)
                health = h[Health]
                player = world.store(Player).rows_of(key_slots(h.entities[target])) >= 0
                # A player already invulnerable takes no damage; one hit this tick is
                # invulnerable to the tick's other shots (they hit in projectile order).
                shielded = player & (health["invulnerable"][target] != 0)
                _, first_shot = np.unique(target, return_index=True)
                again = np.ones(len(target), np.bool_)
                again[first_shot] = False
                shielded |= player & again
                damage[shielded] = 0
                np.subtract.at(health["hp"], target, damage.astype(health.dtype["hp"]))
                hurt = player & ~shielded
                health["invulnerable"][target[hurt]] = INVULNERABLE_AFTER_HIT
                x, y = h[Position]["x"][target], h[Position]["y"][target]
                emit(world, "hit", x[~player], y[~player])
                emit(world, "hurt", x[hurt], y[hurt])
                knocked = h.entities[target[hurt]].copy()
        done = p.entities[hit_any | stopped].copy()
    if len(knocked):  # knocked up, as by an enemy's touch
        world.set_batch(knocked, Velocity, {"y": 12.0})
    if len(done):
        world.despawn_batch(done)
    _handle_deaths(world)


def _handle_deaths(world: World) -> None:
    """Despawn entities at 0 hp (a ``defeat`` event each). A player at 0 hp is down: it
    stays (hp 0, standing still, a ``down`` event) and the game decides what follows (the
    demo shows game over)."""
    # What this reads depends only on Health's values and on which entities have
    # Health, Position and Player: when none of that moved since a check that found
    # nothing to do, this one finds nothing either (most ticks: nobody was hit).
    health_store = world.store(Health)
    seen = (health_store.data_version, health_store.layout_version,
            world.store(Position).layout_version, world.store(Player).layout_version)
    if recall(world, DEATHS_CHECKED, seen):
        return
    with world.query(Health, Position, without=(Player,), readonly=(Health, Position)) as q:
        dead = q[Health]["hp"] <= 0
        gone = q.entities[dead].copy()
        if len(gone):
            emit(world, "defeat", q[Position]["x"][dead], q[Position]["y"][dead])
    if len(gone):
        world.despawn_batch(gone)
    with world.query(Player, Health, readonly=(Player, Health)) as q:
        health = q[Health]
        # invulnerable < 0 marks a player already down, so "down" is emitted once.
        if not _count((health["hp"] <= 0) & (health["invulnerable"] >= 0)):
            if not len(gone):
                remember(world, DEATHS_CHECKED, seen)
            return  # the common case: look, write nothing
    with world.query(Player, Health, Position, Velocity, readonly=(Player, Position)) as q:
        health = q[Health]
        down = (health["hp"] <= 0) & (health["invulnerable"] >= 0)
        if _count(down):
            emit(world, "down", q[Position]["x"][down], q[Position]["y"][down])
            health["hp"][down] = 0
            health["invulnerable"][down] = DOWN
            q[Velocity]["x"][down] = 0
            q[Velocity]["y"][down] = np.minimum(q[Velocity]["y"][down], 0)


class _ContactRows(NamedTuple):
    """Where the boxes of players and of what they can touch sit: their Position rows,
    players first, then enemies, pickups and goals (``bounds``: where each kind's rows
    end), and their half sizes (Collider's, as box_edges takes them)."""

    rows: np.ndarray
    half: np.ndarray  # (boxes, 2) float32: half width, half height
    players: int
    bounds: tuple[int, int, int]


def _xy(store: ComponentStore, rows: np.ndarray) -> np.ndarray:
    """Rows of a two-float32-field store (Position, Collider) as a (rows, 2) array."""
    flat = store.flat
    if flat is not None:
        return flat[rows]
    return np.stack([store.columns[name][rows] for name in store.schema.field_names], 1)


def _contact_rows(pos: ComponentStore, col: ComponentStore,
                  kinds: list[ComponentStore | None]) -> _ContactRows:
    pos_rows, col_rows, bounds = [], [], [0]
    for store in kinds:  # players, enemies, pickups, goals (None: no such store)
        n = store.n if store is not None else 0
        slots = key_slots(store.entities[:n]) if store is not None else np.zeros(0, np.int64)
        prow, crow = pos.rows_of(slots), col.rows_of(slots)
        boxed = (prow >= 0) & (crow >= 0)  # (an entity has a box if it has both)
        pos_rows.append(prow[boxed])
        col_rows.append(crow[boxed])
        bounds.append(bounds[-1] + len(pos_rows[-1]))
    # box_edges' half sizes: col["w"] * 0.5 in float32
    half = _xy(col, np.concatenate(col_rows)) * 0.5
    return _ContactRows(np.concatenate(pos_rows), half, bounds[1],
                        (bounds[2], bounds[3], bounds[4]))


def _touching(world: World) -> tuple[bool, bool, bool]:
    """Whether any player box (every entity with Player, Position and Collider) overlaps
    any enemy, pickup or goal box: one test a tick that touch_damage, pickups and
    reach_goal share, so each does its exact work only when its kind is touched (most
    ticks nothing is). The edges are box_edges' and the comparisons overlap_matrix's, in
    the same float32 arithmetic, so False here means each system's own (narrower: players
    with Health, ...) test finds no overlap either.

    Kept by the versions of what it reads, so the three systems compute it once a tick,
    and whichever of them is scheduled alone computes it for itself; a layout change (a
    pickup taken, an entity that became an enemy) finds the rows again."""
    count = world.count  # (stores are looked up only where they hold rows: the systems
    # never create a store their own queries would not, such as Goal's in a game without)
    if not (count(Player) and count(Position) and count(Collider)):
        return False, False, False
    pos, col, player = world.store(Position), world.store(Collider), world.store(Player)
    enemy = world.store(Enemy) if count(Enemy) else None
    pickup = world.store(Pickup) if count(Pickup) else None
    goal = world.store(Goal) if count(Goal) else None
    layout = (pos.layout_version, col.layout_version, col.data_version, player.layout_version,
              0 if enemy is None else enemy.layout_version,
              0 if pickup is None else pickup.layout_version,
              0 if goal is None else goal.layout_version)

    def test() -> tuple[bool, bool, bool]:
        return _touch_test(pos, derived(
            world, CONTACT_ROWS, layout,
            lambda: _contact_rows(pos, col, [player, enemy, pickup, goal])))

    return derived(world, TOUCHING, (pos.data_version, layout), test)


def _touch_test(pos: ComponentStore, boxes: _ContactRows) -> tuple[bool, bool, bool]:
    """_touching's test on the Position rows of ``boxes``."""
    k = boxes.players
    if not 0 < k < len(boxes.rows):
        return False, False, False
    # x and y side by side: one gather and one numpy call per edge pair
    centre = _xy(pos, boxes.rows)
    low, high = centre - boxes.half, centre + boxes.half  # (left, bottom), (right, top)
    if k == 1:  # (the usual one player)
        hit = (low[1:] < high[0]) & (high[1:] > low[0])
        hit = hit[:, 0] & hit[:, 1]
    else:
        hit = overlap_matrix((low[:k, 0], low[:k, 1], high[:k, 0], high[:k, 1]),
                             (low[k:, 0], low[k:, 1], high[k:, 0], high[k:, 1])).any(axis=0)
    if not _count(hit):
        return False, False, False
    enemies, pickups, goals = (b - k for b in boxes.bounds)
    return (bool(_count(hit[:enemies])), bool(_count(hit[enemies:pickups])),
            bool(_count(hit[pickups:goals])))


def _contact(world: World, dt: float, health: np.ndarray, pos: np.ndarray,
             col: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For players with these Health, Position and Collider rows: (invulnerable time left
    after this tick's countdown, who an enemy hurts now, the damage)."""
    inv = health["invulnerable"]
    left = np.where(inv > 0, np.maximum(inv - dt, 0), inv)
    with world.query(Enemy, Position, Collider, readonly=(Enemy, Position, Collider)) as e:
        touching = overlap_matrix(box_edges(pos, col), box_edges(e[Position], e[Collider]))
        damage = (touching * e[Enemy]["damage"][None, :]).max(axis=1, initial=0)
    hurt = (damage > 0) & (left <= 0) & (health["hp"] > 0)
    return left, hurt, damage


def touch_damage(world: World, dt: float) -> None:
    """Enemies hurt the player on touch, then the player is briefly invulnerable."""
    # Look first (read-only, the same players as the writing query below): most ticks
    # nobody is invulnerable or touched, and then nothing is written (a written column
    # is a changed store for snapshots and rollback). Whether an enemy touches any player
    # comes from the tick's shared test: when none does, no enemy box is read here.
    with world.query(Player, Health, Position, Collider, Velocity,
                     readonly=(Player, Health, Position, Collider, Velocity)) as p:
        if len(p) == 0:
            return
        world.store(Enemy)  # (made here as the enemy query made it: no store more or less)
        touched = _touching(world)[ENEMIES]
        health = p[Health]
        due = _count(health["invulnerable"] > 0) > 0
        if touched and not due:
            _, hurt, _ = _contact(world, dt, health, p[Position], p[Collider])
            due = _count(hurt) > 0
    if due:
        with world.query(Player, Health, Position, Collider, Velocity,
                         readonly=(Player, Position, Collider)) as p:
            health = p[Health]
            if not touched:  # nobody is hurt: only the invulnerability counts down
                inv = health["invulnerable"]
                health["invulnerable"] = np.where(inv > 0, np.maximum(inv - dt, 0), inv)
            else:
                health["invulnerable"], hurt, damage = _contact(world, dt, health,
                                                                p[Position], p[Collider])
                health["hp"][hurt] -= damage[hurt].astype(np.int16)
                health["invulnerable"][hurt] = INVULNERABLE_AFTER_HIT
                p[Velocity]["y"][hurt] = 12.0  # knock the player up and out of the enemy
                if _count(hurt):
                    emit(world, "hurt", p[Position]["x"][hurt], p[Position]["y"][hurt])
    _handle_deaths(world)


def pickups(world: World, dt: float) -> None:
    """Players collect overlapping pickups: health, ammo or coins."""
    # (No read-only look first, unlike touch_damage: this writing query is what keeps
    # Health, Ammo and Score in the moving-body group's row order within the tick, and
    # row order is state. It opens every tick; the pickups are read only when the tick's
    # shared test finds one touching a player.)
    taken: np.ndarray | None = None
    with world.query(Player, Position, Collider, Health, Ammo, Score,
                     readonly=(Player, Position, Collider)) as p:
        if len(p) == 0:
            return
        world.store(Pickup)  # (made here as the pickup query made it)
        if not _touching(world)[PICKUPS]:
            return
        with world.query(Pickup, Position, Collider, readonly=(Pickup, Position, Collider)) as k:
            touching = overlap_matrix(box_edges(p[Position], p[Collider]),
                                      box_edges(k[Position], k[Collider]))
            got = touching.any(axis=0)
            if not _count(got):
                return
            who = np.argmax(touching, axis=0)[got]
            kind, amount = k[Pickup]["kind"][got], k[Pickup]["amount"][got]
            taken = k.entities[got].copy()
            for code, name in PICKUP_EVENTS.items():
                sel = kind == code
                if _count(sel):
                    emit(world, name, k[Position]["x"][got][sel], k[Position]["y"][got][sel])
        health, ammo, score = p[Health], p[Ammo], p[Score]
        for code, column, field in ((PICKUP_HEALTH, health, "hp"), (PICKUP_AMMO, ammo, "count"),
                                    (PICKUP_COIN, score, "coins")):
            sel = kind == code
            np.add.at(column[field], who[sel], amount[sel].astype(column[field].dtype))
        np.minimum(health["hp"], health["max_hp"], out=health["hp"])
        np.minimum(ammo["count"], 99, out=ammo["count"])
    if taken is not None:
        world.despawn_batch(taken)


def reach_goal(world: World, dt: float) -> None:
    """A player touching a ``Goal`` wins: the first time, the resource ``won_at`` gets the
    tick and a ``goal`` event is emitted."""
    del dt
    if world.resources.get(WON_AT) is not None:
        return
    with world.query(Player, Position, Collider, Health,
                     readonly=(Player, Position, Collider, Health)) as p:
        if len(p) == 0:
            return
        world.store(Goal)  # (made here as the goal query made it)
        if not _touching(world)[GOALS]:
            return  # (most ticks no player touches a goal: the tick's shared test)
        with world.query(Goal, Position, Collider, readonly=(Goal, Position, Collider)) as g:
            if len(g) == 0:
                return
            touching = overlap_matrix(box_edges(p[Position], p[Collider]),
                                      box_edges(g[Position], g[Collider]))
            winners = touching.any(axis=1) & (p[Health]["hp"] > 0)
            if not _count(winners):
                return
            emit(world, "goal", p[Position]["x"][winners], p[Position]["y"][winners])
    world.resources[WON_AT] = int(world.tick) + 1  # ticks run when this one ends


def _landed(ground: np.ndarray) -> np.ndarray:
    """Rows of ``Grounded`` standing on something or touching a wall. The two one-byte
    fields are one 16-bit word per row: nonzero exactly when either is set."""
    if ground.dtype.names == ("on_ground", "wall") and ground.dtype.itemsize == 2 \
            and ground.flags.c_contiguous:
        return (ground.view(np.uint16) != 0).nonzero()[0]
    return (ground["on_ground"] | (ground["wall"] != 0)).nonzero()[0]


def bounce(world: World, dt: float) -> None:
    """Bouncers that landed jump again with a random speed and direction."""
    if world.store(Bouncer).n == 0:
        return  # (a level with no bouncers: nothing to look at)
    with world.query(Grounded, readonly=(Grounded,)) as q:  # one column, no gather
        landed = q.entities[_landed(q[Grounded])]
    if len(landed) == 0:
        return
    # Only the few that landed this tick are looked up and written, not every bouncer.
    bouncers, velocities = world.store(Bouncer), world.store(Velocity)
    slots = key_slots(landed)
    rows = bouncers.rows_of(slots)
    vrows = velocities.rows_of(slots)
    jumping = ((rows >= 0) & (vrows >= 0)).nonzero()[0]
    n = len(jumping)
    if n == 0:
        return
    b = bouncers.data[rows[jumping]]
    # rng.uniform(low, high) with array bounds is low + (high - low) * random(), one draw
    # each: the same numbers from the same stream, without its per-call broadcasting cost.
    low = b["min_speed"].astype(np.float64)
    vy = low + (b["max_speed"].astype(np.float64) - low) * world.rng.random(n)
    vx = world.rng.uniform(-8.0, 8.0, n)
    # Every one has a Velocity already: write the rows in place (what add_batch does for
    # present rows, without its per-call checks and copies).
    vrows = vrows[jumping]
    data = velocities.data
    data["x"][vrows] = vx
    data["y"][vrows] = vy
    velocities.touch(vrows)


def camera_follow(world: World, dt: float, stiffness: float = 8.0) -> None:
    """Ease the camera resource ``{"x", "y"}`` (world units) towards the player."""
    with world.query(Player, Position, readonly=(Player, Position)) as q:
        if len(q) == 0:
            return
        target = (float(q[Position]["x"][0]), float(q[Position]["y"][0]))
    cam = world.resources.get("camera")
    if cam is None:
        world.resources["camera"] = {"x": target[0], "y": target[1]}
        return
    blend = 1.0 - float(np.exp(-stiffness * dt))
    cam["x"] += (target[0] - cam["x"]) * blend
    cam["y"] += (target[1] - cam["y"]) * blend
