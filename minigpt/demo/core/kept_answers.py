"""Answers computed once per key and the latest kept, for the demo's caches: per model (`per_model`), per circuit asked
(`find_circuit`), per text and question type (`exercises`), per recorded pass (`pass_cache`).

Concurrent asks of one key compute it once: the first computes, the others wait for its end and look again. A key's
bookkeeping goes when its computation ends, answered or failed (a failure is not kept: the next ask computes again),
so keys whose computation fails leave nothing behind, however many there are."""

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable


class KeptAnswers:
    """The answers of the latest keys, at most `budget` of them together by `size` (1 each by default: the last
    `budget` keys), the least recently used going first; an answer bigger than the whole budget is returned, not
    kept."""

    def __init__(self, budget: float, size: Callable[[object], float] = lambda answer: 1):
        self.budget, self.size, self.used = budget, size, 0
        self.found: OrderedDict[Hashable, object] = OrderedDict()
        self.lock = threading.Lock()  # held for a moment: the dicts' changes
        self.computing: dict[Hashable, threading.Event] = {}  # keys being computed, each set when its computation ends
        self.computed = 0  # computations that answered, for tests and benchmarks

    def get(self, key: Hashable, compute: Callable[[], object]):
        """The answer of `key`: kept, or `compute()`d (once, however many ask at the same moment)."""
        while True:
            with self.lock:
                if key in self.found:
                    self.found.move_to_end(key)
                    return self.found[key]
                ended = self.computing.get(key)
                if ended is None:  # nobody computes it: this ask will
                    ended = self.computing[key] = threading.Event()
                    break
            ended.wait()  # another ask computes it: look again (it may have failed, or been too big to keep)
        try:
            answer = compute()
            with self.lock:
                self.computed += 1
                self.keep(key, answer)
            return answer
        finally:
            with self.lock:
                del self.computing[key]
            ended.set()

    def keep(self, key: Hashable, answer) -> None:
        """Under self.lock: `answer` kept, the least recently used going until the kept fit the budget."""
        size = self.size(answer)
        if size > self.budget:
            return
        self.found[key], self.used = answer, self.used + size
        while self.used > self.budget:
            _, gone = self.found.popitem(last=False)
            self.used -= self.size(gone)

    def cached(self, key: Hashable):
        """The kept answer of `key`, else None (nothing computed)."""
        with self.lock:
            return self.found.get(key)

    def clear(self) -> None:
        with self.lock:
            self.found.clear()
            self.used = 0
