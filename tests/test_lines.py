"""The line view (bertviz's head view): every line drawn is one (query, key) weight of the recorded pass, its opacity
that weight, none left out but the invisible; long texts get a note; in Chromium, the page's lines equal the
/attention_values endpoint's weights, for one head and for every head of the layer."""

import re

import torch

from helpers import call, chromium_page, needs_chromium
from minigpt.demo.maps.lines_view import FAINTEST, MAX_LINE_TOKENS, lines_html

LINE = re.compile(r'stroke-opacity="([^"]+)"[^>]*data-q="(\d+)" data-k="(\d+)" data-head="(\d+)"')


def test_each_line_is_a_weight_and_only_the_invisible_are_left_out():
    torch.manual_seed(0)
    weights = torch.rand(2, 9, 9).tril().pow(3)
    weights = weights / weights.sum(-1, keepdim=True)  # rows sum to 1, many weights near 0
    page = lines_html({h: weights[h].tolist() for h in range(2)}, [f"t{i}" for i in range(9)], layer=1, query=4)
    drawn = {(int(h), int(q), int(k)): float(w) for w, q, k, h in LINE.findall(page)}
    expected = {
        (h, q, k): float(weights[h, q, k])
        for h in range(2)
        for q in range(9)
        for k in range(q + 1)
        if weights[h, q, k] >= FAINTEST
    }
    assert drawn == expected  # the weights themselves, each once; no future key
    assert 'class="q chosen" data-i="4"' in page


def test_a_text_too_long_for_lines_gets_a_note():
    page = lines_html({0: [[1.0]]}, ["x"] * (MAX_LINE_TOKENS + 1), layer=0)
    assert f"up to {MAX_LINE_TOKENS} tokens" in page and "<line" not in page


@needs_chromium
def test_the_pages_lines_are_the_endpoints_weights(page_url, client):
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.goto(f"{page_url}?model=tiny-names&text=emma&layer=2&head=1")
        lines = page.locator("#attention-lines line")
        expect(page.locator("#attention-lines svg")).to_have_attribute("data-layer", "2")
        read = "els => els.map(e => [e.dataset.head, e.dataset.q, e.dataset.k, e.getAttribute('stroke-opacity')])"
        one_head = lines.evaluate_all(read)
        page.get_by_label("every head of the layer, in colours").check()
        expect(page.locator("#attention-lines .swatch")).to_have_count(4)
        every_head = lines.evaluate_all(read)
    for drawn, heads in ((one_head, [1]), (every_head, range(4))):
        on_page = {(int(h), int(q), int(k)): float(w) for h, q, k, w in drawn}
        expected = {}
        for head in heads:
            for query in range(5):
                answer = call(
                    client, "/attention_values", text="emma", model="tiny-names", layer=2, head=str(head), query=query
                )
                expected |= {(head, query, k): w for k, w in enumerate(answer["weights"]) if w >= FAINTEST}
        assert on_page == expected
