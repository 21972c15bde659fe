"""Speed of the demo, as a user feels it: median time from request to names + all attention maps, and to 200 streamed
text tokens, through the running app (HTTP requests on 127.0.0.1, as `curl` or a page makes them), with in-process
figures and references measured in the same run.

    python bench/bench_app.py                      # the shipped models (else same-size random models, said so)
    python bench/bench_app.py --runs 30 --names-model models/names --text-model models/shakespeare

Goals (issue 4): names + maps <= 150 ms, 200 streamed tokens <= 2 s, on this CPU. The reference for text is the same
200 tokens sampled as nanoGPT does (no KV cache: the whole window, slid by one token, recomputed every step): the ratio
shows what the cache and the 3/4-window jump buy. The reference for names + maps is the bare model work (generate +
one eager forward), in process: the rest is the app (checks, drawing) and the HTTP queue.
"""

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from test_app_api import LOWERCASE, char_tokenizer, running_app, save_fixture_model  # noqa: E402  (the tests')


def same_size_models(root: Path) -> tuple[str, str]:
    """Random-weight stand-ins for the shipped models, of their presets' sizes (character tokenizers)."""
    printable = "".join(chr(c) for c in range(32, 127)) + "\n"
    names = save_fixture_model(root / "names", char_tokenizer(LOWERCASE, "."), seed=0, name="names")
    text_tokenizer = char_tokenizer(printable, "<|endoftext|>")
    text = save_fixture_model(root / "shakespeare", text_tokenizer, seed=0, name="shakespeare")
    return str(names), str(text)


def median_ms(fn, runs: int) -> float:
    times = []
    for i in range(runs):
        start = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def call(http, url: str, endpoint: str, *data) -> str:
    """One request on Gradio's REST route, as `curl` would make it: POST the inputs, then read the event stream to
    its end (for /text, every streamed token). Returns the stream."""
    event = http.post(f"{url}gradio_api/call/{endpoint}", json={"data": list(data)}).json()["event_id"]
    with http.stream("GET", f"{url}gradio_api/call/{endpoint}/{event}") as stream:
        body = "".join(stream.iter_text())
    if "event: error" in body:
        raise RuntimeError(f"/{endpoint} failed: {body[-500:]}")
    return body


def through_the_server(url: str, names_model: str, text_model: str, runs: int, prompt: str, seeds: list[int]):
    import httpx

    http = httpx.Client(timeout=60)

    def names_and_maps(seed: int):  # what the page does on "Generate names": /names, then the maps of the first name
        call(http, url, "names", "", 10, 1.0, 0, 1.0, seed, names_model)
        call(http, url, "attention", "emma", names_model)

    def text_200(i: int):
        body = call(http, url, "text", prompt, 200, 1.0, 0, 1.0, seeds[i], text_model)
        assert "200 new tokens." in body

    names_and_maps(0), text_200(0)  # warm up
    return {"names + maps": median_ms(names_and_maps, runs), "text 200": median_ms(text_200, len(seeds))}


def full_length_seeds(app, lm, ids: list[int], count: int) -> list[int]:
    """Seeds whose text runs the full 200 tokens (the model does not write its end token first): the same code and
    weights serve them, so the served runs generate exactly 200 tokens too."""
    seeds = []
    for seed in range(20 * count):
        if len(lm.batcher.generate(ids, 200, app.Sampling(1.0, 0, 1.0, seed))[0]) == 200:
            seeds.append(seed)
            if len(seeds) == count:
                return seeds
    raise SystemExit("The text model ends its text before 200 tokens for most seeds: try another --prompt.")


def in_process(names_source: str, text_source: str, runs: int, prompt: str) -> dict[str, float]:
    import app
    from attention_maps import inspect_attention

    app.configure([], names_source, text_source)
    torch.set_num_threads(1)  # as app.main serves
    names_lm, text_lm = app.PICKER.get(app.NAMES_DEFAULT), app.PICKER.get(app.TEXT_DEFAULT)

    def names_and_maps(seed: int):
        app.attention_view.cache_clear()
        _, _, first = asyncio.run(app.names(count=10, seed=seed, model=names_lm.name))
        app.attention(first, names_lm.name)

    def bare_names(seed: int):  # the model's share: generate + one eager forward, no checks and no drawing
        sampling = app.Sampling(1.0, 0, 1.0, seed)
        samples = names_lm.batcher.generate([names_lm.boundary_id], names_lm.block_size - 1, sampling, rows=10)
        inspect_attention(names_lm.model, torch.tensor([[names_lm.boundary_id] + samples[0]]))

    ids = app.from_boundary(text_lm, prompt, "prompt")
    seeds = full_length_seeds(app, text_lm, ids, max(3, runs // 4))

    def text_200(i: int):
        assert len(text_lm.batcher.generate(ids, 200, app.Sampling(1.0, 0, 1.0, seeds[i]))[0]) == 200

    def text_200_no_cache(i: int):  # reference: every step runs the whole window (up to block_size tokens)
        generator, window = torch.Generator().manual_seed(seeds[i]), list(ids)
        with torch.no_grad():
            for _ in range(200):
                logits = text_lm.model(torch.tensor([window[-text_lm.block_size :]]), use_cache=False).logits[0, -1]
                window.append(int(torch.multinomial(logits.softmax(-1), 1, generator=generator)))

    names_and_maps(0), text_200(0)  # warm up
    text_runs = len(seeds)
    return {
        "seeds": seeds,
        "names + maps": median_ms(names_and_maps, runs),
        "names + maps (bare model)": median_ms(bare_names, runs),
        "text 200": median_ms(text_200, text_runs),
        "text 200 (no KV cache)": median_ms(text_200_no_cache, text_runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--names-model", default=str(REPO / "models" / "names"))
    parser.add_argument("--text-model", default=str(REPO / "models" / "shakespeare"))
    parser.add_argument("--prompt", default="ROMEO:\n")
    args = parser.parse_args()

    names_source, text_source = args.names_model, args.text_model
    with tempfile.TemporaryDirectory() as tmp:
        if not (Path(names_source) / "config.json").exists() or not (Path(text_source) / "config.json").exists():
            print(
                f"! {names_source} or {text_source} is missing: timing random-weight models of the same presets "
                "(character tokenizers) instead; train the shipped models for the real figures."
            )
            names_source, text_source = same_size_models(Path(tmp))
        print(f"models: names={names_source}  text={text_source}")
        local = in_process(names_source, text_source, args.runs, args.prompt)
        with running_app("--names-model", names_source, "--text-model", text_source) as (url, _):
            served = through_the_server(
                url, Path(names_source).name, Path(text_source).name, args.runs, args.prompt, local["seeds"]
            )

    print(f"\n{'measure (median)':44} {'through the app':>16} {'in process':>12} {'goal':>8}")
    print(f"{'names (10) + all attention maps':44} {served['names + maps']:13.0f} ms {local['names + maps']:9.0f} ms"
          f" {'150 ms':>8}")  # fmt: skip
    print(f"{'  reference: bare model work':44} {'':>16} {local['names + maps (bare model)']:9.0f} ms")
    print(f"{'200 streamed text tokens':44} {served['text 200']:13.0f} ms {local['text 200']:9.0f} ms {'2000 ms':>8}")
    print(f"{'  reference: nanoGPT sampling (no KV cache)':44} {'':>16} {local['text 200 (no KV cache)']:9.0f} ms")
    speedup = local["text 200 (no KV cache)"] / local["text 200"]
    overhead = served["names + maps"] / local["names + maps (bare model)"]
    print(f"\nText: {speedup:.2f}x faster than nanoGPT sampling. Names + maps, served: {overhead:.2f}x the bare model.")


if __name__ == "__main__":
    main()
