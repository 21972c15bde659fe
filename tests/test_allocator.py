"""The C allocator's settings (minigpt/demo/core/allocator.py): what app.py sets at start for each MINIGPT_MALLOC; a
page function's end told to the Trimmer, whose thread trims once for all the calls that ended since its last trim; and,
on glibc, that a trim gives back what freed blocks inside the heap held (bench/bench_server_memory.py measures the
server over rounds of calls)."""

import asyncio
import ctypes
import threading
from pathlib import Path

import pytest

from helpers import HANG_S
from minigpt.demo.core import allocator


class FakeLibc:
    """Records mallopt and malloc_trim calls instead of making them."""

    def __init__(self):
        self.calls = []

    def mallopt(self, parameter, value):
        self.calls.append(("mallopt", parameter, value))

    def malloc_trim(self, pad):
        self.calls.append(("malloc_trim", pad))


@pytest.fixture
def libc(monkeypatch):
    fake = FakeLibc()
    monkeypatch.setattr(allocator, "glibc", lambda: fake)
    monkeypatch.setattr(allocator, "trimmer", None)
    threadless = allocator.Trimmer
    monkeypatch.setattr(allocator, "Trimmer", lambda libc: threadless(libc, thread=False))
    return fake


@pytest.mark.parametrize(
    "mode, threshold, trims", [(None, True, True), ("untrimmed", True, False), ("glibc", False, False)]
)
def test_each_malloc_mode_sets_what_it_says(libc, monkeypatch, mode, threshold, trims):
    if mode is None:
        monkeypatch.delenv("MINIGPT_MALLOC", raising=False)
    else:
        monkeypatch.setenv("MINIGPT_MALLOC", mode)
    allocator.give_freed_memory_back()
    assert (("mallopt", allocator.M_MMAP_THRESHOLD, 1 << 20) in libc.calls) == threshold
    allocator.gives_memory_back(lambda: None)()
    assert (allocator.trimmer is not None and allocator.trimmer.trim_when_wanted(timeout=0)) == trims
    assert (("malloc_trim", 0) in libc.calls) == trims


def test_calls_that_end_between_two_trims_share_one_and_an_error_ends_a_call_too():
    libc = FakeLibc()
    trimmer = allocator.Trimmer(libc, thread=False)
    doubled = allocator.gives_memory_back(lambda x: 2 * x)

    def refuses():
        raise ValueError("no")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(allocator, "trimmer", trimmer)
        assert [doubled(i) for i in range(3)] == [0, 2, 4]  # answers as before
        assert trimmer.trim_when_wanted(timeout=0) and libc.calls == [("malloc_trim", 0)]
        assert not trimmer.trim_when_wanted(timeout=0)  # no call has ended since: nothing to give back
        with pytest.raises(ValueError, match="no"):  # the error goes on; what the call freed goes back all the same
            allocator.gives_memory_back(refuses)()
        assert trimmer.trim_when_wanted(timeout=0) and libc.calls == [("malloc_trim", 0)] * 2


def test_the_servers_trimmer_trims_on_its_own_thread_once_a_call_has_ended():
    trimmed = threading.Event()
    libc = FakeLibc()
    libc.malloc_trim = lambda pad: trimmed.set()
    trimmer = allocator.Trimmer(libc)
    assert not trimmed.is_set()
    trimmer.ended()
    assert trimmed.wait(HANG_S)


def test_streams_and_coroutines_are_left_as_they_are():
    def stream():
        yield 1

    async def answer():
        return 1

    async def async_stream():
        yield 1

    for endpoint in (stream, answer, async_stream):
        assert allocator.gives_memory_back(endpoint) is endpoint
    assert asyncio.run(allocator.gives_memory_back(answer)()) == 1


def resident_mib() -> float:
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


@pytest.mark.skipif(allocator.glibc() is None, reason="glibc's malloc_trim")
def test_a_trim_gives_back_the_pages_freed_blocks_held_inside_the_heap():
    """200 MB in 100 KB blocks (inside glibc's heap: below its mmap threshold), every 20th kept: the heap's top is in
    use, so glibc gives back nothing of the 190 MB freed by itself; a trim gives back at least half of it."""
    libc = allocator.glibc()
    libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = (
        ctypes.c_void_p,
        [ctypes.c_size_t],
        [ctypes.c_void_p],
    )
    blocks = [libc.malloc(100 << 10) for _ in range(2000)]
    for block in blocks:
        ctypes.memset(block, 1, 100 << 10)  # touched: resident
    kept = blocks[::20]
    for block in set(blocks) - set(kept):
        libc.free(block)
    held = resident_mib()
    libc.malloc_trim(0)
    given_back = held - resident_mib()
    for block in kept:
        libc.free(block)
    assert given_back > 95, f"a trim gave back {given_back:.0f} MB of the 190 MB freed"
