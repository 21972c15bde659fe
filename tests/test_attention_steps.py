"""Attention step by step (attention_steps.py): every number it returns is one the model itself computes, read back
with the tests' own hooks on the model's modules (helpers.captured); the two multi-head computations agree; the mask
and the softmax behave; training-mode dropout is the model's own and repeats with its seed."""

import re

import pytest
import torch

from helpers import REPO, assert_every_number_is_the_models, tiny_model
from minigpt.demo.lesson.steps_view import steps_html
from minigpt.demo.lesson.words import NUMBERS, STEPS, worded
from minigpt.heads.recorded_pass import run_forward_pass
from minigpt.heads.steps import NEG_INF, TRACE_ROWS, StepChoiceError, attention_steps, steps_json

SHIPPED = {name: REPO / "minigpt" / "models" / name for name in ("names", "shakespeare")}
SHAPE = dict(vocab_size=40, block_size=32, n_layer=3, n_head=4, n_embd=32)  # the random models: tiny_model(shape=SHAPE)


def middle(model) -> tuple[int, int]:
    return model.config.n_layer // 2, model.config.n_head // 2


@pytest.mark.parametrize("name", ["names", "shakespeare"])
def test_every_number_is_the_shipped_models_own(name):
    """The `step` endpoint's function, in process, on a shipped model, in a middle layer and head."""
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.lesson.endpoints import Steps

    state = DemoState.configure(training=False)
    lm = state.picker.get(name)
    text = "emma" if name == "names" else "ROMEO:\nBut soft, what light through yonder window breaks?"
    view = state.text_view(name, text)
    layer, head = middle(lm.model)
    numbers = Steps(state).step(text, name, layer, head, query=len(view.ids) // 2)
    assert numbers["tokens"] == view.tokens and numbers["query"] == len(view.ids) // 2
    assert_every_number_is_the_models(numbers, lm.model, view.ids)


@pytest.mark.parametrize("bias", [True, False])
def test_every_number_is_a_random_models_own_and_the_two_multi_head_ways_agree(bias):
    model = tiny_model(shape=SHAPE, bias=bias)
    ids = [0, 5, 9, 3, 3, 7, 1, 0, 12, 30, 2]
    layer, head = middle(model)
    recorded = run_forward_pass(model, ids)
    for query in (0, 6, len(ids) - 1):
        numbers = steps_json(attention_steps(model, recorded, layer, head, query), [str(t) for t in ids])
        assert_every_number_is_the_models(numbers, model, ids)
        separate, fused = (torch.tensor(numbers["steps"]["multi_head"][k]) for k in ("separate_i", "fused_i"))
        torch.testing.assert_close(separate, fused, atol=1e-5, rtol=0)


def test_masked_entries_are_minus_infinity_and_every_softmax_row_sums_to_one():
    model = tiny_model(seed=1, shape=SHAPE)
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
    model = tiny_model(seed=2, shape=SHAPE, attention_dropout=0.5)
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
    model = tiny_model(shape=SHAPE)
    with pytest.raises(StepChoiceError, match=re.escape(message)):
        attention_steps(model, run_forward_pass(model, [0, 1, 2, 3, 4]), **choice)


def titles(page: str, key: str) -> list[str]:
    """The exact values (title attributes) of the numbers drawn under `data-key="key"`, in page order."""
    block = re.search(rf'data-key="{re.escape(key)}"[^>]*>(.*?)</div>', page, re.DOTALL).group(1)
    return re.findall(r'title="([^"]*)"', block)


def test_the_page_draws_the_json_numbers_exactly_and_summarises_long_texts():
    model = tiny_model(seed=3, shape=SHAPE, block_size=128, n_embd=128)
    ids = [t % 40 for t in range(128)]
    numbers = worded(steps_json(attention_steps(model, run_forward_pass(model, ids), 1, 1, 100), [str(t) for t in ids]))
    page = steps_html(numbers)
    for step, key in [("inputs", "x_i"), ("qkv", "q_i"), ("output", "z_i"), ("output", "next_i")]:
        assert [float(t) for t in titles(page, f"{step}.{key}")] == numbers["steps"][step][key]  # exact, all of it
    weights = re.findall(r'data-key="softmax\.weights"><span class="n[^"]*"(?: style="[^"]*")? title="([^"]*)"', page)
    assert [float(w) for w in weights] == numbers["steps"]["softmax"]["weights"]  # every key, 128 rows
    # The weights as bars: on a long text the 16 largest, largest first.
    bars = re.findall(r'class="bar-row"><span class="tok">(\d+) ', page)
    largest_first = sorted(range(101), key=lambda j: -numbers["steps"]["softmax"]["weights"][j])[:16]
    assert [int(j) for j in bars] == largest_first
    drawn = re.search(r'data-key="inputs\.x_j">(.*?)</table>', page, re.DOTALL).group(1)
    rows = [int(j) for j in re.findall(r'data-j="(\d+)"', drawn)]
    assert len(rows) == 32 and 100 in rows  # 32 of the 101 rows, the query's among them
    assert drawn.count("<td>…</td>") == 32  # 128 numbers a row: the first 48 and the last 16 drawn


def test_the_library_returns_numbers_and_the_demo_names_each_of_them():
    """The library's JSON holds numbers and keys, no words; the demo's words name every step and every number it
    returns, and the endpoint's JSON is the library's with those words put in."""
    model = tiny_model(shape=SHAPE)
    ids = [0, 5, 9, 3, 3, 7]
    steps = attention_steps(model, run_forward_pass(model, ids), 1, 2, 4, training=True, seed=3)
    assert list(STEPS) == list(TRACE_ROWS)
    assert {name: list(steps[name]) for name in TRACE_ROWS} == {name: list(NUMBERS[name]) for name in STEPS}
    numbers = steps_json(steps, [str(t) for t in ids])
    assert not any({"title", "explanation"} & set(step) for step in numbers["steps"].values())
    shown = worded(numbers)
    for name, step in shown["steps"].items():
        assert list(step)[:3] == ["title", "explanation", "shapes"]
        assert (step["title"], step["explanation"]) == STEPS[name]
        named = [shape["what"] for shape in step["shapes"][len(TRACE_ROWS[name]) :]]
        assert named == [NUMBERS[name][key][1] for key in numbers["steps"][name]["number_shapes"]]
        words = ("title", "explanation", "shapes", "number_shapes")
        assert {k: v for k, v in step.items() if k not in words} == {
            k: v for k, v in numbers["steps"][name].items() if k not in words
        }
