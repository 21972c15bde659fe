"""MiniGPT against `transformers`' GPT2LMHeadModel with the same dimensions and the same weights (via `from_gpt2`).

Training (forward + backward + AdamW step) and generation (`generate()`, greedy, KV cache) in tokens per second, and
milliseconds per new token at a short and a long context. The two models alternate within each measurement
(A B A B ..., after warm-up), so the ratio MiniGPT / GPT-2 is robust to the machine's noise.

    python bench/bench_speed.py                 # everything, about 10 minutes on 2 cores
    python bench/bench_speed.py --only generation --rounds 3
"""

import argparse
import statistics
import sys
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM  # noqa: E402
from timing import alternate, machine_summary, print_table, summarise  # noqa: E402

# (label, preset, preset overrides, batch, sequence length) for training.
TRAINING = [
    ("names", "names", {}, 64, 16),
    ("shakespeare", "shakespeare", {}, 8, 128),
    ("gpt2-shaped 6x384", "gpt2", dict(n_layer=6, n_head=6, n_embd=384, block_size=256), 4, 256),
]
# Generation runs on the shakespeare size with a context long enough for 256 new tokens after the long prompt.
GENERATION = ("shakespeare", dict(block_size=1024))


def twin_models(preset: str, overrides: dict) -> tuple[MiniGPTForCausalLM, GPT2LMHeadModel]:
    """A GPT-2 of the preset's dimensions, no dropout, random weights; and a MiniGPT holding the same weights."""
    c = MiniGPTConfig.from_preset(preset, **overrides)
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(
        GPT2Config(vocab_size=c.vocab_size, n_positions=c.block_size, n_embd=c.n_embd, n_layer=c.n_layer,
                   n_head=c.n_head, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None,
                   eos_token_id=None)
    )  # fmt: skip
    return MiniGPTForCausalLM.from_gpt2(gpt2), gpt2


def training_step(model, optimizer, ids):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def bench_training(rounds: int) -> list[list]:
    rows = []
    for label, preset, overrides, batch, length in TRAINING:
        models = dict(zip(("MiniGPT", "GPT-2"), twin_models(preset, overrides)))
        ids = torch.randint(0, models["GPT-2"].config.vocab_size, (batch, length))
        steps = {}
        for name, model in models.items():
            model.train()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            steps[name] = lambda model=model, optimizer=optimizer, ids=ids: training_step(model, optimizer, ids)
        rows += stats_rows(f"train {label}", "tokens/s", alternate(steps, rounds, warmup=2), batch * length)
    return rows


def bench_generation(rounds: int) -> list[list]:
    rows = []
    models = dict(zip(("MiniGPT", "GPT-2"), twin_models(*GENERATION)))
    vocab = models["GPT-2"].config.vocab_size
    for batch in (1, 8):
        prompt = torch.randint(0, vocab, (batch, 8))
        runs = {name: generation_run(model, prompt, 256) for name, model in models.items()}
        rows += stats_rows(f"generate batch {batch}, 256 tokens", "tokens/s", alternate(runs, rounds), batch * 256)
    per_token = {}
    for context in (64, 512):
        seconds = decode_seconds_per_token(models, torch.randint(0, vocab, (1, context)), rounds)
        rows += stats_rows(f"ms/token at context {context}", "ms", seconds, 1000)
        per_token[context] = statistics.median(seconds["MiniGPT"])
    print(f"MiniGPT ms/token at context 512 / at 64: {per_token[512] / per_token[64]:.2f} (goal <= 1.5)")
    return rows


def decode_seconds_per_token(models: dict, prompt: torch.Tensor, rounds: int, new_tokens: int = 32) -> dict:
    """Seconds per cached decoding step after `prompt`: generate 1 + n tokens minus generate 1 (the prefill), / n."""
    runs = {}
    for name, model in models.items():
        runs[name] = generation_run(model, prompt, 1 + new_tokens)
        runs[name + " prefill"] = generation_run(model, prompt, 1)
    seconds = alternate(runs, rounds)
    return {
        name: [(full - prefill) / new_tokens for full, prefill in zip(seconds[name], seconds[name + " prefill"])]
        for name in models
    }


def generation_run(model, prompt: torch.Tensor, new_tokens: int):
    model.eval()
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, use_cache=True,
                  pad_token_id=0)  # fmt: skip

    def run():
        with torch.inference_mode():
            model.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs)

    return run


def stats_rows(what: str, unit: str, seconds: dict[str, list[float]], work: float) -> list[list]:
    """Rows of min / median / max per model in `unit` (work / s for rates, s * work for times), and the ratio."""
    rate = unit.endswith("/s")
    stats = {}
    for name, samples in seconds.items():
        values = sorted(work / s for s in samples) if rate else sorted(s * work for s in samples)
        stats[name] = summarise(values)
    ratio = stats["MiniGPT"][1] / stats["GPT-2"][1]
    return [[what, unit, name, *stats[name], f"{ratio:.2f}x" if name == "MiniGPT" else ""] for name in stats]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", choices=["training", "generation"])
    args = parser.parse_args()
    print(machine_summary())
    rows = []
    if args.only in (None, "training"):
        rows += bench_training(args.rounds)
    if args.only in (None, "generation"):
        rows += bench_generation(args.rounds)
    print_table(["measure", "unit", "model", "min", "median", "max", "MiniGPT / GPT-2 (median)"], rows)
    print("Rates: higher is better; ms/token: lower is better. Ratio > 1 means MiniGPT is faster for rates.")


if __name__ == "__main__":
    main()
