"""The level loader: decode layers, map colours, partition geometry, spawn in bulk.

Loading is two phases. :func:`plan_level` reads and checks everything (the ``.lvl``, every
image, every colour, every prefab with its parameters, and builds the component batches) and
touches no world. :meth:`LevelPlan.spawn` then only hands the prebuilt batches to
``World.spawn_batch``. So any bad input fails in the first phase and the world is unchanged.

Coordinates: world y points up. Image row 0 is the top of the level, so a geometry cell at
``(col, row)`` in an image ``H`` cells high covers world x in ``[col, col + 1)`` and y in
``[H - 1 - row, H - row)``, plus the layer's offset. A sprite pixel in an image ``k`` times the
geometry size becomes one entity centred at ``((col + 0.5) / k, (H_s - row - 0.5) / k)``.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ecs_engine import Prefab, PrefabError, PrefabRegistry, World, schema_of
from ecs_engine.component import ComponentBase, component_values
from ecs_engine.levels.errors import LevelError
from ecs_engine.levels.format import (
    KINDS,
    ColorRule,
    LayerSpec,
    LevelFile,
    join_path,
    read_level_file,
)
from ecs_engine.levels.images import (
    DEFAULT_MAX_PIXELS,
    ColorTable,
    png_size,
    read_rgba,
    resolve_layer_path,
)
from ecs_engine.levels.partition import partition
from ecs_engine.levels.summary import LevelSummary, VisualLayer, WorldRect

__all__ = ["DEFAULT_MAX_ENTITIES", "Batch", "ChildSteps", "GeometryPlan", "LevelPlan",
           "SpritePlan", "check_entity_total", "child_steps", "load_level", "plan_level"]

Method = Literal["greedy", "exact"]

DEFAULT_MAX_ENTITIES = 1 << 22
"""Most entities one level may make (the shipped stress level makes 43k): a small PNG full
of sprite pixels must not become tens of millions of entities."""

_TILE_LABELS = ("x", "y", "w", "h")
_SPRITE_LABELS = ("x", "y")


@dataclass(frozen=True)
class GeometryPlan:
    """One decoded geometry layer: rule index per cell (0 = empty) and its rectangles
    (``RECT_DTYPE``, grid cells, ``value`` = rule index)."""

    spec: LayerSpec
    grid: NDArray[np.int32]
    rects: NDArray[np.void]
    rules: tuple[ColorRule, ...]
    cell: tuple[float, float] = (1.0, 1.0)
    """World units per grid cell (x, y): editor layers may use a finer or coarser grid."""


@dataclass(frozen=True)
class SpritePlan:
    """One decoded sprite layer: entity centres (world units) and the pixel colours."""

    spec: LayerSpec
    x: NDArray[np.float64]
    y: NDArray[np.float64]
    rgba: NDArray[np.uint8]


ChildSteps = tuple[tuple[int, int, list[ComponentBase]], ...]
"""A prefab's child prefabs as ``PrefabRegistry`` spawns them: (parent step, -1 for the
instances; children per parent; their components), depth first."""


@dataclass(frozen=True)
class Batch:
    """Entities of one prefab with one set of parameters, ready for ``spawn_batch``; every
    one gets the prefab's child prefabs (``children``) attached below it."""

    prefab: str
    kind: Literal["tile", "sprite"]
    components: tuple[ComponentBase, ...]
    count: int
    x: NDArray[np.float64]
    y: NDArray[np.float64]
    children: ChildSteps = ()

    @property
    def child_count(self) -> int:
        """Entities the child prefabs add to this batch."""
        made: list[int] = []
        for at, per_parent, _ in self.children:
            made.append((self.count if at < 0 else made[at]) * per_parent)
        return sum(made)


def child_steps(prefabs: PrefabRegistry, prefab: Prefab, file: Path,
                where: str) -> ChildSteps:
    """``prefab``'s subtree of child prefabs, checked (unknown child, bad params, a cycle)
    before anything is spawned, as ``PrefabRegistry.instantiate`` checks it."""
    if not prefab.children:
        return ()
    try:
        return tuple(prefabs.child_steps(prefab))
    except PrefabError as exc:
        raise LevelError(file, f"prefab {prefab.name!r}: its child prefabs: {exc}",
                         where=where) from exc


def check_entity_total(plan_file: Path, batches: tuple[Batch, ...], limit: int) -> None:
    """The placed entities and their child prefabs together stay within ``limit``, counted
    before any child's array is built."""
    placed = sum(b.count for b in batches)
    children = sum(b.child_count for b in batches)
    if placed + children > limit:
        raise LevelError(plan_file, f"the level makes {placed + children} entities ({placed} "
                                    f"placed, {children} from their prefabs' child prefabs); "
                                    f"the limit is {limit} (max_entities=)")


@dataclass(frozen=True)
class LevelPlan:
    """A fully checked level, not yet in any world. ``size`` in cells, ``k`` as in
    :class:`LevelSummary`, ``seconds`` the time planning took."""

    level: LevelFile
    method: Method
    size: tuple[int, int]
    k: int
    geometry: tuple[GeometryPlan, ...]
    sprites: tuple[SpritePlan, ...]
    visuals: tuple[VisualLayer, ...]
    batches: tuple[Batch, ...]
    player_start: tuple[float, float] | None
    seconds: float

    @property
    def rect_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for b in self.batches:
            if b.kind == "tile":
                out[b.prefab] = out.get(b.prefab, 0) + b.count
        return out

    @property
    def entity_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for b in self.batches:
            out[b.prefab] = out.get(b.prefab, 0) + b.count
        return out

    def spawn(self, world: World) -> NDArray[np.uint64]:
        """Spawn every batch into ``world``, then each batch's child prefabs below its
        entities (one ``spawn_batch`` per child step, as ``PrefabRegistry.instantiate_batch``
        does); returns the batches' keys in spawn order (children hang below them)."""
        _check_world(world, self)
        spawned: list[NDArray[np.uint64]] = []
        try:
            # Should the engine refuse a checked plan anyway, the world goes back exactly
            # as it was (slot generations, registered types): a level never half-loads.
            with world._all_or_nothing():
                for b in self.batches:
                    if b.count:
                        spawned.append(np.asarray(world.spawn_batch(*b.components,
                                                                    count=b.count)))
                # after every batch, so the placed entities' keys do not depend on children
                made = iter(spawned)
                for b in self.batches:
                    keys = next(made) if b.count else None
                    if b.children and keys is not None:
                        PrefabRegistry.spawn_children(world, list(b.children), keys)
        except Exception as exc:
            raise LevelError(self.level.path, f"spawning failed: {exc}") from exc
        if not spawned:
            return np.empty(0, dtype=np.uint64)
        return np.concatenate(spawned).astype(np.uint64, copy=False)

    def summary(self, seconds: float, keys: NDArray[np.uint64] | None = None) -> LevelSummary:
        return LevelSummary(
            name=self.level.name, path=self.level.path, version=self.level.version,
            method=self.method, size=self.size, k=self.k,
            rect_counts=MappingProxyType(self.rect_counts),
            entity_counts=MappingProxyType(self.entity_counts), visuals=self.visuals,
            background=self.level.background, player_start=self.player_start,
            seconds=seconds,
            keys=keys if keys is not None else np.empty(0, dtype=np.uint64))


def load_level(world: World, path: str | os.PathLike[str], prefabs: PrefabRegistry,
               method: Method = "greedy", *, level: str | int | None = None,
               strict: bool = True, names: Mapping[str, str | None] | None = None,
               max_pixels: int = DEFAULT_MAX_PIXELS,
               max_entities: int = DEFAULT_MAX_ENTITIES) -> LevelSummary:
    """Load a level into ``world``: all or nothing.

    ``path``: a level folder (or its ``.lvl``), an LDtk project (``.ldtk``; ``level`` its
    identifier or index, default the first) or a Tiled map (``.tmx``, ``.tmj``, ``.json``).
    Geometry becomes one collider entity per partition rectangle (``method``: ``"greedy"``
    or ``"exact"``), sprites and editor entities one entity each. Editor names map to prefabs
    through ``names`` (editor name -> prefab name, or None to drop it; ``"Entity.field"`` ->
    parameter label) and the registry's names and aliases; with ``strict=False`` unknown
    names are skipped and counted in ``summary.skipped``. Raises :class:`LevelError` on bad
    input, leaving ``world`` unchanged. ``max_pixels`` limits the pixels (width * height) of
    all layer images together, checked from their headers before any is decoded (for an
    editor file: the cells of all its tile and IntGrid layers together, checked from their
    sizes); ``max_entities`` the entities a level makes (rectangles, sprite pixels, editor
    instances and their child prefabs), checked before any per-entity array is built.
    """
    start = time.perf_counter()
    plan = plan_level(path, prefabs, method, level=level, strict=strict, names=names,
                      max_pixels=max_pixels, max_entities=max_entities)
    keys = plan.spawn(world)
    prefabs.remember(world)  # saves store prefab-owned fields relative to these prefabs
    return plan.summary(time.perf_counter() - start, keys)


def plan_level(path: str | os.PathLike[str], prefabs: PrefabRegistry,
               method: Method = "greedy", *, level: str | int | None = None,
               strict: bool = True, names: Mapping[str, str | None] | None = None,
               max_pixels: int = DEFAULT_MAX_PIXELS,
               max_entities: int = DEFAULT_MAX_ENTITIES) -> LevelPlan:
    """Read and check a level completely without spawning anything (see module doc)."""
    from ecs_engine.levels.editors import is_editor_file, plan_editor_file

    if is_editor_file(path):
        return plan_editor_file(path, prefabs, method, level=level, strict=strict,
                                names=names, max_pixels=max_pixels, max_entities=max_entities)
    if level is not None:
        raise LevelError(Path(path), f"a level folder is one level; level= is for LDtk "
                                     f"projects, got {level!r}")
    return _plan_folder(path, prefabs, method, max_pixels, max_entities)


def _plan_folder(path: str | os.PathLike[str], prefabs: PrefabRegistry, method: Method,
                 max_pixels: int, max_entities: int) -> LevelPlan:
    """:func:`plan_level` for a level folder or its ``.lvl``."""
    start = time.perf_counter()
    if method not in ("greedy", "exact"):
        raise ValueError(f"method must be 'greedy' or 'exact', got {method!r}")
    level = read_level_file(path)
    tile_prefabs = [_rule_prefab(prefabs, level, r, _TILE_LABELS, "tile")
                    for r in level.tile_colors]
    sprite_prefabs = [_rule_prefab(prefabs, level, r, _SPRITE_LABELS, "sprite")
                      for r in level.sprite_colors]
    # Every header before any pixel: sizes, scales and the pixel budget of all layers
    # together, so no combination of layers can exhaust memory while decoding.
    paths = {spec: resolve_layer_path(level.folder, spec.file, level.path, spec.where)
             for spec in level.layers}
    _check_no_extra_files(level)  # after: a misspelt layer file is "missing", not stray
    sizes = {spec: png_size(paths[spec], level.folder / spec.file)[::-1]
             for spec in level.layers}
    _check_pixel_budget(level, sizes, max_pixels)
    size, k = _check_sizes(level, sizes)
    images = {spec: read_rgba(paths[spec], max_pixels, shown=level.folder / spec.file)
              for spec in level.layers}
    empty = (level.background,) if level.background is not None else ()

    tiles = ColorTable.build([r.rgba for r in level.tile_colors], empty)
    entities = 0  # counted before any per-entity array is built
    geometry: list[GeometryPlan] = []
    for spec in level.layers_of("geometry"):
        grid = tiles.lookup(images[spec], level.folder / spec.file, "a tile")
        rects = partition(grid, method=method, background=0)
        entities = _count_entities(level, spec, entities, len(rects), max_entities)
        geometry.append(GeometryPlan(spec, grid, rects, level.tile_colors))

    sprite_table = ColorTable.build([r.rgba for r in level.sprite_colors], empty)
    sprites: list[tuple[SpritePlan, NDArray[np.int32]]] = []
    for spec in level.layers_of("sprites"):
        grid = sprite_table.lookup(images[spec], level.folder / spec.file, "a prefab")
        entities = _count_entities(level, spec, entities, int(np.count_nonzero(grid)),
                                   max_entities)
        sprites.append(_sprite_points(spec, images[spec], grid, k))

    visuals = tuple(
        VisualLayer(images[spec], WorldRect(spec.offset[0], spec.offset[1],
                                            float(size[0]), float(size[1])),
                    spec.z if spec.z is not None else -1)
        for spec in level.layers_of("visuals"))

    groups = _Groups()
    for g in geometry:
        _add_tiles(groups, g, tile_prefabs, size[1])
    for sp, rule_idx in sprites:
        _add_sprites(groups, sp, rule_idx, level.sprite_colors, sprite_prefabs)
    batches, player_start = groups.build(level, prefabs)
    check_entity_total(level.path, batches, max_entities)
    return LevelPlan(level, method, size, k, tuple(geometry), tuple(s for s, _ in sprites),
                     visuals, batches, player_start, time.perf_counter() - start)


# --------------------------------------------------------------------------------------------
# prefabs


def resolve_prefab(prefabs: PrefabRegistry, name: str) -> Prefab | None:
    """A prefab by name or alias, case-insensitively; ``PlayerStart`` also finds
    ``player_start`` (the thesis writes C# class names)."""
    found = prefabs.resolve(name)
    if found is not None:
        return found
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    found = prefabs.resolve(snake)
    if found is not None:
        return found

    def squash(text: str) -> str:
        return re.sub(r"[\s_\-]", "", text).casefold()

    target = squash(name)
    hits = {p for p in prefabs.names
            if any(squash(alias) == target for alias in (p, *prefabs[p].aliases))}
    return prefabs[hits.pop()] if len(hits) == 1 else None


def _rule_prefab(prefabs: PrefabRegistry, level: LevelFile, rule: ColorRule,
                 needs: tuple[str, ...], role: str) -> Prefab:
    """Resolve a rule's prefab and check its parameters once, before any image is read."""
    prefab = resolve_prefab(prefabs, rule.prefab)
    if prefab is None:
        raise LevelError(level.path, f"colour {rule.hex}: {prefabs.unknown(rule.prefab)}",
                         where=rule.where)
    table = prefab.params()
    missing = [label for label in needs if label not in table]
    if missing:
        raise LevelError(level.path, f"prefab {prefab.name!r} cannot be a {role}: it has no "
                                     f"{', '.join(missing)} parameter(s)", where=rule.where)
    _check_reserved(prefab, rule, level, needs)
    try:
        comps = prefab.build(_author_params(prefab, rule, level.version))
    except PrefabError as exc:
        raise LevelError(level.path, str(exc), where=rule.where) from exc
    # A colour's parameter is one value for all its entities; an array where the field wants
    # a scalar would otherwise read as a batch of several entities.
    for comp in comps:
        ctype, values, count = component_values(comp)
        if count is None:
            continue
        schema = schema_of(ctype)
        for spec in schema.fields:
            if spec.name in values and values[spec.name].ndim > len(spec.shape):
                shape = f"shape {spec.shape}" if spec.shape else "a single value"
                raise LevelError(level.path, f"prefab {prefab.name!r}: parameter "
                                             f"{spec.label!r} ({schema.name}.{spec.name}) takes "
                                             f"{shape}, got {values[spec.name].tolist()}",
                                 where=rule.where)
    return prefab


def _author_labels(prefab: Prefab, rule: ColorRule, version: int) -> dict[str, str]:
    """Each of the rule's labels as ``prefab.build`` will read it: as written, or for
    version 0 matched case-insensitively (C# names)."""
    if version != 0:
        return {label: label for label in rule.params}
    table = prefab.params()
    folded: dict[str, list[str]] = {}
    for label in table:
        folded.setdefault(label.casefold(), []).append(label)
    out: dict[str, str] = {}
    for label in rule.params:
        hits = folded.get(label.casefold(), [])
        out[label] = label if label in table or len(hits) != 1 else hits[0]
    return out


def _author_params(prefab: Prefab, rule: ColorRule, version: int) -> dict[str, Any]:
    """The rule's parameters under the labels ``prefab.build`` reads (:func:`_author_labels`)."""
    labels = _author_labels(prefab, rule, version)
    return {labels[label]: value for label, value in rule.params.items()}


def _check_reserved(prefab: Prefab, rule: ColorRule, level: LevelFile,
                    reserved: tuple[str, ...]) -> None:
    """The loader sets ``reserved`` (x, y; w, h for tiles) itself: a colour may not set the
    same fields under another label (``Position.x``, or ``X`` in version 0), which the
    loader's own columns would silently override. Labels resolve as ``prefab.build``
    resolves them, so every spelling of a reserved field is caught."""
    table = prefab.params()
    fields = {(table[label].ctype, table[label].spec.name): label for label in reserved}
    for written, label in _author_labels(prefab, rule, level.version).items():
        param = table.get(label)
        hit = fields.get((param.ctype, param.spec.name)) if param is not None else None
        if hit is not None:
            where = (f"{rule.where}.params" if level.version != 0 else rule.where)
            raise LevelError(level.path, f"{written!r} is the field {hit!r}, which the loader "
                                         f"sets for every entity ({', '.join(reserved)} are "
                                         f"reserved)", where=join_path(where, written))


def _check_world(world: World, plan: LevelPlan) -> None:
    """Refuse before spawning if a batch's component type clashes with one of the world's
    or with another prefab's (two classes, one component name)."""
    names = {schema_of(t).name: (t, "the world") for t in world.component_types}
    for b in plan.batches:
        for comp in (*b.components, *(c for _, _, comps in b.children for c in comps)):
            ctype = type(comp)
            name = schema_of(ctype).name
            other, owner = names.setdefault(name, (ctype, f"prefab {b.prefab!r}"))
            if other is not ctype:
                raise LevelError(plan.level.path, f"prefab {b.prefab!r}: {owner} already "
                                                  f"has a different component type named "
                                                  f"{name!r} ({other.__module__}."
                                                  f"{other.__qualname__}, here "
                                                  f"{ctype.__module__}.{ctype.__qualname__})")


# --------------------------------------------------------------------------------------------
# files and sizes


def _check_no_extra_files(level: LevelFile) -> None:
    """Every ``.png`` in a layer folder must be listed: a stray one is usually a typo."""
    listed = {spec.file.casefold() for spec in level.layers}
    for kind in KINDS:
        folder = level.folder / kind
        try:
            entries = sorted(folder.iterdir()) if folder.is_dir() else []
        except OSError as exc:
            raise LevelError(folder, f"cannot list the folder: {exc.strerror or exc}") from None
        for entry in entries:
            rel = f"{kind}/{entry.name}"
            if entry.suffix.lower() == ".png" and rel.casefold() not in listed:
                mine = [s.file for s in level.layers_of(kind)]
                raise LevelError(level.folder / rel,
                                 f"layer image not listed in {level.path.name} "
                                 f"({kind} layers listed: {mine or 'none'}); add it to the "
                                 f"level or remove the file")


def _count_entities(level: LevelFile, spec: LayerSpec, before: int, more: int,
                    limit: int) -> int:
    total = before + more
    if total > limit:
        raise LevelError(level.folder / spec.file, f"the level makes {total} entities up to "
                                                   f"this layer ({more} here); the limit is "
                                                   f"{limit} (max_entities=)")
    return total


def _check_pixel_budget(level: LevelFile, sizes: Mapping[LayerSpec, tuple[int, int]],
                        max_pixels: int) -> None:
    total = sum(h * w for h, w in sizes.values())
    if total > max_pixels:
        biggest = sorted(sizes.items(), key=lambda item: -item[1][0] * item[1][1])[:3]
        listed = ", ".join(f"{spec.file} {w}x{h}" for spec, (h, w) in biggest)
        raise LevelError(level.path, f"the layers hold {total} pixels together ({listed}"
                                     f"{', ...' if len(sizes) > 3 else ''}); the limit is "
                                     f"{max_pixels} pixels for all layers of a level")


def _check_sizes(level: LevelFile,
                 sizes: Mapping[LayerSpec, tuple[int, int]]) -> tuple[tuple[int, int], int]:
    """Geometry size ``(W, H)`` in cells, and the one scale ``k`` of sprite/visual layers,
    from each layer's ``(height, width)``."""
    geo = level.layers_of("geometry")
    first = geo[0]
    gh, gw = sizes[first]
    for spec in geo[1:]:
        h, w = sizes[spec]
        if (w, h) != (gw, gh):
            raise LevelError(level.folder / spec.file,
                             f"geometry layer is {w}x{h} but {first.file} is {gw}x{gh}; "
                             f"all geometry layers must have one size")
    k: int | None = None
    k_from = ""
    for spec in (*level.layers_of("sprites"), *level.layers_of("visuals")):
        h, w = sizes[spec]
        if w % gw or h % gh or w // gw != h // gh:
            raise LevelError(level.folder / spec.file,
                             f"{spec.kind} layer is {w}x{h}, not an integer multiple k of the "
                             f"geometry size {gw}x{gh} (same k on both axes)")
        this_k = w // gw
        if k is None:
            k, k_from = this_k, spec.file
        elif this_k != k:
            raise LevelError(level.folder / spec.file,
                             f"{spec.kind} layer is {this_k}x the geometry size but {k_from} is "
                             f"{k}x; sprite and visual layers must share one scale k")
    return (gw, gh), k or 1


# --------------------------------------------------------------------------------------------
# grouping into batches


def _sprite_points(spec: LayerSpec, rgba: NDArray[np.uint8], grid: NDArray[np.int32],
                   k: int) -> tuple[SpritePlan, NDArray[np.int32]]:
    """One entity centre per non-empty sprite pixel, in reading order; and its rule index."""
    hs = grid.shape[0]
    rows, cols = np.nonzero(grid)
    x = (cols + 0.5) / k + spec.offset[0]
    y = (hs - rows - 0.5) / k + spec.offset[1]
    return SpritePlan(spec, x, y, rgba[rows, cols]), grid[rows, cols]


class _Groups:
    """Collects entity columns per (kind, prefab, parameters, z), in first-seen order."""

    def __init__(self) -> None:
        self._parts: dict[tuple[Any, ...], list[dict[str, NDArray[np.float64]]]] = {}
        self._meta: dict[tuple[Any, ...], tuple[Prefab, ColorRule, Literal["tile", "sprite"],
                                                 int | None]] = {}

    def add(self, kind: Literal["tile", "sprite"], prefab: Prefab, rule: ColorRule,
            z: int | None, cols: dict[str, NDArray[np.float64]]) -> None:
        if "z" in rule.params or "z" not in prefab.params():
            z = None  # the colour's own parameters win over the layer's z
        key = (kind, prefab.name, json.dumps(dict(rule.params), sort_keys=True), z)
        self._parts.setdefault(key, []).append(cols)
        self._meta.setdefault(key, (prefab, rule, kind, z))

    def build(self, level: LevelFile, registry: PrefabRegistry
              ) -> tuple[tuple[Batch, ...], tuple[float, float] | None]:
        batches: list[Batch] = []
        start: tuple[float, float] | None = None
        for key, parts in self._parts.items():
            prefab, rule, kind, z = self._meta[key]
            cols = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
            count = len(cols["x"])
            params = _author_params(prefab, rule, level.version)
            params.update(cols)
            if z is not None:
                params["z"] = z
            try:
                comps = prefab.build(params)
                for comp in comps:
                    _, _, n = component_values(comp)
                    if n not in (None, count):
                        raise PrefabError(f"prefab {prefab.name!r}: a parameter has {n} values "
                                          f"for {count} entities")
            except PrefabError as exc:
                raise LevelError(level.path, str(exc), where=rule.where) from exc
            batches.append(Batch(prefab.name, kind, tuple(comps), count, cols["x"], cols["y"],
                                 child_steps(registry, prefab, level.path, rule.where)))
            if start is None and count and _is_player(prefab):
                start = (float(cols["x"][0]), float(cols["y"][0]))
        return tuple(batches), start


def _is_player(prefab: Prefab) -> bool:
    # By component name: levels may not import the game's components.
    return any(schema_of(type(c)).name == "Player" for c in prefab.components)


def _split_by_rule(rule_idx: NDArray[np.int32], n_rules: int) -> list[NDArray[np.intp]]:
    """Positions of each rule's entries (rules 1..n), keeping their order."""
    order = np.argsort(rule_idx, kind="stable")
    counts = np.bincount(rule_idx, minlength=n_rules + 1)
    return np.split(order, np.cumsum(counts)[:-1])[1:]


def _add_tiles(groups: _Groups, g: GeometryPlan, prefabs: list[Prefab], height: int) -> None:
    rects = g.rects
    value = rects["value"].astype(np.int32)
    for i, idx in enumerate(_split_by_rule(value, len(g.rules))):
        if idx.size == 0:
            continue
        r = rects[idx]
        w = r["w"].astype(np.float64)
        h = r["h"].astype(np.float64)
        # Grid row y counts down from the top; world y counts up from the bottom.
        cols = {"x": r["x"] + w / 2 + g.spec.offset[0],
                "y": height - r["y"] - h / 2 + g.spec.offset[1],
                "w": w, "h": h}
        groups.add("tile", prefabs[i], g.rules[i], g.spec.z, cols)


def _add_sprites(groups: _Groups, sp: SpritePlan, rule_idx: NDArray[np.int32],
                 rules: tuple[ColorRule, ...], prefabs: list[Prefab]) -> None:
    for i, idx in enumerate(_split_by_rule(rule_idx, len(rules))):
        if idx.size:
            groups.add("sprite", prefabs[i], rules[i], sp.spec.z,
                       {"x": sp.x[idx], "y": sp.y[idx]})

