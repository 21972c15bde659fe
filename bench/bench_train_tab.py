"""The Train tab on a running app: does the demo keep serving while a model trains, and how quickly does a run start
and cancel? Through HTTP on 127.0.0.1, with the idle figures measured in the same run as the reference.

    python bench/bench_train_tab.py                 # the names preset's model (203K parameters) on the built-in names
    python bench/bench_train_tab.py --runs 30

Rows: 10 names + every attention map (as bench_app.py requests them), idle and while the run trains; the run's pace
(steps/s) while nothing else is asked and while those requests come; the time from Start to the first step (the
server's first run, which starts the fork server; a later one, forked from it) and from Cancel to the stopped state
(the checkpoint written).
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the repo's modules, and the tests' helpers.py

from bench_app import call, median_ms  # noqa: E402

from helpers import running_app  # noqa: E402


def events(folder: Path) -> list[dict]:
    lines = (folder / "progress.jsonl").read_text().splitlines() if (folder / "progress.jsonl").exists() else []
    return [json.loads(line) for line in lines if line.endswith("}")]


def wait_for(condition, timeout: float = 600.0):
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.1)
    return found


def latest_step(folder: Path) -> dict:
    return wait_for(lambda: [e for e in events(folder) if e["event"] == "step"])[-1]


def pace(folder: Path, work) -> float:
    """Steps per second of the run while `work()` runs, from the run's own step events."""
    first = latest_step(folder)
    work()
    last = latest_step(folder)
    return (last["step"] - first["step"]) / (last["time"] - first["time"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    import httpx
    from gradio_client import Client

    with tempfile.TemporaryDirectory() as runs, httpx.Client(timeout=120) as http:
        os.environ["MINIGPT_RUNS_DIR"] = runs
        with running_app() as (url, _):
            names_and_maps = lambda i: (
                call(http, url, "names", "", 10, 1.0, 0, 1.0, i, "names"),
                call(http, url, "attention", "emma", "names"),
            )
            names_and_maps(0)  # warm-up
            idle_ms = median_ms(names_and_maps, args.runs)

            client = Client(url, verbose=False)

            def first_step(name: str) -> float:
                """Seconds from Start to the run's first step."""
                asked = time.time()
                client.submit(data="names", max_steps=6000, seed=0, name=name, api_name="/train")
                steps = wait_for(lambda: [e for e in events(Path(runs) / name) if e["event"] == "step"])
                return steps[0]["time"] - asked

            start = first_step("bench")  # the server's first run: the fork server starts and imports train.py's path
            folder = Path(runs) / "bench"
            alone = pace(folder, lambda: time.sleep(10))
            busy = []
            serving = pace(folder, lambda: busy.append(median_ms(names_and_maps, args.runs)))
            busy_ms = busy[0]
            cancelled = time.time()
            client.predict(name="bench", api_name="/cancel")
            stopped = wait_for(lambda: [e for e in events(folder) if e["event"] == "stopped"])[0]
            again = first_step("bench-again")  # a later run: forked from the warm fork server
            client.predict(name="bench-again", api_name="/cancel")

    rows = [
        ("10 names + every attention map", f"{idle_ms:.0f} ms", f"{busy_ms:.0f} ms", f"{busy_ms / idle_ms:.2f}x"),
        (
            "training pace (names preset, steps/s)",
            f"{alone:.1f} (no requests)",
            f"{serving:.1f} (while serving)",
            f"{serving / alone:.2f}x",
        ),
        ("Start -> first step, the server's first run (fork server, data, model)", "", f"{start:.1f} s", ""),
        ("Start -> first step, a later run (forked, data, model)", "", f"{again:.1f} s", ""),
        ("Cancel -> stopped (checkpoint written)", "", f"{stopped['time'] - cancelled:.2f} s", ""),
    ]
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print("| measure | idle | while training | ratio |\n| --- | ---: | ---: | ---: |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"(requests: median of {args.runs} each)")


if __name__ == "__main__":
    main()
