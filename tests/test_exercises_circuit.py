"""The exercise "build a circuit of at most N heads that keeps at least X" (the `circuit` question type), through the
endpoint functions on the shipped specimen: N and X are what the circuit search's minimal circuit measured (read from
the find-circuit answer, one cache with the Circuits endpoints); a circuit is graded by the measurement `/test_circuit`
makes on the question's prompts (the minimal circuit's own edges right, an unimportant head alone wrong with its
figure, checked against `heads.measure_circuit` on the answer's prompt ids); too many heads and a malformed circuit are
refused with a message; a class link naming the kind opens the same question; a model whose metric does not move, or
whose minimal circuit falls short, is not asked."""

import math
from urllib.parse import parse_qsl

import pytest
import torch

from minigpt import heads
from minigpt.demo.head_tools.words import job_clause
from minigpt.errors import InstrumentError, VisitorError
from minigpt.heads.recorded_pass import run_forward_pass
from minigpt.heads.role_scores import head_roles, measured_jobs

ROMEO, CAT = "Romeo and Juliet, Romeo and Jul", "the cat sat. the ca"
CLOSE = 1e-5  # the same float32 runs in another batch and order


@pytest.fixture(scope="module")
def exercises():
    from minigpt.demo.circuits.endpoints import Circuits
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.exercises.endpoints import Exercises

    state = DemoState.configure(training=False)
    return Exercises(state, Circuits(state))  # as the page builds them: one circuit search a model


@pytest.fixture(scope="module")
def found(exercises):
    """The circuit search's answer on the induction task, the page's defaults: computed once, kept for the module."""
    return exercises.circuits.find_circuit(model="specimen", task="induction")


@pytest.fixture(scope="module")
def question(exercises, found):
    (asked,) = exercises.exercises(ROMEO, "specimen", kinds="circuit")["questions"]
    return asked


def edges_text(edges: list[dict]) -> str:
    return "; ".join(f"{e['sender']} -> {e['receiver']}{' ' + e['input'] if e['input'] else ''}" for e in edges)


def grade(exercises, question, answer, text=ROMEO):
    return exercises.grade(text, "specimen", question["id"], answer)


def test_the_question_asks_for_the_minimal_circuits_heads_and_faithfulness(question, found):
    minimal = found["minimal"]
    most, keeps = question["parameters"]["heads"], question["parameters"]["keeps"]
    assert question["kind"] == question["type"] == "circuit"
    assert most == len(minimal["heads"]) == question["answer_with"]["max_heads"]
    assert keeps == math.floor(minimal["faithfulness"] * 100) / 100  # rounded down to 2 decimals: an answer exists
    assert keeps <= minimal["faithfulness"] < keeps + 0.01 and minimal["faithfulness"] >= found["target"]
    said = question["prompt"]
    assert f"at most {most} heads" in said and f"keeps at least {keeps:.2f}" in said
    assert found["prompts"]["described"] in said and f"keeps {minimal['faithfulness']:.3f}" in said


def test_the_minimal_circuits_own_edges_are_right(exercises, question, found):
    minimal = found["minimal"]
    graded = grade(exercises, question, edges_text(minimal["edges"]))
    assert graded["correct"] and graded["measured"]["heads"] == minimal["heads"]
    assert graded["measured"]["faithfulness"] == pytest.approx(minimal["faithfulness"], abs=CLOSE)
    assert graded["measured"]["minimal"] == minimal["faithfulness"]
    assert f"keeps {minimal['faithfulness']:.3f} on the question's prompts, at least the" in graded["explanation"]
    for name in minimal["heads"]:  # each named with its job on the question's prompts: yours, then the minimal's
        assert graded["explanation"].count(job_clause(name, found["jobs"][name])) == 2, name
    link = dict(parse_qsl(graded["link"][1:]))  # the view that shows it: the Circuits section's "Find the circuit"
    assert link == {"model": "specimen", "text": ROMEO, "part": "find-circuit"}


def test_the_circuit_questions_link_unfolds_the_circuits_section_at_find_the_circuit(tmp_path, monkeypatch):
    """The page as app.py builds it: the part the circuit question's link names (links.PARTS) is an element of the
    Circuits section, and the page's load event that reads the link unfolds that section for it, and for no other
    link."""
    import inspect
    from types import SimpleNamespace

    from minigpt.demo.core.links import PARTS
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.page.ui import build_demo

    monkeypatch.setenv("MINIGPT_RUNS_DIR", str(tmp_path))  # no finished run of this checkout joins the picker
    demo = build_demo(DemoState.configure())
    fold = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "circuits")

    def inside(block) -> set:
        below = getattr(block, "children", [])
        return {getattr(block, "elem_id", None)} | {i for child in below for i in inside(child)}

    assert PARTS["find-circuit"] in inside(fold) and "own-circuit-text" in inside(fold)
    (opens,) = [f for f in demo.fns.values() if [o._id for o in f.outputs] == [fold._id]]
    assert [t[1] for t in opens.targets] == ["load"]
    read = inspect.unwrap(opens.fn)
    opened = read(SimpleNamespace(query_params={"model": "specimen", "text": ROMEO, "part": "find-circuit"}))
    assert opened.open is True
    for other in ({"model": "specimen", "text": ROMEO}, {"part": "banana"}, {"kinds": "circuit"}):
        assert not getattr(read(SimpleNamespace(query_params=other)), "open", False), other


def test_an_unimportant_head_alone_is_wrong_with_its_measured_figure(exercises, question, found):
    """A head the minimal circuit leaves out, alone: its figure is heads.measure_circuit's on the answer's own prompt
    ids (the same options: mean ablation, normalised against every edge ablated); the reveal shows it beside the
    minimal circuit's."""
    from minigpt.demo.exercises.view import card_html, reveal_html

    config = exercises.state.picker.get("specimen").model.config
    every = [f"{layer}.{h}" for layer in range(config.n_layer) for h in range(config.n_head)]
    head = [name for name in every if name not in found["minimal"]["heads"]][-1]
    graded = grade(exercises, question, head)
    model = exercises.state.picker.get("specimen").model
    clean, corrupted = (torch.tensor(found["prompt_ids"][k]) for k in ("clean", "corrupted"))
    alone = heads.measure_circuit(model, head, clean, corrupted, task="induction", held_out={}, max_runs=0)
    figure = graded["measured"]["faithfulness"]
    assert figure == pytest.approx(alone.found_on.faithfulness, abs=CLOSE) and figure < question["parameters"]["keeps"]
    assert not graded["correct"] and graded["measured"]["heads"] == [head]
    assert f"keeps {figure:.3f} on the question's prompts, less than the" in graded["explanation"]
    roles = head_roles(model, run_forward_pass(model, clean[0].tolist()), clean)  # its job, as the library measures
    roles.pop("induction_on_text")  # the first prompt's; induction is over every prompt (as the found circuit's)
    layer, index = map(int, head.split("."))
    assert (
        f"What each of your heads does on the found-on prompts: {job_clause(head, measured_jobs(roles)[layer][index])}."
        in graded["explanation"]
    )
    shown = reveal_html(graded)
    assert f"Not quite: your circuit keeps {figure:.3f}" in shown
    assert f"the minimal circuit: {found['minimal']['faithfulness']:.3f}" in shown
    assert 'class="ex-circuit"' in card_html(question, "specimen", ROMEO)


def test_too_many_heads_are_refused_before_any_measurement(exercises, question, found, monkeypatch):
    config = exercises.state.picker.get("specimen").model.config
    most = question["parameters"]["heads"]
    every = [f"{layer}.{h}" for layer in range(config.n_layer) for h in range(config.n_head)]
    monkeypatch.setattr(exercises.circuits, "test_circuit", lambda **_: pytest.fail("measured a refused circuit"))
    with pytest.raises(
        VisitorError, match=f"Your circuit names {most + 1} heads .*: the question asks for at most {most}"
    ):
        grade(exercises, question, " ".join(every[: most + 1]))
    with pytest.raises(VisitorError, match=f"names {most + 1} heads"):  # heads at either end of an edge count too
        grade(
            exercises,
            question,
            edges_text([{"sender": a, "receiver": "logits", "input": None} for a in every[: most + 1]]),
        )


@pytest.mark.parametrize("circuit", ["0.2 -> 1.1", "0.9", "1.1 -> 0.2 k", "banana", ""])
def test_a_malformed_circuit_gets_the_parsers_message(exercises, question, circuit):
    model = exercises.state.picker.get("specimen").model
    with pytest.raises(InstrumentError) as parsed:
        heads.measure_circuit(model, circuit)  # refused as read, before any pass
    with pytest.raises((InstrumentError, VisitorError)) as refused:
        grade(exercises, question, circuit)
    if circuit:
        assert str(refused.value) == str(parsed.value)
    else:
        assert "answer is empty: write a circuit" in str(refused.value)


def test_a_class_link_naming_the_kind_opens_the_same_question(exercises, question):
    """The link /exercises answers, read back as the page reads it, asks the same question; an empty kinds asks every
    kind but this one (its first ask runs the circuit search), and a set of two texts asks it once."""
    from minigpt.demo.core.links import read_link
    from minigpt.demo.exercises.endpoints import asked_once, checked_types, class_link

    answer = exercises.exercises(ROMEO, "specimen", kinds="circuit")
    link = read_link(dict(parse_qsl(answer["link"][1:])))
    assert link["kinds"] == "circuit" and link["model"] == "specimen"
    again = exercises.exercises(link["text"], link["model"], link["kinds"])
    assert [q["id"] for q in again["questions"]] == [question["id"]]
    assert "circuit" not in checked_types("") and checked_types("circuit, head")[-1] == "circuit"
    both = class_link("specimen", [ROMEO, CAT], "head,circuit")
    read = read_link(dict(parse_qsl(both[1:])))
    parts = [exercises.exercises(text, read["model"], read["kinds"]) for text in read["texts"].split("\n")]
    kept = asked_once(parts)
    assert [[q["type"] for q in p["questions"] if q["kind"] == "circuit"] for p in kept] == [["circuit"], []]


def test_a_model_that_does_not_do_the_task_or_whose_minimal_circuit_falls_short_is_not_asked(found):
    """The question's premises, each measured: the metric moves (the model copies) and the minimal circuit keeps the
    search's target; else it is not asked, and the message says which number fell short."""
    from types import SimpleNamespace

    from minigpt.demo.circuits.words import BEHAVIOUR_GAP as COPIES
    from minigpt.demo.exercises.questions import Unasked, circuit

    flat = {**found, "model_metric": found["ablated_metric"] + COPIES / 2}
    with pytest.raises(Unasked, match="This model does not do the induction task yet") as why:
        circuit(SimpleNamespace(found_circuit=lambda: flat))
    assert f"{flat['model_metric']:.3f} for the model and {flat['ablated_metric']:.3f}" in str(why.value)
    short = {**found, "minimal": {**found["minimal"], "faithfulness": found["target"] - 0.1}}
    with pytest.raises(Unasked, match=f"keeps {found['target'] - 0.1:.3f} .* below its target"):
        circuit(SimpleNamespace(found_circuit=lambda: short))
    with pytest.raises(Unasked, match="no circuit search"):
        circuit(SimpleNamespace(found_circuit=None))


def test_the_page_draws_one_circuit_card_for_a_set_of_two_texts(exercises, question):
    """The section's set on two texts, the kind ticked: the question asked once, a box to write the circuit in."""
    from minigpt.demo.exercises.ui import TICKED, ExercisesSection

    section = ExercisesSection(exercises.state, exercises.circuits)
    drawn = section.drawn_set("specimen", [ROMEO, CAT], "head,circuit")
    assert drawn.count('data-kind="circuit"') == 1 and f'data-id="{question["id"]}"' in drawn
    assert drawn.count('class="ex-circuit"') == 1 and "circuit" not in TICKED  # ticked by the teacher, not at first
