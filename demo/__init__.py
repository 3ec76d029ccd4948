"""The arcade platformer demo (``python -m ecs_engine.demo``): a shipped level, the stock systems,
quicksave/quickload, save files and rewind. ``demo.game`` holds the arcade-free logic."""

from ecs_engine.demo.game import ACTIONS, DT, TICK_RATE, Game, state_hash

__all__ = ["ACTIONS", "DT", "TICK_RATE", "Game", "state_hash"]
