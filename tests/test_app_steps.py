"""The Step by step view as users reach it: the `step` endpoint through gradio_client (its numbers are the served
model's own, bad input gets a clear message and leaves no traceback in the server log), and the page in Chromium (a
click on a row of the enlarged head makes that token the query, and the page shows the endpoint's numbers)."""

from pathlib import Path

import pytest

from helpers import (
    app_error,
    assert_drawn_exactly,
    assert_every_number_is_the_models,
    call,
    chromium_page,
    needs_chromium,
    numbers_drawn,
    server_log,
)
from minigpt.demo.lesson.words import NUMBERS


def served_model(folder: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def test_step_endpoint_lists_its_parameters_with_defaults(client):
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/step"]
    names = [p["parameter_name"] for p in api["parameters"]]
    assert names == ["text", "model", "layer", "head", "query", "training", "seed"]
    assert all(p["parameter_has_default"] for p in api["parameters"])


def test_every_number_the_endpoint_returns_is_the_served_models_own(client, fixture_models):
    """A middle layer and head of the random-weight text model (2 layers x 2 heads), against hooks on the same
    weights loaded here."""
    model, tokenizer = served_model(fixture_models[1])
    numbers = call(client, "/step", text="to be, or not", model="tiny-text", layer=1, head=1, query=6)
    ids = [tokenizer.bos_token_id] + tokenizer.encode("to be, or not", add_special_tokens=False)
    assert numbers["tokens"][1:4] == ["t", "o", "␣"] and len(numbers["tokens"]) == len(ids)
    assert_every_number_is_the_models(numbers, model, ids)


def test_training_mode_through_the_endpoint_repeats_with_its_seed(client):
    ask = dict(text="abcdefghijklm", model="tiny-dropout", layer=2, head=1, training=True)
    first, again = (call(client, "/step", **ask, seed=3)["steps"]["dropout"] for _ in range(2))
    assert first["applied"] and first["p"] == 0.5 and first["seed"] == 3
    evaluation = call(client, "/step", **{**ask, "training": False})["steps"]["dropout"]
    assert not evaluation["applied"] and evaluation["p"] == 0 and evaluation["model_p"] == 0.5  # what training applies
    assert first["keep"] == again["keep"] and first["weights"] == again["weights"]
    assert set(first["keep"]) <= {0, 1} and len(first["keep"]) == 14  # the query is the last of 14 tokens
    masks = {tuple(call(client, "/step", **ask, seed=seed)["steps"]["dropout"]["keep"]) for seed in range(8)}
    assert len(masks) > 1  # other seeds, other masks


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(layer=4), "layer must be 0 to 3 (the model has 4 layers), got 4."),
        (dict(layer="top"), "Layer must be a number, got 'top'."),
        (dict(head=9), "head must be 0 to 3 (each layer has 4 heads), got 9."),
        (dict(text="emma", query=5), "query position must be 0 to 4 (the text is 5 tokens"),
        (dict(query=-1), "query position must be 0 to 4"),
        (dict(text="Emma!"), "'!' (EXCLAMATION MARK), 'E' (LATIN CAPITAL LETTER E)"),
        (dict(training="maybe"), "Training must be true or false, got 'maybe'."),
        (dict(seed=-5, training=True), "seed must be 0 or more"),
        (dict(model="gpt-5"), "Unknown model 'gpt-5'"),
    ],
)
def test_bad_input_gets_a_clear_message_and_no_traceback_in_the_log(client, server, params, message):
    before = server_log(server[1]).count("Traceback")
    error = app_error(client, "/step", **params)
    assert message in error and "Traceback" not in error
    assert server_log(server[1]).count("Traceback") == before


@needs_chromium
def test_clicking_a_row_of_the_enlarged_head_shows_that_query_with_the_endpoints_numbers(server, client):
    from playwright.sync_api import expect

    expect.set_options(timeout=90_000)
    with chromium_page(1280, 1000) as page:
        page.goto(server[0] + "?model=tiny-names&text=emma&step=0")  # every step at once
        view = page.locator("#step-view .steps > .head")
        expect(view).to_have_attribute("data-query", "4")  # on load: the maps' text 'emma', its last token
        page.locator('#attention-grid svg[data-layer="2"][data-head="1"]').click()
        expect(page.locator("#attention-head figcaption").first).to_have_text("layer 2, head 1")
        heat = page.locator("#attention-head figure image.heat").first
        heat.scroll_into_view_if_needed()
        box = heat.bounding_box()
        heat.click(position={"x": box["width"] * 0.1, "y": box["height"] * 2.5 / 5})  # row 2 of 5 ('m')
        expect(view).to_have_attribute("data-query", "2")
        expect(view).to_have_attribute("data-layer", "2")
        expect(view).to_have_attribute("data-head", "1")
        drawn = numbers_drawn(page)
    numbers = call(client, "/step", text="emma", model="tiny-names", layer=2, head=1, query=2)
    assert_drawn_exactly(drawn, numbers)
    every = {f"{step}.{key}" for step, keys in NUMBERS.items() for key in keys} - {"dropout.keep"}  # eval: no mask
    assert set(drawn) == every | SCALARS_DRAWN


# The numbers the view draws besides each step's vectors (NUMBERS), by data key.
SCALARS_DRAWN = {
    "scores.scale",
    "softmax.sum",
    "softmax.exp_sum",
    "multi_head.max_abs_difference",
    *(f"block.{norm}.{moment}" for norm in ("attn_norm", "mlp_norm") for moment in ("mean", "variance")),
    "block.attention_update",
    "block.mlp_update",
    "probabilities.next_probability",
}
