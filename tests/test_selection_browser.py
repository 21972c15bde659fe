"""The learner's second pass, in a real browser (Debian Chromium driven by Playwright, on the shared fixture server):
one selection (layer, head) that survives every redraw, the grid and the maps worked with the keyboard, and a link
that cannot be shown named as it was asked. Screenshots of the grid with a focused tile, at 1440x900 and 390x844, go
to MINIGPT_SCREENSHOT_DIR when it is set."""

import os
import re
import shutil

from helpers import REPO, chromium_page, needs_chromium, open_head_tools

pytestmark = needs_chromium  # page_url (the app on tiny-names, 4 x 4 heads, and tiny-text, 2 x 2): conftest.py

TEXT_BOX = "Text to look at (filled in by each generation)"


def tile(page, layer, head):
    return page.locator(f'#attention-grid svg[data-layer="{layer}"][data-head="{head}"]')


def caption(page):
    return page.locator("#attention-head figcaption").first


def keep_screenshot(page, path, name: str) -> None:
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000
    if os.environ.get("MINIGPT_SCREENSHOT_DIR"):  # keep a copy to look at
        shutil.copy(path, os.path.join(os.environ["MINIGPT_SCREENSHOT_DIR"], name))


def test_one_selection_kept_over_redraws_and_worked_with_the_keyboard(page_url, tmp_path):
    from playwright.sync_api import expect

    with chromium_page(1440, 900) as page:
        page.goto(page_url)
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(20)
        expect(caption(page)).to_have_text("layer 0, head 0")

        # A tile is a button: focus() and Tab reach it, Enter opens it, the outline shows where the focus is.
        first = tile(page, 2, 0)
        assert first.get_attribute("tabindex") == "0" and first.get_attribute("role") == "button"
        first.focus()
        page.keyboard.press("Tab")  # the next tile of the row: layer 2, head 1
        focused = page.evaluate("[document.activeElement.dataset.layer, document.activeElement.dataset.head]")
        assert focused == ["2", "1"], focused
        outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline == "solid", outline
        tile(page, 2, 1).scroll_into_view_if_needed()
        keep_screenshot(page, tmp_path / "desktop.png", "second_pass_desktop.png")
        page.keyboard.press("Enter")
        expect(caption(page)).to_have_text("layer 2, head 1")
        expect(tile(page, 2, 1)).to_have_class(re.compile("selected"))

        # The lesson's diagram: its boxes are buttons too (Enter opens the step a box explains); a click on a number
        # shows its exact value, as hovering does.
        box = page.locator('#step-view .diagram [data-lesson]:not([data-lesson="1"])').first
        step = box.get_attribute("data-lesson")
        expect(box).to_have_attribute("tabindex", "0")
        box.focus()
        page.keyboard.press("Enter")
        expect(page.locator("#step-view .lesson")).to_have_attribute("data-lesson-step", step)
        number = page.locator("#step-view .n[title]:visible").first  # not one folded away
        number.click()
        expect(page.locator("#step-view .exact-value")).to_have_text(f"exact value: {number.get_attribute('title')}")

        # A new text, typed and Enter: the same head in the large map and the grid, and the line view.
        text = page.get_by_label(TEXT_BOX)
        text.fill("annabel")
        text.press("Enter")
        expect(page.locator("#current-text")).to_contain_text("annabel")
        expect(caption(page)).to_have_text("layer 2, head 1")
        expect(tile(page, 2, 1)).to_have_class(re.compile("selected"))
        expect(page.locator("#attention-grid svg.selected")).to_have_count(1)

        # The large map with the keyboard: Up moves the query row and shows the weight under it, Enter chooses it.
        large = page.locator("#attention-head figure svg").first
        last = int(page.locator("#attention-head .attn-large").get_attribute("data-query"))
        large.focus()
        page.keyboard.press("ArrowUp")
        value = page.locator("#attention-head .attn-value")
        expect(value).to_contain_text(re.compile(rf"layer 2, head 1: query {last - 1} .+: \d\.\d{{3}}"))
        page.keyboard.press("Enter")
        expect(page.locator("#attention-head .attn-large")).to_have_attribute("data-query", str(last - 1))

        # Another model that lacks head 2.1 (2 layers x 2 heads): the nearest, said in words.
        page.locator("#attention-model").get_by_label("Model").click()
        page.get_by_role("option", name="tiny-text").click()
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(6)
        expect(caption(page)).to_have_text("layer 1, head 1")
        expect(page.locator("#attention-head .attn-moved")).to_have_text(
            "head 2.1 does not exist in this model: showing head 1.1."
        )
        expect(tile(page, 1, 1)).to_have_class(re.compile("selected"))

        # A model that cannot read the text: its message once (a dropdown's choice used to redraw twice: "Error (2)").
        page.get_by_label(TEXT_BOX).fill("a b")
        page.locator("#attention-model").get_by_label("Model").click()
        page.get_by_role("option", name="induction", exact=True).click()
        toast = page.locator(".toast-body")
        expect(toast).to_contain_text("The induction model does not know these characters")
        page.wait_for_timeout(1500)  # a second call would have answered by now
        assert "(2)" not in toast.first.inner_text() and toast.count() == 1

        # A link that cannot be shown: the line names what the link asked for, not the page's defaults.
        page.goto(f"{page_url}?model=specimen&text=abc&layer=9")  # specimen has 2 layers
        lost = page.locator("#current-text .current-view.lost")
        expect(lost).to_contain_text("“abc” on specimen")
        expect(page.get_by_label(TEXT_BOX)).to_have_value("abc")

    with chromium_page(390, 844, is_mobile=True, has_touch=True) as phone:
        phone.goto(page_url)
        expect(phone.locator("#attention-grid svg[data-layer]")).to_have_count(20)
        phone.locator("#attention-grid").scroll_into_view_if_needed()
        tile(phone, 1, 2).focus()
        phone.keyboard.press("Tab")
        smallest = phone.evaluate(
            "Math.min(...[...document.querySelectorAll('#attention-grid .col-title, #attention-grid .row-title')]"
            ".map((e) => parseFloat(getComputedStyle(e).fontSize)))"
        )
        assert smallest >= 11, smallest
        keep_screenshot(phone, tmp_path / "phone.png", "second_pass_phone.png")

        # The ablation's loss strip, wider than a phone: scrolled so that the largest rise is in view; a tap on a
        # changed loss shows its exact change (no hover-only information).
        text = phone.get_by_label(TEXT_BOX)
        text.fill("abcdefgabcdefgh")  # 15 letters and the start token: the fixture's whole context
        text.press("Enter")
        expect(phone.locator("#current-text")).to_contain_text("abcdefgabcdefgh")
        open_head_tools(phone)
        phone.locator("#ablate-heads").get_by_label("1.2").check()
        phone.get_by_role("button", name="Ablate", exact=True).click()
        strip = phone.locator("#loss-strip")
        expect(strip).to_contain_text("loss after")
        assert strip.evaluate("s => s.scrollWidth > s.clientWidth")  # it does not fit: it must scroll
        phone.wait_for_function(
            """() => {
                const strip = document.querySelector('#loss-strip'), rise = strip.querySelector('td.largest-rise');
                if (!rise) return false;
                const outer = strip.getBoundingClientRect(), cell = rise.getBoundingClientRect();
                return cell.left >= outer.left - 1 && cell.right <= outer.right + 1;
            }"""
        )
        strip.locator("td.largest-rise").tap()
        expect(phone.locator("#ablation .exact-value")).to_contain_text(re.compile(r"change [+-]\d\.\d{4}"))


def test_the_chosen_head_over_training_opens_each_step_with_one_click_or_enter(page_url):
    """A model with snapshots shows the chosen head at each saved step beside its roles curve; a click (or Enter) on a
    step shows the page at that step, the head kept; a model without snapshots shows no strip."""
    from playwright.sync_api import expect

    from minigpt.heads.role_log import snapshots_of

    steps = snapshots_of(REPO / "minigpt" / "models" / "induction")
    with chromium_page() as page:
        page.goto(f"{page_url}?model=induction&text=liamnoaholiverliamnoah&layer=1&head=2")
        strip = page.locator("#head-over-training .step-map")
        expect(strip).to_have_count(len(steps) + 1)
        expect(page.locator("#head-over-training .roles-curve img")).to_be_visible()
        now = page.locator("#head-over-training .step-map.now")
        expect(now).to_have_attribute("data-model", "induction")
        strip.nth(2).click()
        expect(page.locator("#current-text")).to_contain_text(f"on induction@{steps[2]}")
        expect(caption(page)).to_contain_text("layer 1, head 2")  # the selection kept
        expect(now).to_have_attribute("data-model", f"induction@{steps[2]}")
        strip.last.focus()
        page.keyboard.press("Enter")
        expect(page.locator("#current-text")).to_contain_text("on induction,")
        page.goto(f"{page_url}?model=tiny-names&text=emma")
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(20)
        expect(page.locator("#head-over-training")).to_be_hidden()


def test_several_names_say_which_is_mapped_and_another_is_one_click_away(page_url):
    """Generating several names maps the first and says so; picking another name maps that one."""
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.goto(page_url)
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(20)
        page.get_by_label(re.compile(r"How many names")).fill("3")
        page.get_by_role("button", name="Generate names").click()
        picks = page.locator("#names-pick input[type=radio]")
        expect(picks).to_have_count(3)
        expect(picks.first).to_be_checked()
        text = page.get_by_label(TEXT_BOX)
        expect(text).to_have_value(picks.first.get_attribute("value"))
        second = picks.nth(1).get_attribute("value")
        page.locator("#names-pick label").nth(1).click()
        expect(text).to_have_value(second)
        expect(page.locator("#current-text .current-view")).to_contain_text(f"“{second}”")


def test_the_step_picker_shows_a_model_with_snapshots_at_the_step_chosen(page_url, client):
    """The 'At training step' picker of a model with snapshots (the specimen's, shipped): the maps, the lesson and the
    current-text line follow the step's model (name@N), and its maps are that snapshot's."""
    import torch
    from playwright.sync_api import expect
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from helpers import call
    from minigpt.heads.role_log import load_snapshot

    with chromium_page() as page:
        page.goto(f"{page_url}?model=specimen&text=to%20be&layer=1&head=1")
        picker = page.get_by_label("At training step (the model's snapshots)")
        expect(picker).to_be_visible()
        picker.click()
        page.get_by_role("option", name="step 1600").click()
        expect(page.locator("#current-text")).to_contain_text("on specimen@1600")
        expect(page.locator("#step-view .view-of")).to_have_attribute("data-label", "“to be” on specimen@1600")
    answer = call(client, "/attention_values", text="to be", model="specimen@1600", layer=1, head="1", query=3)
    folder = REPO / "minigpt" / "models" / "specimen"
    final = AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = torch.tensor([[tokenizer.bos_token_id, *tokenizer.encode("to be", add_special_tokens=False)]])  # as read
    with torch.no_grad():
        finals = final(ids, output_attentions=True).attentions[1][0, 1, 3, :4]
        weights = load_snapshot(final, folder, 1600)(ids, output_attentions=True).attentions[1][0, 1, 3, :4]
    assert len(answer["tokens"]) == 4  # the query's row: keys 0 to 3
    assert torch.tensor(answer["weights"]).allclose(weights, atol=1e-6)  # the step's weights,
    assert not weights.allclose(finals, atol=1e-3)  # not the final model's
