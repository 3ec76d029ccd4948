"""``read_following``: a file read into memory, hashed piece by piece, while another
thread (or the same one, for small files) works on the bytes as they arrive."""

from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from ecs_engine import readahead
from ecs_engine.readahead import PIECE, Wait, read_following


def reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ecs-engine-load"]


@settings(max_examples=60, deadline=None)
@given(size=st.sampled_from([0, 1, 255, PIECE - 1, PIECE, PIECE + 1, 3 * PIECE + 7]),
       cut=st.integers(0, 16), threaded=st.booleans(), fresh=st.booleans(),
       waits=st.lists(st.integers(0, 4 * PIECE), max_size=6))
def test_it_reads_the_bytes_and_hashes_them_in_order(size: int, cut: int, threaded: bool,
                                                      fresh: bool, waits: list[int]) -> None:
    data = np.random.default_rng(size).integers(0, 256, size, np.uint8).tobytes()
    buf = np.full(size + 8, 0xAB, np.uint8)
    hasher = xxhash.xxh3_64()
    digest_to = max(0, size - cut)

    def follow(wait: Wait) -> list[bytes]:
        seen = []
        for n in waits:  # any order: each answer covers what was asked for, in bytes
            got = wait(n)
            assert got >= min(n, size)
            seen.append(buf[: min(n, size)].tobytes())
        return seen

    got, seen = read_following(io.BytesIO(data), buf, size, follow, hasher.update,
                               digest_to, fresh=fresh, threaded=threaded)
    assert got == size
    assert seen == [data[: min(n, size)] for n in waits]
    assert buf[:size].tobytes() == data
    assert (buf[size:] == 0xAB).all()  # nothing past the end
    assert hasher.intdigest() == xxhash.xxh3_64_intdigest(data[:digest_to])
    assert not reader_threads()


@pytest.mark.parametrize(("threaded", "fresh"), [(False, False), (True, False), (True, True)])
def test_a_file_shorter_than_its_size_gives_what_is_there(threaded: bool, fresh: bool) -> None:
    data = bytes(range(256)) * (3 * PIECE // 256 + 1)
    short = data[: PIECE + 100]
    buf = np.zeros(len(data), np.uint8)
    hasher = xxhash.xxh3_64()
    got, answers = read_following(io.BytesIO(short), buf, len(data),
                                  lambda wait: (wait(len(data)), wait(10)), hasher.update,
                                  len(data), fresh=fresh, threaded=threaded)
    assert got == len(short) and answers == (len(short), len(short))
    assert buf[: len(short)].tobytes() == short
    assert hasher.intdigest() == xxhash.xxh3_64_intdigest(short)


class Failing(io.BytesIO):
    """Fails after ``good`` bytes (a disk error half way)."""

    def __init__(self, data: bytes, good: int) -> None:
        super().__init__(data)
        self.good = good

    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        if self.tell() >= self.good:
            raise OSError(5, "Input/output error")
        return super().readinto(b)


@pytest.mark.parametrize(("threaded", "fresh"), [(False, False), (True, False), (True, True)])
def test_a_read_error_is_raised_on_the_callers_thread(threaded: bool, fresh: bool) -> None:
    data = bytes(4 * PIECE)
    buf = np.zeros(len(data), np.uint8)
    answers: list[int] = []
    with pytest.raises(OSError, match="Input/output error"):
        read_following(Failing(data, 2 * PIECE), buf, len(data),
                       lambda wait: answers.append(wait(len(data))), fresh=fresh,
                       threaded=threaded)
    assert answers in ([], [2 * PIECE])  # the follower saw what came before the error
    assert not reader_threads()


class Slow(io.BytesIO):
    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        time.sleep(0.01)
        return super().readinto(b)


def failing_follower(wait: Wait) -> None:
    wait(1)
    raise KeyError("the follower's own error")


def read_with_failing_follower(fresh: bool, raises: type[BaseException]) -> int:
    """Bytes in once the failed read returned, checked to stay so (nobody writes after)."""
    data = bytes([7]) * (12 * PIECE)
    buf = np.zeros(len(data), np.uint8)
    with pytest.raises(raises):
        read_following(Slow(data), buf, len(data), failing_follower, fresh=fresh,
                       threaded=True)
    assert not reader_threads()
    written = int(np.count_nonzero(buf))
    time.sleep(0.05)
    assert int(np.count_nonzero(buf)) == written
    return written


@pytest.mark.parametrize("fresh", [False, True])
def test_a_follower_that_raises_stops_the_read_and_raises(fresh: bool) -> None:
    """The caller gets its memory back: the reading thread is joined and writes nothing
    after (a reading caller reads on to the end: the file is the follower's only
    worry)."""
    written = read_with_failing_follower(fresh, KeyError)
    assert written == 12 * PIECE if fresh else written < 12 * PIECE


@pytest.mark.parametrize("fresh", [False, True])
def test_who_reads_and_who_follows(fresh: bool) -> None:
    """Memory used before: a second thread reads; fresh memory: the caller reads (the
    thread that freed the memory it faults in) and a second thread follows."""
    size = readahead.THREAD_FROM
    buf = np.zeros(size, np.uint8)
    readers: set[str] = set()
    real = readahead._Reader._read_piece

    def piece(self: readahead._Reader) -> None:
        readers.add(threading.current_thread().name)
        real(self)

    caller = threading.current_thread().name
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(readahead._Reader, "_read_piece", piece)
        _, follower = read_following(io.BytesIO(bytes(size)), buf, size,
                                     lambda wait: (wait(size), threading.current_thread().name)[1],
                                     fresh=fresh)
    if fresh:
        assert readers == {caller} and follower == "ecs-engine-load"
    else:
        assert readers == {"ecs-engine-load"} and follower == caller


def test_small_files_are_read_on_the_callers_thread_alone() -> None:
    size = readahead.THREAD_FROM - 1
    buf = np.zeros(size, np.uint8)

    def follow(wait: Wait) -> list[threading.Thread]:
        wait(size)
        return reader_threads()

    assert read_following(io.BytesIO(bytes(size)), buf, size, follow) == (size, [])


def interrupt_first_join(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """The first join of the load's thread raises KeyboardInterrupt (a Ctrl-C there)."""
    real_join = threading.Thread.join
    interrupts: list[BaseException] = [KeyboardInterrupt()]

    def join(self: threading.Thread, timeout: float | None = None) -> None:
        if interrupts and self.name == "ecs-engine-load":
            raise interrupts.pop()
        real_join(self, timeout)

    monkeypatch.setattr(threading.Thread, "join", join)
    return interrupts


def test_an_interrupt_while_waiting_for_the_follower_waits_for_it_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by an outside review: a Ctrl-C while the caller joined the other thread
    left it parsing (and taking the world's index memory) after the load had returned.
    Now the interrupt cancels the read, the thread is waited for, then it is raised."""
    interrupts = interrupt_first_join(monkeypatch)
    data = bytes([7]) * (3 * PIECE)
    buf = np.zeros(len(data), np.uint8)
    done: list[bool] = []

    def follow(wait: Wait) -> None:
        wait(len(data))
        time.sleep(0.1)  # still at work when the caller has read everything
        done.append(True)

    with pytest.raises(KeyboardInterrupt):
        read_following(io.BytesIO(data), buf, len(data), follow, fresh=True, threaded=True)
    assert not interrupts and done == [True] and not reader_threads()


def test_an_interrupt_while_waiting_for_the_reader_stops_it_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    interrupts = interrupt_first_join(monkeypatch)
    assert read_with_failing_follower(False, KeyboardInterrupt) < 12 * PIECE
    assert not interrupts
