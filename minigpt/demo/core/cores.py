"""The machine's cores, shared between requests. The server runs each request on one intra-op thread (app.py): with
many visitors, one thread each keeps the cores busy without oversubscribing them. A lone visitor's heavy work (a long
text's recorded pass on a big model) would then use one core of many; `CoreShare.threads_for` gives it every core while
nothing else computes. No Gradio here.
"""

import contextlib
import os
import threading

import torch

HEAVY_WORK = 2e9  # multiply-adds of a forward pass from which more threads pay (about 50 ms on one core)


def pass_work(config, length: int) -> float:
    """Multiply-adds of one forward pass of `length` tokens: the blocks' weights (12 C^2 a token a layer) and the
    attention's two T x T products (2 T^2 C a layer, half of them masked but computed)."""
    C, L = config.n_embd, config.n_layer
    return L * (12 * C * C * length + 2 * C * length * length)


class CoreShare:
    """Counts the computations in flight; a heavy one alone (and `busy()` false: no text decoding) runs on every core.
    Any other keeps its thread's count (the server's: one), as every request did before."""

    def __init__(self, cores: int | None = None, busy=lambda: False):
        self.cores = cores or len(os.sched_getaffinity(0))
        self.busy = busy
        self.in_flight = 0
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def threads_for(self, work: float):
        """Within the block, the calling thread's torch ops run on as many threads as the work and the load allow."""
        with self.lock:
            self.in_flight += 1
            alone = self.in_flight == 1
        before = torch.get_num_threads()
        threads = self.cores if alone and work >= HEAVY_WORK and not self.busy() else before
        if threads != before:
            torch.set_num_threads(threads)  # this thread's team (and the default of threads started meanwhile)
        try:
            yield threads
        finally:
            if threads != before:
                torch.set_num_threads(before)
            with self.lock:
                self.in_flight -= 1
