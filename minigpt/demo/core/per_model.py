"""What does not depend on the text, computed once per model and kept: a server's answer to a new text then costs only
what the text adds (composition scores, the roles probe, the effective embedding of the OV and QK circuits, the heads
the induction task needs)."""

import threading
from collections.abc import Callable


class PerModel:
    """compute(lm) -> the answer, kept for the last `kept` models (a model is its name and its weights' object: a
    snapshot or a reloaded folder is another model); concurrent asks of one model compute it once. The answers are
    shared between requests: callers read them and never change them."""

    def __init__(self, compute: Callable, kept: int = 4):
        self.compute, self.kept = compute, kept
        self.found: dict[tuple, object] = {}
        self.lock = threading.Lock()  # held for a moment: the dict's changes
        self.computing: dict[tuple, threading.Lock] = {}  # one per model, held while its answer is computed

    def get(self, lm):
        key = (lm.name, id(lm.model))
        with self.lock:
            if key in self.found:
                return self.found[key]
            computing = self.computing.setdefault(key, threading.Lock())
        with computing:  # one computation per model; other models' asks go on meanwhile
            with self.lock:
                if key in self.found:
                    return self.found[key]
            found = self.compute(lm)
            with self.lock:
                self.found[key] = found
                self.computing.pop(key, None)
                while len(self.found) > self.kept:
                    self.found.pop(next(iter(self.found)))
            return found
