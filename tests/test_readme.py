"""The README's Python examples run as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from ecs_engine import World, component

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, tmp_path: Path) -> None:
    cwd = os.getcwd()
    os.chdir(tmp_path)  # examples may write save files
    try:
        code = compile(BLOCKS[index], f"README.md block {index}", "exec", dont_inherit=True)
        exec(code, {"__name__": "__main__"})
    finally:
        os.chdir(cwd)


def test_readme_starts_with_the_two_commands() -> None:
    head = README.read_text().split("\n", 10)[:8]
    assert any(line.startswith("./dev demo") for line in head)
    assert any(line.startswith("./dev test") for line in head)


def test_readme_renamed_field_row_loads_an_old_save(tmp_path: Path) -> None:
    """The schema-change table's ``renamed=`` row, applied as written, keeps the values of
    a save made before the rename."""
    row = next(line for line in README.read_text().splitlines()
               if line.startswith("| renamed field"))
    old, new = re.search(r"`(\w+)` is now `(\w+)`", row).groups()  # type: ignore[union-attr]
    declared = eval(re.search(r"renamed=(\{.*?\})", row).group(1))  # type: ignore[union-attr]

    before = component(name="ReadmeRenamed")(
        type("ReadmeRenamed", (), {"__annotations__": {old: np.float32}}))
    world = World()
    world.spawn_batch(before(**{old: [1.0, 2.0]}))
    world.save(tmp_path / "old.sav")

    after = component(name="ReadmeRenamed", renamed=declared)(
        type("ReadmeRenamed", (), {"__annotations__": {new: np.float32}}))
    loaded = World()
    loaded.register(after)
    loaded.load(tmp_path / "old.sav")
    with loaded.query(after, readonly=(after,)) as q:
        assert sorted(q[after][new].tolist()) == [1.0, 2.0]


def test_readme_readonly_types_join_the_query() -> None:
    """The README's note: a type named only in ``readonly=`` is required too."""
    assert "A type named only in `readonly=` is required too" in README.read_text()

    @component
    class ReadmePos:
        x: np.float32 = 0.0

    @component
    class ReadmeVel:
        x: np.float32 = 0.0

    world = World()
    both = world.spawn(ReadmePos(), ReadmeVel())
    world.spawn(ReadmePos())
    with world.query(ReadmePos, readonly=(ReadmeVel,)) as q:
        assert q.entities.tolist() == [both]
        assert not q[ReadmeVel].flags.writeable


def test_documented_python_m_commands_name_modules_that_exist() -> None:
    """Every ``python -m MODULE`` in the README and the format documents runs an
    installed module (``ecs_engine.levels``, not the repo folder's ``levels``)."""
    import importlib.util

    repo = README.parent
    docs = [README, repo / "levels" / "FORMAT.md", repo / "ecs_engine" / "SAVE_FORMAT.md"]
    found = {(doc.name, module) for doc in docs
             for module in re.findall(r"python -m\s+([\w.]+)", doc.read_text())}
    assert found
    for doc, module in sorted(found):
        assert module.startswith("ecs_engine"), f"{doc}: python -m {module}"
        assert importlib.util.find_spec(module) is not None, f"{doc}: python -m {module}"
