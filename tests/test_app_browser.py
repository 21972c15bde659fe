"""The demo in a real browser (Debian Chromium driven by Playwright): load the page, generate names and text, and see
the output and the attention maps appear; hover and click the maps; save a screenshot."""

import os
import re
import shutil

from helpers import call, chromium_page, gradio_client, needs_chromium, open_head_tools

pytestmark = needs_chromium  # page_url (the app on the fixture models): conftest.py


def grid_tiles(page):
    return page.locator("#attention-grid svg[data-layer]")


def test_generate_names_and_text_and_see_the_maps(page_url, tmp_path):
    from playwright.sync_api import expect

    expect.set_options(timeout=90_000)  # a busy 2-core machine: generous, it only matters when something is wrong
    with chromium_page(1280, 1000) as page:
        outside = []  # requests that leave this machine: the page must work offline
        page.on(
            "request",
            lambda r: outside.append(r.url) if "127.0.0.1" not in r.url and not r.url.startswith("data:") else None,
        )
        page.goto(page_url)

        # On load, the maps of the example text: 4 layers x (4 heads + average) for the names fixture.
        expect(grid_tiles(page)).to_have_count(20)

        # Names: the output appears, then the maps of the first name (it starts with the boundary '.').
        page.get_by_label("Starts with (optional)").fill("em")
        page.get_by_role("button", name="Generate names").click()
        names = page.locator("#names-output textarea")
        page.wait_for_function(
            "() => document.querySelector('#names-output textarea').value.startsWith('em')", timeout=90_000
        )
        first = names.input_value().split("\n")[0]
        attention_text = page.get_by_label("Text to look at (filled in by each generation)")
        expect(attention_text).to_have_value(re.compile(rf"^\.{first}\.?$"))
        expect(grid_tiles(page)).to_have_count(20)

        # Hover over the large map: the weight under the pointer is shown.
        large = page.locator("#attention-head figure image.heat").first
        large.scroll_into_view_if_needed()
        box = large.bounding_box()
        large.hover(position={"x": box["width"] * 0.05, "y": box["height"] * 0.95})  # first key, last query
        tip = page.locator("#attention-head .attn-tip")
        expect(tip).to_be_visible()
        expect(tip).to_contain_text(re.compile(r'query \d+ ".+" -> key 0 "\.": 0\.\d{3}'))

        # Clicking a tile shows that head large.
        page.locator('#attention-grid svg[data-layer="2"][data-head="3"]').click()
        expect(page.locator("#attention-head figcaption").first).to_have_text("layer 2, head 3")

        # Text: the output, then the maps of the text model (2 layers x (2 heads + average)). A fixed seed: the
        # fixture's random weights give its end token 1/97 a step, so a random seed often ends the text early.
        page.get_by_role("tab", name="Text").click()
        sampling = page.locator("#text-sampling")  # the Text tab's own sampling settings, folded
        sampling.get_by_text("Sampling settings").first.click()
        sampling.get_by_label("Seed (-1 = random; same seed, same output)").fill("7")
        page.get_by_label("Prompt (may be empty)").fill("to be")
        page.get_by_role("button", name="Generate text").click()
        expect(page.get_by_text(re.compile(r"^\d+ new tokens"))).to_be_visible()  # the note that ends each run
        assert re.fullmatch(r"to be.+", page.locator("#text-output textarea").input_value(), re.DOTALL)
        expect(grid_tiles(page)).to_have_count(6)
        expect(page.locator("#shape-trace")).to_contain_text("(B, H, T, D)")
        screenshot = tmp_path / "demo.png"
        page.screenshot(path=str(screenshot), full_page=True)
        assert screenshot.stat().st_size > 10_000
        if os.environ.get("MINIGPT_SCREENSHOT"):  # keep a copy to look at
            shutil.copy(screenshot, os.environ["MINIGPT_SCREENSHOT"])

        # Bad input: a clear message, and the page keeps working.
        page.get_by_role("tab", name="Names").click()
        page.get_by_label("Starts with (optional)").fill("🙂")
        page.get_by_role("button", name="Generate names").click()
        expect(page.get_by_text("does not know these characters").first).to_be_visible()
        assert outside == []


def test_zoom_select_a_query_and_download_a_png_and_the_weights(page_url, tmp_path):
    """The enlarged head zooms (a window drawn by the server), a click on a row selects that query, and the export
    downloads a PNG of the grid and the weights file."""
    from playwright.sync_api import expect

    from minigpt.demo.maps.export import load_weights

    expect.set_options(timeout=90_000)
    with chromium_page(1280, 1000, accept_downloads=True) as page:
        page.goto(page_url)
        expect(grid_tiles(page)).to_have_count(20)

        # A 30-token text of the text model: zoom in to a window of 16 tokens.
        page.get_by_label("Text to look at (filled in by each generation)").fill("to be, or not to be, that is?")
        page.locator("#attention-head").scroll_into_view_if_needed()
        page.locator("#attention-model").get_by_label("Model").click()
        page.get_by_role("option", name="tiny-text").click()
        page.get_by_role("button", name="Show attention").click()
        expect(grid_tiles(page)).to_have_count(6)
        page.locator("#attention-head button[data-zoom=in]").click()
        expect(page.locator("#attention-head figcaption").first).to_contain_text("queries 8-23, keys 8-23 of 30")

        # Hover: the exact weight, read from the server; a click on a row selects that query.
        large = page.locator("#attention-head figure image.heat").first
        box = large.bounding_box()
        large.hover(position={"x": box["width"] * 0.03, "y": box["height"] * 0.97})  # key 8, query 23
        expect(page.locator("#attention-head .attn-tip")).to_contain_text(
            re.compile(r'query 23 ".+" -> key 8 ".+": \d\.\d{3}')
        )
        large.click(position={"x": box["width"] * 0.5, "y": box["height"] * 0.97})
        expect(page.locator("#attention-head .attn-large")).to_have_attribute("data-query", "23")

        # Export: the grid as one PNG, then every weight as .safetensors.
        downloads = {}
        for label, suffix in (
            ("every map (.png)", ".png"),
            ("all weights (.safetensors, bertviz layout)", ".safetensors"),
        ):
            page.get_by_label("Export the attention of this text").click()
            page.get_by_role("option", name=label).click()
            page.get_by_role("button", name="Export", exact=True).click()
            link = page.locator(f'#attention-export a[href*="{suffix}"]')
            with page.expect_download() as download:
                link.click()
            downloads[suffix] = tmp_path / download.value.suggested_filename
            download.value.save_as(downloads[suffix])
        assert downloads[".png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        layers, tokens, _ = load_weights(downloads[".safetensors"])
        assert len(tokens) == 30 and [a.shape for a in layers] == [(1, 2, 30, 30)] * 2


def test_every_view_shows_the_current_texts_numbers_or_says_whose_they_are(page_url):
    """The page's central promise: a number on screen is the current text's. Hover after a text change reads the new
    text's tokens and weights (equal to /attention_values); after a new text, a new model or a text that cannot be
    shown, each view is either redrawn for the current text or greyed with a note naming the text it belongs to."""
    from playwright.sync_api import expect

    client = gradio_client(page_url)
    expect.set_options(timeout=90_000)
    views = ["#next-tokens", "#ablation", "#importance", "#head-roles", "#compare", "#step-view"]
    with chromium_page(1280, 1000) as page:
        page.goto(page_url)
        current = page.locator("#current-text .current-view")
        expect(current).to_contain_text("“emma” on tiny-names, 5 tokens")

        def show(text: str) -> None:
            page.get_by_label("Text to look at (filled in by each generation)").fill(text)
            page.get_by_role("button", name="Show attention").click()

        def hover(row: int, col: int) -> str:
            heat = page.locator("#attention-head figure image.heat").first
            heat.scroll_into_view_if_needed()
            box, size = (
                heat.bounding_box(),
                int(page.locator("#attention-head figure svg").first.get_attribute("data-size")),
            )
            heat.hover(position={"x": box["width"] * (col + 0.5) / size, "y": box["height"] * (row + 0.5) / size})
            tip = page.locator("#attention-head .attn-tip")
            expect(tip).to_contain_text(re.compile(r": \d\.\d+$"))
            return tip.text_content()

        def expected_tip(text: str, model: str, row: int, col: int) -> str:
            answer = call(client, "/attention_values", text=text, model=model, layer=0, head="0", query=row)
            tokens = answer["tokens"]
            return f'query {row} "{tokens[row]}" -> key {col} "{tokens[col]}": {answer["weights"][col]:.6g}'

        def greyed(selector: str) -> str | None:
            note = page.locator(f"{selector} .view-of > .stale-note")
            return note.text_content() if note.count() else None

        assert hover(3, 1) == expected_tip("emma", "tiny-names", 3, 1)
        open_head_tools(page)
        for button in (
            "Next-token probabilities and logit lens",
            "Ablate",
            "Head importance map",
            "Head roles",
            "Compare",
        ):
            page.get_by_role("button", name=button, exact=True).click()
        for selector in views:
            expect(page.locator(f"{selector} .view-of")).to_have_attribute("data-label", "“emma” on tiny-names")
        # Compare's own default (an empty second text): the first with one token changed, no error.
        expect(page.locator("#compare")).to_contain_text("changed to")
        for selector in views:
            assert greyed(selector) is None, selector

        for text, row, col in (("christopher", 5, 4), ("isabella", 5, 4), ("isabella", 3, 1)):
            show(text)
            expect(current).to_contain_text(f"“{text}” on tiny-names")
            assert hover(row, col) == expected_tip(text, "tiny-names", row, col)
        for selector in views[:-1]:  # computed for emma: marked as such
            expect(page.locator(f"{selector} .stale-note")).to_contain_text("computed for “emma” on tiny-names")
        expect(page.locator("#step-view .view-of")).to_have_attribute("data-label", "“isabella” on tiny-names")
        assert greyed("#step-view") is None and greyed("#attention-grid") is None

        # A view run again is of the current text; Compare of texts of different lengths: the common positions.
        page.locator("#compare-text textarea").fill("emma")
        page.get_by_role("button", name="Compare", exact=True).click()
        expect(page.locator("#compare")).to_contain_text("compared over the first 5")
        assert greyed("#compare") is None

        # Another model: the maps and the step view follow it; the views of the names model are marked.
        page.locator("#attention-model").get_by_label("Model").click()
        page.get_by_role("option", name="tiny-text").click()
        expect(current).to_contain_text("“isabella” on tiny-text")
        expect(grid_tiles(page)).to_have_count(6)
        assert hover(5, 4) == expected_tip("isabella", "tiny-text", 5, 4)
        expect(page.locator("#compare .stale-note")).to_contain_text("“isabella” on tiny-names")
        expect(page.locator("#step-view .view-of")).to_have_attribute("data-label", "“isabella” on tiny-text")

        # A text the model cannot read: nothing claims to be current, the maps included.
        show("ok 🙂")
        expect(current).to_contain_text("Could not show")
        for selector in ["#attention-grid", "#attention-head", *views]:
            expect(page.locator(f"{selector} .stale-note")).to_be_visible()
        page.get_by_role("button", name="Head roles").click()
        expect(page.locator("#head-roles")).to_contain_text("No text is shown")
