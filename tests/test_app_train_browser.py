"""The Train tab in a real browser (Debian Chromium driven by Playwright): start a tiny run, watch the loss plot
redraw, cancel, reload the page and resume (the run is the browser's), then a short run to its end and the new model's
attention maps."""

import os
import re
import shutil
import time

import pytest

from helpers import chromium_page, needs_chromium

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def page_url(training_server):
    """The address of the training server (conftest.py), which test_app_train and test_crowd share."""
    return training_server[0]


# A run that cannot end before Cancel on any machine (the plots are redrawn every 3 s at most, and the test waits for
# two), and one that ends in seconds (an evaluation every 6 steps).
LONG, SHORT = 20_000, 60


def plot_source(page) -> str | None:
    image = page.locator("#train-plot img")
    return image.first.get_attribute("src") if image.count() else None


def start_run(page, steps: int, name: str) -> None:
    """The Train tab's form for a 1-layer, 2-head, 16-wide names model of `steps` steps, and Start."""
    for label, value in [("Layers", "1"), ("Heads", "2"), ("Width (n_embd)", "16"), ("Steps", str(steps))]:
        page.get_by_label(label, exact=True).fill(value)
    page.get_by_label("Model name (empty: one is picked)").fill(name)
    page.get_by_role("button", name="Start training").click()


def test_train_watch_the_plot_cancel_resume_and_open_the_maps(page_url, tmp_path):
    """Start a run, watch its plot redraw, cancel it, reload the page and resume it (the run is the browser's), cancel
    again; then a short run to its end: its samples, its roles plot, its maps. (Resuming to the end, equal to the
    uninterrupted run, is test_app_train's.)"""
    from playwright.sync_api import expect

    expect.set_options(timeout=180_000)  # a training run on a busy 2-core machine
    with chromium_page(1280, 1000) as page:
        page.goto(page_url)
        page.get_by_role("tab", name="Train").click()
        start_run(page, LONG, "browser-run")

        # While it runs (read in one loop, so that a loaded machine's slowness cannot let Cancel land first): the plot
        # redrawn (two different images) and the bar's time-left estimate.
        bar = page.locator("#train-progress .train-progress")
        drawn, left, deadline = set(), False, time.monotonic() + 240
        while len(drawn) < 2 or not left:
            assert time.monotonic() < deadline, f"plot drawn {len(drawn)} time(s), time left: {left}"
            assert bar.count() == 0 or bar.get_attribute("data-state") in ("queued", "running")
            if source := plot_source(page):
                drawn.add(source)
            left = left or (bar.count() == 1 and "left" in bar.inner_text())
            time.sleep(0.3)
        notes = page.locator("#train-notes")
        page.get_by_role("button", name="Cancel").click()
        shot = tmp_path / "train.png"
        page.locator("#train-tab").screenshot(path=str(shot))
        if os.environ.get("MINIGPT_TRAIN_SCREENSHOT"):  # the README's picture of a run
            shutil.copy(shot, os.environ["MINIGPT_TRAIN_SCREENSHOT"])
        expect(bar).to_have_attribute("data-state", "stopped")
        stopped_at = int(bar.get_attribute("data-step"))
        assert 0 < stopped_at < LONG
        expect(bar).to_contain_text("checkpoint is kept")
        expect(notes).not_to_contain_text("Cancelling")  # the bar says how it ended: Cancel's note has gone

        # A reloaded page is the same visitor (the token the run is owned by stays in the browser's storage): it
        # shows the visitor's stopped run again, its name in the field, so that Resume needs nothing typed. Resumed,
        # it goes on from its checkpoint until cancelled again.
        page.reload()
        expect(page.get_by_role("tab", name="Train")).to_have_count(1)
        page.get_by_role("tab", name="Train").click()
        expect(page.get_by_label("Model name (empty: one is picked)")).to_have_value("browser-run")
        expect(bar).to_have_attribute("data-state", "stopped")
        page.get_by_role("button", name="Resume").click()
        expect(bar).to_have_attribute("data-state", "running")
        expect(notes).not_to_contain_text("Cancelling")
        page.get_by_role("button", name="Cancel").click()
        expect(bar).to_have_attribute("data-state", "stopped")
        assert stopped_at <= int(bar.get_attribute("data-step")) < LONG

        # A short run to its end: the samples of its last evaluation, the heads' roles at each evaluation, drawn.
        start_run(page, SHORT, "browser-short")
        expect(bar).to_have_attribute("data-state", "finished")
        expect(bar).to_have_attribute("data-step", str(SHORT))
        assert page.locator("#train-samples textarea").input_value() != ""
        expect(page.locator("#train-roles img")).to_be_visible()
        expect(notes).not_to_contain_text("Cancelling")

        # The new model is in the maps' picker: its 1 layer x (2 heads + average) maps.
        picker = page.locator("input[aria-label='Model']:visible")
        picker.click()
        page.get_by_role("option", name="browser-short").click()
        page.get_by_role("button", name="Show attention").click()
        expect(page.locator("#attention-grid svg[data-layer]")).to_have_count(3)


def test_the_tab_shows_only_the_fields_that_apply_and_the_runs_size_before_start(page_url):
    from playwright.sync_api import expect

    from minigpt.demo.training import run_requests

    default = run_requests.defaults("names")
    sizes = {key: default[key] for key in ("n_layer", "n_head", "n_embd", "block_size", "max_steps", "seed")}
    spec, _ = run_requests.check_request(
        "names", "", None, **sizes, learning_rate=default["learning_rate"], vocab_size=default["vocab_size"], name="",
        taken=(),
    )  # fmt: skip
    with chromium_page() as page:
        page.goto(page_url)
        page.get_by_role("tab", name="Train").click()
        estimate = page.locator("#train-estimate")
        expect(estimate).to_contain_text(f"{spec.parameters:,} parameters")  # before Start: its size and time
        expect(estimate).to_contain_text("about")
        own_text = page.get_by_label("Your names (one a line) or text")
        vocabulary = page.get_by_label("BPE vocabulary size")
        expect(own_text).to_be_hidden()  # built-in names: no text box, no BPE vocabulary
        expect(vocabulary).to_be_hidden()
        page.get_by_label("Your names or text").check()
        expect(own_text).to_be_visible()
        page.get_by_label("Built-in Shakespeare").check()
        expect(own_text).to_be_hidden()
        expect(vocabulary).to_be_visible()  # Shakespeare's default tokenizer is bpe
        tokenizers = page.locator("#train-tab").get_by_role("radio", name=re.compile(r"^(names|char|bpe)$"))
        expect(tokenizers).to_have_count(2)  # char and bpe: Shakespeare is not a list of names
        page.get_by_label("Layers", exact=True).fill("99")
        page.get_by_label("Layers", exact=True).press("Enter")
        expect(estimate).to_contain_text("n_layer must be between")  # what to change, before Start
