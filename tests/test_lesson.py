"""The lesson through the block: its thirteen steps in the seeds' order, each pointing at real parts of the step view
and the diagram; in Chromium, every step walked on the shipped names model with the numbers drawn equal to the `step`
endpoint's (and those to the model's own tensors read by hooks, the block step's layer norms and MLP included), the
head roles equal to the `head_roles` endpoint's and the weights counted equal to the model's; and at a phone's width,
no part of the page wider than the page without a scroll bar of its own."""

import html
import re
from urllib.parse import quote

import torch

from helpers import (
    REPO,
    assert_drawn_exactly,
    assert_every_number_is_the_models,
    call,
    chromium_page,
    needs_chromium,
    numbers_drawn,
    open_head_tools,
    tiny_model,
)
from minigpt.demo.lesson.view import ATTENTION, BLOCK_AFTER, BLOCK_BEFORE, OUTSIDE_AFTER, OUTSIDE_BEFORE
from minigpt.demo.lesson.words import ALL_STEPS, DEPTHS, LESSON, LESSON_CHOICES, STEPS, lesson_number, next_step
from minigpt.heads.block_steps import parameter_counts

NAMES = REPO / "minigpt" / "models" / "names"


def test_the_lesson_follows_the_seeds_order_through_the_whole_block():
    sections = [section for step in LESSON for section in step.sections]
    assert len(LESSON) == 13
    # Every step view section is taught, in the model's order, then what heads learn and training.
    assert sections == [*STEPS, "roles", "weights", "circuits"]
    boxes = {box for part in (OUTSIDE_BEFORE, BLOCK_BEFORE, ATTENTION, BLOCK_AFTER, OUTSIDE_AFTER) for box, *_ in part}
    for step in LESSON:
        assert set(step.boxes) <= boxes | {"attention"}, step.title
        assert step.plain != step.formulas and step.try_this and step.question.endswith("?")
    # Each box of the diagram opens a step that marks it "you are here".
    for part in (OUTSIDE_BEFORE, BLOCK_BEFORE, ATTENTION, BLOCK_AFTER, OUTSIDE_AFTER):
        for box, _, opens in part:
            assert box in LESSON[opens - 1].boxes, box


def test_back_and_next_stay_inside_the_lesson():
    assert [next_step(n, +1) for n in (1, 11, 12, 13)] == [2, 12, 13, 13]
    assert [next_step(n, -1) for n in (1, 2, 12, 13)] == [1, 1, 11, 12]
    assert next_step(ALL_STEPS, +1) == 1 and next_step(ALL_STEPS, -1) == 13
    assert [lesson_number(v) for v in ("5", 12, 13, 14, -1, None, "x", 0)] == [5, 12, 13, 0, 0, 0, 0, 0]


def test_the_weights_are_counted_once_each_by_part():
    model = tiny_model()
    counts = dict(parameter_counts(model))
    assert sum(counts.values()) == sum(p.numel() for p in model.parameters())  # tied weights counted once
    blocks = model.model.layers
    assert counts["attention"] == sum(p.numel() for b in blocks for p in b.attn.parameters())
    assert counts["MLP"] == sum(p.numel() for b in blocks for p in b.mlp.parameters())
    assert counts["token embedding"] == model.model.token_embedding.weight.numel()


def lesson_text(page) -> str:
    return page.locator("#step-view .lesson .words").inner_text()


@needs_chromium
def test_every_lesson_step_shows_the_step_endpoints_numbers_on_the_names_model(page_url, client):
    from playwright.sync_api import expect
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(NAMES).eval()
    tokenizer = AutoTokenizer.from_pretrained(NAMES)
    ids = [tokenizer.bos_token_id] + tokenizer.encode("emma", add_special_tokens=False)
    numbers = call(client, "/step", text="emma", model="names", layer=2, head=1, query=3)
    assert_every_number_is_the_models(numbers, model, ids)  # the endpoint's numbers are the model's own
    roles = call(client, "/head_roles", text="emma", model="specimen")
    seen = {}
    with chromium_page() as page:
        page.goto(f"{page_url}?model=names&text=emma&layer=2&head=1&query=3&step=1")
        for n, step in enumerate(LESSON, start=1):
            lesson = page.locator(f'#step-view .lesson[data-lesson-step="{n}"]')
            expect(lesson).to_have_count(1)
            expect(page.locator("#step-view .steps > .head")).to_have_attribute("data-query", "3")
            assert step.plain in lesson_text(page)
            assert lesson.locator(".diagram .here").count() >= 1
            assert lesson.locator(".diagram .you").count() == 1  # one "you are here"
            seen[n] = numbers_drawn(page)
            if n == 11:
                seen["roles"] = lesson.locator('[data-step="roles"] td[data-layer]').evaluate_all(
                    "cells => cells.map(c => [c.dataset.layer, c.dataset.head, c.title])"
                )
            if n == 12:
                seen["weights"] = lesson.locator("td[data-part]").evaluate_all(
                    "cells => cells.map(c => [c.dataset.part, c.textContent])"
                )
            page.locator("#lesson-next").click()
        # The other depth: formulas and the shapes; a click on a box of the diagram opens its step.
        page.get_by_label("Formulas and shapes").check()
        expect(page.locator("#step-view .lesson")).to_have_attribute("data-depth", "formulas")
        assert LESSON[12].formulas in lesson_text(page)
        page.locator('#step-view .diagram [data-box="softmax"]').click()
        expect(page.locator('#step-view .lesson[data-lesson-step="5"]')).to_have_count(1)
        assert LESSON[4].formulas in lesson_text(page)
        expect(page.locator('#step-view [data-step="softmax"] .shapes')).to_contain_text("Shapes (")
        # Arriving at the causal mask's step with the last token as the query (no later key to mask), the query moves
        # to the middle of the text: ".emma" is 5 tokens, query 2 has 2 masked keys.
        page.goto(f"{page_url}?model=names&text=emma&layer=2&head=1&step=4")
        expect(page.locator("#step-view .steps > .head")).to_have_attribute("data-query", "4")
        page.locator("#lesson-next").click()
        expect(page.locator('#step-view .lesson[data-lesson-step="5"]')).to_have_count(1)
        expect(page.locator("#step-view .steps > .head")).to_have_attribute("data-query", "2")
        expect(page.locator('#step-view [data-key="softmax.masked"] .masked')).to_have_count(2)
    for n, step in enumerate(LESSON, start=1):
        drawn = seen[n]
        assert_drawn_exactly(drawn, numbers)  # each number drawn is the endpoint's, and so the model's
        if step.sections[0] in STEPS:  # each step shows numbers of its own sections, of each of them
            assert {key.split(".")[0] for key in drawn} == set(step.sections), step.title
    # The block step's vectors are all there: the layer norms, the residual adds, the MLP's neurons.
    assert {key.split(".")[1] for key in seen[9]} >= {
        "attn_norm_hat",
        "attn_norm_out",
        "middle_i",
        "mlp_norm_out",
        "pre_activation_i",
        "activation_i",
        "mlp_out_i",
        "after_i",
    }
    # Step 11: the specimen's head roles, as the head_roles endpoint scores them (the cells' titles, to 4 decimals).
    drawn_roles = [
        (int(layer), int(head), float(re.search(r": (-?[\d.]+)", title).group(1)))
        for layer, head, title in seen["roles"]
    ]
    expected = [
        (layer, head, round(score, 4))
        for role in ("previous_token", "first_token", "self", "induction", "induction_on_text")
        if role in roles  # induction on the text itself: drawn when the text repeats a token
        for layer, row in enumerate(roles[role])
        for head, score in enumerate(row)
    ]
    assert drawn_roles == expected
    # Step 12: the weights by part, counted from the model itself.
    assert [(part, int(count.replace(",", ""))) for part, count in seen["weights"]] == parameter_counts(model)


# Every element wider than the page must sit in an element that scrolls sideways and fits the page.
OVERFLOW_JS = """() => {
  const width = document.documentElement.clientWidth;
  const scrolls = (element) => /(auto|scroll)/.test(getComputedStyle(element).overflowX);
  const cut = [];
  for (const element of document.querySelectorAll('body *')) {
    const box = element.getBoundingClientRect();
    if (box.width === 0 || box.height === 0 || box.right <= width + 1) continue;
    let parent = element.parentElement, held = false;
    while (parent && !held) {
      held = scrolls(parent) && parent.getBoundingClientRect().right <= width + 1;
      parent = parent.parentElement;
    }
    const parentCut = element.parentElement && element.parentElement.getBoundingClientRect().right > width + 1;
    if (!held && !parentCut) {  // the outermost element cut off, named by its tag and the nearest id around it
      const named = element.closest('[id]:not([id^="html-"])');
      cut.push(`${element.tagName.toLowerCase()} in #${named ? named.id : ''}`);
    }
  }
  return {page: document.documentElement.scrollWidth, width, cut: cut.slice(0, 10)};
}"""


@needs_chromium
def test_at_a_phones_width_nothing_is_wider_than_the_page_without_a_scroll_bar(page_url):
    """The widest lesson steps (9: the heads side by side, 11: the roles table, and every step at once) on a phone,
    with the head roles' table open beside them: one page, the other steps picked from the lesson's list."""
    from playwright.sync_api import expect

    overflow = {}
    with chromium_page(390, 844, is_mobile=True, has_touch=True) as page:
        text = quote("To be, or not to be: to be")
        page.goto(f"{page_url}?model=specimen&text={text}&layer=1&head=1&step=9")
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(10)  # 2 layers x (4 heads + mean)
        expect(page.locator("#step-view .steps > .head")).to_have_count(1)
        open_head_tools(page)
        page.get_by_role("button", name="Head roles").click()
        expect(page.locator("#head-roles")).to_contain_text("Induction probe")
        for step in (9, 11, ALL_STEPS):
            if step != 9:  # the link opened step 9; the others picked as a learner picks them
                page.locator("#lesson-step input").click()
                page.get_by_role("option", name=dict(map(reversed, LESSON_CHOICES))[step], exact=True).click()
            shown = f'#step-view .lesson[data-lesson-step="{step}"]' if step != ALL_STEPS else "#step-view .lesson"
            expect(page.locator(shown)).to_have_count(int(step != ALL_STEPS))  # every step at once: no lesson's words
            page.wait_for_timeout(500)
            overflow[step] = page.evaluate(OVERFLOW_JS)
    wide = {step: found for step, found in overflow.items() if found["page"] > found["width"] or found["cut"]}
    assert not wide, wide  # the page itself never scrolls sideways, and nothing is cut off


def test_depths_are_plain_words_and_formulas():
    assert DEPTHS == ("plain", "formulas")
    assert all(not re.search(r"[√Σ⊙]", step.plain) for step in LESSON)  # plain words: no formula signs
    assert sum(bool(re.search(r"[√Σ⊙=]", step.formulas)) for step in LESSON) >= 10


def test_a_lesson_step_draws_the_same_numbers_as_the_step_view_for_that_step():
    from minigpt.demo.lesson.steps_view import section_html
    from minigpt.demo.lesson.view import lesson_html
    from minigpt.demo.lesson.words import worded
    from minigpt.heads.recorded_pass import run_forward_pass
    from minigpt.heads.steps import attention_steps, steps_json

    model = tiny_model(seed=1)
    steps = attention_steps(model, run_forward_pass(model, [0, 3, 4, 3, 2]), 1, 0, 3)
    numbers = worded(steps_json(steps, list("abcde")))
    numbers["model"] = "tiny"
    page = lesson_html(5, "formulas", numbers)
    # Step 6 on a model trained without attention dropout says that training mode would change nothing.
    without = numbers["steps"]["dropout"]["model_p"] == 0
    assert ("changes nothing either" in lesson_html(6, "plain", numbers)) == without
    numbers["steps"]["dropout"]["model_p"] = 0.0 if not without else 0.1
    assert ("changes nothing either" in lesson_html(6, "plain", numbers)) != without
    numbers["steps"]["dropout"]["model_p"] = 0.0 if without else 0.1
    assert section_html(numbers, "softmax", 5, "formulas", explained=False) in page
    assert html.escape(LESSON[4].formulas) in page and html.escape(LESSON[4].plain) not in page
    assert (
        torch.tensor(numbers["steps"]["softmax"]["exps"])
        .div(numbers["steps"]["softmax"]["exp_sum"])
        .allclose(torch.tensor(numbers["steps"]["softmax"]["weights"][:4]))
    )


def test_step_11_says_once_what_a_click_does_and_only_where_a_click_selects_a_head():
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.head_tools.endpoints import Insights
    from minigpt.demo.lesson.view import roles_section

    state = DemoState.configure([str(NAMES)], training=False)
    roles = Insights(state).head_roles("emma", "names")
    own = roles_section(11, roles, "names", "names", "emma")
    other = roles_section(11, roles, "names", "specimen", "emma")
    assert own.count("Click a cell") == 1 and "data-pick" in own
    assert "Click a cell" not in other and "data-pick" not in other and "Open this text on names" in other
