"""Sounds for the game's cues, through arcade's audio (pyglet media).

:class:`SoundBoard` maps cue kinds (``jump``, ``coin``, ``hurt``, ``shoot``...) to arcade's
built-in ``:resources:sounds/`` and plays each kind at most once per frame. It is silent
when ``enabled`` is False (headless runs): nothing is loaded or played, but :attr:`played`
still lists what would have played, so tests can check which cues sound and when.

Cues come only from live ticks (:attr:`Game.cues`): a rewind or a load restores states
without ticking, so nothing is ever played twice.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

__all__ = ["SOUNDS", "SoundBoard"]

SOUNDS = {
    "jump": ":resources:sounds/jump1.wav",
    "coin": ":resources:sounds/coin1.wav",
    "heart": ":resources:sounds/upgrade1.wav",
    "ammo": ":resources:sounds/upgrade4.wav",
    "hurt": ":resources:sounds/hurt1.wav",
    "shoot": ":resources:sounds/laser1.wav",
    "hit": ":resources:sounds/hit1.wav",
    "defeat": ":resources:sounds/hit3.wav",
    "down": ":resources:sounds/gameover1.wav",
    "goal": ":resources:sounds/secret2.wav",
}
VOLUME = 0.5


class SoundBoard:
    """Plays cue kinds as sounds (loaded on first use); silent unless ``enabled``."""

    def __init__(self, enabled: bool, sounds: dict[str, str] | None = None) -> None:
        self.enabled = enabled
        self.sounds = dict(SOUNDS if sounds is None else sounds)
        self.played: deque[str] = deque(maxlen=1024)  # kinds played (or due, when silent)
        self._loaded: dict[str, Any] = {}

    def play(self, cues: Iterable[tuple[str, float, float]]) -> list[str]:
        """Play this frame's cues: each kind with a sound once, in first-seen order.
        Returns the kinds played."""
        kinds = list(dict.fromkeys(kind for kind, _, _ in cues if kind in self.sounds))
        self.played.extend(kinds)
        if self.enabled:
            import arcade

            for kind in kinds:
                sound = self._loaded.get(kind)
                if sound is None:
                    sound = self._loaded[kind] = arcade.load_sound(self.sounds[kind])
                arcade.play_sound(sound, volume=VOLUME)
        return kinds
