"""One selection (layer, head, query) shared by the views: in Chromium, a tile click moves the lesson, a change of the
lesson's head moves the enlarged map, a click on a map row or on a token of the next-token strip moves the query, and
the enlarged maps outline the selected query's row; the outline's place, drawn by the server, checked against the
heatmap's geometry."""

import re

import torch

from helpers import chromium_page, needs_chromium, open_head_tools
from minigpt.demo.core.attention_maps import Window
from minigpt.demo.maps.view import figure_body


def test_the_selected_query_row_is_outlined_where_the_window_shows_it():
    matrix = torch.rand(12, 12).tril()
    tokens = [f"t{i}" for i in range(12)]
    whole = figure_body(matrix, tokens, "layer 0, head 0", Window.fit(12), query=5)
    image = re.search(r'<image class="heat"[^>]* y="([\d.]+)" width="(\d+)" height="(\d+)"', whole)
    mark = re.search(r'<rect class="row-mark"[^>]* y="([\d.]+)" width="(\d+)" height="([\d.]+)"', whole)
    top, size = float(image.group(1)), int(image.group(3))
    assert float(mark.group(1)) == round(top + 5 * size / 12, 1) and float(mark.group(3)) == round(size / 12, 2)
    longer, many = torch.rand(40, 40).tril(), [f"t{i}" for i in range(40)]
    window = Window.fit(40, 20, 20, 16)  # queries 20..35: row 5 is not in it, row 25 is its sixth
    assert "row-mark" not in figure_body(longer, many, "layer 0, head 0", window, query=5)
    assert "row-mark" in figure_body(longer, many, "layer 0, head 0", window, query=25)
    assert "row-mark" not in figure_body(matrix, tokens, "layer 0, head 0", Window.fit(12))  # no query chosen


@needs_chromium
def test_every_view_moves_the_one_selection(page_url):
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.goto(f"{page_url}?model=tiny-names&text=emma")
        lesson = page.locator("#step-view .steps > .head")
        caption = page.locator("#attention-head figcaption").first
        expect(lesson).to_have_attribute("data-query", "4")

        # A tile of the grid: the map and the lesson follow, the query (the last token) outlined in both maps.
        page.locator('#attention-grid svg[data-layer="2"][data-head="3"]').click()
        expect(caption).to_have_text("layer 2, head 3")
        expect(lesson).to_have_attribute("data-layer", "2")
        expect(lesson).to_have_attribute("data-head", "3")
        expect(page.locator("#attention-head rect.row-mark")).to_have_count(2)  # the head and the layer's average

        # The lesson's head picker: the map follows.
        page.locator("#step-view").scroll_into_view_if_needed()
        page.get_by_label("Head", exact=True).nth(1).click()
        page.get_by_role("option", name="head 1").click()
        expect(caption).to_have_text("layer 2, head 1")
        expect(page.get_by_label("Head", exact=True).first).to_have_value("head 1")

        # A row of the map: that token is the lesson's query, and its row is outlined.
        heat = page.locator("#attention-head figure image.heat").first
        heat.scroll_into_view_if_needed()
        box = heat.bounding_box()
        heat.click(position={"x": box["width"] * 0.1, "y": box["height"] * 1.5 / 5})  # row 1 of 5 ('e')
        expect(lesson).to_have_attribute("data-query", "1")
        mark = page.locator("#attention-head rect.row-mark").first
        mark_box = mark.bounding_box()
        assert abs(mark_box["y"] + mark_box["height"] / 2 - (box["y"] + box["height"] * 1.5 / 5)) < box["height"] / 10

        # A token of the next-token strip (head tools): the lesson's query moves there.
        open_head_tools(page)
        page.get_by_role("button", name="Next-token probabilities and logit lens").click()
        page.locator('#next-tokens td[data-position="3"]').click()
        expect(lesson).to_have_attribute("data-query", "3")
        expect(lesson).to_have_attribute("data-head", "1")  # the lesson's own layer and head are kept


def test_a_view_redrawn_on_several_changes_always_draws_the_last(server):
    """The chosen head over training (redrawn with the text, the layer and the head) and the next-token bars (with
    each of their three sliders) are each one event of the page (/config) with every change as its trigger and
    Gradio's `always_last`: a change while it runs draws again after, from the values then. As one event a change, a
    slow strip of the first selection (its snapshots' passes) could land after the strip of the head moved to since,
    and stay (the first-screen walk's head, on a loaded machine: the strip stayed on head 0.0)."""
    import httpx

    config = httpx.get(f"{server[0]}config", timeout=60).json()
    named = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    for view in ("head-over-training", "next-tokens"):
        on_change = [
            event
            for event in config["dependencies"]
            if any(named.get(o) == view for o in event["outputs"]) and {t[1] for t in event["targets"]} == {"change"}
        ]
        assert len(on_change) == 1, f"{view}: {len(on_change)} events redraw it on a change"
        assert on_change[0]["trigger_mode"] == "always_last" and len(on_change[0]["targets"]) == 3, on_change[0]
