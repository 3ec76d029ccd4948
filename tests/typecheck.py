"""Run mypy on the package as it installs, the tests and the README's examples.

mypy does not run setuptools' editable import hook, so the installed layout
(``components/`` -> ``ecs_engine.components``, ...) is rebuilt as a tree of symlinks and the
README's ``python`` blocks are written out as modules. ``python -m tests.typecheck`` (what
``./dev typecheck`` runs) prints mypy's report and exits with its status.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUBPACKAGES = ("components", "systems", "levels", "demo")
README_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def build_tree(root: Path) -> list[str]:
    """Lay out ``root`` like site-packages; returns the paths mypy should check."""
    if root.exists():
        shutil.rmtree(root)
    package = root / "ecs_engine"
    package.mkdir(parents=True)
    for entry in (REPO / "ecs_engine").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name in SUBPACKAGES:
        (package / name).symlink_to(REPO / name, target_is_directory=True)
    (root / "tests").symlink_to(REPO / "tests", target_is_directory=True)
    examples = root / "readme_examples"
    examples.mkdir()
    (examples / "__init__.py").write_text("")
    blocks = README_BLOCK.findall((REPO / "README.md").read_text())
    for index, block in enumerate(blocks):
        (examples / f"example_{index}.py").write_text(block)
    return ["ecs_engine", "tests", "readme_examples"]


def run(root: Path | None = None) -> tuple[int, str]:
    """Build the tree under ``root`` and run mypy there: (exit status, report)."""
    from mypy import api

    root = root or REPO / ".venv" / "typecheck"
    targets = build_tree(root)
    args = ["--config-file", str(REPO / "pyproject.toml"),
            "--cache-dir", str(REPO / ".venv" / "mypy_cache"), *[str(root / t) for t in targets]]
    stdout, stderr, status = api.run(args)
    return status, stdout + stderr


def check_snippet(source: str, root: Path | None = None) -> tuple[int, str]:
    """Type-check one module of user code against the package: (exit status, report)."""
    from mypy import api

    root = root or REPO / ".venv" / "typecheck"  # the same module paths: mypy's cache holds
    build_tree(root)
    module = root / "snippet.py"
    module.write_text(source)
    args = ["--config-file", str(REPO / "pyproject.toml"),
            "--cache-dir", str(REPO / ".venv" / "mypy_cache"), str(module)]
    stdout, stderr, status = api.run(args)
    return status, stdout + stderr


def main() -> int:
    status, report = run()
    print(report, end="")
    return status


if __name__ == "__main__":
    sys.exit(main())
