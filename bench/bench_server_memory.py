"""The server's resident memory over rounds of distinct calls (issues 30 and 57): it levels off once each cache holds
its bound, under the bound docs/hosting.md states. Each round asks the shipped models' server `--calls` calls, each
on a text (and options) no call asked before; after each round, the server's resident memory (its process and its
children), and what each cache holds, as the server reports it (tests/memory_census.py).

1. heavy calls (find_circuit, circuit_walk, patching, exercises, head_roles, importance, ...) with small bounds, so
   that every cache fills within a few rounds: --sessions 100, a 16 MiB pass cache; the allocator as app.py sets it
   (freed memory given back after calls) against the mmap threshold alone (MINIGPT_MALLOC=untrimmed: the server
   before malloc_trim);
2. the default bounds filled: distinct texts of 128 tokens on the Shakespeare model, a recorded pass of 2 MB each
   (attention_values), until the 1 GiB pass cache and the 500 sessions are full;
3. (--texts N, issue 30) distinct 500-token texts on a wide model (12 layers x 16 heads, context 512), passes of
   ~200 MB with a 256 MiB pass cache: app.py's allocator against glibc's own (MINIGPT_MALLOC=glibc);
4. (--session-calls N, issue 30) fresh sessions: --sessions 500 (the default) against Gradio's 10,000.

    python bench/bench_server_memory.py [--rounds 6] [--calls 40] [--filled-rounds 8] [--filled-calls 100]
    python bench/bench_server_memory.py --rounds 0 --filled-rounds 0 --texts 20 --session-calls 1000  # issue 30
"""

import argparse
import os
import random
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from helpers import LOWERCASE, char_tokenizer, running_app, save_fixture_model, server_memory  # noqa: E402
from timing import machine_summary, print_table  # noqa: E402

MiB = 1 << 20
SETTLE_S = 2.0  # after a round, the server idle for twice allocator.TRIM_EVERY_S: its memory as a quiet moment finds it
WORDS = (
    "romeo juliet tybalt mercutio verona night love sword friar nurse capulet montague balcony poison house feud "
    "banished county paris mantua letter tomb morning lark nightingale heaven star moon kinsman prince"
).split()


def resident_mib(pid: int, key: str = "VmRSS") -> float:
    """`key` of /proc/PID/status (VmRSS: resident now; VmHWM: its peak) of the process and of its children."""
    status = Path(f"/proc/{pid}/status").read_text()
    own = int(next(line.split()[1] for line in status.splitlines() if line.startswith(key + ":"))) / 1024
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return own + sum(resident_mib(int(child), key) for child in children.read_text().split())


def peak_reset(pid: int) -> None:
    """The peak (VmHWM) of the process and of its children set back to their resident memory now (Linux's
    clear_refs 5): each round's peak is its own, not the census's walk after the last round."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        peak_reset(int(child))


def call(http: httpx.Client, url: str, name: str, data: list) -> bool:
    """One REST call (a fresh session, as every gradio_client call is); whether it answered (a visitor's mistake,
    such as a text no single change alters, is an answer too: it is counted apart)."""
    asked = http.post(f"{url}gradio_api/call/{name}", json={"data": data})
    answer = http.get(f"{url}gradio_api/call/{name}/{asked.json()['event_id']}").text
    assert "event: complete" in answer or "event: error" in answer, answer[:500]
    return "event: complete" in answer


def repeated_text(i: int) -> str:
    """A distinct text whose end repeats a phrase, cut short (the circuit views' kind): 'love romeo and tybalt,
    romeo and ty'."""
    pick = random.Random(i)
    first, second = pick.sample(WORDS, 2)
    return f"{pick.choice(WORDS)} {pick.choice(WORDS)} {first} and {second}, {first} and {second[: pick.randint(1, 3)]}"


# The heavy endpoints, each with its values on the i-th text (options varied too): the audit's mix.
HEAVY = {
    "find_circuit": lambda t, i: [t, "specimen", "text", "", 2 + i % 7, "corrupted", "eap-ig", 0.8 + i % 3 / 20],
    "circuit_walk": lambda t, i: [t, "specimen"],
    "patching": lambda t, i: [t, "", "specimen", "", "1.1" if i % 2 else "", "k"],
    "exercises": lambda t, i: [t, "specimen"],
    "head_roles": lambda t, i: [t, "specimen"],
    "importance": lambda t, i: [t, "shakespeare", ("zero", "mean")[i % 2]],
    "logit_attribution": lambda t, i: [t, "specimen", -1, "", "", 1 + i % 4],
    "head_circuit": lambda t, i: [t, "specimen", 1, i % 4],
    "compare": lambda t, i: [t, "", "shakespeare"],
    "ablate": lambda t, i: [t, "shakespeare", f"1.{i % 4}"],
    "step": lambda t, i: [t, "shakespeare", i % 4, i % 4],
    "logit_lens": lambda t, i: [t, "shakespeare"],
    "head_over_training": lambda t, i: [t, "specimen", 1, str(i % 4)],
}


def heavy_call(http, url, i: int) -> bool:
    name = list(HEAVY)[i % len(HEAVY)]
    return call(http, url, name, HEAVY[name](repeated_text(i), i))


def long_text_call(http, url, i: int) -> bool:
    """attention_values on a distinct text of 128 Shakespeare tokens or more (its last 128 kept): one 2 MB pass."""
    pick = random.Random(i)
    return call(http, url, "attention_values", [" ".join(pick.choices(WORDS, k=150)), "shakespeare", 0, "0", 5])


@contextmanager
def environment(**values):
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


def rounds(asked, rounds: int, calls: int, flags: list[str], env: dict) -> tuple[list[list], dict]:
    """`rounds` rounds of `calls` calls (`asked(http, url, i)`, each i once) on a fresh server, after one warm-up
    call of each heavy kind (what is loaded or compiled once is not growth): a row per round, and the last census."""
    rows = []
    with environment(**env), running_app(*flags) as (url, server), httpx.Client(timeout=900) as http:
        for i in range(-len(HEAVY), 0):
            heavy_call(http, url, i)
        time.sleep(SETTLE_S)
        start = before = resident_mib(server.pid)
        peak_reset(server.pid)
        seconds = []  # each round's
        for number in range(1, rounds + 1):
            began = time.perf_counter()
            refused = calls - sum(asked(http, url, (number - 1) * calls + i) for i in range(calls))
            seconds.append(time.perf_counter() - began)
            time.sleep(SETTLE_S)
            now, peak = resident_mib(server.pid), resident_mib(server.pid, "VmHWM")
            memory = [f"{now:.0f}", f"{now - before:+.0f}", f"{now - start:+.0f}", f"{peak:.0f}"]
            held = server_memory(server)
            peak_reset(server.pid)
            rows.append([number, refused, *memory, *held_row(held), f"{seconds[-1] / seconds[0]:.2f}"])
            before = now
    return rows, held


def settled(rows: list[list]) -> str:
    """The later half of the rounds in one line: their RSS's spread around its mean, and its trend (least squares)."""
    later = [float(row[2]) for row in rows[len(rows) // 2 :]]
    mean, middle = sum(later) / len(later), (len(later) - 1) / 2
    squares = sum((i - middle) ** 2 for i in range(len(later))) or 1
    slope = sum((i - middle) * (rss - mean) for i, rss in enumerate(later)) / squares
    first, spread = len(rows) - len(later) + 1, (max(later) - min(later)) / mean
    return (
        f"rounds {first}-{len(rows)}: RSS {min(later):.0f}-{max(later):.0f} MiB (spread {spread:.1%} of their mean), "
        f"trend {slope:+.1f} MiB a round"
    )


def report(title: str, rows: list[list], held: dict) -> None:
    """The rounds' table, the later rounds in a line, and every cache the census found as the last round left it."""
    print(f"\n{title} (MiB):")
    print_table(HEADER, rows)
    print(settled(rows))
    rows = [
        [name, c["caches"], c["entries"], "" if c["bytes"] is None else f"{c['bytes'] / MiB:.2f}"]
        for name, c in held["caches"].items()
    ]
    rows += [[f"Gradio: {name}", 1, c["entries"], f"{c['bytes'] / MiB:.2f}"] for name, c in held["gradio"].items()]
    print("\nEach cache after the last round:")
    print_table(["cache", "instances", "entries", "MiB"], sorted(rows))


def held_row(held: dict) -> list:
    """What the server's caches hold (entries / MiB), and Gradio's event records (MiB)."""
    caches, gradio = held["caches"], held["gradio"]
    mib = lambda entry: f"{entry['entries']} / {entry['bytes'] / MiB:.1f}"  # noqa: E731
    records = sum(gradio[k]["bytes"] for k in ("event_sessions", "message_sessions", "analytics"))
    return [
        mib(caches["pass_cache.ForwardPassCache"]), mib(gradio["sessions"]), mib(caches["exercises.Kept"]),
        mib(caches["find_circuit.FoundCache"]), f"{records / MiB:.1f}",
    ]  # fmt: skip


HEADER = [
    "round", "refused", "RSS", "vs last round", "vs start", "round's peak", "passes (n / MiB)", "sessions (n / MiB)",
    "exercises (n / MiB)", "circuits found (n / MiB)", "Gradio's event records", "round time / first",
]  # fmt: skip


def distinct_texts(folder: Path, texts: int, allocator: str, cache: int = 256 * MiB) -> list[object]:
    env = {"MINIGPT_PASS_CACHE_BYTES": str(cache), "MINIGPT_MALLOC": allocator}
    with environment(**env), running_app("--model", str(folder)) as (url, process), httpx.Client(timeout=600) as http:
        start, began = resident_mib(process.pid), time.perf_counter()
        for i in range(texts):
            text = "".join(random.Random(i).choice(LOWERCASE) for _ in range(500))
            call(http, url, "attention_values", [text, "wide", 0, "0", 1, None])
        seconds = (time.perf_counter() - began) / texts
        grown, peak = resident_mib(process.pid) - start, resident_mib(process.pid, "VmHWM") - start
    label = "freed tensors given back (app.py)" if allocator == "app" else "glibc's own (reference)"
    return [label, texts, f"{grown:.0f}", f"{peak:.0f}", f"{grown / (cache / MiB):.2f}", f"{seconds:.2f}"]


def fresh_sessions(calls: int, kept: int) -> list[object]:
    with running_app("--sessions", str(kept)) as (url, process), httpx.Client(timeout=60) as http:
        call(http, url, "attention_values", ["emma", None, 0, "0", 1, None])
        start = resident_mib(process.pid)
        for _ in range(calls):
            call(http, url, "attention_values", ["emma", None, 0, "0", 1, None])
        grown = resident_mib(process.pid) - start
    label = f"--sessions {kept}" + (" (default)" if kept == 500 else " (Gradio's default, reference)")
    return [label, calls, f"{grown:.0f}", f"{grown / calls * 1024:.0f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="rounds of heavy calls (0: none)")
    parser.add_argument("--calls", type=int, default=40, help="heavy calls a round")
    parser.add_argument("--filled-rounds", type=int, default=8, help="rounds at the default bounds (0: none)")
    parser.add_argument("--filled-calls", type=int, default=100, help="calls a round at the default bounds")
    parser.add_argument("--texts", type=int, default=0, help="issue 30's distinct texts on a wide model")
    parser.add_argument("--session-calls", type=int, default=0, help="issue 30's fresh sessions")
    args = parser.parse_args()
    print(machine_summary())
    small = (["--sessions", "100"], {"MINIGPT_PASS_CACHE_BYTES": str(16 * MiB)})
    for allocator in ("app", "untrimmed") if args.rounds else ():
        title = f"Heavy calls, --sessions 100, pass cache 16 MiB, MINIGPT_MALLOC={allocator}"
        report(title, *rounds(heavy_call, args.rounds, args.calls, small[0], {**small[1], "MINIGPT_MALLOC": allocator}))
    if args.filled_rounds:
        title = "Distinct 128-token texts, the default bounds (--sessions 500, pass cache 1 GiB)"
        report(title, *rounds(long_text_call, args.filled_rounds, args.filled_calls, [], {"MINIGPT_MALLOC": "app"}))
    if args.texts:
        with tempfile.TemporaryDirectory() as root:
            folder = save_fixture_model(
                Path(root) / "wide", char_tokenizer(LOWERCASE, "."), seed=0, name="names",
                n_layer=12, n_head=16, n_embd=32, block_size=512,
            )  # fmt: skip
            rows = [distinct_texts(folder, args.texts, allocator) for allocator in ("app", "glibc")]
        print("\nDistinct 500-token texts on a 12 x 16-head model, pass cache 256 MiB (RSS in MiB):")
        print_table(["allocator", "texts", "RSS growth", "peak growth", "growth / cache budget", "s a text"], rows)
    if args.session_calls:
        rows = [fresh_sessions(args.session_calls, kept) for kept in (500, 10_000)]
        print("\nFresh sessions (one REST call each), RSS growth in MiB:")
        print_table(["sessions kept", "calls", "RSS growth", "KiB a call"], rows)


if __name__ == "__main__":
    main()
