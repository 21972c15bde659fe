"""Speed of the demo, as a user feels it: median time from request to names + all attention maps, and to 200 streamed
text tokens, through the running app (HTTP requests on 127.0.0.1, as `curl` or a page makes them), with in-process
figures and references measured in the same run.

    python bench/bench_app.py                      # the shipped models (else same-size random models, said so)
    python bench/bench_app.py --runs 30 --names-model minigpt/models/names --text-model minigpt/models/shakespeare
    python bench/bench_app.py --only scale         # issue 11's rows: GPT-2 size at 1,024 tokens; drawing then and now

Goals (issue 4): names + maps <= 150 ms, 200 streamed tokens <= 2 s, on this CPU; (issue 9) the step view of the text
model at 128 tokens <= 300 ms: the `step` endpoint through the app, plus drawing its numbers (in process: the page's
own event draws them after the same computation, and is not open to HTTP clients). The reference for text is the same
200 tokens sampled as nanoGPT does (no KV cache: the whole window, slid by one token, recomputed every step): the ratio
shows what the cache and the 3/4-window jump buy. The reference for names + maps is the bare model work (generate +
one eager forward), in process: the rest is the app (checks, drawing) and the HTTP queue.

Goals (issue 11), with a GPT-2-shaped random-weight model (12 layers x 12 heads x 768, vocabulary 50,257, a
transformers GPT2LMHeadModel converted by the app with from_gpt2) at 1,024 tokens: the attention view's response
<= 5 MB and <= 2 s beyond the model's own forward pass (timed here too), a hover value <= 100 ms. The shipped models'
maps are drawn by the new code and by the code before issue 11 (`git show BEFORE_ISSUE_11:attention_maps.py`) from the
same recorded pass, interleaved: the ratio says whether they got slower.
"""

import argparse
import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the repo's modules, and the tests' helpers.py

from helpers import (  # noqa: E402
    LOWERCASE,
    char_tokenizer,
    page_function,
    printable_tokenizer,
    running_app,
    save_fixture_model,
    save_gpt2,
)
from minigpt.demo.core.serving import Sampling  # noqa: E402
from minigpt.demo.core.texts import from_boundary  # noqa: E402
from timing import alternate, reference_corpus, summarise  # noqa: E402  (bench/timing.py)

BEFORE_ISSUE_11 = "4492d0f"  # the commit whose attention_maps.py drew the maps before they scaled
GPT2_SHAPE = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)


def same_size_models(root: Path) -> tuple[str, str]:
    """Random-weight stand-ins for the shipped models, of their presets' sizes (character tokenizers)."""
    names = save_fixture_model(root / "names", char_tokenizer(LOWERCASE, "."), seed=0, name="names")
    text = save_fixture_model(root / "shakespeare", printable_tokenizer(), seed=0, name="shakespeare")
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


INSIGHTS = {  # row name: (endpoint, its inputs after text and model, goal in ms)
    "ablation (heads 1.2, 0.3, mean)": ("ablate", ["1.2, 0.3", "mean", -1, "", 0, 1.0, 0, 1.0, 0], 500),
    "head importance map (zero)": ("importance", ["zero"], 3000),
    "head roles (+ induction probe)": ("head_roles", [], 1000),
}


def shakespeare_128(lm) -> str:
    """The first 127 tokens of Tiny Shakespeare as text: with the start token, the 128 tokens the goals are set on."""
    source = reference_corpus("tinyshakespeare.txt", required=False)
    sample = source.read_text()[:4000] if source else "To be, or not to be, that is the question:\n" * 40
    return lm.tokenizer.decode(lm.tokenizer.encode(sample, add_special_tokens=False)[:127])


def step_texts(runs: int) -> list[str]:
    """Texts of 128 tokens or more (the view keeps the last 128): 3,000-character windows of Shakespeare, a new one
    per run, so that each run records its forward pass; without the data file, one repeated line, varied."""
    data = reference_corpus("tinyshakespeare.txt", required=False)
    if data:
        text = data.read_text()
        return [text[i * 3000 : (i + 1) * 3000] for i in range(runs + 1)]
    return [f"{i} " + "To be, or not to be, that is the question. " * 40 for i in range(runs + 1)]


def step_choice(i: int) -> tuple[int, int, int]:
    """A middle layer and head, a query past the middle: what a user clicking around the view would ask."""
    return 2, 1, 64 + i % 64


def through_the_server(
    url: str, names_model: str, text_model: str, runs: int, prompt: str, seeds: list[int], sample: str
):
    import httpx

    http = httpx.Client(timeout=60)

    def names_and_maps(seed: int):  # what the page does on "Generate names": /names, then the maps of the first name
        call(http, url, "names", "", 10, 1.0, 0, 1.0, seed, names_model)
        call(http, url, "attention", "emma", names_model)

    def text_200(i: int):
        body = call(http, url, "text", prompt, 200, 1.0, 0, 1.0, seeds[i], text_model)
        assert "200 new tokens." in body

    texts = step_texts(runs)

    def step_view(i: int):  # the JSON of every step, for a new text each run (its forward pass included)
        call(http, url, "step", texts[i + 1], text_model, *step_choice(i), False, 0)

    call(http, url, "step", texts[0], text_model, 2, 1, 64, False, 0)  # warm up
    names_and_maps(0), text_200(0)  # warm up
    timings = {
        "names + maps": median_ms(names_and_maps, runs),
        "text 200": median_ms(text_200, len(seeds)),
        "step": median_ms(step_view, runs),
    }
    for row, (endpoint, inputs, _) in INSIGHTS.items():
        ask = lambda i, endpoint=endpoint, inputs=inputs: call(http, url, endpoint, sample, text_model, *inputs)  # noqa: E731
        ask(0)  # warm up (the text's recorded pass is then cached, as for a user looking at one text)
        timings[row] = median_ms(ask, runs)
    return timings


def in_process_demo(extra: list[str], names_model: str | None = None, text_model: str | None = None):
    """The demo's sections on a state of their own, as the server builds them (without a page or a training queue)."""
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.generation.endpoints import Generation
    from minigpt.demo.head_tools.endpoints import Insights
    from minigpt.demo.lesson.endpoints import Steps
    from minigpt.demo.maps.ui import AttentionSection

    state = DemoState.configure(extra, names_model, text_model, training=False)
    sections = dict(maps=AttentionSection(state), steps=Steps(state), insights=Insights(state))
    return SimpleNamespace(state=state, generation=Generation(state), **sections)


def full_length_seeds(lm, ids: list[int], count: int) -> list[int]:
    """Seeds whose text runs the full 200 tokens (the model does not write its end token first): the same code and
    weights serve them, so the served runs generate exactly 200 tokens too."""
    seeds = []
    for seed in range(20 * count):
        if len(lm.batcher.generate(ids, 200, Sampling(1.0, 0, 1.0, seed))[0]) == 200:
            seeds.append(seed)
            if len(seeds) == count:
                return seeds
    raise SystemExit("The text model ends its text before 200 tokens for most seeds: try another --prompt.")


def in_process(names_source: str, text_source: str, runs: int, prompt: str) -> dict[str, float]:
    from minigpt.demo.lesson.steps_view import steps_html
    from minigpt.heads.recorded_pass import run_forward_pass

    demo = in_process_demo([], names_source, text_source)
    torch.set_num_threads(1)  # as app.py serves
    names_lm, text_lm = demo.state.picker.get(demo.state.names_default), demo.state.picker.get(demo.state.text_default)

    def names_and_maps(seed: int):
        demo.state.passes.clear()
        _, _, first = asyncio.run(demo.generation.names(count=10, seed=seed, model=names_lm.name))
        demo.maps.attention(first, names_lm.name)

    def bare_names(seed: int):  # the model's share: generate + one eager forward, no checks and no drawing
        sampling = Sampling(1.0, 0, 1.0, seed)
        samples = names_lm.batcher.generate([names_lm.boundary_id], names_lm.block_size - 1, sampling, rows=10)
        run_forward_pass(names_lm.model, [names_lm.boundary_id] + samples[0])

    ids = from_boundary(text_lm, prompt, "prompt")
    seeds = full_length_seeds(text_lm, ids, max(3, runs // 4))

    def text_200(i: int):
        assert len(text_lm.batcher.generate(ids, 200, Sampling(1.0, 0, 1.0, seeds[i]))[0]) == 200

    def text_200_no_cache(i: int):  # reference: every step runs the whole window (up to block_size tokens)
        generator, window = torch.Generator().manual_seed(seeds[i]), list(ids)
        with torch.no_grad():
            for _ in range(200):
                logits = text_lm.model(torch.tensor([window[-text_lm.block_size :]]), use_cache=False).logits[0, -1]
                window.append(int(torch.multinomial(logits.softmax(-1), 1, generator=generator)))

    texts, text_model = step_texts(runs), text_lm.name

    def step_view(i: int):  # what the page's event does: the step endpoint's function, then the drawing
        steps_html(demo.steps.step(texts[i + 1], text_model, *step_choice(i)))

    names_and_maps(0), text_200(0), step_view(-1)  # warm up
    text_runs = len(seeds)
    step_ms = median_ms(step_view, runs)
    numbers = [demo.steps.step(texts[i + 1], text_model, *step_choice(i)) for i in range(runs)]
    sample = shakespeare_128(text_lm)
    assert len(demo.state.text_view(text_lm.name, sample).ids) == 128, "the sample must be 128 tokens"
    insights = {}
    for row, (endpoint, inputs, _) in INSIGHTS.items():
        run = getattr(demo.insights, endpoint)
        run(sample, text_lm.name, *inputs)  # warm up
        insights[row] = median_ms(lambda i, run=run, inputs=inputs: run(sample, text_lm.name, *inputs), runs)
    sample_ids = demo.state.text_view(text_lm.name, sample).ids
    return {
        "sample": sample,
        **insights,
        "recorded pass (128 tokens)": median_ms(lambda i: run_forward_pass(text_lm.model, sample_ids), runs),
        "step view": step_ms,
        "step drawing": median_ms(lambda i: steps_html(numbers[i]), runs),
        "seeds": seeds,
        "names + maps": median_ms(names_and_maps, runs),
        "names + maps (bare model)": median_ms(bare_names, runs),
        "text 200": median_ms(text_200, text_runs),
        "text 200 (no KV cache)": median_ms(text_200_no_cache, text_runs),
    }


def load_time(path: str) -> float:
    return float(Path(path).read_text().split()[0]) if Path(path).exists() else float("nan")


def gpt2_at_1024(root: Path, runs: int) -> dict[str, float]:
    """Issue 11's rows: a GPT-2-shaped random model (from_gpt2 in the app) at its full context, in process and
    served."""
    import httpx

    from minigpt.demo.maps.export import save_weights
    from minigpt.heads.recorded_pass import run_forward_pass

    folder = save_gpt2(root / "gpt2-shaped", printable_tokenizer(), **GPT2_SHAPE)
    text = ("It was the best of times, it was the worst of times, it was the age of wisdom. " * 20)[:1023]
    demo = in_process_demo([str(folder)])
    lm = demo.state.picker.get("gpt2-shaped")
    ids = from_boundary(lm, text, "text")
    assert len(ids) == 1024
    results = {}
    forward = []
    for _ in range(max(1, runs // 10)):
        start = time.perf_counter()
        run_forward_pass(lm.model, ids)
        forward.append(time.perf_counter() - start)
    results["forward"] = statistics.median(forward) * 1000
    demo.state.passes.clear()
    start = time.perf_counter()
    demo.maps.attention(text, "gpt2-shaped")  # the first time: the forward pass and the drawing
    results["view, first"] = (time.perf_counter() - start) * 1000
    results["view, beyond forward"] = median_ms(lambda i: demo.maps.attention(text, "gpt2-shaped"), max(3, runs // 4))
    rows = [1023 - 37 * i for i in range(runs)]
    results["hover, in process"] = median_ms(
        lambda i: demo.maps.maps.attention_row(
            {"model": "gpt2-shaped", "text": text, "layer": 11, "head": str(i % 12), "query": rows[i]}
        ),
        runs,
    )
    with tempfile.TemporaryDirectory(dir=root) as out:
        start = time.perf_counter()
        written = save_weights(Path(out) / "w.safetensors", demo.state.passes.get(lm.model, ids).attentions, [], ids)
        results["export"] = (time.perf_counter() - start) * 1000
        results["export MB"] = written.stat().st_size / 1e6

    with running_app("--model", str(folder)) as (url, _):
        http = httpx.Client(timeout=600)
        start = time.perf_counter()
        body = call(http, url, "attention", text, "gpt2-shaped")  # loads the model, runs the pass, draws
        results["served, first"] = (time.perf_counter() - start) * 1000
        results["served MB"] = len(body.encode()) / 1e6
        results["served, beyond forward"] = median_ms(
            lambda i: call(http, url, "attention", text, "gpt2-shaped"), max(3, runs // 4)
        )
        asked = {"model": "gpt2-shaped", "text": text, "layer": 5}
        results["hover, served"] = median_ms(
            lambda i: page_function(http, url, "attention_row", {**asked, "head": str(i % 12), "query": rows[i]}), runs
        )
        results["hover mean, served"] = median_ms(
            lambda i: page_function(http, url, "attention_row", {**asked, "head": "mean", "query": rows[i]}), runs
        )
        results["zoom, served"] = median_ms(
            lambda i: page_function(
                http,
                url,
                "attention_window",
                {**asked, "head": str(i % 12), "row": rows[i] - 256, "col": 37 * i, "size": 256},
            ),
            runs,
        )
    return results


def old_drawing_module():
    """attention_maps.py as it was before issue 11, from git, as a module of its own (None without git)."""
    try:
        source = subprocess.run(
            ["git", "show", f"{BEFORE_ISSUE_11}:attention_maps.py"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / "attention_maps_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("attention_maps_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def drawing_then_and_now(names_source: str, text_source: str, runs: int) -> list[list]:
    """Drawing the grid and the enlarged head, new code vs the code before issue 11, from the same recorded pass."""
    from minigpt.demo.maps import view as now

    before = old_drawing_module()
    if before is None:
        return []
    demo = in_process_demo([], names_source, text_source)
    rows = []
    for model, text in (
        (demo.state.names_default, ".emma."),
        (demo.state.text_default, "ROMEO:\n" + "To be, or not to be? " * 20),
    ):
        view = demo.state.text_view(model, text)
        contenders = {
            "now": partial(draw, now, view.recorded.attentions, view.tokens, view.shown),
            "before": partial(draw, before, view.recorded.attentions, view.tokens, None),
        }
        seconds = alternate(contenders, rounds=runs)
        ms_now, ms_before = summarise(seconds["now"], 1000)[1], summarise(seconds["before"], 1000)[1]
        kb_now, kb_before = contenders["now"]() / 1e3, contenders["before"]() / 1e3
        rows.append([f"{model}, {len(view.ids)} tokens", ms_now, ms_before, ms_now / ms_before, kb_now, kb_before])
    return rows


def draw(maps, weights: torch.Tensor, tokens: list[str], shown: dict | None) -> int:
    """The grid and the enlarged head drawn by `maps` (attention_maps now, or before issue 11: arrays, no `shown`);
    returns their size in characters."""
    if shown is None:
        return len(maps.grid_html(weights.numpy(), tokens)) + len(maps.head_html(weights.numpy(), tokens, 0, "0"))
    return len(maps.grid_html(weights, tokens)) + len(maps.head_html(weights, tokens, 0, "0", shown))


def print_scale(results: dict[str, float], drawing: list[list]) -> None:
    print(
        f"\nload: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f} (1, 5, 15 min) on "
        f"{os.cpu_count()} cores"
    )
    if results:
        print("\nGPT-2-shaped random MiniGPT (12 x 12 x 768, vocab 50,257, from_gpt2), 1,024 tokens (median):")
        r = results
        print(f"{'measure':52} {'in process':>12} {'through the app':>16} {'goal':>10}")
        print(f"{'model forward pass (run_forward_pass)':52} {r['forward']:9.0f} ms")
        print(
            f"{'attention view, first request (forward + drawing)':52} {r['view, first']:9.0f} ms "
            f"{r['served, first']:13.0f} ms"
        )
        print(
            f"{'attention view, beyond the forward (pass cached)':52} {r['view, beyond forward']:9.0f} ms "
            f"{r['served, beyond forward']:13.0f} ms {'2000 ms':>10}"
        )
        print(f"{'attention view, response size':52} {'':>12} {r['served MB']:13.2f} MB {'5 MB':>10}")
        print(
            f"{'hover value (one query row, a head)':52} {r['hover, in process']:9.1f} ms "
            f"{r['hover, served']:13.1f} ms {'100 ms':>10}"
        )
        print(f"{'hover value (one query row, average of heads)':52} {'':>12} {r['hover mean, served']:13.1f} ms")
        print(f"{'zoom/pan: a 256 x 256 window':52} {'':>12} {r['zoom, served']:13.1f} ms")
        export = f"export all weights (.safetensors, {r['export MB']:.0f} MB)"
        print(f"{export:52} {r['export']:9.0f} ms")
        ratio = r["view, beyond forward"] / r["forward"]
        print(f"ratio: drawing beyond the forward / forward = {ratio:.3f}")
    if drawing:
        print(f"\nDrawing grid + enlarged head, now vs before issue 11 ({BEFORE_ISSUE_11}), same pass, interleaved:")
        print(f"{'text':28} {'now':>9} {'before':>9} {'ratio':>7} {'now KB':>9} {'before KB':>10}")
        for name, now, before, ratio, kb_now, kb_before in drawing:
            print(f"{name:28} {now:6.1f} ms {before:6.1f} ms {ratio:7.2f} {kb_now:9.0f} {kb_before:10.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--names-model", default=str(REPO / "minigpt" / "models" / "names"))
    parser.add_argument("--text-model", default=str(REPO / "minigpt" / "models" / "shakespeare"))
    parser.add_argument("--prompt", default="ROMEO:\n")
    parser.add_argument("--only", choices=["speed", "scale"], help="only issue 4's rows (speed) or issue 11's (scale)")
    args = parser.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    torch.set_num_threads(1)  # as app.main serves: idle intra-op threads spin on a loaded machine and blur the ratios

    names_source, text_source = args.names_model, args.text_model
    with tempfile.TemporaryDirectory() as tmp:
        if not (Path(names_source) / "config.json").exists() or not (Path(text_source) / "config.json").exists():
            print(
                f"! {names_source} or {text_source} is missing: timing random-weight models of the same presets "
                "(character tokenizers) instead; train the shipped models for the real figures."
            )
            names_source, text_source = same_size_models(Path(tmp))
        print(f"models: names={names_source}  text={text_source}")
        if args.only != "speed":
            drawing = drawing_then_and_now(names_source, text_source, args.runs)
            scale = gpt2_at_1024(Path(tmp), args.runs)
            print_scale(scale, drawing)
        if args.only == "scale":
            return
        local = in_process(names_source, text_source, args.runs, args.prompt)
        with running_app("--names-model", names_source, "--text-model", text_source) as (url, _):
            served = through_the_server(
                url,
                Path(names_source).name,
                Path(text_source).name,
                args.runs,
                args.prompt,
                local["seeds"],
                local["sample"],
            )

    print(f"\n{'measure (median)':44} {'through the app':>16} {'in process':>12} {'goal':>8}")
    print(
        f"{'names (10) + all attention maps':44} {served['names + maps']:13.0f} ms {local['names + maps']:9.0f} ms"
        f" {'150 ms':>8}"
    )
    print(f"{'  reference: bare model work':44} {'':>16} {local['names + maps (bare model)']:9.0f} ms")
    print(f"{'200 streamed text tokens':44} {served['text 200']:13.0f} ms {local['text 200']:9.0f} ms {'2000 ms':>8}")
    print(f"{'  reference: nanoGPT sampling (no KV cache)':44} {'':>16} {local['text 200 (no KV cache)']:9.0f} ms")
    for row, (_, _, goal) in INSIGHTS.items():
        print(f"{row + ', 128 tokens':44} {served[row]:13.0f} ms {local[row]:9.0f} ms {f'{goal} ms':>8}")
    print(f"{'  reference: one recorded eager pass':44} {'':>16} {local['recorded pass (128 tokens)']:9.0f} ms")
    step_page = served["step"] + local["step drawing"]
    print(
        f"{'step view, text model, 128 tokens (new text)':44} {step_page:13.0f} ms {local['step view']:9.0f} ms"
        f" {'300 ms':>8}"
    )
    print(f"{'  of which: /step (JSON) through the app':44} {served['step']:13.0f} ms")
    print(f"{'  of which: drawing its numbers':44} {'':>16} {local['step drawing']:9.0f} ms")
    speedup = local["text 200 (no KV cache)"] / local["text 200"]
    overhead = served["names + maps"] / local["names + maps (bare model)"]
    print(f"\nText: {speedup:.2f}x faster than nanoGPT sampling. Names + maps, served: {overhead:.2f}x the bare model.")


if __name__ == "__main__":
    main()
