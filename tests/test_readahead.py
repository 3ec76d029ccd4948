"""``ReadAhead``: a file read into memory on a second thread, hashed piece by piece."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from ecs_engine import readahead
from ecs_engine.readahead import PIECE, ReadAhead


def reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ecs-engine-file-read"]


@settings(max_examples=40, deadline=None)
@given(size=st.sampled_from([0, 1, 255, PIECE - 1, PIECE, PIECE + 1, 3 * PIECE + 7]),
       cut=st.integers(0, 16), threaded=st.booleans(),
       waits=st.lists(st.integers(0, 4 * PIECE), max_size=6))
def test_it_reads_the_bytes_and_hashes_them_in_order(size: int, cut: int, threaded: bool,
                                                      waits: list[int]) -> None:
    data = np.random.default_rng(size).integers(0, 256, size, np.uint8).tobytes()
    buf = np.full(size + 8, 0xAB, np.uint8)
    hasher = xxhash.xxh3_64()
    digest_to = max(0, size - cut)
    with ReadAhead(io.BytesIO(data), buf, size, hasher.update, digest_to,
                   threaded=threaded) as reader:
        for n in waits:  # any order: each answer covers what was asked for
            assert reader.wait(n) >= min(n, size)
        got = reader.wait(size)
    assert got == size
    assert buf[:size].tobytes() == data
    assert (buf[size:] == 0xAB).all()  # nothing past the end
    assert hasher.intdigest() == xxhash.xxh3_64_intdigest(data[:digest_to])
    assert not reader_threads()


@pytest.mark.parametrize("threaded", [False, True])
def test_a_file_shorter_than_its_size_gives_what_is_there(threaded: bool) -> None:
    data = bytes(range(256)) * (3 * PIECE // 256 + 1)
    short = data[: PIECE + 100]
    buf = np.zeros(len(data), np.uint8)
    hasher = xxhash.xxh3_64()
    with ReadAhead(io.BytesIO(short), buf, len(data), hasher.update, len(data),
                   threaded=threaded) as reader:
        assert reader.wait(len(data)) == len(short)
        assert reader.wait(10) == len(short)
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


def test_a_read_error_on_the_thread_is_raised_on_the_callers() -> None:
    data = bytes(4 * PIECE)
    buf = np.zeros(len(data), np.uint8)
    with pytest.raises(OSError, match="Input/output error"):
        with ReadAhead(Failing(data, 2 * PIECE), buf, len(data), threaded=True) as reader:
            assert reader.wait(len(data)) == 2 * PIECE  # what came before the error
    assert not reader_threads()


def test_a_read_error_in_one_go_is_raised_where_it_happens() -> None:
    data = bytes(2 * PIECE)
    buf = np.zeros(len(data), np.uint8)
    with ReadAhead(Failing(data, PIECE), buf, len(data), threaded=False) as reader:
        with pytest.raises(OSError, match="Input/output error"):
            reader.wait(len(data))


class Slow(io.BytesIO):
    def readinto(self, b: memoryview) -> int:  # type: ignore[override]
        time.sleep(0.01)
        return super().readinto(b)


def test_leaving_early_stops_the_thread_before_it_writes_on() -> None:
    """A caller that gives up (an error of its own) gets its memory back: the thread
    is joined, and nothing is written after."""
    data = bytes([7]) * (40 * PIECE // 8)
    buf = np.zeros(len(data), np.uint8)
    with pytest.raises(KeyError):
        with ReadAhead(Slow(data), buf, len(data), threaded=True) as reader:
            reader.wait(1)
            raise KeyError("the caller's own error")
    assert not reader_threads()
    written = int(np.count_nonzero(buf))
    assert written < len(data)
    time.sleep(0.05)
    assert int(np.count_nonzero(buf)) == written


def test_big_files_are_read_on_a_thread_and_small_ones_not(tmp_path: Path) -> None:
    seen: list[bool] = []
    for size in (readahead.THREAD_FROM - 1, readahead.THREAD_FROM):
        buf = np.zeros(size, np.uint8)
        with ReadAhead(Slow(bytes(size)), buf, size) as reader:
            seen.append(bool(reader_threads()))
            reader.wait(size)
    assert seen == [False, True]
