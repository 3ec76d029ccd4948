"""Level format, image decoding, rectangle partition and level loading.

A level is a folder: ``level.lvl`` (JSON) plus PNG layers in ``geometry/``, ``sprites/`` and
``visuals/``. See ``levels/FORMAT.md`` for the format and the coordinate conventions.
"""

from levels.errors import LevelError
from levels.format import LevelFile, read_level_file
from levels.loader import LevelPlan, load_level, plan_level
from levels.partition import RECT_DTYPE, partition
from levels.shipped import shipped_level, shipped_levels
from levels.summary import LevelSummary, VisualLayer, WorldRect

__all__ = [
    "RECT_DTYPE",
    "LevelError",
    "LevelFile",
    "LevelPlan",
    "LevelSummary",
    "VisualLayer",
    "WorldRect",
    "load_level",
    "partition",
    "plan_level",
    "read_level_file",
    "shipped_level",
    "shipped_levels",
]
