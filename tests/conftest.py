"""Test session setup: arcade must be headless and silent before anything imports it."""

import os

os.environ.setdefault("ARCADE_HEADLESS", "1")
os.environ.setdefault("ARCADE_SOUND_BACKENDS", "silent")
