"""The server's resident memory under visitors who each ask once (issue 30), against the reference measured in the same
run:

1. distinct long texts on a wide model (12 layers x 16 heads, context 512: the widest a visitor could ask for by
   heads), each a recorded pass of ~200 MB, with a 256 MiB pass cache: the allocator as app.py sets it (freed tensors
   given back) against glibc's own (MINIGPT_MALLOC=glibc);
2. fresh sessions (each REST call is one): --sessions 500 (the default) against Gradio's 10,000, after more calls
   than 500.

    python bench/bench_server_memory.py [--texts 20] [--calls 1000]    # --calls 0: the texts alone
"""

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from helpers import LOWERCASE, char_tokenizer, running_app, save_fixture_model  # noqa: E402
from timing import machine_summary, print_table  # noqa: E402

PASS_CACHE = 256 << 20


def resident_mib(pid: int, key: str = "VmRSS") -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith(key + ":"))) / 1024


def call(http: httpx.Client, url: str, data: list) -> None:
    asked = http.post(f"{url}gradio_api/call/attention_values", json={"data": data})
    answer = http.get(f"{url}gradio_api/call/attention_values/{asked.json()['event_id']}").text
    assert "event: complete" in answer, answer[:500]


def distinct_texts(folder: Path, texts: int, allocator: str) -> list[object]:
    env = {"MINIGPT_PASS_CACHE_BYTES": str(PASS_CACHE), "MINIGPT_MALLOC": allocator}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        with running_app("--model", str(folder)) as (url, process), httpx.Client(timeout=600) as http:
            start, began = resident_mib(process.pid), time.perf_counter()
            for i in range(texts):
                text = "".join(random.Random(i).choice(LOWERCASE) for _ in range(500))
                call(http, url, [text, "wide", 0, "0", 1, None])
            seconds = (time.perf_counter() - began) / texts
            grown, peak = resident_mib(process.pid) - start, resident_mib(process.pid, "VmHWM") - start
    finally:
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
    label = "freed tensors given back (app.py)" if allocator == "app" else "glibc's own (reference)"
    return [label, texts, f"{grown:.0f}", f"{peak:.0f}", f"{grown / (PASS_CACHE / 2**20):.2f}", f"{seconds:.2f}"]


def fresh_sessions(calls: int, kept: int) -> list[object]:
    with running_app("--sessions", str(kept)) as (url, process), httpx.Client(timeout=60) as http:
        call(http, url, ["emma", None, 0, "0", 1, None])
        start = resident_mib(process.pid)
        for _ in range(calls):
            call(http, url, ["emma", None, 0, "0", 1, None])
        grown = resident_mib(process.pid) - start
    label = f"--sessions {kept}" + (" (default)" if kept == 500 else " (Gradio's default, reference)")
    return [label, calls, f"{grown:.0f}", f"{grown / calls * 1024:.0f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=20)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    print(machine_summary())
    with tempfile.TemporaryDirectory() as root:
        folder = save_fixture_model(
            Path(root) / "wide", char_tokenizer(LOWERCASE, "."), seed=0, name="names",
            n_layer=12, n_head=16, n_embd=32, block_size=512,
        )  # fmt: skip
        rows = [distinct_texts(folder, args.texts, allocator) for allocator in ("app", "glibc")]
    print(f"\nDistinct 500-token texts on a 12 x 16-head model, pass cache {PASS_CACHE >> 20} MiB (RSS in MiB):")
    print_table(["allocator", "texts", "RSS growth", "peak growth", "growth / cache budget", "s a text"], rows)
    if not args.calls:
        return
    rows = [fresh_sessions(args.calls, kept) for kept in (500, 10_000)]
    print("\nFresh sessions (one REST call each), RSS growth in MiB:")
    print_table(["sessions kept", "calls", "RSS growth", "KiB a call"], rows)


if __name__ == "__main__":
    main()
