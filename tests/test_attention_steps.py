"""Attention step by step (attention_steps.py): every number it returns is one the model itself computes, read back here
with the test's own hooks on the model's modules; the two multi-head computations agree; the mask and the softmax
behave; training-mode dropout is the model's own and repeats with its seed."""

import re

import pytest
import torch
from conftest import REPO

from explorer.attention_steps import NEG_INF, NUMBERS, StepChoiceError, attention_steps, steps_json
from explorer.forward_pass import run_forward_pass
from explorer.views.steps import steps_html
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM

SHIPPED = {name: REPO / "models" / name for name in ("names", "shakespeare")}


def random_model(seed: int = 0, **config) -> MiniGPTForCausalLM:
    torch.manual_seed(seed)
    sizes = dict(vocab_size=40, block_size=32, n_layer=3, n_head=4, n_embd=32) | config
    return MiniGPTForCausalLM._from_config(MiniGPTConfig(**sizes), attn_implementation="sdpa").eval()


def captured(model, ids: list[int], layer: int) -> dict[str, torch.Tensor]:
    """The model's own tensors for one layer, read by hooks on its modules during one plain forward pass with
    `output_attentions=True`: block input, qkv_proj's input and output, out_proj's input, the sublayer's output."""
    block, seen = model.model.layers[layer], {}

    def keep(name, from_output, index=0):
        def hook(module, args, output=None):
            value = output if from_output else args
            seen[name] = (value[index] if isinstance(value, tuple) else value)[0].detach()

        return hook

    handles = [
        block.register_forward_pre_hook(keep("block_in", False)),
        block.attn.qkv_proj.register_forward_pre_hook(keep("qkv_in", False)),
        block.attn.qkv_proj.register_forward_hook(keep("qkv_out", True)),
        block.attn.out_proj.register_forward_pre_hook(keep("heads", False)),
        block.attn.register_forward_hook(keep("sublayer_out", True)),
    ]
    try:
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True, use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    seen["weights"] = out.attentions[layer][0]  # (H, T, T)
    return seen


def close(actual, expected, what: str) -> None:
    torch.testing.assert_close(torch.tensor(actual), expected.float(), atol=1e-5, rtol=1e-5, msg=what)


def assert_every_number_is_the_models(numbers: dict, model, ids: list[int]) -> None:
    """Each number `steps_json` returned (eval mode) against the hooked tensors, or a formula on them (steps 2 and 4,
    which the model does not compute as such). Fails if a step holds a number this test does not check."""
    layer, h, i = numbers["layer"], numbers["head"], numbers["query"]
    C, D = model.config.n_embd, model.config.n_embd // model.config.n_head
    t = captured(model, ids, layer)
    x, qkv, s = t["qkv_in"], t["qkv_out"], numbers["steps"]
    q, k, v = (qkv[:, part * C + h * D : part * C + (h + 1) * D] for part in range(3))  # (T, D) each: the head's rows
    expected = {
        "inputs": {"x_i": x[i], "x_j": x[: i + 1], "residual_i": t["block_in"][i]},
        "no_weights": {
            "scores": x[: i + 1] @ x[i],
            "weights": (x[: i + 1] @ x[i]).softmax(-1),
            "output": (x[: i + 1] @ x[i]).softmax(-1) @ x[: i + 1],
        },
        "qkv": {"q_i": q[i], "k_j": k[: i + 1], "v_j": v[: i + 1]},
        "scores": {"scores": k[: i + 1] @ q[i], "scaled": k[: i + 1] @ q[i] / D**0.5},
        "softmax": {"weights": t["weights"][h, i]},
        "dropout": {"weights": t["weights"][h, i]},
        "output": {
            "z_i": t["heads"][i, h * D : (h + 1) * D],
            "heads_z_i": t["heads"][i],
            "out_i": t["sublayer_out"][i],
            "next_i": t["block_in"][i] + t["sublayer_out"][i],
        },
        "multi_head": {"separate_i": t["heads"][i], "fused_i": t["heads"][i]},
    }
    for step, values in expected.items():
        for key, tensor in values.items():
            close(s[step][key], tensor, f"{step}.{key}")
    masked = s["softmax"]["masked"]
    close(masked[: i + 1], expected["scores"]["scaled"], "softmax.masked")
    assert masked[i + 1 :] == [NEG_INF] * (len(ids) - i - 1)
    assert s["dropout"]["keep"] is None and not s["dropout"]["applied"]
    assert {k: tuple(r) for k, r in s["qkv"]["rows"].items()} == {
        name: (part * C + h * D, part * C + (h + 1) * D) for part, name in enumerate("qkv")
    }
    assert s["scores"]["D"] == D and s["scores"]["scale"] == pytest.approx(D**-0.5)
    assert s["multi_head"]["max_abs_difference"] <= 1e-5
    checked = {(step, key) for step, values in expected.items() for key in values} | {
        ("softmax", "masked"),
        ("dropout", "keep"),
    }
    assert checked == {(step, key) for step, keys in NUMBERS.items() for key in keys}  # nothing returned unchecked


def middle(model) -> tuple[int, int]:
    return model.config.n_layer // 2, model.config.n_head // 2


@pytest.mark.parametrize("name", ["names", "shakespeare"])
def test_every_number_is_the_shipped_models_own(name):
    """The `step` endpoint's function, in process, on a shipped model, in a middle layer and head."""
    if not (SHIPPED[name] / "config.json").exists():
        pytest.skip(f"models/{name} is not there: train it with the README's command")
    from explorer.state import DemoState
    from explorer.ui.steps import StepByStep

    state = DemoState.configure(training=False)
    lm = state.picker.get(name)
    text = "emma" if name == "names" else "ROMEO:\nBut soft, what light through yonder window breaks?"
    view = state.text_view(name, text)
    layer, head = middle(lm.model)
    numbers = StepByStep(state).step(text, name, layer, head, query=len(view.ids) // 2)
    assert numbers["tokens"] == view.tokens and numbers["query"] == len(view.ids) // 2
    assert_every_number_is_the_models(numbers, lm.model, view.ids)


@pytest.mark.parametrize("bias", [True, False])
def test_every_number_is_a_random_models_own_and_the_two_multi_head_ways_agree(bias):
    model = random_model(bias=bias)
    ids = [0, 5, 9, 3, 3, 7, 1, 0, 12, 30, 2]
    layer, head = middle(model)
    recorded = run_forward_pass(model, ids)
    for query in (0, 6, len(ids) - 1):
        numbers = steps_json(attention_steps(model, recorded, layer, head, query), [str(t) for t in ids])
        assert_every_number_is_the_models(numbers, model, ids)
        separate, fused = (torch.tensor(numbers["steps"]["multi_head"][k]) for k in ("separate_i", "fused_i"))
        torch.testing.assert_close(separate, fused, atol=1e-5, rtol=0)


def test_masked_entries_are_minus_infinity_and_every_softmax_row_sums_to_one():
    model = random_model(1)
    ids = list(range(1, 17))
    recorded = run_forward_pass(model, ids)
    for query in range(len(ids)):
        s = steps_json(attention_steps(model, recorded, 2, 3, query), [str(t) for t in ids])["steps"]
        masked, weights = s["softmax"]["masked"], s["softmax"]["weights"]
        assert masked[query + 1 :] == [NEG_INF] * (len(ids) - query - 1) and NEG_INF not in masked[: query + 1]
        assert all(float(m) == float("-inf") for m in masked[query + 1 :])  # JSON's "-inf" reads back as -inf
        assert weights[query + 1 :] == [0.0] * (len(ids) - query - 1)
        assert sum(weights) == pytest.approx(1.0, abs=1e-5) and s["softmax"]["sum"] == pytest.approx(1.0, abs=1e-5)
        assert sum(s["no_weights"]["weights"]) == pytest.approx(1.0, abs=1e-5)


def test_training_mode_is_the_models_own_dropout_and_repeats_with_its_seed():
    model = random_model(2, attention_dropout=0.5)
    ids = list(range(1, 25))
    recorded = run_forward_pass(model, ids)
    rng_before = torch.get_rng_state()
    first, again, other = (attention_steps(model, recorded, 1, 2, 20, training=True, seed=s) for s in (7, 7, 8))
    assert torch.equal(torch.get_rng_state(), rng_before)  # the global generator is as it was
    assert not model.training and not any(m.training for m in model.modules())  # the shared model stays in eval
    keep = first["dropout"]["keep"]
    assert torch.equal(keep, again["dropout"]["keep"]) and not torch.equal(keep, other["dropout"]["keep"])
    assert 0 < int(keep.sum()) < 21  # p = 0.5 over 21 keys: some kept, some dropped
    weights, dropped = first["softmax"]["weights"][:21], first["dropout"]["weights"][:21]
    torch.testing.assert_close(dropped, weights * keep / 0.5)  # zeros, and the others scaled by 1/(1-p)
    torch.testing.assert_close(first["output"]["z_i"], dropped @ first["qkv"]["v_j"])  # mixes with dropped weights
    out_proj = model.model.layers[1].attn.out_proj
    torch.testing.assert_close(first["output"]["out_i"], out_proj(first["output"]["heads_z_i"]))
    evaluation = attention_steps(model, recorded, 1, 2, 20)
    assert evaluation["dropout"]["keep"] is None
    assert torch.equal(evaluation["dropout"]["weights"], evaluation["softmax"]["weights"])  # identity


@pytest.mark.parametrize(
    "choice, message",
    [
        (dict(layer=3, head=0), "layer must be 0 to 2 (the model has 3 layers), got 3"),
        (dict(layer=0, head=-1), "head must be 0 to 3 (each layer has 4 heads), got -1"),
        (dict(layer=0, head=0, query=5), "query position must be 0 to 4 (the text is 5 tokens"),
        (dict(layer=0, head=0, seed=-2), "seed must be 0 or more"),
    ],
)
def test_choices_outside_the_model_or_text_say_what_to_choose(choice, message):
    model = random_model()
    with pytest.raises(StepChoiceError, match=re.escape(message)):
        attention_steps(model, run_forward_pass(model, [0, 1, 2, 3, 4]), **choice)


def titles(page: str, key: str) -> list[str]:
    """The exact values (title attributes) of the numbers drawn under `data-key="key"`, in page order."""
    block = re.search(rf'data-key="{re.escape(key)}">(.*?)</div>', page, re.DOTALL).group(1)
    return re.findall(r'title="([^"]*)"', block)


def test_the_page_draws_the_json_numbers_exactly_and_summarises_long_texts():
    model = random_model(3, block_size=128, n_embd=128)
    ids = [t % 40 for t in range(128)]
    numbers = steps_json(attention_steps(model, run_forward_pass(model, ids), 1, 1, 100), [str(t) for t in ids])
    page = steps_html(numbers)
    for step, key in [("inputs", "x_i"), ("qkv", "q_i"), ("output", "z_i"), ("output", "next_i")]:
        assert [float(t) for t in titles(page, f"{step}.{key}")] == numbers["steps"][step][key]  # exact, all of it
    weights = re.findall(r'data-key="softmax\.weights"><span class="n[^"]*" title="([^"]*)"', page)
    assert [float(w) for w in weights] == numbers["steps"]["softmax"]["weights"]  # every key, 128 rows
    drawn = re.search(r'data-key="inputs\.x_j">(.*?)</table>', page, re.DOTALL).group(1)
    rows = [int(j) for j in re.findall(r'data-j="(\d+)"', drawn)]
    assert len(rows) == 32 and 100 in rows  # 32 of the 101 rows, the query's among them
    assert drawn.count("<td>…</td>") == 32  # 128 numbers a row: the first 48 and the last 16 drawn
