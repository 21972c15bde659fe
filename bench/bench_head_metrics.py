"""How long the Head Finder takes to measure every head over a corpus (minigpt/heads/metrics.py `measure`).

    python bench/bench_head_metrics.py            # the shipped models over their corpora (>= 32K tokens)
    python bench/bench_head_metrics.py --gpt2     # and a GPT-2-shaped model (random weights), cut to the bound

The shipped models read their validation text (names: makemore's names.txt from ../shared/data, one a line, as its
own validation set holds only 1,000 names); the GPT-2 shape (12 layers x 12 heads x 768, 1,024 context, 50,257
tokens) reads 8 windows of random tokens, each a random span written twice (induction has queries to read). The
reference, timed in the same run: one plain forward pass (sdpa, no weights kept) over the same windows. Audit 3's
shape (12 layers x 16 heads, width 32, context 256: few parameters, many attention cells) reads 32K random tokens.
Every corpus is cut as the Head Finder cuts it (head_corpus.cut_to_budget: the recording's work bound; the ablation's,
work_budgets.ablation_windows), and each row shows the estimate the bound is computed from (measure_seconds) beside
the measured time. On one thread (the estimate's unit: a core); targets: <= 30 s for a shipped model, <= the bound
(RECORD_SECONDS + ABLATION_SECONDS) for the others.
"""

import argparse
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from minigpt.demo.core.models import SHIPPED, load_language_model  # noqa: E402
from minigpt.demo.core.work_budgets import ABLATION_SECONDS, RECORD_SECONDS, ablation_windows, measure_seconds  # noqa: E402
from minigpt.demo.head_finder.corpus import MOST_TOKENS, cut_to_budget, default_corpus, text_corpus  # noqa: E402
from minigpt.heads.metrics import measure  # noqa: E402
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM  # noqa: E402
from timing import machine_summary, print_table, reference_corpus  # noqa: E402

TARGET = {"shipped": 30.0, "big": RECORD_SECONDS + ABLATION_SECONDS}


def plain_pass_seconds(model, windows: list[list[int]]) -> float:
    started = time.perf_counter()
    with torch.no_grad():
        for window in windows:
            model(input_ids=torch.tensor([window]), use_cache=False, logits_to_keep=1)
    return time.perf_counter() - started


def shipped_corpora():
    for name, folder in SHIPPED.items():
        lm = load_language_model(name, str(folder), dict(max_rows=2, max_waiting=2))
        if name == "names":
            corpus = text_corpus(lm, reference_corpus("names.txt").read_text())
        else:
            corpus = default_corpus(lm, str(folder))
        yield name, lm.model, corpus.windows


def random_shape(name: str, windows: int, **shape):
    """A model of `shape` with random weights, and `windows` windows of its full context, each a random span written
    twice (induction has queries to read), cut to the recording's bound as the Head Finder cuts a corpus."""
    torch.manual_seed(0)
    config = MiniGPTConfig(**shape)
    model = MiniGPTForCausalLM(config).eval()
    generator, half = torch.Generator().manual_seed(0), config.block_size // 2 - 1
    corpus = []
    for _ in range(windows):
        span = torch.randint(1, config.vocab_size, (half,), generator=generator).tolist()
        corpus.append([0, *span, *span, span[0]])
    return name, model, cut_to_budget(corpus, MOST_TOKENS, config, [])


def big_corpora():
    yield random_shape(
        "audit 3 (12x16, width 32, 256)", 128, n_layer=12, n_head=16, n_embd=32, block_size=256, vocab_size=70
    )
    yield random_shape("GPT-2 shape (random)", 8, n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50257)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpt2", action="store_true", help="also audit 3's shape and GPT-2's (about 4 minutes)")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # the estimate's unit is one core
    print(machine_summary())
    rows = []
    runs = [(*run, "shipped") for run in shipped_corpora()]
    if args.gpt2:
        runs += [(*run, "big") for run in big_corpora()]
    for name, model, windows, kind in runs:
        reference = plain_pass_seconds(model, windows)
        ablated = ablation_windows(model, windows)
        estimate = measure_seconds(model.config, windows, ablated)
        started = time.perf_counter()
        result = measure(model, windows, ablated=ablated)
        seconds = time.perf_counter() - started
        tokens = sum(map(len, windows))
        rows.append(
            [
                name,
                f"{tokens:,}",
                f"{result['ablation_tokens']:,}",
                f"{seconds:.1f}",
                f"{estimate:.1f}",
                f"{reference:.2f}",
                f"{seconds / reference:.0f}x",
                f"<= {TARGET[kind]:.0f} s: {'yes' if seconds <= TARGET[kind] else 'NO'}",
            ]
        )
    print_table(
        ["model", "tokens", "ablation tokens", "metrics (s)", "estimate (s)", "one plain pass (s)", "ratio", "target"],
        rows,
    )


if __name__ == "__main__":
    main()
