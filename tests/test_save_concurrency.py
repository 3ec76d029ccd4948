"""Several writers saving to one path: every save has its own temp file, so the file on
disk is always one complete save that loads (never a mix, never empty), no writer fails,
and planted or stale temp names are never written through."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

from ecs_engine import World, component
from ecs_engine.atomicfile import temp_name_pattern, write_atomic
from ecs_engine.savefile import SaveFileError, read_file

SAVES = 25

WRITER = """
import sys
import numpy as np
from ecs_engine import World, component

@component
class Mark:
    v: np.int64 = 0

path, who, count, saves = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
world = World(seed=who)
world.spawn_batch(Mark(v=who), count=count)
world.resources["who"] = who
for i in range(saves):
    world.tick = i
    world.save(path)
print("done", flush=True)
"""


@component
class Mark:
    v: np.int64 = 0


def marked_world(who: int, count: int) -> World:
    world = World(seed=who)
    world.spawn_batch(Mark(v=who), count=count)
    world.resources["who"] = who
    return world


def check_complete(path: Path, counts: dict[int, int]) -> int:
    """Load ``path``: it must be exactly one writer's world. Returns that writer."""
    world = World()
    world.register(Mark)
    world.load(path)
    who = world.resources["who"]
    rows = world.store(Mark).live()
    assert len(world) == counts[who] == len(rows)
    assert np.all(rows["v"] == who)
    return int(who)


def test_two_worlds_saving_from_threads_leave_one_complete_save(tmp_path: Path) -> None:
    path = tmp_path / "slot.sav"
    counts = {1: 40_000, 2: 25_000}
    worlds = {who: marked_world(who, n) for who, n in counts.items()}
    errors: list[BaseException] = []
    seen: set[int] = set()
    start = threading.Barrier(len(worlds) + 1)
    writing = [len(worlds)]

    def writer(world: World) -> None:
        start.wait()
        try:
            for _ in range(SAVES):
                world.save(path)
        except BaseException as exc:  # reported below; a failed save is a test failure
            errors.append(exc)
        finally:
            writing[0] -= 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in worlds.values()]
    for t in threads:
        t.start()
    start.wait()
    while writing[0]:  # read while both write: every state on disk is a whole save
        if path.exists():
            seen.add(check_complete(path, counts))
    for t in threads:
        t.join()
    assert not errors, errors
    seen.add(check_complete(path, counts))
    assert seen <= set(counts)
    assert [p.name for p in tmp_path.iterdir()] == ["slot.sav"]  # no temp file left


def test_two_processes_saving_to_one_path_leave_one_complete_save(tmp_path: Path) -> None:
    path = tmp_path / "slot.sav"
    counts = {1: 60_000, 2: 35_000}
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(who), str(n),
                               str(SAVES)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for who, n in counts.items()]
    loads = 0
    while any(p.poll() is None for p in procs):
        if path.exists():
            check_complete(path, counts)
            loads += 1
    for p in procs:
        out, err = p.communicate()
        assert p.returncode == 0 and out.strip() == "done", err
    check_complete(path, counts)
    assert [p.name for p in tmp_path.iterdir()] == ["slot.sav"]


def test_a_stale_symlinked_tmp_is_never_written_through(tmp_path: Path) -> None:
    other = tmp_path / "other-slot.sav"
    other.write_bytes(b"another slot's save")
    path = tmp_path / "slot.sav"
    (tmp_path / "slot.sav.tmp").symlink_to(other)  # the name older engines used
    planted = tmp_path / ".slot.sav.abcdefgh.tmp"  # a name this engine's temp files use
    planted.symlink_to(other)
    assert temp_name_pattern(path).fullmatch(planted.name)
    world = marked_world(1, 10)
    world.save(path)
    world.save(path)
    assert other.read_bytes() == b"another slot's save"
    assert (tmp_path / "slot.sav.tmp").is_symlink()  # not ours: left alone
    assert not os.path.lexists(planted)  # ours by name: the link (only the link) removed
    assert check_complete(path, {1: 10}) == 1


def test_a_symlinked_target_is_replaced_not_written_through(tmp_path: Path) -> None:
    other = tmp_path / "other.sav"
    other.write_bytes(b"keep")
    path = tmp_path / "slot.sav"
    path.symlink_to(other)
    marked_world(1, 3).save(path)
    assert other.read_bytes() == b"keep" and not path.is_symlink()


@pytest.mark.skipif(sys.platform == "win32", reason="flock sweep is POSIX only")
def test_dead_writers_temp_files_are_swept_live_ones_kept(tmp_path: Path) -> None:
    import fcntl

    path = tmp_path / "slot.sav"
    dead = tmp_path / ".slot.sav.deadbeef.tmp"
    dead.write_bytes(b"half a save from a killed process")
    live = tmp_path / ".slot.sav.l1vewrtr.tmp"
    live.write_bytes(b"a writer is filling this")
    fd = os.open(live, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        marked_world(2, 5).save(path)
        assert not dead.exists()
        assert live.read_bytes() == b"a writer is filling this"
    finally:
        os.close(fd)
    marked_world(2, 5).save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slot.sav"]


def test_a_failing_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "slot.sav"
    marked_world(1, 7).save(path)
    before = path.read_bytes()

    def boom(f: object) -> None:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_atomic(path, boom)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["slot.sav"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_saves_keep_the_permission_bits_of_the_file_they_replace(tmp_path: Path) -> None:
    path = tmp_path / "slot.sav"
    marked_world(1, 2).save(path)
    mode = os.stat(path).st_mode & 0o777
    assert mode == 0o666 & ~_umask_now()
    os.chmod(path, 0o640)
    marked_world(1, 2).save(path)
    assert os.stat(path).st_mode & 0o777 == 0o640


def _umask_now() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def test_a_damaged_save_still_reports_the_path(tmp_path: Path) -> None:
    path = tmp_path / "slot.sav"
    path.write_bytes(b"")
    with pytest.raises(SaveFileError, match="slot.sav: the file is empty"):
        read_file(path)


def test_saving_into_a_missing_folder_or_onto_a_folder_names_the_users_path(
        tmp_path: Path) -> None:
    # Not the temp file's name (".x.sav.k2j4h1x9.tmp"), which the user never chose.
    missing = tmp_path / "no" / "such" / "x.sav"
    with pytest.raises(FileNotFoundError, match="folder .* does not exist") as info:
        marked_world(1, 2).save(missing)
    assert info.value.filename == os.fspath(missing) and ".tmp" not in str(info.value)
    with pytest.raises(IsADirectoryError, match="is a folder") as info2:
        marked_world(1, 2).save(tmp_path)
    assert info2.value.filename == os.fspath(tmp_path)
    assert list(tmp_path.iterdir()) == []  # no temp file left behind


def test_a_folder_that_refuses_a_new_file_names_the_users_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (Simulated: the tests may run as root, which a read-only folder does not stop.)
    path = tmp_path / "slot.sav"
    marked_world(1, 2).save(path)
    old = path.read_bytes()

    def refuse(*args: object, dir: str = "", **kw: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied", os.path.join(dir, ".slot.sav.x.tmp"))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(PermissionError, match="cannot create a file in the folder") as info:
        marked_world(3, 4).save(path)
    assert info.value.filename == os.fspath(path) and ".tmp" not in str(info.value)
    assert path.read_bytes() == old


def test_a_folder_that_exists_but_answers_no_such_file_is_not_called_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (/proc answers a new file with ENOENT though it exists.)
    def refuse(*args: object, dir: str = "", **kw: object) -> tuple[int, str]:
        raise FileNotFoundError(2, "No such file or directory", os.path.join(dir, ".x.tmp"))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(FileNotFoundError, match="cannot create a file in the folder") as info:
        marked_world(1, 2).save(tmp_path / "x.sav")
    assert "does not exist" not in str(info.value)
    assert info.value.filename == os.fspath(tmp_path / "x.sav")
