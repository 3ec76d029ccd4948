"""Atomic file replacement that is safe when several writers save to one path at once.

Each write goes to its own temp file, created exclusively (``O_CREAT | O_EXCL``, never
through a symlink: ``tempfile.mkstemp``) in the target's folder, then is fsynced, renamed
over the target with ``os.replace`` and the folder fsynced. Two worlds (threads or
processes) saving to one path therefore never share a temp file: the target always holds
one complete file, the last one renamed. A planted or stale name (say ``save.tmp`` as a
symlink to another slot) is never opened.

Temp files of writers that were killed are removed by the next write to the same path.
A writer holds an exclusive ``flock`` on its temp file for as long as it writes, so a
sweep only deletes temp files no live writer holds (POSIX only; elsewhere stale temp
files are left for the user).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["temp_name_pattern", "write_atomic"]

_TEMP_SUFFIX = ".tmp"
_NAME_CHARS = "[a-z0-9_]{8}"  # tempfile's random part


def temp_name_pattern(target: Path) -> re.Pattern[str]:
    """The names of the temp files writes to ``target`` use: ``.<name>.<random>.tmp``."""
    return re.compile(re.escape(f".{target.name}.") + _NAME_CHARS + re.escape(_TEMP_SUFFIX))


def _umask() -> int:
    """The process umask without changing it (``os.umask`` sets it, racing other threads)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    return 0o022


def _mode_for(target: Path) -> int:
    """The permission bits for the new file: the old file's, else what ``open`` gives."""
    try:
        st = os.stat(target)
    except OSError:
        return 0o666 & ~_umask()
    return stat.S_IMODE(st.st_mode)


def _lock(fd: int, block: bool) -> bool:
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
    except OSError:
        return False
    return True


def _sweep(folder: Path, target: Path) -> None:
    """Remove temp files of dead writers to ``target`` (unlocked ones)."""
    if fcntl is None:
        return
    pattern = temp_name_pattern(target)
    try:
        names = [e.name for e in os.scandir(folder) if pattern.fullmatch(e.name)]
    except OSError:
        return
    for name in names:
        path = folder / name
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
        except OSError:
            # A symlink (ELOOP) or a name that vanished: a link is only a name, removing
            # it never touches what it points to.
            with contextlib.suppress(OSError):
                if os.path.islink(path):
                    os.unlink(path)
            continue
        try:
            if not _lock(fd, block=False):
                continue  # a live writer
            opened, now = os.fstat(fd), os.lstat(path)
            if (opened.st_ino, opened.st_dev) == (now.st_ino, now.st_dev):
                os.unlink(path)  # still holding the lock: a writer that opens it sees nlink 0
        except OSError:
            pass
        finally:
            os.close(fd)


def _create_temp(folder: Path, target: Path) -> tuple[int, Path]:
    """A new, empty, exclusively created and locked temp file next to ``target``."""
    while True:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=_TEMP_SUFFIX,
                                    dir=folder)
        _lock(fd, block=True)
        if os.fstat(fd).st_nlink:
            return fd, Path(name)
        os.close(fd)  # a sweep removed it between creation and our lock: take another


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open folders
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_meanwhile(fd: int, meanwhile: Callable[[], object] | None) -> None:
    """``os.fsync(fd)``; with ``meanwhile``, the fsync runs on a helper thread (it waits
    for the disk without the GIL) while ``meanwhile()`` runs here. Both finish before
    this returns; an error from either is raised (the fsync's first)."""
    if meanwhile is None:
        os.fsync(fd)
        return
    failure: list[BaseException] = []
    syncing = threading.Event()

    def sync() -> None:
        syncing.set()
        try:
            os.fsync(fd)  # releases the GIL at once
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    helper = threading.Thread(target=sync, name="ecs-engine-fsync", daemon=True)
    helper.start()
    syncing.wait()  # else this thread may keep the GIL for a switch interval first
    try:
        meanwhile()
    finally:
        helper.join()
    if failure:
        raise failure[0]


def write_atomic(path: str | os.PathLike[str], write: Callable[[BinaryIO], object],
                 meanwhile: Callable[[], object] | None = None) -> None:
    """Replace ``path`` with what ``write(file)`` writes, atomically: a crash at any point
    leaves the old file or the new one, and concurrent writers never mix their bytes.

    The new file keeps the old one's permission bits (a new path gets ``0o666 & ~umask``).
    If ``write`` raises, the target is untouched and the temp file removed.
    ``meanwhile()`` (optional) runs while the file is fsynced, so CPU work overlaps the
    wait for the disk; if it raises, the target is untouched too.
    """
    target = Path(path)
    folder = target.parent
    # The user's path in the error, not the temp file's (".slot1.sav.k2j4h1x9.tmp").
    if target.is_dir() and not target.is_symlink():  # (a link is replaced, as always)
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file to save to",
                                os.fspath(path))
    _sweep(folder, target)
    mode = _mode_for(target)
    try:
        fd, tmp = _create_temp(folder, target)
    except FileNotFoundError as exc:
        if folder.is_dir():  # (some folders refuse new files so: /proc)
            raise FileNotFoundError(exc.errno, f"cannot save: cannot create a file in the "
                                               f"folder {os.fspath(folder)!r} "
                                               f"({exc.strerror})", os.fspath(path)) from None
        raise FileNotFoundError(errno.ENOENT, f"cannot save: the folder {os.fspath(folder)!r} "
                                              f"does not exist", os.fspath(path)) from None
    except OSError as exc:  # (the user's path in the error, not the temp file's)
        raise type(exc)(exc.errno, f"cannot save: cannot create a file in the folder "
                                   f"{os.fspath(folder)!r} ({exc.strerror})",
                        os.fspath(path)) from None
    closed = False
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            write(f)
            f.flush()
            if hasattr(os, "fchmod"):
                os.fchmod(fd, mode)
            _fsync_meanwhile(fd, meanwhile)
        if fcntl is None:  # Windows cannot rename an open file (and has no sweep to race)
            os.close(fd)
            closed = True
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    finally:
        if not closed:
            os.close(fd)  # after the rename: a sweep never sees a live temp file unlocked
    _fsync_dir(folder)
