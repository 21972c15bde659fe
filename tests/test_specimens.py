"""Specimens: the shipped induction model shows the circuit its model card claims, measured by the demo's own Head
roles endpoint function, and the induction lab's preset grows that circuit again from scratch through train.py."""

import contextlib
import io
import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from helpers import REPO
from minigpt.demo.core.state import DemoState
from minigpt.demo.head_tools.endpoints import Insights
from minigpt.heads import ablation, role_scores

LAB_MODEL = REPO / "minigpt" / "models" / "induction"
SPECIMEN = REPO / "minigpt" / "models" / "specimen"
TEXT = "liamnoaholiverliamnoaholiver"  # names written twice, as the lab trained on
PASSAGE = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n"


def roles(folder, text: str = TEXT) -> dict:
    """The /head_roles answer for `text` on the model in `folder` (shown in the picker under the folder's name)."""
    state = DemoState.configure(extra=[str(folder)], training=False)
    return Insights(state).head_roles(text, folder.name)


def assert_induction_circuit(answer: dict) -> None:
    """Layer 1 holds an induction head far above every other head's score and the probe's repeated half costs at
    most half its first; layer 0 holds a previous-token head, the circuit's first half, well above chance."""
    induction = sorted(
        (score, layer, head) for layer, row in enumerate(answer["induction"]) for head, score in enumerate(row)
    )
    (runner_up, *_), (best, layer, _) = induction[-2], induction[-1]
    assert layer == 1 and best >= 0.4 and best > 3 * runner_up, induction[-3:]
    probe = answer["probe"]
    assert probe["repeated_half_loss"] <= 0.5 * probe["first_half_loss"], probe
    previous = answer["top_heads"]["previous_token"][0]
    assert previous["layer"] == 0 and previous["score"] >= 4 * answer["chance"]["previous_token"], previous


def test_the_shipped_induction_model_shows_its_circuit():
    answer = roles(LAB_MODEL)
    assert_induction_circuit(answer)
    marked = {(a["role"], a["layer"], a["head"]) for a in answer["above_chance"]}
    best = answer["top_heads"]["induction"][0]
    assert ("induction", best["layer"], best["head"]) in marked  # the view outlines it


@pytest.mark.parametrize("folder, text", [(LAB_MODEL, TEXT), (SPECIMEN, PASSAGE)], ids=["induction", "specimen"])
def test_the_shipped_circuit_is_what_copies(folder, text):
    """Ablating either half of the circuit (the induction head, or the previous-token head it reads) makes the
    repeated half about as hard as the first; ablating another head of the induction head's layer changes nearly
    nothing."""
    answer = roles(folder, text)
    induction, previous = answer["top_heads"]["induction"][0], answer["top_heads"]["previous_token"][0]
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    vocabulary = [i for i in range(len(tokenizer)) if i not in set(tokenizer.all_special_ids)]
    probes = role_scores.induction_probe(vocabulary, tokenizer.bos_token_id, model.config.block_size, probes=4)
    L, H = model.config.n_layer, model.config.n_head

    def losses(heads):
        with ablation.heads_ablated(model, ablation.head_mask(heads, L, H)):
            return role_scores.induction_scores(model, probes)

    plain = losses([])
    for head in (induction, previous):
        ablated = losses([(head["layer"], head["head"])])
        assert ablated["repeated_half_loss"] > 0.8 * ablated["first_half_loss"] > 5 * plain["repeated_half_loss"]
    other = next(h for h in range(H) if h != induction["head"])
    assert losses([(induction["layer"], other)])["repeated_half_loss"] < 2 * plain["repeated_half_loss"]


def test_the_shipped_text_specimen_shows_the_roles_its_card_claims():
    """Issue 22's thresholds, on Hamlet's lines: an induction head >= 0.4 on the probe with the repeated half at most
    half the first half's loss, a previous-token head >= 0.7, and a head clearly parked on the start token."""
    answer = roles(SPECIMEN, PASSAGE)
    induction, previous = answer["top_heads"]["induction"][0], answer["top_heads"]["previous_token"][0]
    assert induction["score"] >= 0.4 and induction["layer"] == 1, induction
    assert answer["probe"]["repeated_half_loss"] <= 0.5 * answer["probe"]["first_half_loss"], answer["probe"]
    assert previous["score"] >= 0.7 and previous["layer"] == 0, previous
    assert any(head["role"] == "first_token" for head in answer["above_chance"]), answer["top_heads"]["first_token"]


def test_the_lab_preset_trains_through_train_py_and_logs_its_roles(tmp_path):
    """train.py --preset induction, as the README and the Train tab run it (its main, in this process), for a short
    run: the preset's own corpus, sizes and schedule, its validation loss falls and every evaluation logs the heads'
    roles (roles_log.jsonl, which the roles curve draws). That the full run grows the circuit (about 2.5 minutes on 2
    cores) is what the shipped model, trained by that command (its model card), shows in the tests above.
    """
    from minigpt import training

    out = tmp_path / "lab"
    flags = ["--preset", "induction", "--output_dir", str(out), "--disable_tqdm", "true"]
    flags += ["--max_steps", "60", "--eval_steps", "20", "--save_steps", "100000", "--samples", "1"]
    with contextlib.redirect_stdout(io.StringIO()):  # train.py's main in this process: no interpreter start (~5 s)
        training.main(flags)
    history = json.loads((out / "log_history.json").read_text())
    losses = [h["eval_loss"] for h in history if "eval_loss" in h]
    assert len(losses) == 3 and losses[-1] < losses[0], losses
    logged = [json.loads(line) for line in (out / "roles_log.jsonl").read_text().splitlines()]
    assert [entry["step"] for entry in logged] == [20, 40, 60]
    layers, heads = 2, 4  # the preset's sizes (configuration_minigpt.PRESETS["induction"])
    for entry in logged:
        for role in ("previous_token", "first_token", "self", "induction"):
            assert len(entry[role]) == layers and all(len(row) == heads for row in entry[role]), (role, entry[role])
        assert entry["eval_loss"] is not None and entry["chance"]


@pytest.mark.parametrize(
    "folder, name, head", [(LAB_MODEL, "induction", (1, 2)), (SPECIMEN, "specimen", (1, 1))], ids=["lab", "specimen"]
)
def test_a_shipped_lab_carries_its_history_and_the_phase_change_is_said(folder, name, head):
    """The lab and the specimen ship their training history (issue 41): a roles log with an evaluation every 1,000
    steps and weight snapshots, so that `induction@N`, `specimen@N` and the roles curve work on a fresh clone. The step
    where an induction head forms is found in the log (the first evaluation with a head clearly above chance, as the
    Head roles view outlines it), and the curve says it in words."""
    from minigpt.demo.core.models import ModelPicker
    from minigpt.heads.role_log import induction_forms, read_roles, snapshots_of
    from minigpt.heads.role_scores import above_chance

    lines = read_roles(folder)
    assert len(lines) >= 3 and [line["step"] for line in lines] == sorted(line["step"] for line in lines)
    formed = induction_forms(lines)
    assert (formed["layer"], formed["head"]) == head
    before = [line for line in lines if line["step"] < formed["step"]]
    assert all(not above_chance(max(map(max, line["induction"])), line["chance"]["induction"]) for line in before)
    assert formed["before"] < formed["score"]
    assert induction_forms(lines[:1]) is None or lines[0]["step"] == formed["step"]

    steps = snapshots_of(folder)
    assert len(steps) >= 3
    picker = ModelPicker({name: str(folder)}, dict(max_rows=2, max_waiting=2, min_decode_rows=1))
    early, late = picker.get(f"{name}@{steps[0]}"), picker.get(f"{name}@{steps[-1]}")
    probe_roles = [roles_at(lm, head) for lm in (early, late)]
    assert probe_roles[0] < probe_roles[1]  # the induction head grew between the first and the last snapshot

    from minigpt import plots

    figure = plots.roles_figure(lines, f"MiniGPT {name}")
    said = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert f"step {formed['step']}: head {head[0]}.{head[1]} becomes an induction head" in " ".join(said)


def roles_at(lm, head: tuple[int, int]) -> float:
    """A head's induction score on the Head roles probe, for a loaded model (a snapshot's weights)."""
    from minigpt.heads.role_scores import ROLE_PROBES, induction_probe, induction_scores

    vocabulary = [i for i in range(len(lm.tokenizer)) if i not in set(lm.tokenizer.all_special_ids)]
    probes = induction_probe(vocabulary, lm.boundary_id, lm.block_size, ROLE_PROBES)
    return float(induction_scores(lm.model, probes)["induction"][head])


def test_the_head_over_training_is_each_snapshots_own_map():
    """The strip of the chosen head at each snapshot (the page's "over training" view, /head_over_training): each map
    is that snapshot's model's own attention (output_attentions on the snapshot's weights), the final one the model's;
    a model without snapshots gets a message saying how to have them."""
    from minigpt.demo.maps.over_training import head_over_training
    from minigpt.errors import VisitorError
    from minigpt.heads.role_log import load_snapshot, snapshots_of

    state = DemoState.configure([str(LAB_MODEL), str(REPO / "minigpt" / "models" / "names")], training=False)
    text = "emma.olivia.emma.oli"
    answer = head_over_training(state, "induction@800", text, layer=1, head="2")
    steps = snapshots_of(LAB_MODEL)
    assert [s["model"] for s in answer["steps"]] == [f"induction@{n}" for n in steps] + ["induction"]
    assert answer["model"] == "induction" and answer["pooled"] == 1 and (answer["layer"], answer["head"]) == (1, 2)
    ids = torch.tensor([answer["ids"]])
    for step, drawn in zip([*steps, None], answer["steps"]):
        model = AutoModelForCausalLM.from_pretrained(LAB_MODEL).eval()
        if step is not None:
            model = load_snapshot(model, LAB_MODEL, step)
        with torch.no_grad():
            expected = model(ids, output_attentions=True).attentions[1][0, 2]
        torch.testing.assert_close(torch.tensor(drawn["weights"]), expected, atol=1e-6, rtol=1e-5)  # float32, same ops
    with pytest.raises(VisitorError, match="has no training snapshots"):
        head_over_training(state, "names", text)
