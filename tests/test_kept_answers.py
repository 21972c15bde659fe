"""The demo's caches (kept_answers.KeptAnswers, and the four built on it): a key whose computation fails leaves nothing
behind (exercises' cache kept a lock for each: memory that grew with failures), and concurrent asks of one key
compute it once. Threads meet at Events and Barriers, never at sleeps."""

import threading

import pytest

from helpers import THREE_LAYERS, tiny_model
from minigpt.demo.circuits.find_circuit import FoundCache
from minigpt.demo.core.kept_answers import KeptAnswers
from minigpt.demo.core.pass_cache import ForwardPassCache
from minigpt.demo.core.per_model import PerModel
from minigpt.demo.exercises.endpoints import Exercises, measured
from minigpt.demo.exercises.questions import Unasked
from minigpt.heads.errors import InstrumentError


def failing(key):
    raise RuntimeError(f"no answer for {key}")


def exercises_cache():
    """A cache as the demo builds it, and an ask of its i-th key, whose computation fails."""
    kept = Exercises(state=None).kept
    return kept, lambda i: kept.get(("emma", i), lambda: failing(i))


def found_circuit_cache():
    found = FoundCache()
    return found, lambda i: found.get(("induction", i), lambda: failing(i))


def per_model_cache():
    per_model = PerModel(lambda lm: failing(lm.name))
    return per_model.kept, lambda i: per_model.get(type("LM", (), {"name": f"m{i}", "model": object()})())


def pass_cache():
    passes, model, vocabulary = ForwardPassCache(), tiny_model(shape=THREE_LAYERS), THREE_LAYERS["vocab_size"]
    return passes.kept, lambda i: passes.get(model, [0, vocabulary + i])  # its last token is none of the model's


@pytest.mark.parametrize("cache", [exercises_cache, found_circuit_cache, per_model_cache, pass_cache])
def test_keys_whose_computation_fails_leave_nothing_behind(cache):
    kept, ask = cache()
    for i in range(1000):
        with pytest.raises((RuntimeError, InstrumentError)):
            ask(i)
    assert kept.computing == {} and len(kept.found) == 0 and kept.computed == 0


def test_a_question_type_the_text_cannot_support_is_an_answer_kept():
    kept, asks = KeptAnswers(4), []

    def ask(measurements):
        asks.append(measurements)
        raise Unasked("The text's end is not a repeat.")

    for _ in range(3):
        why = kept.get("key", lambda: measured(ask, "measurements"))
        assert isinstance(why, Unasked) and str(why) == "The text's end is not a repeat."
    assert asks == ["measurements"] and kept.computing == {}


def asked_together(kept: KeptAnswers, compute, askers: int = 8) -> tuple[list, list, list]:
    """`askers` threads ask `kept` for one key while the first ask's computation is held (it waits for `release`):
    the threads, and each one's answer or error, in no particular order."""
    answers, errors, ready = [], [], threading.Barrier(askers + 1)

    def ask():
        ready.wait()
        try:
            answers.append(kept.get("key", compute))
        except RuntimeError as error:
            errors.append(error)

    threads = [threading.Thread(target=ask) for _ in range(askers)]
    for thread in threads:
        thread.start()
    ready.wait()  # every asker is about to ask
    return threads, answers, errors


def test_concurrent_asks_of_one_key_compute_it_once():
    kept, started, release, calls = KeptAnswers(4), threading.Event(), threading.Event(), []

    def compute():
        calls.append(1)
        started.set()
        release.wait()
        return object()

    threads, answers, errors = asked_together(kept, compute)
    assert started.wait(600)  # one ask computes; the others wait for it or find its answer
    release.set()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and errors == [] and len(answers) == 8 and all(a is answers[0] for a in answers)
    assert kept.computing == {} and kept.get("key", lambda: failing("key")) is answers[0]


def test_a_failed_computation_is_not_kept_the_next_ask_computes_again():
    kept, started, release, calls = KeptAnswers(4), threading.Event(), threading.Event(), []

    def compute():
        calls.append(1)
        if len(calls) == 1:  # the first computation fails, once every asker has asked or is about to
            started.set()
            release.wait()
            raise RuntimeError("the first try failed")
        return "answer"

    threads, answers, errors = asked_together(kept, compute)
    assert started.wait(600)
    release.set()
    for thread in threads:
        thread.join()
    assert len(calls) == 2 and [str(e) for e in errors] == ["the first try failed"] and answers == ["answer"] * 7
    assert kept.computing == {} and dict(kept.found) == {"key": "answer"}


def test_the_least_recently_used_go_first_within_the_budget():
    kept = KeptAnswers(10, size=len)
    for key in "abc":
        kept.get(key, lambda key=key: key * 4)  # 4 each: two fit
    assert list(kept.found) == ["b", "c"] and kept.used == 8
    kept.get("b", lambda: failing("b"))  # kept: used, not computed
    kept.get("d", lambda: "ddd")  # 11 with c: c goes, the least recently used
    assert list(kept.found) == ["b", "d"] and kept.used == 7
    assert kept.get("e", lambda: "e" * 11) == "e" * 11 and "e" not in kept.found  # bigger than the budget: not kept
