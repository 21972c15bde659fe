"""The pictures of docs/lesson.md: every lesson step on the names model and "emma", at a desktop's width (1440) and a
phone's (390), as the page first shows it (colour squares, no digits); step 13 on the specimen and a text written
twice. Needs Debian's chromium and playwright (never `playwright install`). Run from the repository's root:

    python docs/lesson_screenshots.py            # writes docs/lesson/step-N-desktop.png and step-N-phone.png
    python docs/lesson_screenshots.py 13         # step 13 alone (the specimen on a text written twice)

It starts the demo on a free port, opens each step by its link, and prints each picture's height in CSS pixels (the
lesson's length on a phone is one of its checks)."""

import socket
import subprocess
import sys
import time
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "lesson"
WIDTHS = {"desktop": (1440, 900), "phone": (390, 844)}
STEPS = 13
LINK = "?model=names&text=emma&layer=2&head=1&query=3&step={step}"
# Step 13 finds how heads work together: on a model that has a circuit to find, on a text written twice
LINKS = {13: "?model=specimen&text=Then%20Zorbak%20spoke.%20Then%20Zor&layer=1&head=1&step=13"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serving(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def small_png(path: Path) -> None:
    """A palette of 128 colours: the lesson's flat colours and text survive, the file is a third of the size."""
    Image.open(path).convert("RGB").quantize(128, dither=Image.Dither.NONE).save(path, optimize=True)


def wait_until_up(port: int, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 180
    while not serving(port):
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the demo did not start")
        time.sleep(0.5)


def main(steps: list[int]) -> None:
    OUT.mkdir(exist_ok=True)
    port = free_port()
    server = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=ROOT)
    try:
        wait_until_up(port, server)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            for kind, (width, height) in WIDTHS.items():
                page = browser.new_page(viewport={"width": width, "height": height}, is_mobile=kind == "phone")
                page.set_default_timeout(120_000)
                for step in steps:
                    page.goto(f"http://127.0.0.1:{port}/" + LINKS.get(step, LINK.format(step=step)))
                    lesson = page.locator(f'#step-view .lesson[data-lesson-step="{step}"]')
                    lesson.wait_for()
                    page.wait_for_timeout(500)  # the view's scripts draw after it is attached
                    path = OUT / f"step-{step}-{kind}.png"
                    lesson.screenshot(path=str(path))
                    print(f"step {step:2d} {kind:7s} {lesson.bounding_box()['height']:6.0f} px  {path.name}")
                    small_png(path)
                page.close()
            browser.close()
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main([int(step) for step in sys.argv[1:]] or list(range(1, STEPS + 1)))
