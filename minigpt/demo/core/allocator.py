"""The C allocator's share of the server's memory. torch's CPU tensors and Python's larger objects come from glibc's
malloc, which keeps what is freed for reuse: a server whose recorded passes, sessions and answers come and go then
holds memory it no longer uses, more after each round of calls. `give_freed_memory_back` (app.py, at start) and
`gives_memory_back` (every plain function of the page, page.build_demo) hand it back to the system.

MINIGPT_MALLOC=glibc leaves glibc's own ways, MINIGPT_MALLOC=untrimmed sets the mmap threshold alone (the server
before malloc_trim): bench/bench_server_memory.py measures each. Another C library (macOS, musl): nothing is done.
"""

import contextlib
import ctypes
import functools
import inspect
import os
import threading
import time

M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)
TRIM_EVERY_S = 1.0  # a trim at most this often: one took under 10 ms on the shipped models' server
trimmer = None  # the server's Trimmer, once give_freed_memory_back has made it


def glibc():
    """The process's C library when it is glibc, else None."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    return None


def give_freed_memory_back() -> None:
    """glibc keeps a freed block below its mmap threshold for reuse, and raises that threshold as big blocks are
    freed: a server whose recorded passes come and go then holds gigabytes it no longer uses (40 texts: 10 GB against
    a 1 GiB pass cache). A fixed 1 MiB threshold maps each big tensor on its own, given back when freed. The smaller
    blocks freed inside its heaps are given back after calls (`Trimmer`)."""
    global trimmer
    libc, mode = glibc(), os.environ.get("MINIGPT_MALLOC", "app")
    if libc is None or mode == "glibc":
        return
    libc.mallopt(M_MMAP_THRESHOLD, 1 << 20)
    if mode != "untrimmed" and trimmer is None:
        trimmer = Trimmer(libc)


class Trimmer:
    """malloc_trim(0) after calls, off their path: glibc gives back a heap's free top by itself, a trim every free page
    inside it too. `ended()` (a call has ended) wakes a thread that trims once, then rests TRIM_EVERY_S; calls that
    end meanwhile share the next trim. The last call of a burst is always followed by one: an idle server holds what
    its caches keep."""

    def __init__(self, libc, thread: bool = True):
        self.libc, self.wanted = libc, threading.Event()
        if thread:
            threading.Thread(target=self.run, name="minigpt-trim", daemon=True).start()

    def ended(self) -> None:
        self.wanted.set()

    def trim_when_wanted(self, timeout: float | None = None) -> bool:
        """One trim once a call has ended since the last (waiting up to `timeout`); whether it trimmed."""
        if not self.wanted.wait(timeout):
            return False
        self.wanted.clear()
        self.libc.malloc_trim(0)
        return True

    def run(self) -> None:
        while True:
            self.trim_when_wanted()
            time.sleep(TRIM_EVERY_S)


def gives_memory_back(endpoint):
    """A plain function, its end told to the server's Trimmer: what it freed goes back. A generator or coroutine as
    it is (a stream's decoding runs on its model's own thread, and a stream's steps are small)."""
    if (
        inspect.isgeneratorfunction(endpoint)
        or inspect.iscoroutinefunction(endpoint)
        or inspect.isasyncgenfunction(endpoint)
    ):
        return endpoint

    @functools.wraps(endpoint)
    def answer(*args, **kwargs):
        try:
            return endpoint(*args, **kwargs)
        finally:
            if trimmer is not None:
                trimmer.ended()

    return answer
