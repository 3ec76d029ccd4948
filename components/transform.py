"""Attachment components: an entity placed relative to its parent (see ``ChildOf``)."""

from __future__ import annotations

import numpy as np

from ecs_engine import component, field


@component
class LocalOffset:
    """Where this entity sits relative to its parent's Position, in world units.

    ``systems.follow_parents`` sets the entity's Position to the parent's plus this, so a
    sign on a moving platform (or a weapon in a hand) moves with it."""

    x: np.float32 = field(label="dx")
    y: np.float32 = field(label="dy")
