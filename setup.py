"""The optional C extensions; everything else about the package is in pyproject.toml.

``ecs_engine._keyindex`` checks a load's entity keys in one pass (``_keyindex.c``);
``ecs_engine._queryblock`` opens and closes query blocks and takes their columns without
a Python frame (``_queryblock.c``); ``ecs_engine._removal`` removes many entities' rows
from a store in one pass (``_removal.c``); ``ecs_engine._entityrows`` adds or removes one
entity's rows in all its stores in one call (``_entityrows.c``);
``ecs_engine.systems._fewbodies`` moves a few bodies through the level's tile grid and
tests a few boxes against it, one at a time (``systems/_fewbodies.c``). Optional: without a C
compiler the install goes on and the engine takes its numpy and Python paths, which give
the same answers, slower.
"""

import os

import numpy as np
from setuptools import Extension, setup

# ECS_REQUIRE_C=1 (CI sets it) makes a failed build an error instead of the numpy path.
# (_queryblock reads numpy's array struct: its headers, no link to numpy)
OPTIONAL = not os.environ.get("ECS_REQUIRE_C")
ENGINE = [Extension(f"ecs_engine.{name}", [f"ecs_engine/{name}.c"],
                    include_dirs=[np.get_include()], depends=["ecs_engine/_buffers.h"],
                    optional=OPTIONAL)
          for name in ("_keyindex", "_queryblock", "_removal", "_entityrows")]
# The few-bodies loops repeat the Python loops' float64 arithmetic exactly: a fused
# multiply-add would round once where they round twice.
NO_FUSED = [] if os.name == "nt" else ["-ffp-contract=off"]
SYSTEMS = [Extension("ecs_engine.systems._fewbodies", ["systems/_fewbodies.c"],
                     include_dirs=[np.get_include()], extra_compile_args=NO_FUSED,
                     optional=OPTIONAL)]
setup(ext_modules=ENGINE + SYSTEMS)
