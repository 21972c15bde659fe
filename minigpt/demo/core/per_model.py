"""What does not depend on the text, computed once per model and kept: a server's answer to a new text then costs only
what the text adds (composition scores, the roles probe, the effective embedding of the OV and QK circuits, the heads
the induction task needs)."""

from collections.abc import Callable

from minigpt.demo.core.kept_answers import KeptAnswers


class PerModel:
    """compute(lm) -> the answer, kept for the last `kept` models (a model is its name and its weights' object: a
    snapshot or a reloaded folder is another model); concurrent asks of one model compute it once (kept_answers). The
    answers are shared between requests: callers read them and never change them."""

    def __init__(self, compute: Callable, kept: int = 4):
        self.compute, self.kept = compute, KeptAnswers(kept)

    def get(self, lm):
        return self.kept.get((lm.name, id(lm.model)), lambda: self.compute(lm))
