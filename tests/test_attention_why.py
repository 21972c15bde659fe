"""Why a head attends here (/attention_why, and its drawing under the enlarged maps): on the shipped specimen the
answer's table sums to the score the model computes from its own q and k (this file's hook) and its sentences are
written from its numbers (the induction cell: MLP 0 at both ends); a key with little weight is said to get little
rather than explained as attended; through the server (gradio_client, the page's server function) the answer is plain
JSON whose numbers agree with the model, and a visitor's mistake gets a message."""

import os
import shutil
from urllib.parse import quote

import httpx
import pytest
import torch

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from helpers import app_error, call, chromium_page, needs_chromium, page_function
from minigpt.demo.lesson.words import SECTION_STEP
from minigpt.demo.maps import words

ZORBAK = "Then Zorbak spoke. Then Zor"
# The answer's numbers are rounded to 5 decimals: a table of P^2 = 81 entries sums to its score within 81 x 5e-6
# (the float32 split itself within ~4e-6, tests/test_qk_attribution.py); 1e-3 leaves room.
ROUNDED = 1e-3


@pytest.fixture(scope="module")
def maps(tmp_path_factory):
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.maps.endpoints import AttentionMaps

    return AttentionMaps(DemoState.configure(training=False))  # the shipped models, the specimen among them


def model_score(model, ids, layer, head, query, key) -> float:
    """q·k/sqrt(D) from the model's own qkv_proj output (this file's own hook)."""
    seen, C, D = {}, model.config.n_embd, model.config.head_dim
    handle = model.model.layers[layer].attn.qkv_proj.register_forward_hook(lambda m, a, out: seen.update(x=out[0]))
    with torch.no_grad():
        model(torch.tensor([ids]), use_cache=False)
    handle.remove()
    q, k = seen["x"][query, head * D : (head + 1) * D], seen["x"][key, C + head * D : C + (head + 1) * D]
    return float(q @ k) / D**0.5


def test_the_induction_cell_is_explained_by_mlp_0_at_both_ends_and_sums_to_the_models_score(maps):
    answer = maps.attention_why(ZORBAK, "specimen", 1, 1, -1, 9)
    lm = maps.state.picker.get("specimen")
    score = model_score(lm.model, answer["ids"], 1, 1, answer["query"], 9)
    assert abs(answer["score"] - score) < ROUNDED
    assert abs(sum(map(sum, answer["table"])) - score) < ROUNDED
    assert abs(sum(answer["key_totals"].values()) - score) < ROUNDED
    assert abs(sum(answer["query_totals"].values()) - score) < ROUNDED
    weights = torch.softmax(torch.tensor([k["score"] for k in answer["keys"]]), 0)
    assert torch.allclose(weights, torch.tensor([k["weight"] for k in answer["keys"]]), atol=1e-4)
    largest = answer["largest"][0]
    assert (largest["query_part"], largest["key_part"]) == ("mlp 0", "mlp 0")
    reason = next(f for f in answer["findings"] if "because" in f)
    assert reason.startswith("1.1 attends to 'b' (0.69) because what MLP 0 writes at 'b' matches what MLP 0 writes")
    assert f"{largest['value']:.2f} of the score {answer['score']:.1f}" in reason
    runner = answer["runner_up"]
    assert runner["position"] != 9 and runner["weight"] < answer["weight"]
    assert any(f.startswith("The runner-up") and f"key {runner['position']}" in f for f in answer["findings"])


def test_a_key_with_little_weight_is_said_to_get_little_and_compared_with_the_key_weighed_most(maps):
    answer = maps.attention_why(ZORBAK, "specimen", 1, 1, -1, 5)
    assert answer["weight"] < words.ATTENDS
    assert answer["findings"][0].startswith("1.1 gives '␣' (key 5) little weight")
    assert not any("because" in f for f in answer["findings"])
    top = max(answer["keys"], key=lambda k: k["weight"])
    assert answer["runner_up"]["position"] == top["position"]  # compared with the key the head does look at
    assert any(f.startswith("The key weighed most") for f in answer["findings"])


def test_the_sentences_follow_the_numbers():
    """The same answer with its largest entry moved to another pair, and then made small: the reason names the new
    pair, and then says no single pair makes the score."""
    key = {"position": 3, "token": "x", "score": 4.0, "weight": 0.8}
    answer = {
        "head_name": "2.0", "key_info": key, "keys": [key], "score": 4.0, "runner_up": None,
        "largest": [{"query_part": "0.1", "key_part": "embed token", "value": 3.0}],
        "key_totals": {"embed token": 3.5, "0.1": 0.5}, "divisors": {"query": 1.0, "key": 2.0},
    }  # fmt: skip
    found = words.why_findings(answer)
    assert found[0] == (
        "2.0 attends to 'x' (0.80) because what the token embedding writes at 'x' matches what head 0.1 writes at "
        "the query: 3.00 of the score 4.0."
    )
    assert found[1] == "On the key side, the token embedding gives +3.50 in all; every other part together +0.50."
    answer["largest"][0]["value"] = 1.0
    assert words.why_findings(answer)[1].endswith("1.00 of the score 4.0 (no single pair makes this score).")


# ---- through the server: the fixture models (tiny-names: 4 layers of 4 heads) ---------------------------------------


def test_the_endpoint_answers_plain_json_that_sums_to_the_models_score(server, client, fixture_models):
    from transformers import AutoModelForCausalLM

    answer = call(client, "/attention_why", text="emma", model="tiny-names", layer=2, head=1, query=4)
    model = AutoModelForCausalLM.from_pretrained(fixture_models[0]).eval()
    assert answer["key"] == max(answer["keys"], key=lambda k: k["weight"])["position"]  # the default key
    score = model_score(model, answer["ids"], 2, 1, 4, answer["key"])
    assert abs(answer["score"] - score) < ROUNDED and abs(sum(map(sum, answer["table"])) - score) < ROUNDED
    assert answer["parts"][:2] == ["embed token", "embed position"] and answer["parts"][-2] == "mlp 1"
    asked = {"model": "tiny-names", "text": "emma", "layer": 2, "head": "1", "query": 4, "key": answer["key"]}
    with httpx.Client(timeout=120) as http:  # the page's server function (head.js: server.attention_why_html)
        drawn = page_function(http, server[0], "attention_why_html", asked)
        average = page_function(http, server[0], "attention_why_html", {**asked, "head": "mean"})
    assert 'class="attn-why"' in drawn and "Key side, in all" in drawn and f"{answer['score']:.2f}" in drawn
    assert "asked of one head" in average


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(query=2, key=3), "key 3 comes after the query 2: it is masked (a future token)"),
        (dict(head="mean"), "head must be 0 to 3, got 'mean'"),
        (dict(key=9), "key must be between 0 and 4"),
    ],
)
def test_a_visitors_mistake_gets_a_message(client, params, message):
    error = app_error(client, "/attention_why", text="emma", model="tiny-names", **params)
    assert message in error and "Traceback" not in error


# ---- the page: a click on a cell of the enlarged map, on a desktop and on a phone --------------------------------


def click_cell(page, query: int, key: int, length: int, tap: bool = False) -> None:
    """A click (or a tap) on the cell (query, key) of the chosen head's enlarged map, showing the whole text."""
    box = page.locator("#attention-head figure[data-layer] image.heat").first.bounding_box()
    x, y = box["x"] + (key + 0.5) / length * box["width"], box["y"] + (query + 0.5) / length * box["height"]
    if tap:
        page.touchscreen.tap(x, y)
    else:
        page.mouse.click(x, y)


@needs_chromium
@pytest.mark.parametrize("width, height, phone", [(1440, 900, False), (390, 844, True)])
def test_a_click_on_the_induction_cell_says_why_on_a_desktop_and_a_phone(page_url, tmp_path, width, height, phone):
    """The specimen's head 1.1 on 'Then Zorbak spoke. Then Zor' (28 tokens), opened by a link; a click (a tap on the
    phone) on the last query's cell at 'b' draws why under the maps: the sentence with MLP 0 at both ends, the bars,
    the runner-up; the drawing fits the phone's width. The lesson's softmax step asks it of the runner-up key too.
    Screenshots go to MINIGPT_SCREENSHOT_DIR when it is set."""
    from playwright.sync_api import expect

    options = dict(is_mobile=True, has_touch=True) if phone else {}
    with chromium_page(width, height, **options) as page:
        page.goto(
            f"{page_url}?model=specimen&text={quote(ZORBAK)}&layer=1&head=1&query=27&step={SECTION_STEP['softmax']}"
        )
        expect(page.locator("#attention-head figcaption").first).to_have_text("layer 1, head 1")
        # The link's lesson step is applied after its head (an event of its own): a click before it would send the
        # step the list held then, as a learner's would.
        expect(page.locator(f'#step-view .lesson[data-lesson-step="{SECTION_STEP["softmax"]}"]')).to_have_count(1)
        page.locator("#attention-head figure[data-layer]").first.scroll_into_view_if_needed()
        click_cell(page, 27, 9, 28, tap=phone)
        why = page.locator("#attention-head .attn-why")
        expect(why).to_contain_text("1.1 attends to 'b' (0.69) because what MLP 0 writes at 'b' matches what MLP 0")
        expect(why.locator(".why-compared")).to_contain_text("(key 0)")  # the runner-up: the start token
        assert why.locator(".why-bars li").count() >= 12
        wide = page.evaluate("(e) => [e.scrollWidth, document.documentElement.clientWidth]", why.element_handle())
        assert wide[0] <= wide[1], wide  # nothing wider than the screen
        why.scroll_into_view_if_needed()
        name = f"attention_why_{'phone' if phone else 'desktop'}.png"
        page.screenshot(path=str(tmp_path / name))
        if os.environ.get("MINIGPT_SCREENSHOT_DIR"):
            shutil.copy(tmp_path / name, os.path.join(os.environ["MINIGPT_SCREENSHOT_DIR"], name))
        # The lesson's softmax step asks the same of its heaviest keys: the runner-up's button, and the answer moves
        asked = page.locator('#step-view .why-keys button[data-why-key="0"]')
        expect(asked).to_have_attribute("data-query", "27")
        asked.click()
        expect(why.locator("h4")).to_contain_text("at '<|endoftext|>' (key 0)")


def test_the_circuit_walks_where_to_look_step_asks_why_of_its_head_at_its_key():
    """The button head.js answers (as the lesson's): the step's receiver and key, from the last query; none in the
    other corruption's step."""
    from minigpt.demo.circuits.circuit_walk_view import why_button

    path = {"receiver": [1, 1], "key_position": 9, "key_token": "b"}
    where = why_button({"what": "the token before the copied one changed: where to look", "path": path}, 27)
    assert 'data-why-key="9" data-query="27" data-layer="1" data-head="1"' in where and "(key 9)" in where
    assert why_button({"what": "the copied token changed: what to copy", "path": path}, 27) == ""
    assert why_button({"what": "the token before the copied one changed: where to look"}, 27) == ""
