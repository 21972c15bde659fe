"""The learner's third pass (issue 52), in a real browser (Debian Chromium driven by Playwright, on the shared fixture
server, which offers the shipped specimen and induction models too): one click from the first screen draws the
induction circuit found on the specimen, in view; a click on a head of a circuits view moves the page's one selection
and never meets a stale Ablate box; a new text clears the corrupted one; a tile click brings the enlarged map into view
with the focus on it; the strip over training scores each snapshot and follows the head whose score rises most; the
step picker follows the model shown; at a phone's width the circuits views keep their text at 11 px or more, one head's
view near one screen high, and a finger picks a query row. Screenshots go to MINIGPT_SCREENSHOT_DIR when it is set."""

import os
from urllib.parse import quote

from helpers import HANG_S, call, chromium_page, needs_chromium

pytestmark = needs_chromium

ZORBAK = "Then Zorbak spoke. Then Zor"
# The size of every piece of text in the circuits section as it is drawn on the screen: an SVG's text scaled with the
# SVG; text set to 0 px (hidden on purpose: the ablated maps' labels on a phone) left out.
# The labels of the found circuit's faithfulness curve that stick out of its svg's box (drawn cut: "110" as "11(").
CUT_TICKS = """() => {
  const svg = document.querySelector('#found-circuit svg.curve'), box = svg.getBoundingClientRect();
  return [...svg.querySelectorAll('text')].filter((text) => {
    const r = text.getBoundingClientRect();
    return r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5;
  }).map((text) => text.textContent);
}"""
SMALLEST_TEXT = """() => {
  const found = [];
  document.querySelectorAll('#circuits *').forEach((node) => {
    const text = [...node.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    const box = node.getBoundingClientRect();
    if (!text || !box.width || !box.height) return;
    let size = parseFloat(getComputedStyle(node).fontSize);
    const svg = node.closest('svg');
    if (svg && svg.viewBox.baseVal && svg.viewBox.baseVal.width) {
      size *= svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    }
    if (size > 0 && size < 10.95) found.push([node.tagName, node.textContent.trim().slice(0, 12), size.toFixed(1)]);
  });
  return found;
}"""


# On the found circuit's graph, an edge drawn under a neighbour of the same sender and receiver (another input), and a
# point on it that the neighbour's target covers, 4 units or more from the neighbour: where the stack alone would give
# the tap to the neighbour. Its edge and the point, in the graph's units; null where the graph has none.
CONTESTED_POINT = """(skip) => {
  const svg = document.querySelector('#found-circuit svg.circuit-graph');
  const hits = [...svg.querySelectorAll('path.edge-hit:not(.hidden)')];
  const away = (path, p) => {
    let d = Infinity;
    for (let along = 0; along <= path.getTotalLength(); along += 0.5) {
      const q = path.getPointAtLength(along);
      d = Math.min(d, Math.hypot(q.x - p.x, q.y - p.y));
    }
    return d;
  };
  for (const [i, hit] of hits.entries()) {
    const over = hits.slice(i + 1).filter((o) => o.dataset.sender === hit.dataset.sender &&
      o.dataset.receiver === hit.dataset.receiver);
    if (!hit.dataset.input || !over.length || skip.includes(hit.dataset.edge)) continue;
    for (let along = 0; along < hit.getTotalLength(); along += 1) {
      const p = svg.createSVGPoint();
      ({x: p.x, y: p.y} = hit.getPointAtLength(along));
      if (!over.some((o) => o.isPointInStroke(p) && away(o, p) >= 4)) continue;
      const at = p.matrixTransform(svg.getScreenCTM());
      const top = document.elementFromPoint(at.x, at.y);
      const edge = top && top.closest('path.edge, path.edge-hit');
      if (edge && edge.dataset.edge !== hit.dataset.edge) return {edge: hit.dataset.edge, x: p.x, y: p.y};
    }
  }
  return null;
}"""


ON_SCREEN = """([x, y]) => {  // a point of the found circuit's graph where it is on the screen now
  const svg = document.querySelector('#found-circuit svg.circuit-graph');
  const p = svg.createSVGPoint();
  [p.x, p.y] = [x, y];
  const at = p.matrixTransform(svg.getScreenCTM());
  return [at.x, at.y];
}"""


def screenshot(page, name: str) -> None:
    if os.environ.get("MINIGPT_SCREENSHOT_DIR"):
        page.screenshot(path=os.path.join(os.environ["MINIGPT_SCREENSHOT_DIR"], name))


def test_one_click_from_the_first_screen_draws_the_circuit_found_in_view(page_url, client):
    """... and the maps, their strip over training and the circuits' chosen head follow the head the walk follows (the
    /circuit_walk answer's `head`), not the page's first selection."""
    from playwright.sync_api import expect

    followed = call(client, "/circuit_walk", text=ZORBAK, model="specimen")["head"]
    caption = "layer {}, head {}".format(*followed.split("."))

    with chromium_page(1440, 900) as page:
        page.goto(page_url)
        button = page.locator("#walk-button")
        assert button.bounding_box()["y"] < 900  # on the first screen
        button.click()
        walk = page.locator("#walk-first-screen ol.walk")
        expect(walk).to_be_visible()
        expect(walk).to_contain_text("0.2 → mlp 0 → 1.1's key")  # where to look: 0.2's work through MLP 0
        expect(walk).to_contain_text("1.1's value")  # what to copy
        expect(walk).to_contain_text("0.0, 0.2, 1.1")  # the heads the model needs
        assert walk.bounding_box()["y"] < 900  # the walk starts on the first screen, under the button
        expect(page.locator("#current-text")).to_contain_text("Zorbak")  # the maps show the same text
        expect(page.locator("#attention-head figcaption").first).to_have_text(caption)  # on the walk's head
        strip = page.locator("#head-over-training .over-training > p:not(.most-changed)")
        expect(strip).to_contain_text(f"{caption} of specimen")  # the strip over training: that head at each step
        screenshot(page, "walk_desktop.png")
        page.locator("#circuits").get_by_text("Circuits: how heads work together").first.click()
        expect(page.locator("#circuit-chosen textarea")).to_have_value(followed)


def test_circuits_clicks_move_the_selection_and_inputs_never_go_stale(page_url):
    from playwright.sync_api import expect

    with chromium_page(1440, 900) as page:
        page.goto(f"{page_url}?model=specimen&text={quote(ZORBAK)}")
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(10)
        page.locator("#circuits").get_by_text("Circuits: how heads work together").first.click()
        page.locator("#circuit-attribution-button").click()
        page.locator('#circuit-attribution td.pick[data-layer="0"][data-head="2"]').click()  # a layer-0 head
        expect(page.locator("#circuit-chosen textarea")).to_have_value("0.2")
        expect(page.locator("#circuit-ablate textarea")).to_have_value("")  # "0.2" cannot be ablated before 0.2
        expect(page.locator("#circuit-head .head-circuit")).to_have_attribute("data-head", "2")
        expect(page.locator("#circuit-head .view-error")).to_have_count(0)
        expect(page.locator("#attention-head figcaption").first).to_have_text("layer 0, head 2")  # the selection
        # A corrupted text belongs to its text: another text empties it
        page.locator("#circuit-corrupted textarea").fill("Then Zoxbak spoke. Then Zor")
        page.get_by_label("Text to look at (filled in by each generation)").fill("Then Zorbek spoke. Then Zor")
        page.get_by_role("button", name="Show attention").click()
        expect(page.locator("#current-text")).to_contain_text("Zorbek")
        expect(page.locator("#circuit-corrupted textarea")).to_have_value("")
        # A tile click: the enlarged map in view, outlined a moment, with the keyboard's focus on it
        page.locator("#attention-grid").scroll_into_view_if_needed()
        page.locator('#attention-grid svg[data-layer="1"][data-head="1"]').click()
        expect(page.locator("#attention-head figcaption").first).to_have_text("layer 1, head 1")
        expect(page.locator("#attention-head")).to_be_in_viewport()
        page.wait_for_function("document.querySelector('#attention-head').contains(document.activeElement)")


def test_over_training_follows_the_head_that_forms_and_the_step_picker_follows_the_model(page_url):
    from playwright.sync_api import expect

    with chromium_page(1440, 900) as page:
        page.goto(f"{page_url}?model=induction&text=abcdefgh.abcdefgh")
        strip = page.locator("#head-over-training")
        follow = strip.locator("button.follow")
        expect(follow).to_have_text("Follow head 1.2")  # the lab's induction head rises most on this text
        expect(strip.locator(".step-map figcaption small").first).to_contain_text("induction 0.")
        follow.click()
        expect(page.locator("#attention-head figcaption").first).to_have_text("layer 1, head 2")
        expect(strip.locator("p.most-changed")).to_contain_text("rises the most")
        picker = page.get_by_label("At training step (the model's snapshots)")
        expect(picker).to_be_visible()
        # A text the model cannot read: no view claims it, and the picker offers no other model's steps
        page.get_by_label("Text to look at (filled in by each generation)").fill("zoë")
        page.get_by_role("button", name="Show attention").click()
        expect(picker).to_be_hidden()


def test_at_a_phones_width_the_circuits_keep_their_text_readable_and_a_finger_picks_a_row(page_url):
    from playwright.sync_api import expect

    with chromium_page(390, 844, is_mobile=True, has_touch=True) as page:
        page.goto(f"{page_url}?model=specimen&text={quote(ZORBAK)}")
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(10)
        picker = page.locator("#attention-head .row-picker")
        expect(picker).to_be_visible()
        chip = picker.locator('button[data-query="9"]')
        assert chip.bounding_box()["height"] >= 28  # a finger's target
        chip.tap()
        expect(page.locator("#step-view")).to_contain_text("query token 9")
        page.locator("#circuits").get_by_text("Circuits: how heads work together").first.tap()
        for button, view in (
            ("#circuit-attribution-button", "#circuit-attribution .findings"),
            ("#circuit-patch", "#circuit-patching .findings"),
            ("#circuit-composition-button", "#circuit-composition svg.graph"),
            ("#circuit-head-button", "#circuit-head .findings"),
        ):
            page.locator(button).tap()
            expect(page.locator(view)).to_be_visible()
        assert page.evaluate(SMALLEST_TEXT) == []
        assert page.locator("#circuit-head").bounding_box()["height"] < 1300  # about one phone screen and a half
        assert page.locator("#circuit-patching").bounding_box()["height"] < 1200
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width  # nothing wider than the page (wide tables scroll in their own boxes)
        screenshot(page, "circuits_phone.png")


def test_the_circuit_found_is_drawn_its_slider_redraws_and_a_head_click_moves_the_selection(page_url):
    """Find the circuit (issue 51): the specimen's circuit drawn with its faithfulness; the slider (keys, as a keyboard
    moves it) redraws the graph and the faithfulness from the answer's curve; a head of the graph moves the page's
    selection; at a phone's width it fits the screen with its text readable and a finger moves the slider."""
    from playwright.sync_api import expect

    with chromium_page(1440, 900) as page:
        page.goto(f"{page_url}?model=specimen&text={quote(ZORBAK)}")
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(10)
        page.locator("#circuits").get_by_text("Circuits: how heads work together").first.click()
        page.locator("#found-button").click()
        found = page.locator("#found-circuit .found-circuit")
        expect(found.locator("svg.circuit-graph")).to_be_visible(timeout=HANG_S * 1000)  # a search: minutes at load 18
        expect(found.locator("ul.findings")).to_contain_text("4 of its 8 heads")
        shown = found.locator("path.edge:not(.hidden)")
        kept = int(found.locator(".readout .kept").inner_text())
        assert shown.count() == kept <= 110 / 3
        assert float(found.locator(".readout .faith").inner_text()) >= 0.9
        expect(found.locator('text.port:not(.hidden)[data-port="1.1 k"]')).to_have_count(1)  # an edge into 1.1's key
        assert page.evaluate(CUT_TICKS) == []  # the curve's labels, the last k's among them, inside its box
        screenshot(page, "find_circuit.png")
        slider = found.locator("input.keep-edges")
        slider.focus()
        page.keyboard.press("Home")  # no edge kept: what every edge ablated does
        expect(found.locator(".readout .faith")).to_have_text("0.000")
        expect(shown).to_have_count(0)
        page.keyboard.press("End")  # every edge kept: the model itself
        expect(found.locator(".readout .faith")).to_have_text("1.000")
        expect(shown).to_have_count(110)
        found.locator('.node.head[data-name="1.1"]').click()
        expect(page.locator("#attention-head figcaption").first).to_have_text("layer 1, head 1")
        expect(page.locator("#circuit-chosen textarea")).to_have_value("1.1")
    with chromium_page(390, 844, is_mobile=True, has_touch=True) as page:
        page.goto(f"{page_url}?model=specimen&text={quote(ZORBAK)}")
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(10)
        page.locator("#circuits").get_by_text("Circuits: how heads work together").first.tap()
        page.locator("#found-button").tap()
        found = page.locator("#found-circuit .found-circuit")
        expect(found.locator("svg.circuit-graph")).to_be_visible(timeout=HANG_S * 1000)  # a search: minutes at load 18
        assert page.evaluate(SMALLEST_TEXT) == []
        assert page.evaluate(CUT_TICKS) == []
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        slider = found.locator("input.keep-edges")
        slider.scroll_into_view_if_needed()
        box = slider.bounding_box()
        assert box["height"] >= 28  # a finger's target
        page.touchscreen.tap(box["x"] + 4, box["y"] + box["height"] / 2)  # the slider's left end: no edge
        expect(found.locator(".readout .faith")).to_have_text("0.000")
        found.scroll_into_view_if_needed()
        screenshot(page, "find_circuit_phone.png")


def found_graph(page, page_url: str, tap: bool = False):
    """The specimen's circuit found on ZORBAK's page, drawn, with "Build your circuit by clicking" on; `tap`: by a
    finger."""
    from playwright.sync_api import expect

    page.goto(f"{page_url}?model=specimen&text={quote(ZORBAK)}")
    expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(10)
    press = (lambda locator: locator.tap()) if tap else (lambda locator: locator.click())  # noqa: E731
    press(page.locator("#circuits").get_by_text("Circuits: how heads work together").first)
    press(page.locator("#found-button"))
    found = page.locator("#found-circuit .found-circuit")
    expect(found.locator("svg.circuit-graph")).to_be_visible(timeout=HANG_S * 1000)  # a search: minutes at load 18
    press(found.locator(".build-button"))
    expect(found.locator(".build-button")).to_have_attribute("aria-pressed", "true")
    return found


def stated_edges(text: str, model) -> set:
    """The edges the library reads in a circuit written as edges, as (sender, receiver, input) names."""
    from minigpt.heads.graph import graph_of
    from minigpt.heads.stated_circuit import parsed_circuit

    form, kept, _ = parsed_circuit(text, model)
    assert form == "edges", text
    graph = graph_of(model.config)
    return {graph.edge_name(s, r) for s, r in kept.nonzero().tolist()}


def edge_parts(edge: str) -> tuple:
    """An edge into a head's input, "0.2 -> 1.1 k", as (sender, head, input)."""
    sender, receiver = edge.split(" -> ")
    return (sender, *receiver.split())


def test_clicking_the_found_circuits_graph_builds_your_circuit_and_tests_it(page_url, specimen):
    """Issue 61: with "Build your circuit by clicking" on, a click, Enter or a tap on a head or an edge of the found
    circuit's graph puts it in the Test-your-own-circuit box, written as the library reads it (parsed back here), and
    again takes it out; the box's parts are marked on the graph, also as typed; a head into a box of edges is refused
    in words; the test button draws your circuit beside the found and minimal ones. Desktop: heads, by mouse and key;
    phone: edges, by taps (edges apart from their neighbours: a finger's touch is snapped to the nearest target, and a
    head's q, k and v edges from one sender run side by side)."""
    from playwright.sync_api import expect

    from minigpt.heads.stated_circuit import parsed_circuit

    model = specimen[0]
    for phone in (False, True):
        size = dict(is_mobile=True, has_touch=True) if phone else {}
        with chromium_page(390 if phone else 1440, 844 if phone else 900, **size) as page:
            found = found_graph(page, page_url, tap=phone)
            box = page.locator("#own-circuit-text textarea")
            note = found.locator(".build-note")
            if not phone:
                found.locator('.node.head[data-name="0.2"]').click()
                found.locator('.node.head[data-name="1.1"]').focus()
                page.keyboard.press("Enter")
                expect(box).to_have_value("0.2, 1.1")
                form, _, heads = parsed_circuit(box.input_value(), model)
                assert (form, heads) == ("heads", [("head", 0, 2), ("head", 1, 1)])
                expect(found.locator(".node.head.mine")).to_have_count(2)
                expect(found.locator(".node.chosen")).to_have_count(0)  # building, not selecting (pickHead marks)
                expect(found.locator(".chosen-note")).to_be_hidden()
                found.locator('path.edge:not(.hidden)[data-edge="1.1 -> logits"]').click()  # an edge: refused
                expect(note).to_contain_text("written as heads")
                expect(box).to_have_value("0.2, 1.1")
            else:
                for edge in ("embed -> 0.2 v", "1.1 -> logits", "1.1 -> logits", "1.1 -> logits"):  # out, and in again
                    found.locator(f'path.edge:not(.hidden)[data-edge="{edge}"]').tap(force=True)
                expect(box).to_have_value("embed -> 0.2 v, 1.1 -> logits")
                assert stated_edges(box.input_value(), model) == {("embed", "0.2", "v"), ("1.1", "logits", None)}
                expect(found.locator("path.edge-hit.mine")).to_have_count(2)
                found.locator('.node.head[data-name="0.0"]').tap()  # a head into a box of edges: refused
                expect(note).to_contain_text("written as edges")
                # A finger between side-by-side edges takes the edge nearest it, not the one drawn on top there.
                found.locator("svg.circuit-graph").scroll_into_view_if_needed()
                contested = page.evaluate(CONTESTED_POINT, ["embed -> 0.2 v"])
                assert contested, "no edge of the graph lies under a neighbour's target"
                page.touchscreen.tap(*page.evaluate(ON_SCREEN, [contested["x"], contested["y"]]))
                expect(note).to_contain_text(f"Put in {contested['edge']}:")
                assert stated_edges(box.input_value(), model) == {
                    ("embed", "0.2", "v"), ("1.1", "logits", None), edge_parts(contested["edge"])
                }  # fmt: skip
                page.touchscreen.tap(*page.evaluate(ON_SCREEN, [contested["x"], contested["y"]]))  # the note moved it
                expect(box).to_have_value("embed -> 0.2 v, 1.1 -> logits")
            found.locator("svg.circuit-graph").scroll_into_view_if_needed()
            screenshot(page, f"build_circuit_{'phone' if phone else 'desktop'}.png")
            button = page.locator("#own-circuit-button")
            button.tap() if phone else button.click()
            table = page.locator("#own-circuit table.faithfulness-sets")
            expect(table).to_be_visible(timeout=HANG_S * 1000)
            for circuit in ("your circuit (", "found (", "minimal ("):  # yours beside the found and minimal ones
                expect(table.locator("th", has_text=circuit)).to_have_count(1)
            table.scroll_into_view_if_needed()
            screenshot(page, f"own_circuit_{'phone' if phone else 'desktop'}.png")
            if phone:
                assert page.evaluate("document.documentElement.scrollWidth") <= 390
                continue
            # Typed: the marks follow the box, a path edge by edge; Enter on an edge takes it out, the path split there
            box.fill("0.2 -> mlp 0 -> 1.1 k")
            expect(found.locator("path.edge-hit.mine")).to_have_count(2)
            expect(found.locator(".node.head.mine")).to_have_count(0)
            found.locator('path.edge-hit[data-edge="0.2 -> mlp 0"]').focus()
            page.keyboard.press("Enter")
            expect(box).to_have_value("mlp 0 -> 1.1 k")
            assert stated_edges(box.input_value(), model) == {("mlp 0", "1.1", "k")}
            # Filled by the page (as Gradio writes a box a handler or a link fills: its value set, no input event)
            box.evaluate("(input) => { input.value = '0.0, 1.1'; }")
            expect(found.locator(".node.head.mine")).to_have_count(2)
            expect(found.locator("path.edge-hit.mine")).to_have_count(0)
