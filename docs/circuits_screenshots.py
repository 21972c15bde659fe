"""The pictures of docs/circuits.md: the first screen's circuit walk, the patching views and the composition graph at a
desktop's width (1440), and head 1.1's map with 0.2 ablated at a phone's (390), all on the shipped specimen. Needs
Debian's chromium and playwright (never `playwright install`). Run from the repository's root:

    python docs/circuits_screenshots.py     # writes docs/circuit_walk.png, circuits_desktop.png, circuits_phone.png

It starts the demo on a free port and prints each picture's size in CSS pixels."""

import subprocess
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lesson_screenshots import ROOT, free_port, small_png, wait_until_up  # noqa: E402

LINK = "?model=specimen&text=Then%20Zorbak%20spoke.%20Then%20Zor&layer=1&head=1"


def shoot(page, selector: str, name: str) -> None:
    """One element's picture, made small enough for the repository."""
    path = ROOT / "docs" / name
    element = page.locator(selector)
    element.scroll_into_view_if_needed()
    page.wait_for_timeout(500)  # the view's scripts draw after it is attached
    element.screenshot(path=path)
    small_png(path)
    box = element.bounding_box()
    print(f"{name}: {box['width']:.0f} x {box['height']:.0f}")


def click_and_wait(page, button: str, drawn: str) -> None:
    """Click a button and wait until its view has drawn `drawn` (a selector inside it)."""
    page.locator(button).click()
    page.locator(drawn).first.wait_for()


def desktop(page, url: str) -> None:
    page.goto(url)
    click_and_wait(page, "#walk-button", "#walk-first-screen ol.walk")
    shoot(page, "#walk-first-screen", "circuit_walk.png")
    page.locator("#circuits > button").first.click()
    click_and_wait(page, "#circuit-patch", "#circuit-patching table")
    click_and_wait(page, "#circuit-composition-button", "#circuit-composition svg")
    shoot(page, "#circuits", "circuits_desktop.png")


def phone(page, url: str) -> None:
    page.goto(url)
    page.get_by_text("Showing “Then Zorbak").first.wait_for()  # the link's text is shown before a view asks for it
    page.locator("#circuits > button").first.click()
    click_and_wait(page, "#circuit-head-button", "#circuit-head .ablation")
    shoot(page, "#circuit-head .ablation", "circuits_phone.png")


def main() -> None:
    port = free_port()
    server = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=ROOT)
    try:
        wait_until_up(port, server)
        url = f"http://127.0.0.1:{port}/{LINK}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            for shot, (width, height) in ((desktop, (1440, 900)), (phone, (390, 844))):
                page = browser.new_page(viewport={"width": width, "height": height}, is_mobile=shot is phone)
                page.set_default_timeout(120_000)
                shot(page, url)
            browser.close()
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
