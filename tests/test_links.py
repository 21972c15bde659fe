"""Links that reopen a view: the query string read back (minigpt/demo/core/links.py), and in Chromium a link opened in a
fresh browser shows the head and query it names, and the page's "Copy a link" gives the link that shows the same
again."""

from helpers import chromium_page, needs_chromium
from minigpt.demo.core.inputs import MAX_TEXT_CHARS
from minigpt.demo.core.links import read_link


def test_a_link_keeps_the_known_keys_and_a_text_of_a_texts_length():
    params = {"model": "names", "text": "emma", "layer": "2", "head": "1", "query": "3", "tab": "text", "step": ""}
    params["part"] = "find-circuit"
    kept = {"tab": "text", "model": "names", "text": "emma", "layer": "2", "head": "1", "query": "3"}
    kept["part"] = "find-circuit"
    assert read_link({**params, "other": "x"}) == kept  # unknown keys and empty values left out
    assert read_link({}) == {} and read_link({"text": "", "model": ""}) == {}  # no link: the page's defaults
    assert len(read_link({"text": "a" * (MAX_TEXT_CHARS + 5)})["text"]) == MAX_TEXT_CHARS


@needs_chromium
def test_a_link_opened_in_a_fresh_browser_shows_its_head_and_query(page_url):
    from playwright.sync_api import expect

    expect.set_options(timeout=90_000)  # a busy 2-core machine: generous, it only matters when something is wrong
    link = f"{page_url}?model=names&text=emma&layer=2&head=1&query=3"
    # What the page's button makes of it: every key, the page's defaults for those the link leaves out.
    full = f"{page_url}?tab=names&model=names&text=emma&layer=2&head=1&query=3&step=1&depth=plain"
    # A link to another tab and lesson step, at the other depth.
    other = f"{page_url}?tab=text&model=names&text=emma&layer=1&head=0&query=2&step=7&depth=formulas"
    copied = None
    for opened, expected in ((link, full), (None, full), (other, other)):  # the link, the page's link of it, ...
        with chromium_page(1280, 1000) as page:  # a context of its own: fresh, no state carried
            page.goto(opened or copied)
            layer, head, query = (1, 0, 2) if opened == other else (2, 1, 3)
            expect(page.locator("#attention-head figcaption").first).to_have_text(f"layer {layer}, head {head}")
            expect(page.locator("#step-view")).to_contain_text(f"Layer {layer}, head {head}, query token {query}")
            expect(page.locator("#current-text")).to_contain_text("emma")
            lesson = page.locator("#step-view .lesson")
            step, depth = (7, "formulas") if opened == other else (1, "plain")
            expect(lesson).to_have_attribute("data-lesson-step", str(step))
            expect(lesson).to_have_attribute("data-depth", depth)
            tab = "Text" if opened == other else "Names"
            expect(page.get_by_role("tab", name=tab)).to_have_attribute("aria-selected", "true")
            page.get_by_role("button", name="Copy a link to this view").click()
            box = page.locator("#view-link textarea, #view-link input").first
            expect(box).to_have_value(expected)  # the same keys, in the same order
            copied = box.input_value()
            assert page.url == copied  # in the address bar too


def test_every_value_of_a_link_is_cut_to_a_length_it_may_have():
    from minigpt.demo.core.links import MAX_LINK_VALUE_CHARS

    long = {key: "7" * 50_000 for key in ("tab", "model", "layer", "head", "query", "step", "depth", "part")}
    assert all(len(value) == MAX_LINK_VALUE_CHARS for value in read_link(long).values())


@needs_chromium
def test_a_link_to_a_model_the_server_lacks_says_so_and_leaves_the_log_alone(server, page_url):
    """An unknown model of 8,000 characters in a link: the page says so, its picker keeps a model it offers, and the
    log grows by a line at most (Gradio's warning about a value outside a dropdown's choices quoted it whole, each
    distinct value again: 8 KB a link)."""
    from playwright.sync_api import expect

    from helpers import server_log

    mark = len(server_log(server[1]))
    with chromium_page(1280, 1000) as page:
        page.goto(f"{page_url}?model={'x' * 8000}&text=emma")
        expect(page.get_by_text("Unknown model 'xxxxxxxx").first).to_be_visible()
        expect(page.locator("#current-text")).to_contain_text("emma")
    logged = server_log(server[1])[mark:]
    assert "x" * 100 not in logged and len(logged) < 1000, logged[-500:]
