"""The one optional C extension; everything else about the package is in pyproject.toml.

``ecs_engine._keyindex`` checks a load's entity keys in one pass (see
``ecs_engine/_keyindex.c``). ``optional=True``: without a C compiler the install goes on
and loads take the numpy path, which gives the same answers, slower.
"""

import os

from setuptools import Extension, setup

# ECS_REQUIRE_C=1 (CI sets it) makes a failed build an error instead of the numpy path.
setup(ext_modules=[Extension("ecs_engine._keyindex", ["ecs_engine/_keyindex.c"],
                             optional=not os.environ.get("ECS_REQUIRE_C"))])
