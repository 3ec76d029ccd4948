"""Level format, image decoding, rectangle partition and level loading.

A level is a folder: ``level.lvl`` (JSON) plus PNG layers in ``geometry/``, ``sprites/`` and
``visuals/``. See ``FORMAT.md`` beside this module for the format and the coordinate conventions.
``load_level`` also reads LDtk projects (:mod:`.ldtk`) and Tiled maps (:mod:`.tiled`).
"""

try:  # pillow comes with the [levels] extra (and scipy, which only method="exact" imports)
    import PIL  # noqa: F401
except ImportError as missing:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        f"ecs_engine.levels needs {missing.name!r}: install the levels extra, "
        "pip install 'ecs-engine[levels]'"
    ) from missing

from ecs_engine.levels.editor_names import STOCK_EDITOR_NAMES, stock_editor_names
from ecs_engine.levels.errors import LevelError
from ecs_engine.levels.format import LevelFile, read_level_file
from ecs_engine.levels.ldtk import ldtk_levels
from ecs_engine.levels.loader import LevelPlan, load_level, plan_level
from ecs_engine.levels.partition import RECT_DTYPE, partition
from ecs_engine.levels.shipped import shipped_level, shipped_levels
from ecs_engine.levels.summary import LevelSummary, VisualLayer, WorldRect

__all__ = [
    "RECT_DTYPE",
    "STOCK_EDITOR_NAMES",
    "LevelError",
    "LevelFile",
    "LevelPlan",
    "LevelSummary",
    "VisualLayer",
    "WorldRect",
    "ldtk_levels",
    "load_level",
    "partition",
    "plan_level",
    "read_level_file",
    "shipped_level",
    "shipped_levels",
    "stock_editor_names",
]
