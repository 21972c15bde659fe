"""The demo on a device (app.py's --device): the flag read and refused in one line, and every tensor the instruments and
the computing endpoints create following the model's device. CI has no GPU: the endpoints run on the CPU model inside
`torch.device("meta")`, a default device under which a tensor made without device= lands on meta, and mixing it with
the model's CPU tensors raises (or reading its numbers does): a forgotten device= fails here as it would on a GPU."""

import pytest
import torch

from minigpt.demo.app import check_flags, parse_args, resolved_device
from minigpt.demo.circuits import head_circuit as head_circuit_module
from minigpt.demo.circuits import patch_estimates
from minigpt.demo.circuits.endpoints import Circuits
from minigpt.demo.core.state import DemoState
from minigpt.demo.head_tools.endpoints import Insights
from minigpt.demo.lesson.endpoints import Steps

TEXT = "Romeo and Juliet, Romeo and Jul"  # the specimen's lesson text: 1.1 copies "i"


def test_device_flag_resolves_auto_and_names():
    expected = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert resolved_device("auto") == expected
    assert resolved_device(" CPU ") == "cpu"
    args = parse_args([])
    assert args.device == "auto"
    check_flags(args)
    assert args.device == expected  # resolved by the checks, before anything loads


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "cpu:1", "tpu", ""])
def test_unknown_device_refused_in_one_line(name, capsys):
    with pytest.raises(SystemExit) as refused:
        check_flags(parse_args(["--device", name]))
    message = str(refused.value)
    assert (
        message.startswith("app.py: error: --device takes auto, cpu, cuda (or cuda:N) or mps") and "\n" not in message
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_missing_gpu_refused_in_one_line():
    with pytest.raises(SystemExit) as refused:
        resolved_device("cuda", "minigpt-demo")
    assert str(refused.value) == (
        "minigpt-demo: error: --device cuda: this machine has no CUDA GPU; use --device cpu or auto."
    )


@pytest.fixture(scope="module")
def sections():
    state = DemoState.configure(training=False, device="cpu")
    state.picker.get("specimen")  # loaded outside the meta context: the model's own tensors are real
    return state, Circuits(state), Insights(state), Steps(state)


def on_meta(call, *args, **kwargs):
    """call(*args, **kwargs) with meta as the default device."""
    with torch.device("meta"):
        return call(*args, **kwargs)


def test_models_go_to_the_chosen_device(sections):
    state, *_ = sections
    assert state.picker.device == "cpu"
    assert {p.device.type for p in state.picker.get("specimen").model.parameters()} == {"cpu"}


def test_circuits_endpoints_create_tensors_on_the_models_device(sections, monkeypatch):
    state, circuits, *_ = sections
    exact = on_meta(lambda: circuits.patching(TEXT, "", "specimen", receiver="1.1"))
    answer = on_meta(lambda: circuits.logit_attribution(TEXT, "specimen", prompts=2))
    assert answer["largest"] and exact["heads_by_position"] is not None and not exact["estimate"]
    monkeypatch.setattr(patch_estimates, "ESTIMATE_WORK", 0)  # the GPT-2 path: estimates, exact on demand
    estimated = on_meta(lambda: circuits.patching(TEXT, "", "specimen", exact_cell="1.1 15"))
    assert estimated["estimate"] and estimated["exact_cell"]["exact"] == pytest.approx(
        exact["heads_by_position"][1][1][15], abs=1e-5
    )
    on_meta(lambda: circuits.patching(TEXT, "", "specimen", prompts=2, part="k"))
    on_meta(lambda: circuits.composition("specimen"))
    for ablation in ("zero", "mean", "resample"):
        on_meta(circuits.head_circuit, TEXT, "specimen", 1, 1, "0.2", "auto", ablation)
    monkeypatch.setattr(head_circuit_module, "MAX_OV_VOCABULARY", 8)  # a large vocabulary's rows, GPT-2's way
    rows = on_meta(lambda: circuits.head_circuit(TEXT, "specimen", 1, 1))
    assert rows["ov"]["whole"] is False


def test_insights_and_steps_create_tensors_on_the_models_device(sections):
    _, _, insights, steps = sections
    roles = on_meta(lambda: insights.head_roles(TEXT, "specimen"))
    assert roles["top_heads"]["induction"][0]["layer"] == 1
    on_meta(lambda: insights.next_tokens(TEXT, "specimen"))
    on_meta(lambda: insights.logit_lens(TEXT, "specimen"))
    for mode in ("zero", "mean", "resample"):
        on_meta(insights.importance, TEXT, "specimen", mode)
    on_meta(lambda: insights.compare(TEXT, "Romeo and Jullet, Romeo and Jul", "specimen"))
    on_meta(lambda: steps.step(TEXT, "specimen", 1, 1, query=20))


def test_generation_walk_exercises_and_instruments_create_tensors_on_the_models_device(sections):
    from minigpt import heads
    from minigpt.demo.exercises.endpoints import Exercises

    state, circuits, insights, _ = sections
    model = state.picker.get("specimen").model
    regenerated = on_meta(insights.ablate, TEXT, "specimen", "1.1", "mean", new_tokens=4, seed=1)
    assert regenerated["generation"]["plain"] and regenerated["generation"]["ablated"]
    assert on_meta(circuits.circuit_walk, TEXT, "specimen")["steps"]
    assert on_meta(Exercises(state).exercises, TEXT, "specimen")["questions"]
    found = on_meta(heads.find_circuit, model, prompts=4, half=8, steps=2)
    assert 0 < found.kept_edges <= found.total_edges
    windows = [state.text_view("specimen", TEXT).ids, state.text_view("specimen", "Juliet and Romeo").ids]
    assert len(on_meta(heads.measure, model, windows)["metrics"]["induction"]) == 2
