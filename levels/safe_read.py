"""Reading a file a level names: a regular file only, never more than a size limit.

Level files come from players. A path in one may name a FIFO (reading blocks forever), a
device such as ``/dev/zero`` (reading never ends) or a huge file. The file is opened without
blocking and checked on the open descriptor (``fstat``), so what is checked is what is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ecs_engine.levels.errors import LevelError

__all__ = ["read_regular"]


def read_regular(path: Path, limit: int, what: str = "file", shown: Path | None = None,
                 where: str | None = None) -> bytes:
    """The bytes of ``path``: a :class:`LevelError` (on ``shown``, default ``path``) if it is
    not a regular file or holds more than ``limit`` bytes. ``what`` names it in messages."""
    name = shown or path
    try:
        # O_NONBLOCK: opening a FIFO nobody writes to returns at once instead of hanging.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise LevelError(name, f"cannot read the {what}: {exc.strerror or exc}",
                         where=where) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LevelError(name, f"the {what} is not a regular file (a folder, FIFO or "
                                   f"device); level files must be ordinary files", where=where)
        if info.st_size > limit:
            raise LevelError(name, f"the {what} is {info.st_size} bytes; at most {limit} "
                                   f"bytes are allowed", where=where)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)  # a file growing while read is still cut at the limit
    except OSError as exc:
        raise LevelError(name, f"cannot read the {what}: {exc.strerror or exc}",
                         where=where) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise LevelError(name, f"the {what} is more than {limit} bytes", where=where)
    return data
