"""Specimens: the shipped induction model shows the circuit its model card claims, measured by the demo's own Head
roles endpoint function, and the induction lab's preset grows that circuit again from scratch through train.py."""

import subprocess
import sys

import pytest
from transformers import AutoModelForCausalLM

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from explorer import head_insights
from explorer.state import DemoState
from explorer.ui.insights import Insights
from helpers import REPO

LAB_MODEL = REPO / "models" / "induction"
TEXT = "liamnoaholiverliamnoaholiver"  # names written twice, as the lab trained on


def roles(folder) -> dict:
    """The /head_roles answer for TEXT on the model in `folder` (shown in the picker under the folder's name)."""
    state = DemoState.configure(extra=[str(folder)], training=False)
    return Insights(state).head_roles(TEXT, folder.name)


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


@pytest.mark.skipif(not (LAB_MODEL / "config.json").exists(), reason="models/induction is not trained yet")
def test_the_shipped_induction_model_shows_its_circuit():
    answer = roles(LAB_MODEL)
    assert_induction_circuit(answer)
    marked = {(a["role"], a["layer"], a["head"]) for a in answer["above_chance"]}
    best = answer["top_heads"]["induction"][0]
    assert ("induction", best["layer"], best["head"]) in marked  # the view outlines it


@pytest.mark.skipif(not (LAB_MODEL / "config.json").exists(), reason="models/induction is not trained yet")
def test_the_shipped_circuit_is_what_copies():
    """Ablating either half of the circuit (the induction head, or the previous-token head it reads) makes the
    repeated half as hard as the first; ablating another head of layer 1 changes nearly nothing."""
    answer = roles(LAB_MODEL)
    induction, previous = answer["top_heads"]["induction"][0], answer["top_heads"]["previous_token"][0]
    model = AutoModelForCausalLM.from_pretrained(LAB_MODEL).eval()
    probes = head_insights.induction_probe(list(range(1, 27)), 0, model.config.block_size, probes=4)

    def losses(heads):
        with head_insights.heads_ablated(model, head_insights.head_mask(heads, 2, 4)):
            return head_insights.induction_scores(model, probes)

    plain = losses([])
    for head in (induction, previous):
        ablated = losses([(head["layer"], head["head"])])
        assert ablated["repeated_half_loss"] > 0.9 * ablated["first_half_loss"] > 5 * plain["repeated_half_loss"]
    other = next(h for h in range(4) if h != induction["head"])
    assert losses([(1, other)])["repeated_half_loss"] < 2 * plain["repeated_half_loss"]


def test_the_lab_preset_grows_an_induction_head_from_scratch(tmp_path):
    """train.py --preset induction, as the README and the Train tab run it (about 100 s on 2 CPU cores); its model
    starts with every head near chance and ends with the circuit."""
    out = tmp_path / "lab"
    command = [sys.executable, "train.py", "--preset", "induction", "--output_dir", str(out), "--disable_tqdm", "true"]
    command += ["--save_steps", "100000", "--eval_steps", "100000", "--samples", "1"]  # no checkpoints: time is short
    subprocess.run(command, cwd=REPO, check=True, capture_output=True, timeout=900)
    assert_induction_circuit(roles(out))
