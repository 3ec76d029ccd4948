"""From an editor's level (LDtk, Tiled) to a checked :class:`LevelPlan`: tiles, instances, refs.

The readers (:mod:`.ldtk`, :mod:`.tiled`) turn their files into the engine-neutral
:class:`EditorLevel` below: grids of named cells and named instances with typed field values,
all in world units (y up). :func:`plan_editor_level` then resolves every name to a prefab,
partitions every grid, converts every field for the component field it sets, builds the
component batches, and finds the target of every reference: all before any world is touched,
so a bad file fails with the world unchanged, exactly as a ``.lvl`` does.

References (LDtk ``EntityRef``, Tiled object properties) need keys that exist only after
spawning. The plan stores where each target sits (batch, row); :meth:`EditorPlan.spawn` spawns
every batch, then re-adds the components holding ``Entity`` fields of those batches with the
new keys filled in, one ``add_batch`` per batch and component, and takes everything back if
that fails.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ecs_engine import NULL, Param, Prefab, PrefabError, PrefabRegistry, World, schema_of
from ecs_engine.component import ComponentBase, FieldSpec, component_values
from ecs_engine.levels.colors import RGBA
from ecs_engine.levels.editor_names import Names
from ecs_engine.levels.errors import LevelError
from ecs_engine.levels.format import ColorRule, LayerSpec, LevelFile
from ecs_engine.levels.loader import (
    DEFAULT_MAX_ENTITIES,
    Batch,
    GeometryPlan,
    LevelPlan,
    Method,
    SpritePlan,
    check_entity_total,
    child_steps,
)
from ecs_engine.levels.partition import partition
from ecs_engine.levels.summary import LevelSummary

__all__ = ["EditorLevel", "EditorPlan", "FieldValue", "Instance", "TileGrid",
           "plan_editor_level"]

FieldKind = Literal["int", "float", "bool", "string", "color", "enum", "point", "ref", "other"]

_DEFAULT_RGBA: RGBA = (200, 200, 200, 255)


@dataclass(frozen=True)
class FieldValue:
    """One editor field or custom property, typed the editor's way.

    ``value`` per kind: int/float/bool as is; ``color`` an RGBA tuple; ``enum`` the value's
    name (it sets its index in ``enum_values``); ``point`` ``(x, y)`` in world units;
    ``ref`` the target's editor id;
    ``string``/``other`` the text (never converted: a clear error if it sets a parameter).
    Arrays are lists of those. ``None`` (an unset field) keeps the prefab's default.
    """

    label: str
    kind: FieldKind
    value: Any
    is_array: bool
    where: str
    type_name: str
    may_ref: bool = False  # a Tiled int: an object id when it sets an Entity field
    enum_values: tuple[str, ...] = ()  # an enum's values: a value sets its index


@dataclass(frozen=True)
class TileGrid:
    """One grid layer: ``grid`` holds 1-based indices into ``kinds`` (0 = empty), row 0 at
    the top. A cell is ``cell`` world units wide and high; the grid's bottom-left corner is
    at ``offset`` (world units)."""

    name: str
    where: str
    grid: NDArray[np.int32]
    kinds: tuple[str, ...]
    kind_where: tuple[str, ...]
    colors: tuple[RGBA, ...]
    what: str
    cell: tuple[float, float]
    offset: tuple[float, float]


@dataclass(frozen=True)
class Instance:
    """One placed entity or object: centre ``(x, y)`` and, when drawn to a size the prefab
    should take, ``size`` ``(w, h)``, all in world units."""

    name: str
    what: str
    where: str
    ident: Hashable
    x: float
    y: float
    size: tuple[float, float] | None
    fields: tuple[FieldValue, ...]
    layer: str
    rgba: RGBA | None = None


@dataclass(frozen=True)
class EditorLevel:
    """What a reader found in one level, before any name is resolved."""

    file: Path
    name: str
    source: str
    size: tuple[int, int]
    background: RGBA | None
    grids: tuple[TileGrid, ...]
    instances: tuple[Instance, ...]


@dataclass(frozen=True)
class _Ref:
    """Batch ``batch`` row ``row``: parameter ``label`` (element ``index`` of an array) is
    the key of the entity at (``target_batch``, ``target_row``)."""

    batch: int
    row: int
    label: str
    index: int | None
    target_batch: int
    target_row: int


@dataclass(frozen=True)
class EditorPlan(LevelPlan):
    """A :class:`LevelPlan` from an editor file, with references to fill in at spawn."""

    source: str = ""
    batch_params: tuple[Mapping[str, Any], ...] = ()
    batch_prefabs: tuple[Prefab | None, ...] = ()
    refs: tuple[_Ref, ...] = ()
    skipped: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    def spawn(self, world: World) -> NDArray[np.uint64]:
        keys = super().spawn(world)
        if not self.refs:
            return keys
        try:
            self._fill_refs(world, keys)
        except Exception as exc:
            world.despawn_batch(keys)
            raise LevelError(self.level.path, f"filling entity references failed: {exc}") \
                from exc
        return keys

    def _fill_refs(self, world: World, keys: NDArray[np.uint64]) -> None:
        starts = np.cumsum([0] + [b.count for b in self.batches])
        by_batch: dict[int, list[_Ref]] = {}
        for ref in self.refs:
            by_batch.setdefault(ref.batch, []).append(ref)
        for b, refs in by_batch.items():
            params = {k: np.array(v, copy=True) for k, v in self.batch_params[b].items()}
            for ref in refs:
                key = keys[starts[ref.target_batch] + ref.target_row]
                column = params[ref.label]
                if ref.index is None:
                    column[ref.row] = key
                else:
                    column[ref.row, ref.index] = key
            prefab = self.batch_prefabs[b]
            assert prefab is not None
            table = prefab.params()
            with_refs = {table[r.label].ctype for r in refs}
            batch_keys = keys[starts[b]:starts[b + 1]]
            for comp in prefab.build(params):
                if type(comp) in with_refs:
                    world.add_batch(batch_keys, comp)

    def summary(self, seconds: float, keys: NDArray[np.uint64] | None = None) -> LevelSummary:
        base = super().summary(seconds, keys)
        return LevelSummary(**{**base.__dict__, "source": self.source,
                               "skipped": MappingProxyType(dict(self.skipped))})


# --------------------------------------------------------------------------------------------
# planning


def plan_editor_level(level: EditorLevel, prefabs: PrefabRegistry, method: Method,
                      names: Names, start: float | None = None, *,
                      max_entities: int = DEFAULT_MAX_ENTITIES) -> EditorPlan:
    """Resolve, partition, convert and batch an editor level (see module doc); at most
    ``max_entities`` entities, counted before their arrays are built."""
    start = time.perf_counter() if start is None else start
    file = level.file
    specs: list[LayerSpec] = []
    geometry: list[GeometryPlan] = []
    batches: list[Batch] = []
    batch_params: list[Mapping[str, Any]] = []
    batch_prefabs: list[Prefab | None] = []
    sprites: list[SpritePlan] = []
    player_start: tuple[float, float] | None = None
    entities = 0

    for g in level.grids:
        plan_rules: list[ColorRule] = []
        remap = np.zeros(len(g.kinds) + 1, np.int32)
        counts = np.bincount(g.grid.ravel(), minlength=len(g.kinds) + 1)
        resolved: list[Prefab] = []
        for i, kind in enumerate(g.kinds, start=1):
            if counts[i] == 0:
                continue
            prefab = names.prefab(kind, g.what, g.kind_where[i - 1], int(counts[i]))
            if prefab is None:
                continue
            table = prefab.params()
            if "x" not in table or "y" not in table:
                raise LevelError(file, f"{g.what} {kind!r} maps to prefab {prefab.name!r}, "
                                       f"which has no x and y parameters",
                                 where=g.kind_where[i - 1])
            resolved.append(prefab)
            plan_rules.append(ColorRule(_prefab_rgba(prefab) or g.colors[i - 1], prefab.name,
                                        MappingProxyType({}), g.kind_where[i - 1]))
            remap[i] = len(resolved)
        grid = remap[g.grid]
        spec = LayerSpec("geometry", g.name, g.name, g.offset, None, g.where)
        specs.append(spec)
        is_tile = np.array([False] + [_is_static_box(p) for p in resolved])
        tile_grid = np.where(is_tile[grid], grid, 0).astype(np.int32)
        rects = partition(tile_grid, method=method, background=0)
        # a rectangle per tile area, an entity per cell of the others (coins)
        entities = _count_entities(file, g.where, entities, len(rects) + int(
            np.count_nonzero(grid)) - int(np.count_nonzero(tile_grid)), max_entities)
        geometry.append(GeometryPlan(spec, tile_grid, rects, tuple(plan_rules),
                                     cell=g.cell))
        height = grid.shape[0]
        cw, ch = g.cell
        for r, prefab in enumerate(resolved, start=1):
            if is_tile[r]:
                sel = rects[rects["value"] == r]
                w = sel["w"].astype(np.float64)
                h = sel["h"].astype(np.float64)
                cols: dict[str, Any] = {
                    "x": g.offset[0] + (sel["x"] + w / 2) * cw,
                    "y": g.offset[1] + (height - sel["y"] - h / 2) * ch,
                    "w": w * cw, "h": h * ch}
                role: Literal["tile", "sprite"] = "tile"
            else:  # a prefab without a size: one entity per cell, centred
                rows, cs = np.nonzero(grid == r)
                cols = {"x": g.offset[0] + (cs + 0.5) * cw,
                        "y": g.offset[1] + (height - rows - 0.5) * ch}
                role = "sprite"
            count = len(cols["x"])
            if count == 0:
                continue
            comps = _build(file, prefab, cols, count, plan_rules[r - 1].where)
            batches.append(Batch(prefab.name, role, comps, count, cols["x"], cols["y"],
                                 child_steps(prefabs, prefab, file, plan_rules[r - 1].where)))
            batch_params.append(cols)
            batch_prefabs.append(None)
            if player_start is None and _is_player(prefab):
                player_start = (float(cols["x"][0]), float(cols["y"][0]))

    instance_batches, refs, inst_sprites, inst_start = _plan_instances(
        level, names, len(batches), entities, max_entities)
    for prefab, params, comps, count, where in instance_batches:
        batches.append(Batch(prefab.name, "sprite", comps, count, params["x"], params["y"],
                             child_steps(prefabs, prefab, file, where)))
        batch_params.append(params)
        batch_prefabs.append(prefab)
    sprites.extend(inst_sprites)
    if player_start is None:
        player_start = inst_start

    check_entity_total(file, tuple(batches), max_entities)
    lf = LevelFile(path=file, folder=file.parent, version=1, name=level.name,
                   background=level.background, layers=tuple(specs), tile_colors=(),
                   sprite_colors=())
    return EditorPlan(lf, method, level.size, 1, tuple(geometry), tuple(sprites), (),
                      tuple(batches), player_start, time.perf_counter() - start,
                      source=level.source, batch_params=tuple(batch_params),
                      batch_prefabs=tuple(batch_prefabs), refs=tuple(refs),
                      skipped=MappingProxyType(dict(names.skipped)))


_Pending = tuple[Prefab, dict[str, Any], tuple[ComponentBase, ...], int, str]


def _count_entities(file: Path, where: str, before: int, more: int, limit: int) -> int:
    total = before + more
    if total > limit:
        raise LevelError(file, f"the level makes {total} entities up to here ({more} here); "
                               f"the limit is {limit} (max_entities=)", where=where)
    return total


def _plan_instances(level: EditorLevel, names: Names, first_batch: int, entities: int,
                    max_entities: int) -> tuple[list[_Pending], list[_Ref], list[SpritePlan],
                                                tuple[float, float] | None]:
    """Group instances into batches (same prefab, same parameter labels) and find refs;
    ``entities`` were made before them, of at most ``max_entities``."""
    file = level.file
    # instance -> (prefab, {label: value}, [(label, index, target ident, where)])
    rows: list[tuple[Instance, Prefab, dict[str, Any], list[tuple[str, int | None, Hashable,
                                                                   str]]]] = []
    dropped: set[Hashable] = set()
    seen: dict[Hashable, str] = {}
    for inst in level.instances:
        if inst.ident in seen:  # references could not tell the two apart
            raise LevelError(file, f"{inst.what} id {inst.ident!r} is used twice (also at "
                                   f"{seen[inst.ident]})", where=inst.where)
        seen[inst.ident] = inst.where
        prefab = names.prefab(inst.name, inst.what, inst.where)
        if prefab is None:
            dropped.add(inst.ident)
            continue
        table = prefab.params()
        for need in ("x", "y"):
            if need not in table:
                raise LevelError(file, f"{inst.what} {inst.name!r} maps to prefab "
                                       f"{prefab.name!r}, which has no {need} parameter",
                                 where=inst.where)
        params: dict[str, Any] = {"x": inst.x, "y": inst.y}
        if inst.size is not None and "w" in table and "h" in table:
            params["w"], params["h"] = inst.size
        # The placement sets these: a field or property that also did would silently win.
        placed = {(table[k].ctype, table[k].spec.name): k for k in params}
        pending: list[tuple[str, int | None, Hashable, str]] = []
        for fv in inst.fields:
            param = names.param(inst.name, prefab, fv.label, fv.where)
            if param is None or fv.value is None:
                continue
            owner = placed.get((param.ctype, param.spec.name))
            if owner is not None:
                raise LevelError(file, f"{inst.what} {inst.name!r}: {fv.label!r} would set "
                                       f"{owner!r}, which the editor's placement sets (x, y "
                                       f"from the position; w, h from the size)",
                                 where=fv.where)
            label = _label_of(prefab, param)
            params[label] = _convert(file, fv, param, pending, label)
        rows.append((inst, prefab, params, pending))
    if rows:
        _count_entities(file, "entities and objects", entities, len(rows), max_entities)

    idents: dict[Hashable, tuple[int, int]] = {}
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, (_inst, prefab, params, _) in enumerate(rows):
        shapes = tuple(sorted((k, np.shape(v)) for k, v in params.items()))
        groups.setdefault((prefab.name, shapes), []).append(i)
    out: list[_Pending] = []
    refs: list[_Ref] = []
    for b, members in enumerate(groups.values()):
        for r, i in enumerate(members):
            idents[rows[i][0].ident] = (first_batch + b, r)
    player_start: tuple[float, float] | None = None
    for b, members in enumerate(groups.values()):
        prefab = rows[members[0]][1]
        labels = list(rows[members[0]][2])
        params = {k: np.stack([np.asarray(rows[i][2][k]) for i in members]) for k in labels}
        count = len(members)
        where = rows[members[0]][0].where
        comps = _build(file, prefab, params, count, where)
        out.append((prefab, params, comps, count, where))
        if player_start is None and _is_player(prefab):
            player_start = (float(params["x"][0]), float(params["y"][0]))
        for r, i in enumerate(members):
            for label, index, target, ref_where in rows[i][3]:
                hit = idents.get(target)
                if hit is None:
                    why = ("was skipped" if target in dropped
                           else "is not in this level")
                    if names.strict:
                        raise LevelError(file, f"reference to {target!r}: the target {why}",
                                         where=ref_where)
                    names.skip(f"reference to an entity that {why}")
                    continue
                refs.append(_Ref(first_batch + b, r, label, index, hit[0], hit[1]))
    sprites = _instance_sprites(rows)
    return out, refs, sprites, player_start


def _label_of(prefab: Prefab, param: Param) -> str:
    """The label under which ``prefab.build`` accepts ``param`` (plain, else Comp.field)."""
    table = prefab.params()
    if table.get(param.label) == param:
        return param.label
    return f"{schema_of(param.ctype).name}.{param.spec.name}"


def _instance_sprites(rows: list[Any]) -> list[SpritePlan]:
    by_layer: dict[str, list[tuple[float, float, RGBA]]] = {}
    for inst, prefab, params, _ in rows:
        rgba = _prefab_rgba(prefab) or inst.rgba or _DEFAULT_RGBA
        by_layer.setdefault(inst.layer, []).append((float(params["x"]), float(params["y"]),
                                                    rgba))
    out: list[SpritePlan] = []
    for layer, pts in by_layer.items():
        spec = LayerSpec("sprites", layer, layer, (0.0, 0.0), None, layer)
        out.append(SpritePlan(spec, np.array([p[0] for p in pts]),
                              np.array([p[1] for p in pts]),
                              np.array([p[2] for p in pts], np.uint8).reshape(-1, 4)))
    return out


# --------------------------------------------------------------------------------------------
# values


def _convert(file: Path, fv: FieldValue, param: Param,
             pending: list[tuple[str, int | None, Hashable, str]], label: str) -> Any:
    """An editor value as a value for ``param``'s component field (see :class:`FieldValue`)."""
    spec = param.spec
    target = f"parameter {param.label!r} ({schema_of(param.ctype).name}.{spec.name}, " \
             f"{_describe(spec)})"
    is_ref = fv.kind == "ref" or (fv.may_ref and spec.is_entity)
    if fv.kind in ("string", "other") and not is_ref:
        raise LevelError(file, f"{fv.type_name} field {fv.label!r} cannot set {target}: "
                               f"component fields hold numbers and entity keys, not text",
                         where=fv.where)
    if is_ref != spec.is_entity:
        what = "an entity reference" if fv.kind == "ref" else f"a {fv.type_name} value"
        raise LevelError(file, f"field {fv.label!r} is {what} and cannot set {target}",
                         where=fv.where)
    item_shape: tuple[int, ...] = (2,) if fv.kind == "point" else (4,) if fv.kind == "color" \
        else ()
    items = list(fv.value) if fv.is_array else [fv.value]
    core = spec.shape
    if fv.is_array:
        if len(core) != 1 + len(item_shape) or core[1:] != item_shape:
            raise LevelError(file, f"{fv.type_name} field {fv.label!r} is an array; {target} "
                                   f"needs a shape of (N, {', '.join(map(str, item_shape))}) "
                                   f"to hold it".replace(", )", ")"), where=fv.where)
        if len(items) > core[0]:
            raise LevelError(file, f"{fv.type_name} field {fv.label!r} has {len(items)} "
                                   f"values; {target} holds at most {core[0]}", where=fv.where)
    elif fv.kind == "color" and core in ((3,), (4,)):
        item_shape = core
    elif core != item_shape:
        raise LevelError(file, f"{fv.type_name} field {fv.label!r} cannot set {target}: "
                               f"the shapes differ", where=fv.where)
    default = np.asarray(schema_of(param.ctype).defaults[spec.name][0])
    out = np.array(default, copy=True)
    for i, item in enumerate(items):
        if item is None:
            continue
        if is_ref:
            ident = item if fv.kind == "ref" else int(item)  # a Tiled object id
            if ident == 0:
                continue  # Tiled's "no object"
            pending.append((label, i if fv.is_array else None, ident, fv.where))
            value: Any = NULL
        elif fv.kind == "color":
            value = list(item)[: item_shape[-1]]
        elif fv.kind == "enum":
            if item not in fv.enum_values:
                raise LevelError(file, f"{item!r} is not a value of {fv.type_name} "
                                       f"{list(fv.enum_values)}", where=fv.where)
            value = fv.enum_values.index(item)
        else:
            value = item
        try:
            converted, _ = schema_of(param.ctype).convert(
                spec.name, value if not fv.is_array else _pad_item(value, core, i))
        except ValueError as exc:
            raise LevelError(file, f"field {fv.label!r}: {exc}", where=fv.where) from exc
        if fv.is_array:
            out[i] = converted[i]
        else:
            out = converted
    return out


def _pad_item(value: Any, shape: tuple[int, ...], index: int) -> Any:
    """A full field value with ``value`` at ``index`` (so ``convert`` checks the range)."""
    arr = np.zeros(shape, dtype=np.asarray(value).dtype)
    arr[index] = value
    return arr


def _describe(spec: FieldSpec) -> str:
    kind = "entity" if spec.is_entity else str(spec.dtype)
    return f"{kind}, shape {spec.shape}" if spec.shape else kind


def _build(file: Path, prefab: Prefab, params: Mapping[str, Any], count: int,
           where: str) -> tuple[ComponentBase, ...]:
    try:
        comps = prefab.build(params)
        for comp in comps:
            _, _, n = component_values(comp)
            if n not in (None, count):
                raise PrefabError(f"prefab {prefab.name!r}: a parameter has {n} values for "
                                  f"{count} entities")
    except PrefabError as exc:
        raise LevelError(file, str(exc), where=where) from exc
    return tuple(comps)


def _prefab_rgba(prefab: Prefab) -> RGBA | None:
    for comp in prefab.components:
        ctype, values, _ = component_values(comp)
        schema = schema_of(ctype)
        for spec in schema.fields:
            if spec.shape == (4,) and spec.dtype == np.uint8 and spec.label == "color":
                v = values.get(spec.name, schema.defaults[spec.name][0])
                arr = np.broadcast_to(np.asarray(v, np.uint8), (4,))
                return (int(arr[0]), int(arr[1]), int(arr[2]), 255)
    return None


def _is_static_box(prefab: Prefab) -> bool:
    """Level geometry: a sized prefab with a ``Tile`` or ``Solid`` component (by name, as
    levels may not import the game's components). Its cells merge into rectangles; other
    prefabs on a grid (coins) get one entity per cell."""
    table = prefab.params()
    kinds = {schema_of(type(c)).name for c in prefab.components}
    return "w" in table and "h" in table and bool(kinds & {"Tile", "Solid"})


def _is_player(prefab: Prefab) -> bool:
    return any(schema_of(type(c)).name == "Player" for c in prefab.components)
