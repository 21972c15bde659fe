"""Many visitors at once: seeded 64-token texts requested by one client at a time, then by 32 clients at once, through
the running demo (HTTP on 127.0.0.1, as `curl` or a page makes them), against the code before continuous batching
(`--reference`, checked out from git and served the same way, in the same run).

    python bench/bench_serving.py                        # the shipped models; 32 clients x 2 requests each
    python bench/bench_serving.py --clients 32 --rounds 2 --max-new-tokens 64 --reference aa178fd
    python bench/bench_serving.py --min-decode-rows 1    # a lone request decoded at batch 1 (app.py's option)
    python bench/bench_serving.py --stream-every 0 --stream-rate 0   # every token sent (no pacing), as before

Goals (issue 13): 32 clients get >= 4x the requests per second of one client alone; every seeded text is the same
alone and in the crowd; the alone latency is no worse than the reference's. The alone requests alternate between the
two servers (A B A B ...), and so do the crowds (3 each, the median reported), so that the load of this shared
machine hits both alike.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the repo's modules, and the tests' helpers.py

from helpers import running_app  # noqa: E402
from timing import print_table  # noqa: E402

BEFORE = "aa178fd"  # the last commit before continuous batching: one loop per request, batch 1


def checkout(commit: str, folder: Path) -> Path:
    """The repository's files at `commit` (without the models, which are passed by path) in `folder`."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "--", ".", ":!models"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


@dataclass
class Reply:
    seconds: float  # from the request to its last streamed token
    first_token: float  # from the request to the update with its first token
    updates: int  # streamed updates (the first one holds the prompt alone)
    text: str


def text_request(http, url: str, model: str, prompt: str, max_new: int, seed: int) -> Reply:
    """One seeded /text request on Gradio's REST route, as `curl` makes it, its event stream read as it comes.
    `http`, an httpx.Client, is the client's connection, kept from one request to the next as a browser keeps it
    (making an httpx.Client takes some 28 ms of CPU, which the server on the same two cores would pay for)."""
    start = time.perf_counter()
    event = http.post(f"{url}gradio_api/call/text", json={"data": [prompt, max_new, 1.0, 0, 1.0, seed, model]})
    updates, first_token, data = 0, None, None
    with http.stream("GET", f"{url}gradio_api/call/text/{event.json()['event_id']}") as stream:
        for line in stream.iter_lines():
            if line == "event: generating":
                updates += 1
                if updates == 2:  # the first update is the prompt as the model sees it
                    first_token = time.perf_counter() - start
            elif line.startswith("event: error"):
                raise RuntimeError(f"/text failed for seed {seed}")
            elif line.startswith("data: "):
                data = line[len("data: ") :]
    return Reply(time.perf_counter() - start, first_token, updates, json.loads(data)[0])


def crowd(url: str, model: str, prompt: str, max_new: int, seeds: list[int], clients: int):
    """`clients` threads, started together, each sending its share of `seeds` one after the other.
    Returns (seconds from the first start to the last end, {seed: Reply})."""
    results, barrier = {}, threading.Barrier(clients)

    def client(mine: list[int]):
        with httpx.Client(timeout=600) as http:
            barrier.wait()
            for seed in mine:
                results[seed] = text_request(http, url, model, prompt, max_new, seed)

    threads = [threading.Thread(target=client, args=(seeds[i::clients],)) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, results


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2, help="requests per client")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--prompt", default="ROMEO:\n")
    parser.add_argument("--names-model", default=str(REPO / "minigpt" / "models" / "names"))
    parser.add_argument("--text-model", default=str(REPO / "minigpt" / "models" / "shakespeare"))
    parser.add_argument("--reference", default=BEFORE, help="git commit of the code to compare with")
    parser.add_argument(
        "--min-decode-rows",
        default="4",
        choices=["1", "4"],
        help="the new server's smallest decoding batch (app.py --min-decode-rows)",
    )
    parser.add_argument(
        "--crowd-runs",
        type=int,
        default=3,
        help="crowds run per server, alternating; the figures are those of the median run",
    )
    parser.add_argument("--stream-every", help="the new server's app.py --stream-every (default: app.py's)")
    parser.add_argument("--stream-rate", help="the new server's app.py --stream-rate (default: app.py's)")
    args = parser.parse_args()
    seeds = list(range(args.clients * args.rounds))
    model = Path(args.text_model).name
    models = [str(Path(args.names_model).resolve()), str(Path(args.text_model).resolve())]
    serve = ("--names-model", models[0], "--text-model", models[1])
    pacing = []  # app.py's own defaults unless given
    if args.stream_every is not None:
        pacing += ["--stream-every", args.stream_every]
    if args.stream_rate is not None:
        pacing += ["--stream-rate", args.stream_rate]
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")

    with (
        tempfile.TemporaryDirectory() as tmp,
        running_app(*serve, "--min-decode-rows", args.min_decode_rows, *pacing) as (new, _),
    ):
        with running_app(*serve, "--concurrency", "4", cwd=checkout(args.reference, Path(tmp))) as (old, _):
            with httpx.Client(timeout=600) as http:
                request = lambda url, seed: text_request(http, url, model, args.prompt, args.max_new_tokens, seed)
                request(new, 0), request(old, 0)  # warm up
                alone = {"new": {}, "old": {}}
                for seed in seeds:  # one client, one request at a time, alternating between the two servers
                    alone["old"][seed] = request(old, seed)
                    alone["new"][seed] = request(new, seed)
            runs = {"new": [], "old": []}  # (seconds, {seed: Reply}) of each crowd run
            for _ in range(args.crowd_runs):
                for k, url in (("new", new), ("old", old)):
                    runs[k].append(crowd(url, model, args.prompt, args.max_new_tokens, seeds, args.clients))
    print(f"load average at end: {os.getloadavg()[0]:.1f}")

    n = len(seeds)
    p50 = lambda replies, field="seconds": statistics.median(getattr(replies[s], field) * 1000 for s in seeds)
    p95 = lambda replies: percentile([replies[s].seconds * 1000 for s in seeds], 95)
    updates = lambda replies: statistics.median(replies[s].updates for s in seeds)
    alone_rate = {k: n / sum(alone[k][s].seconds for s in seeds) for k in alone}  # one request after the other
    median_run = {k: sorted(runs[k], key=lambda run: run[0])[len(runs[k]) // 2] for k in runs}  # by duration
    crowd_rate = {k: n / median_run[k][0] for k in runs}
    crowds = {k: median_run[k][1] for k in runs}
    same = {k: sum(all(run[s].text == alone[k][s].text for _, run in runs[k]) for s in seeds) for k in runs}
    both, c = lambda f: (f("old"), f("new")), args.clients
    measures = [
        ("one client alone: latency p50 (ms)", *both(lambda k: p50(alone[k]))),
        ("one client alone: first token p50 (ms)", *both(lambda k: p50(alone[k], "first_token"))),
        ("one client alone: updates streamed, p50", *both(lambda k: updates(alone[k]))),
        ("one client alone: requests / s", *both(alone_rate.get)),
        (f"{c} clients at once: latency p50 (ms)", *both(lambda k: p50(crowds[k]))),
        (f"{c} clients at once: latency p95 (ms)", *both(lambda k: p95(crowds[k]))),
        (f"{c} clients at once: first token p50 (ms)", *both(lambda k: p50(crowds[k], "first_token"))),
        (f"{c} clients at once: updates streamed, p50", *both(lambda k: updates(crowds[k]))),
        (f"{c} clients at once: requests / s", *both(crowd_rate.get)),
        (f"{c} clients / one client, requests / s", *both(lambda k: crowd_rate[k] / alone_rate[k])),
    ]
    print(
        f"\n{n} seeded requests of {args.max_new_tokens} tokens ({model}, prompt {args.prompt!r}), {args.clients} "
        f"clients x {args.rounds} requests, new server with --min-decode-rows {args.min_decode_rows} "
        f"{' '.join(pacing)}\n"
    )
    rows = [[label, old_value, new_value, f"{new_value / old_value:.2f}"] for label, old_value, new_value in measures]
    identical = f"seeded texts identical to alone in every crowd run ({args.crowd_runs})"
    rows.append([identical, f"{same['old']}/{n}", f"{same['new']}/{n}", ""])
    print_table(["measure", f"before ({args.reference})", "continuous batching", "new / before"], rows)
    speedup = crowd_rate["new"] / alone_rate["new"]
    latency = p50(alone["new"]) / p50(alone["old"])
    print(
        f"\ngoals: {args.clients} clients >= 4x alone: {speedup:.2f}x {'met' if speedup >= 4 else 'MISSED'}; "
        f"identical: {same['new']}/{n} {'met' if same['new'] == n else 'MISSED'}; alone latency <= before: "
        f"{latency:.2f}x {'met' if latency <= 1 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
