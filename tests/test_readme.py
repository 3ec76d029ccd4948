"""The README's Python examples run as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

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
