"""Fuzzing the editor readers: a mutated LDtk project or Tiled map either loads or raises
LevelError (never another exception), and a failed load leaves the world as it was."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ecs_engine import PrefabRegistry, World
from ecs_engine.components import stock_prefabs
from ecs_engine.levels import LevelError, load_level
from ecs_engine.levels.editor_names import stock_editor_names

from .test_level_editors import DATA, STRINGS_DROPPED, TEMPLATE, TMX, arcade_maps, registry

JUNK = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                 st.floats(allow_nan=False), st.text(max_size=5),
                 st.just([]), st.just({}), st.just([1, "a"]), st.just({"cx": "1"}))


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every JSON path of ``doc`` (object keys and array indices)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:40]):  # long IntGrid arrays: their head is enough
            out += paths(v, (*prefix, i))
    return out


def mutate(doc: Any, path: tuple[Any, ...], how: str, junk: Any) -> Any:
    if not path:
        return junk
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if how == "delete" and isinstance(parent, dict):
        del parent[last]
    elif how == "delete" and isinstance(parent, list):
        parent.pop(last)
    else:
        parent[last] = junk
    return doc


def check(path: Path, prefabs: PrefabRegistry | None = None,
          names: Mapping[str, str | None] | None = None) -> None:
    """Loads, or raises LevelError with the world untouched; any other exception fails."""
    world = World()
    stock_prefabs().instantiate(world, "coin", x=1, y=2)
    before = world.snapshot().to_bytes()
    try:
        load_level(world, path, prefabs or stock_prefabs(), strict=False,
                   names=names if prefabs else stock_editor_names())
    except LevelError:
        assert world.snapshot().to_bytes() == before


FUZZ = settings(max_examples=int(os.environ.get("EDITOR_FUZZ_EXAMPLES", "40")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])


@pytest.fixture(scope="module", params=["Entities.ldtk",
                                        "Test_file_for_API_showing_all_features.ldtk"])
def ldtk_doc(request: pytest.FixtureRequest) -> dict[str, Any]:
    return json.loads((DATA / request.param).read_text(encoding="utf-8"))


ALL_NAMES = {**STRINGS_DROPPED, "walls": "wall", "first": "wall", "second": "wall",
             "third_used_in_autoLayer": "wall", "IntGrid_8px_grid": "wall"}


@FUZZ
@given(data=st.data(), how=st.sampled_from(["replace", "delete"]), junk=JUNK)
def test_mutated_ldtk_is_a_level_error(tmp_path_factory: pytest.TempPathFactory,
                                       ldtk_doc: dict[str, Any], data: st.DataObject,
                                       how: str, junk: Any) -> None:
    doc = json.loads(json.dumps(ldtk_doc))
    choices = [p for p in paths(doc) if p[:1] != ("__header__",)]
    path = data.draw(st.sampled_from(choices))
    doc = mutate(doc, path, how, junk)
    folder = tmp_path_factory.mktemp("ldtk")
    file = folder / "p.ldtk"
    file.write_text(json.dumps(doc))
    check(file)
    check(file, registry(), ALL_NAMES)  # every field type converted, refs resolved


@FUZZ
@given(data=st.data(), how=st.sampled_from(["replace", "delete"]), junk=JUNK)
def test_mutated_external_ldtk_level_is_a_level_error(
        tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, how: str,
        junk: Any) -> None:
    folder = tmp_path_factory.mktemp("sep")
    shutil.copy(DATA / "SeparateLevelFiles.ldtk", folder)
    shutil.copytree(DATA / "SeparateLevelFiles", folder / "SeparateLevelFiles")
    level = folder / "SeparateLevelFiles" / "World_Level_0.ldtkl"
    doc = json.loads(level.read_text(encoding="utf-8"))
    path = data.draw(st.sampled_from(paths(doc)))
    level.write_text(json.dumps(mutate(doc, path, how, junk)))
    check(folder / "SeparateLevelFiles.ldtk")


@FUZZ
@given(data=st.data(), how=st.sampled_from(["replace", "delete"]), junk=JUNK)
def test_mutated_tiled_json_is_a_level_error(tmp_path_factory: pytest.TempPathFactory,
                                             data: st.DataObject, how: str, junk: Any) -> None:
    source = arcade_maps() / "map_with_ladders.json"
    doc = json.loads(source.read_text(encoding="utf-8"))
    path = data.draw(st.sampled_from(paths(doc)))
    folder = tmp_path_factory.mktemp("tiled")
    for tileset in ("grass.json", "dirt.json", "items.json", "more_tiles.json"):
        shutil.copy(source.parent / tileset, folder)
    file = folder / "m.json"
    file.write_text(json.dumps(mutate(doc, path, how, junk)))
    check(file)


@FUZZ
@given(cut=st.integers(0, len(TMX)), flip=st.integers(0, len(TMX) - 1),
       char=st.sampled_from(list("<>\"=/0-9a ")))
def test_mutated_tmx_is_a_level_error(tmp_path_factory: pytest.TempPathFactory, cut: int,
                                      flip: int, char: str) -> None:
    folder = tmp_path_factory.mktemp("tmx")
    (folder / "box.tx").write_text(TEMPLATE)
    text = TMX[:flip] + char + TMX[flip + 1:]
    for variant in (text, TMX[:cut]):
        (folder / "m.tmx").write_text(variant)
        check(folder / "m.tmx")


@pytest.mark.parametrize("encoding", ["U0F-8", "no-such-codec", "utf-16"])
def test_a_tmx_declaring_an_unknown_or_wrong_encoding_is_a_level_error(
        tmp_path: Path, encoding: str) -> None:
    """Found by the fuzzer: the XML parser raised LookupError for "U0F-8"."""
    (tmp_path / "box.tx").write_text(TEMPLATE)
    (tmp_path / "m.tmx").write_text(TMX.replace('encoding="UTF-8"', f'encoding="{encoding}"'))
    with pytest.raises(LevelError):
        load_level(World(), tmp_path / "m.tmx", stock_prefabs(), strict=False,
                   names=stock_editor_names())


@FUZZ
@given(cut=st.integers(0, 4000), junk=st.binary(max_size=8))
def test_truncated_and_binary_files_are_level_errors(tmp_path_factory: pytest.TempPathFactory,
                                                     cut: int, junk: bytes) -> None:
    folder = tmp_path_factory.mktemp("bytes")
    raw = (DATA / "SeparateLevelFiles.ldtk").read_bytes()
    (folder / "p.ldtk").write_bytes(raw[:cut] + junk)
    check(folder / "p.ldtk")
    tiled = (arcade_maps() / "map.json").read_bytes()
    (folder / "m.json").write_bytes(tiled[:cut] + junk)
    check(folder / "m.json")
