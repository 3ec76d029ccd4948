"""The project installs as one import package and embeds in games with their own modules."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True, text=True, timeout=600, env=_env())
    if proc.returncode != 0:
        pytest.fail(f"building the wheel failed:\n{proc.stdout}\n{proc.stderr}")
    (built,) = out.glob("ecs_engine-*.whl")
    return built


def test_wheel_has_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names}
    dist_info = {t for t in top if t.endswith(".dist-info")}
    assert top - dist_info == {"ecs_engine"}, sorted(top)
    for expected in ("ecs_engine/py.typed", "ecs_engine/components/py.typed",
                     "ecs_engine/systems/__init__.py", "ecs_engine/levels/lvl.schema.json",
                     "ecs_engine/levels/data/demo/level.lvl", "ecs_engine/demo/__main__.py",
                     "ecs_engine/SAVE_FORMAT.md", "ecs_engine/_keyindex.pyi",
                     "ecs_engine/_queryblock.pyi", "ecs_engine/_removal.pyi",
                     "ecs_engine/_entityrows.pyi", "ecs_engine/systems/_fewbodies.pyi"):
        assert expected in names, expected
    # the optional C parts, compiled (CI has a compiler: see ECS_REQUIRE_C)
    for part in ("_keyindex", "_queryblock", "_removal", "_entityrows", "systems/_fewbodies"):
        assert any(n.startswith(f"ecs_engine/{part}.") and n.endswith(".so") for n in names) \
            or not os.environ.get("ECS_REQUIRE_C"), sorted(names)
    assert not any(n.startswith(("benchmarks/", "tests/")) for n in names)
    (dist,) = dist_info
    metadata = zipfile.ZipFile(wheel).read(f"{dist}/METADATA").decode()
    assert "License-Expression: MIT" in metadata
    assert "Provides-Extra: levels" in metadata and "Provides-Extra: cluster" in metadata
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    core = [r for r in requires if "extra ==" not in r]
    assert sorted(r.split()[1].rstrip(">=<0123456789.,") for r in core) == [
        "msgpack", "numpy", "xxhash"]
    entry_points = zipfile.ZipFile(wheel).read(f"{dist}/entry_points.txt").decode()
    assert "ecs-demo = ecs_engine.demo.__main__:main" in entry_points


GAME_COMPONENTS = """
import numpy as np
from ecs_engine import component

@component(name="mygame.Collider")  # stable names must differ from the stock Collider's
class Collider:
    radius: np.float32 = 1.0
"""

GAME_SYSTEMS = """
def nothing(world, dt):
    pass
"""

GAME_LEVELS = """
LEVELS = ["my first level"]
"""

GAME_MAIN = """
import numpy as np
import components, systems, levels            # the game's own modules
from ecs_engine import World
from ecs_engine.components import Collider, Gravity, Grounded, Position, Velocity, stock_prefabs
from ecs_engine.systems import collide, gravity
from ecs_engine.levels import load_level, shipped_level

assert components.Collider is not Collider and levels.LEVELS == ["my first level"]
world = World(seed=1)
load_level(world, shipped_level("tutorial"), stock_prefabs())
world.spawn(components.Collider(radius=2.0))
body = world.spawn(Position(x=5, y=30), Velocity(), Gravity(), Collider(w=1, h=1), Grounded())
for fn in (gravity, collide, systems.nothing):
    world.add_system(fn)
for _ in range(10):
    world.step(1 / 60)
print("ok", float(world.get(body, Position)["y"]) < 30)
"""


def test_a_game_with_its_own_components_systems_and_levels(tmp_path: Path) -> None:
    for name, text in (("components.py", GAME_COMPONENTS), ("systems.py", GAME_SYSTEMS),
                       ("levels.py", GAME_LEVELS), ("main.py", GAME_MAIN)):
        (tmp_path / name).write_text(textwrap.dedent(text))
    proc = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok True"


def test_levels_without_pillow_names_the_extra() -> None:
    code = "import sys; sys.modules['PIL'] = None\nimport ecs_engine.levels"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=_env())
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr and "ecs-engine[levels]" in proc.stderr


def test_core_imports_without_game_packages() -> None:
    code = ("import sys\nfor m in ('PIL', 'scipy', 'arcade'): sys.modules[m] = None\n"
            "import ecs_engine, ecs_engine.components, ecs_engine.systems\n"
            "w = ecs_engine.World(); w.spawn(ecs_engine.components.Position(x=1)); print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=_env())
    assert proc.returncode == 0, proc.stderr


def test_version_matches_the_project_metadata() -> None:
    """``ecs_engine.__version__`` (what save files record as "engine") is the version
    pyproject.toml gives the distribution, and the README's save header shows it."""
    import tomllib

    import ecs_engine

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert ecs_engine.__version__ == project
    assert f'"engine": "{project}"' in (REPO / "README.md").read_text()


def test_levels_and_the_demo_run_without_scipy_until_an_exact_partition() -> None:
    """scipy serves only method="exact"; [arcade] alone (arcade brings pillow) crashed the
    demo with 'ecs_engine.levels needs scipy'."""
    code = ("import sys; sys.modules['scipy'] = None\n"
            "import numpy as np\n"
            "from ecs_engine import World\n"
            "from ecs_engine.components import stock_prefabs\n"
            "from ecs_engine.levels import load_level, partition, shipped_level\n"
            "load_level(World(), shipped_level('tutorial'), stock_prefabs())\n"
            "try:\n"
            "    partition(np.eye(3, dtype=np.int32), method='exact')\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert "needs scipy: install the levels extra" in proc.stdout


def test_the_game_extras_bring_the_levels_extra() -> None:
    """The demo ([arcade]) and validate/farm ([cluster]) load levels."""
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for name in ("arcade", "cluster"):
        assert "ecs-engine[levels]" in extras[name], name


def test_the_sdist_holds_what_the_test_suite_needs(tmp_path: Path) -> None:
    """It held the test modules (setuptools' default) but not conftest, the helpers or the
    test data, so the suite could not run from it."""
    import tarfile

    proc = subprocess.run([sys.executable, "-m", "build", "--sdist", "-o",
                           str(tmp_path), str(REPO)], capture_output=True, text=True,
                          timeout=600, env=_env())
    if proc.returncode != 0:
        pytest.fail(f"building the sdist failed:\n{proc.stdout}\n{proc.stderr}")
    (sdist,) = tmp_path.glob("ecs_engine-*.tar.gz")
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    for needed in ("tests/conftest.py", "tests/__init__.py", "tests/world_state.py",
                   "tests/gl.py", "tests/data/pre_hierarchy.save", "benchmarks/__main__.py",
                   "README.md", "dev", "MANIFEST.in", "setup.py", "ecs_engine/_keyindex.c",
                   "ecs_engine/_queryblock.c", "ecs_engine/_removal.c", "ecs_engine/_entityrows.c",
                   "ecs_engine/_buffers.h", "systems/_fewbodies.c"):
        assert needed in names, needed
    assert not any("__pycache__" in n or n.startswith("benchmarks/results/") for n in names)
    assert not any(n.endswith(".so") for n in names)  # (a build of the dev checkout)
