"""mypy passes on the package, the tests and the README examples, and catches wrong fields."""

from __future__ import annotations

import pytest

pytest.importorskip("mypy")

from tests.typecheck import check_snippet, run  # noqa: E402

SNIPPET_HEADER = """
import numpy as np
from ecs_engine import NULL, Entity, World, component, field

@component
class Position:
    x: np.float32 = 0.0
    y: np.float32 = field(default=0.0, label="py")

@component(name="target_v1")
class Target:
    entity: Entity = NULL
    rgba: np.ndarray = field(np.uint8, shape=4, default=255)
"""


def test_package_tests_and_readme_examples_typecheck() -> None:
    status, report = run()
    assert status == 0, report
    assert "Success: no issues found" in report


def test_documented_component_style_is_accepted() -> None:
    status, report = check_snippet(SNIPPET_HEADER + """
world = World()
world.spawn(Position(x=1, y=2.5), Target(entity=NULL, rgba=[1, 2, 3, 255]))
world.spawn_batch(Position(x=np.arange(3.0)))
Position(1.0, np.float32(2))
Position()
""")
    assert status == 0, report


@pytest.mark.parametrize(("code", "message"), [
    ("Position(xx=1)", 'Unexpected keyword argument "xx" for "Position"'),
    ("Position(1, 2, 3)", 'Too many arguments for "Position"'),
    ('Position(x="fast")', 'Argument "x" to "Position" has incompatible type "str"'),
    ("Target(entity=None)", 'Argument "entity" to "Target" has incompatible type "None"'),
    ("Position().z", '"Position" has no attribute "z"'),
])
def test_wrong_constructor_use_is_a_mypy_error(code: str, message: str) -> None:
    status, report = check_snippet(SNIPPET_HEADER + code + "\n")
    assert status == 1 and message in report, report


def test_underscore_names_are_class_attributes_not_fields() -> None:
    status, report = check_snippet(SNIPPET_HEADER + """
@component
class Tuned:
    speed: np.float32 = 1.0
    _label: str = "fast"

Tuned(speed=2)
""")
    assert status == 0, report
    status, report = check_snippet(SNIPPET_HEADER + """
@component
class Tuned:
    speed: np.float32 = 1.0
    _label: str = "fast"

Tuned(_label="slow")
""")
    assert status == 1 and 'Unexpected keyword argument "_label"' in report, report


def test_a_class_body_default_that_is_no_value_is_a_mypy_error() -> None:
    status, report = check_snippet(SNIPPET_HEADER + """
@component
class Bad:
    hp: np.int16 = "full"
""")
    assert status == 1 and 'incompatible type "str"' in report, report
