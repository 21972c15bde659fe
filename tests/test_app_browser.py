"""The demo in a real browser (Debian Chromium driven by Playwright): load the page, generate names and text, and see
the output and the attention maps appear; hover and click the maps; save a screenshot."""

import os
import re
import shutil
from pathlib import Path

import pytest
from test_app_api import build_fixture_models, running_app

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"Chromium is not installed at {CHROMIUM}: install it with `apt-get install -y chromium` (Debian/Ubuntu) "
    "to run the browser test (never `playwright install`).",
)


@pytest.fixture(scope="module")
def page_url(tmp_path_factory):
    names, text = build_fixture_models(tmp_path_factory.mktemp("models"))
    with running_app("--names-model", str(names), "--text-model", str(text)) as (url, _):
        yield url


def grid_tiles(page):
    return page.locator("#attention-grid svg[data-layer]")


def test_generate_names_and_text_and_see_the_maps(page_url, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=90_000)  # a busy 2-core machine: generous, it only matters when something is wrong
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(90_000)  # actions and navigation too, not only the expectations
            outside = []  # requests that leave this machine: the page must work offline
            page.on("request", lambda r: outside.append(r.url) if "127.0.0.1" not in r.url and not
                    r.url.startswith("data:") else None)  # fmt: skip
            page.goto(page_url)

            # On load, the maps of the example text: 4 layers x (4 heads + average) for the names fixture.
            expect(grid_tiles(page)).to_have_count(20)

            # Names: the output appears, then the maps of the first name (it starts with the boundary '.').
            page.get_by_label("Starts with (optional)").fill("em")
            page.get_by_role("button", name="Generate names").click()
            names = page.locator("#names-output textarea")
            page.wait_for_function("() => document.querySelector('#names-output textarea').value.startsWith('em')",
                                   timeout=90_000)  # fmt: skip
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
            page.get_by_label("Seed (-1 = random; same seed, same output)").fill("7")
            page.get_by_role("tab", name="Text").click()
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
        finally:
            browser.close()


def test_zoom_select_a_query_and_download_a_png_and_the_weights(page_url, tmp_path):
    """The enlarged head zooms (a window drawn by the server), a click on a row selects that query, and the export
    downloads a PNG of the grid and the weights file."""
    from playwright.sync_api import expect, sync_playwright

    from attention_export import load_weights

    expect.set_options(timeout=90_000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000}, accept_downloads=True)
            page.set_default_timeout(90_000)
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
            expect(page.locator("#attention-head .attn-tip")).to_contain_text(re.compile(
                r'query 23 ".+" -> key 8 ".+": \d\.\d{3}'))  # fmt: skip
            large.click(position={"x": box["width"] * 0.5, "y": box["height"] * 0.97})
            expect(page.locator("#attention-head .attn-large")).to_have_attribute("data-query", "23")

            # Export: the grid as one PNG, then every weight as .safetensors.
            downloads = {}
            for label, suffix in (("every map (.png)", ".png"), ("all weights (.safetensors, bertviz layout)",
                                                                 ".safetensors")):  # fmt: skip
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
        finally:
            browser.close()
