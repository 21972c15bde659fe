"""What the server keeps per model gives the numbers it would compute afresh, and /patching's estimates (where exact
patching costs too much) against exact patching: the top cell, the correlation, and the exact cell on demand."""

import threading

import pytest
import torch

from minigpt import heads
from minigpt.demo.circuits import patch_estimates
from minigpt.demo.circuits.endpoints import Circuits
from minigpt.demo.circuits.view import patching_html
from minigpt.demo.core.per_model import PerModel
from minigpt.demo.core.state import DemoState
from minigpt.demo.head_tools.endpoints import Insights
from minigpt.heads import role_scores

TEXT = "Romeo and Juliet, Romeo and Jul"
CORRUPTED = "Romeo and Jullet, Romeo and Jul"  # one token changed: the specimen's answer changes from "i" to "l"


@pytest.fixture(scope="module")
def state():
    return DemoState.configure(training=False)


def test_head_roles_from_the_kept_probe_equal_a_fresh_computation_bitwise(state):
    insights = Insights(state)
    first, second = insights.head_roles(TEXT, "specimen"), insights.head_roles("Juliet and Romeo", "specimen")
    lm = state.picker.get("specimen")
    excluded = {lm.boundary_id, lm.eos_id, *lm.never_ids} - {None}
    for text, answer in ((TEXT, first), ("Juliet and Romeo", second)):
        fresh = role_scores.measured_roles(lm.model, state.text_view("specimen", text).recorded, lm.boundary_id,
                                             excluded, lm.vocab_size)  # fmt: skip
        for role in ("previous_token", "first_token", "self", "induction"):
            assert answer[role] == fresh[role].tolist()  # the same floats, not merely close
        assert answer["probe"]["repeated_half_loss"] == fresh["repeated_half_loss"]
    assert len(insights.probed.kept.found) == 1  # one probe for the model, whatever the text


def test_ov_rows_of_the_texts_tokens_equal_those_rows_of_the_whole_circuit(state):
    model = state.picker.get("specimen").model
    tokens = [5, 17, 3, 40]
    for source in ("effective", "bare"):
        whole = heads.ov_circuit(model, 1, 1, source=source)
        rows = heads.ov_circuit(model, 1, 1, source=source, tokens=tokens, unembedding=heads.folded_unembedding(model))
        torch.testing.assert_close(rows, whole[tokens], atol=1e-5, rtol=1e-5)  # float32: batched runs of other sizes
        values, indices = heads.ov_circuit(model, 1, 1, top=3, source=source, tokens=tokens)
        assert indices.tolist() == whole[tokens].topk(3).indices.tolist()


def test_per_model_computes_once_under_concurrent_asks_and_keeps_the_last_models():
    calls, started, release = [], threading.Event(), threading.Event()

    def held(lm):  # the first computation is held until every ask has been made
        calls.append(lm.name)
        started.set()
        release.wait()
        return lm.name.upper()

    kept = PerModel(held, kept=2)
    models = [type("LM", (), {"name": name, "model": object()})() for name in "abc"]
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(kept.get(models[0]))) for _ in range(4)]
    [t.start() for t in threads]
    assert started.wait(600)
    release.set()
    [t.join() for t in threads]
    assert answers == ["A"] * 4 and calls == ["a"]
    kept.get(models[1]), kept.get(models[2])
    assert len(kept.kept.found) == 2 and kept.get(models[0]) == "A" and calls == ["a", "b", "c", "a"]


def test_estimates_agree_with_exact_patching_on_the_specimen(state):
    clean, corrupted = state.text_view("specimen", TEXT), state.text_view("specimen", CORRUPTED)
    model = clean.lm.model
    estimate = heads.estimated_patching(model, clean.ids, corrupted.ids)
    exact = heads.patch_heads_by_position(model, clean.ids, corrupted.ids).effects
    L, H, T = exact.shape
    top = [int(i) for i in torch.unravel_index(estimate.position.argmax(), (L, H, T))]
    assert top == [int(i) for i in torch.unravel_index(exact.argmax(), (L, H, T))] == [1, 1, T - 1]
    assert torch.corrcoef(torch.stack([estimate.position.flatten(), exact.flatten()]))[0, 1] > 0.99
    whole = heads.patch_heads(model, clean.ids, corrupted.ids).effects
    assert torch.corrcoef(torch.stack([estimate.heads.flatten(), whole.flatten()]))[0, 1] > 0.99
    # First order says 1.1 restores more than all of the answer (1.46 against 1.00); the top cells are patched exactly.
    assert estimate.first_order[1, 1, -1] == pytest.approx(1.46, abs=0.05) and exact[1, 1, -1] == pytest.approx(
        1, abs=0.01
    )
    assert (1, 1, T - 1) in estimate.exact_cells and float(estimate.position[1, 1, -1]) == pytest.approx(
        float(exact[1, 1, -1]), abs=1e-5
    )


def test_patching_answers_estimates_first_and_the_exact_cell_on_demand(state, monkeypatch):
    circuits = Circuits(state)
    monkeypatch.setattr(patch_estimates, "ESTIMATE_WORK", 0)  # as a GPT-2-sized model's text does
    answer = circuits.patching(TEXT, CORRUPTED, "specimen", exact_cell="1.1 31")
    clean, corrupted = state.text_view("specimen", TEXT), state.text_view("specimen", CORRUPTED)
    model = clean.lm.model
    exact = heads.patch_heads_by_position(model, clean.ids, corrupted.ids).effects
    assert answer["estimate"] is True and answer["method"] == "attribution patching"
    assert answer["estimated"] == ["heads", "heads_by_position", "residual"]
    assert answer["exact_cell"]["exact"] == pytest.approx(float(exact[1, 1, 31]), abs=1e-5)
    assert answer["exact_cell"]["shown"] == pytest.approx(answer["heads_by_position"][1][1][31])
    assert answer["findings"][0].startswith("Estimates: exact patching would run the model 72 times")
    # What the findings name is patched exactly, beside its estimate: the top 2 heads and the top 3 cells by position.
    whole = heads.patch_heads(model, clean.ids, corrupted.ids).effects
    checked = {(c["grid"], tuple(c["index"])): c for c in answer["checked"]}
    assert checked[("heads", (1, 1))]["exact"] == pytest.approx(float(whole[1, 1]), abs=1e-5)
    assert checked[("heads", (1, 1))]["estimate"] == pytest.approx(answer["heads"][1][1])
    by_position = [c for c in answer["checked"] if c["grid"] == "heads_by_position"]
    assert len(by_position) == 3 and by_position[0]["index"] == [1, 1, 31]
    for c in by_position:  # the grid holds the exact value there, and the words say both
        assert c["exact"] == pytest.approx(float(exact[tuple(c["index"])]), abs=1e-5)
        assert answer["heads_by_position"][c["index"][0]][c["index"][1]][c["index"][2]] == pytest.approx(c["exact"])
    assert any(f.startswith("Patched exactly") and "1.1 at position 31 100% (estimated 146%)" in f
               for f in answer["findings"])  # fmt: skip
    html = patching_html(answer)  # the exact cell is not offered as an estimate to click; its neighbour is
    assert 'data-cell="1.1 31"' not in html and 'data-cell="1.1 30"' in html
    residual = heads.patch_residual(model, clean.ids, corrupted.ids).effects
    assert answer["residual_exact_at"] == [14]  # where the texts differ the stream is patched exactly
    assert [row[14] for row in answer["residual"]] == pytest.approx(residual[:, 14].tolist(), abs=1e-5)
    one = circuits.patching(TEXT, CORRUPTED, "specimen", exact_cell="resid 1 14")["exact_cell"]
    assert one["exact"] == pytest.approx(float(residual[1, 14]), abs=1e-5)
    monkeypatch.setattr(patch_estimates, "EXACT_RESIDUAL_WORK", 0)  # GPT-2's size: the residual stream estimated too
    estimated = circuits.patching(TEXT, CORRUPTED, "specimen")
    assert estimated["residual_exact_at"] == [] and estimated["residual"][1][14] < 0 < residual[1, 14]
    # Bexley (issue 59): the stream entering layer 1 at position 15 restores the answer whole and is estimated at 0.30,
    # below what the findings name; the residual stream's largest estimates are patched exactly, in the grid.
    bexley = "We went to Bexley today. We went to Bex", "We went to Boxley today. We went to Bex"
    found = circuits.patching(*bexley, "specimen")
    views = [state.text_view("specimen", text) for text in bexley]
    exact_stream = heads.patch_residual(model, views[0].ids, views[1].ids).effects
    stream = {tuple(c["index"]): c for c in found["checked"] if c["grid"] == "residual"}
    assert stream[(1, 15)]["estimate"] < 0.5 and stream[(1, 15)]["exact"] == pytest.approx(1, abs=0.02)
    for (layer, position), c in stream.items():
        assert found["residual"][layer][position] == c["exact"]
        assert c["exact"] == pytest.approx(float(exact_stream[layer, position]), abs=1e-5)
    assert "entering layer 1 at position 15" in " ".join(found["findings"])
    assert (
        "at the changed position (14) the residual stream's estimate can be wrong even in sign"
        in (estimated["findings"][0])
    )
    monkeypatch.setattr(patch_estimates, "ESTIMATE_WORK", 1e30)  # the shipped models' own way: exact
    plain = circuits.patching(TEXT, CORRUPTED, "specimen")
    assert plain["estimate"] is False and plain["estimated"] == [] and plain["method"] == "exact patching"
    torch.testing.assert_close(torch.tensor(plain["heads_by_position"]), exact, atol=1e-6, rtol=0)
