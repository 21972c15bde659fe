"""The "What does this head do?" section in a real browser (Debian Chromium driven by Playwright): tick a head, ablate,
and see the per-token loss strip change; click a token to see its next-token probabilities."""

from helpers import call, chromium_page, gradio_client, needs_chromium, open_head_tools

pytestmark = needs_chromium  # page_url (the app on the fixture models): conftest.py


def test_tick_a_head_ablate_and_see_the_loss_strip_change(page_url):
    from playwright.sync_api import expect

    expect.set_options(timeout=90_000)  # a busy 2-core machine: generous, it only matters when something is wrong
    with chromium_page(1280, 1000) as page:
        page.goto(page_url)
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(20)  # the example text's maps
        open_head_tools(page)

        # Tick head 1.2 (4 layers x 4 heads of the names fixture are offered), ablate: the strip shows the change.
        heads = page.locator("#ablate-heads")
        expect(heads.get_by_label("3.3")).to_be_visible()
        heads.get_by_label("1.2").check()
        page.get_by_role("button", name="Ablate", exact=True).click()
        strip = page.locator("#loss-strip")
        expect(strip).to_contain_text("loss after")
        cells = strip.locator("td[data-change]")
        changes = [float(c) for c in cells.evaluate_all("cells => cells.map(c => c.dataset.change)")]
        assert len(changes) == 4 and any(abs(c) > 1e-6 for c in changes)  # 'emma': 4 predicted tokens
        expect(page.locator("#ablation")).to_contain_text("Ablated (zero): 1.2")
        expect(page.locator("#ablated-generation")).to_contain_text("Same seed, heads ablated")

        # Click a token: its next-token probabilities.
        page.get_by_role("button", name="Next-token probabilities and logit lens").click()
        page.locator('#next-tokens td[data-position="2"]').click()
        expect(page.locator("#next-tokens")).to_contain_text("After token 2")
        expect(page.locator("#next-tokens")).to_contain_text("The token that follows, m, got probability")
        # The bars follow the temperature as it moves: at 2, the sampled column flattens the model's.
        sampled = page.locator('#next-tokens td[data-kind="sampled"]')
        before = sampled.evaluate_all("cells => cells.map(c => Number(c.dataset.probability))")
        temperature = page.locator("#next-sampling").get_by_label("Temperature (0 = greedy)").first
        temperature.fill("2")
        temperature.press("Enter")
        expect(page.locator("#next-tokens")).to_contain_text("sampled with temperature 2")
        after = sampled.evaluate_all("cells => cells.map(c => Number(c.dataset.probability))")
        assert after != before and after[0] < before[0]  # flatter: the most likely token loses probability

        page.get_by_role("button", name="Head roles").click()
        expect(page.locator("#head-roles")).to_contain_text("Induction probe")
        expect(page.locator("#head-roles")).to_contain_text("Chance (attention spread evenly)")
        # A click on a head's score opens that head's map, large.
        page.locator('#head-roles td[data-layer="2"][data-head="3"]').first.click()
        expect(page.locator("#attention-head figcaption").first).to_have_text("layer 2, head 3")
        page.get_by_role("button", name="Head importance map").click()
        expect(page.locator("#importance")).to_contain_text("Loss increase when each head alone is ablated")
        page.locator('#importance td[data-layer="1"][data-head="0"]').click()
        expect(page.locator("#attention-head figcaption").first).to_have_text("layer 1, head 0")


def test_compare_two_texts_of_different_lengths_draws_both_maps_and_the_endpoints_difference(page_url):
    from playwright.sync_api import expect

    with chromium_page() as page:
        page.goto(f"{page_url}?model=tiny-names&text=isabella&layer=1&head=2")
        expect(page.locator("#attention-head figcaption").first).to_have_text("layer 1, head 2")
        open_head_tools(page)
        second = page.locator("#compare-text textarea")
        second.fill("emma")
        second.press("Tab")  # the value committed before the click sends it (a busy machine lags)
        expect(second).to_have_value("emma")
        page.get_by_role("button", name="Compare", exact=True).click()
        compare = page.locator("#compare")
        expect(compare).to_contain_text("compared over the first 5")  # the second text's, not a default one
        expect(compare).to_contain_text("Layer 1, head 2")
        read = (  # each row's cells' titles: the exact values, "" for a future key
            "table => [...table.querySelectorAll('tr')].slice(1)"
            ".map(r => [...r.querySelectorAll('td')].map(c => c.title))"
        )
        drawn = {
            key: compare.locator(f'table[data-key="{key}"]').evaluate(read) for key in ("first", "second", "difference")
        }
    answer = call(gradio_client(page_url), "/compare", text="isabella", other_text="emma", model="tiny-names")
    assert (len(drawn["first"]), len(drawn["second"]), len(drawn["difference"])) == (9, 5, 5)  # with the start token
    difference = answer["difference"][1][2]
    on_page = [[float(t) for t in row[: q + 1]] for q, row in enumerate(drawn["difference"])]
    assert on_page == [row[: q + 1] for q, row in enumerate(difference)]  # the endpoint's numbers, each visible cell
    assert all(t == "" for q, row in enumerate(drawn["difference"]) for t in row[q + 1 :])  # future keys: blank
