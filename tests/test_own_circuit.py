"""The visitor's own circuit on the page (minigpt/demo/circuits/own_circuit.py, the `test_circuit` endpoint), on the
shipped specimen: measured on the very prompts the found circuit of the same call was found on (its faithfulness equals
heads.circuit_faithfulness of its edges on the answer's prompt ids, and on its held-out set), the found circuit's
numbers beside it are find_circuit's own (one cache), and the sentences say the numbers and read each part's sign.
(Its mistakes through the server: test_error_rule.py.)"""

import pytest
import torch

from minigpt import heads
from minigpt.demo.circuits import own_circuit
from minigpt.demo.circuits.endpoints import Circuits
from minigpt.demo.circuits.find_circuit import text_held_out
from minigpt.demo.circuits.find_circuit_view import own_circuit_html

ROMEO, ROMEO_CORRUPTED = "Romeo and Juliet, Romeo and Jul", "Romeo and Jullet, Romeo and Jul"
CALL = dict(text=ROMEO, model="specimen", task="text", corrupted_text=ROMEO_CORRUPTED, ablation="corrupted")
CLOSE = 1e-5  # the same float32 runs in another batch and order


@pytest.fixture(scope="module")
def circuits():
    from minigpt.demo.core.state import DemoState

    return Circuits(DemoState.configure(training=False))


@pytest.fixture(scope="module")
def answer(circuits):
    return circuits.test_circuit(circuit="embed -> mlp 0 -> 1.1 k; mlp 0 -> 1.1 v -> logits; 0.2 -> 1.1 k", **CALL)


def test_it_is_measured_on_the_found_circuits_prompts_and_held_out_set(circuits, answer):
    found = circuits.find_circuit(**CALL)
    assert answer["found"]["faithfulness"] == found["faithfulness"] and answer["found"]["heads"] == found["heads"]
    assert answer["found"]["minimal"]["heads"] == found["minimal"]["heads"]
    model = circuits.state.picker.get("specimen").model
    clean, corrupted = (torch.tensor(found["prompt_ids"][k]) for k in ("clean", "corrupted"))
    edges = [(e["sender"], e["receiver"], e["input"]) for e in answer["edges"]]
    assert len(edges) == answer["kept_edges"] == 5 and answer["heads"] == ["0.2", "1.1"]
    given = dict(task="pairs", ablation="corrupted")
    by_hand = heads.circuit_faithfulness(model, edges, clean, corrupted, **given)
    assert answer["found_on"]["faithfulness"] == pytest.approx(by_hand, abs=CLOSE)
    view = circuits.view(ROMEO, "specimen")
    texts = [view.ids, circuits.view(ROMEO_CORRUPTED, "specimen").ids]
    held = text_held_out(view.lm, texts, found["prompts"]["count"] + found["prompts"]["left_out"])
    [(name, (held_clean, held_corrupted))] = held.items()
    other = heads.circuit_faithfulness(model, edges, held_clean, held_corrupted, **given)
    assert [h["prompts"] for h in answer["held_out"]] == [name] == [h["prompts"] for h in found["held_out"]]
    assert answer["held_out"][0]["faithfulness"] == pytest.approx(other, abs=CLOSE)


def test_its_sentences_say_its_numbers_and_the_found_ones(answer):
    said = " ".join(answer["findings"])
    assert f"keeps {answer['found_on']['faithfulness']:.3f}" in said
    assert f"the circuit found keeps {answer['found']['faithfulness']:.3f}" in said
    assert all(f"{h['prompts']}, {h['faithfulness']:.3f}" in said for h in answer["held_out"])
    assert len(answer["parts"]) == 5 and answer["complete"]
    for part in answer["parts"]:
        assert part["name"] in said


def test_each_of_your_heads_is_said_with_its_measured_job(circuits, answer):
    """Issue 61: a head the words name carries what it was measured to do on the found-on prompts, the library's
    head_roles and measured_jobs on them (the first prompt's pass, induction over them all, as the found circuit's)."""
    from minigpt.demo.head_tools.words import job_clause
    from minigpt.heads.recorded_pass import run_forward_pass
    from minigpt.heads.role_scores import head_roles, measured_jobs

    model = circuits.state.picker.get("specimen").model
    clean = torch.tensor(circuits.find_circuit(**CALL)["prompt_ids"]["clean"])
    roles = head_roles(model, run_forward_pass(model, clean[0].tolist()), clean)
    roles.pop("induction_on_text", None)
    library, said = measured_jobs(roles), " ".join(answer["findings"])
    assert list(answer["jobs"]) == answer["heads"] == ["0.2", "1.1"]
    for name, job in answer["jobs"].items():
        layer, head = map(int, name.split("."))
        assert job == library[layer][head] and job_clause(name, job) in said
    assert "0.2 looks at the previous token (" in said  # the specimen's previous-token head, named by its job


def parts_answer(adds: list[float]) -> dict:
    parts = [dict(name=f"part {i}", kind="edge", adds=a, without=0.5 - a) for i, a in enumerate(adds)]
    return dict(parts=parts, complete=True)


@pytest.mark.parametrize(
    "adds, phrase",
    [
        (0.4, "part 0 0.400 (to 0.100)"),
        (-0.05, "Without part 0 the faithfulness rises by 0.050 (to 0.550): in this circuit it works against the"),
        (0.004, "Removing part 0 changes the faithfulness by less than 0.01: it keeps as much without."),
        (-0.004, "Removing part 0 changes the faithfulness by less than 0.01"),
    ],
)
def test_each_part_is_read_by_its_sign(adds, phrase):
    said = own_circuit.parts_sentences(parts_answer([adds]))
    assert len(said) == 1 and phrase in said[0]
    assert ("works against" in said[0]) == (adds <= -own_circuit.NEEDED)


def test_the_page_draws_its_numbers_beside_the_found_and_minimal_ones(answer):
    html = own_circuit_html(answer)
    found = answer["found"]
    for measured in [answer["found_on"], *answer["held_out"], found["found_on"], *found["held_out"]]:
        assert f"{measured['faithfulness']:.3f} <span" in html  # each set's value, its prompts' range beside it
    assert f"<td>{found['minimal']['faithfulness']:.3f}</td>" in html
    assert all(f"<td>{p['adds']:+.3f}</td>" in html for p in answer["parts"])
    assert html.count("<li>") == len(answer["findings"])
