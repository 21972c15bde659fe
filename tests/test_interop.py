"""Carrying on in TransformerLens and nnsight (requirements-interp.txt): the MiniGPT adapter's bridge gives the
recorded pass's patterns, residual stream and logits on a shipped model, and the two scripts in docs/ print the
numbers the demo's API gives for the same text."""

import importlib
import re
import subprocess
import sys
import tomllib

import pytest
import torch

from helpers import REPO

pytest.importorskip("transformer_lens")
pytest.importorskip("nnsight")

TEXT = "To be, or not to be, that is the question."


@pytest.fixture(scope="module")
def bridged():
    from transformer_lens.model_bridge import TransformerBridge

    from minigpt import lens
    from minigpt.heads.recorded_pass import run_forward_pass
    from modeling_minigpt import MiniGPTForCausalLM

    folder = REPO / "minigpt" / "models" / "specimen"
    lens.register()
    bridge = TransformerBridge.boot_transformers(str(folder), trust_remote_code=True, device="cpu")
    model = MiniGPTForCausalLM.from_pretrained(folder).eval()
    return bridge, model, run_forward_pass


@pytest.mark.parametrize("ids", [[0, *range(5, 60)], [0, 40, 41, 42, 40, 41, 42, 43]])
def test_the_bridge_gives_the_recorded_pass(bridged, ids):
    bridge, model, run_forward_pass = bridged
    recorded = run_forward_pass(model, ids)
    logits, cache = bridge.run_with_cache(torch.tensor([ids]))
    L = model.config.n_layer
    patterns = torch.stack([cache[f"blocks.{layer}.attn.hook_pattern"][0] for layer in range(L)])
    torch.testing.assert_close(patterns, recorded.attentions, rtol=0, atol=1e-5)
    # The residual stream grows large (|x| ~ 70 in the specimen's last layer): within 1e-5 of its size there
    for layer in range(L):
        torch.testing.assert_close(
            cache[f"blocks.{layer}.hook_resid_pre"][0], recorded.residual[layer], rtol=1e-5, atol=1e-5
        )
    final = cache[f"blocks.{L - 1}.hook_resid_post"][0]
    torch.testing.assert_close(final, recorded.residual[L], rtol=1e-5, atol=1e-5)
    # The logits are the final norm and head on that stream: its relative error of 1e-5 reaches them as 1e-5 of their
    # own scale (float32 sums over C terms, in another order on each side), not as a fixed 1e-5 (1.16e-5 was seen).
    expected = recorded.logits(model)
    scale = expected.abs().max().item()
    torch.testing.assert_close(logits[0], expected, rtol=1e-5, atol=1e-5 * max(scale, 1.0))


def test_the_adapter_is_registered_by_one_call_and_declared_as_an_entry_point():
    from transformer_lens.factories.architecture_adapter_factory import ArchitectureAdapterFactory

    from minigpt import lens

    lens.register()
    assert ArchitectureAdapterFactory._adapters["MiniGPTForCausalLM"] is lens.MiniGPTArchitectureAdapter
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    module, name = declared["transformer_lens.architectures"]["MiniGPTForCausalLM"].split(":")
    assert getattr(importlib.import_module(module), name) is lens.MiniGPTArchitectureAdapter


def run_script(name: str) -> str:
    done = subprocess.run(
        [sys.executable, f"docs/{name}"], cwd=REPO, capture_output=True, text=True, timeout=600, check=True
    )
    return done.stdout


@pytest.fixture(scope="module")
def insights():
    from minigpt.demo.state import DemoState
    from minigpt.demo.ui.insights import Insights

    return Insights(DemoState.configure(training=False))


def test_the_transformer_lens_script_prints_the_apis_roles_and_ablation(insights):
    printed = run_script("transformer_lens_heads.py")
    roles = insights.head_roles(TEXT, "specimen")
    for layer, head, previous, first, itself in re.findall(
        r"^(\d)\.(\d) +([\d.]+) +([\d.]+) +([\d.]+)$", printed, re.M
    ):
        layer, head = int(layer), int(head)
        assert float(previous) == pytest.approx(roles["previous_token"][layer][head], abs=1e-4)
        assert float(first) == pytest.approx(roles["first_token"][layer][head], abs=1e-4)
        assert float(itself) == pytest.approx(roles["self"][layer][head], abs=1e-4)
    assert len(re.findall(r"^\d\.\d ", printed, re.M)) == 8  # every head of the specimen's 2 x 4
    plain = float(re.search(r"^mean loss: ([\d.]+)$", printed, re.M)[1])
    for heads in ("0.2", "1.1"):
        answer = insights.ablate(TEXT, "specimen", heads, "zero")
        assert plain == pytest.approx(answer["total_before"], abs=1e-4)
        zeroed = float(re.search(rf"^head {heads} zeroed: mean loss ([\d.]+)$", printed, re.M)[1])
        assert zeroed == pytest.approx(answer["total_after"], abs=1e-4)


def test_the_nnsight_script_prints_the_apis_weights_and_ablation(insights):
    printed = run_script("nnsight_heads.py")
    view = insights.state.text_view("specimen", TEXT)
    last = len(view.ids) - 1
    weights = [float(w) for w in printed.splitlines()[2].split()]
    expected = view.recorded.attentions[0, 2, last].tolist()
    assert weights == pytest.approx(expected, abs=1e-4) and len(weights) == len(view.ids)
    answer = insights.ablate(TEXT, "specimen", "0.2", "zero")
    plain, zeroed = map(float, re.search(r"mean loss ([\d.]+); head 0.2 zeroed: ([\d.]+)", printed).groups())
    assert (plain, zeroed) == (
        pytest.approx(answer["total_before"], abs=1e-4),
        pytest.approx(answer["total_after"], abs=1e-4),
    )
