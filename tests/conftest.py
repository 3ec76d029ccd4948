"""Test session setup: arcade must be headless and silent before anything imports it."""

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

os.environ.setdefault("ARCADE_HEADLESS", "1")
os.environ.setdefault("ARCADE_SOUND_BACKENDS", "silent")

# CI explores the same examples every run (a red CI always means a real change); local
# runs draw new examples each time to keep finding new cases.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    """One local Ray instance (2 CPUs) for the whole session: starting Ray takes seconds."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield
    ray.shutdown()
