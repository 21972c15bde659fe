"""MiniGPT against `transformers`' GPT2LMHeadModel with the same dimensions and the same weights (via `from_gpt2`).

Training (forward + backward + AdamW step) and generation (`generate()`, greedy, KV cache) in tokens per second, at the
shapes learners run (the names preset, nanoGPT's CPU configuration, short greedy generations at batch 1 and 8) and at
bigger ones, and milliseconds per new token at a short and a long context. Each shape is also measured compiled
(`torch.compile`, inductor: the model for training, as `train.py --torch_compile` does; a static cache and a compiled
decoding step for generation), with the compile time. The contenders alternate within each measurement
(A B C D A B C D ..., after warm-up), so the ratios are robust to the machine's noise.

    python bench/bench_speed.py                       # everything, about 20 minutes on 2 cores
    python bench/bench_speed.py --only generation --rounds 3 --no-compile
"""

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import CompileConfig, GPT2Config, GPT2LMHeadModel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM  # noqa: E402
from timing import alternate, machine_summary, print_table  # noqa: E402

NANOGPT_CPU = dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128)  # nanoGPT's shakespeare_char on a CPU
# (label, preset, preset overrides, batch, sequence length) for training.
TRAINING = [
    ("names preset, 32 x 16", "names", {}, 32, 16),
    ("nanoGPT CPU 4x4x128, 12 x 64", "names", NANOGPT_CPU, 12, 64),
    ("names preset, 64 x 16", "names", {}, 64, 16),
    ("shakespeare preset, 8 x 128", "shakespeare", {}, 8, 128),
    ("gpt2-shaped 6x384, 4 x 256", "gpt2", dict(n_layer=6, n_head=6, n_embd=384, block_size=256), 4, 256),
]
LONG = dict(block_size=1024)  # the shakespeare preset with a context long enough for the long generations
# (label, preset, preset overrides, batch, prompt length, new tokens) for greedy generation.
GENERATION = [
    ("names preset, 15 tokens, batch 1", "names", {}, 1, 1, 15),
    ("shakespeare preset, 200 tokens, batch 1", "shakespeare", LONG, 1, 8, 200),
    ("shakespeare preset, 200 tokens, batch 8", "shakespeare", LONG, 8, 8, 200),
]
MODELS = ("MiniGPT", "GPT-2")


def twin_models(preset: str, overrides: dict) -> tuple[MiniGPTForCausalLM, GPT2LMHeadModel]:
    """A GPT-2 of the preset's dimensions, no dropout, random weights; and a MiniGPT holding the same weights."""
    c = MiniGPTConfig.from_preset(preset, **overrides)
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=c.vocab_size,
            n_positions=c.block_size,
            n_embd=c.n_embd,
            n_layer=c.n_layer,
            n_head=c.n_head,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=None,
            eos_token_id=None,
        )
    )
    return MiniGPTForCausalLM.from_gpt2(gpt2), gpt2


def training_step(model, optimizer, ids):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def compiled_with_time(models: dict, first_call: Callable[[str, object], Callable[[], object]]) -> tuple[dict, dict]:
    """Each model eager and "compiled"; returns (runs, seconds of each compiled first call minus an eager call)."""
    runs, compile_seconds = {}, {}
    for name, model in models.items():
        eager, compiled = first_call(name, model), first_call(name + " compiled", model)
        eager()  # warm
        seconds = []
        for call in (compiled, eager):  # the compiled first call compiles
            start = time.perf_counter()
            call()
            seconds.append(time.perf_counter() - start)
        compile_seconds[name] = seconds[0] - seconds[1]
        runs[name], runs[name + " compiled"] = eager, compiled
    return runs, compile_seconds


def bench_training(rounds: int, compile: bool) -> list[list]:
    rows = []
    for label, preset, overrides, batch, length in TRAINING:
        models = dict(zip(MODELS, twin_models(preset, overrides)))
        ids = torch.randint(0, models["GPT-2"].config.vocab_size, (batch, length))

        def step(name: str, model, ids=ids):
            model.train()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            runnable = torch.compile(model) if name.endswith("compiled") else model  # as Trainer's torch_compile does
            return lambda: training_step(runnable, optimizer, ids)

        if compile:
            runs, compile_seconds = compiled_with_time(models, step)
        else:
            runs, compile_seconds = {name: step(name, model) for name, model in models.items()}, {}
        rows.append(
            stats_row(f"train {label}", "tokens/s", alternate(runs, rounds, warmup=2), batch * length, compile_seconds)
        )
        torch._dynamo.reset()  # the next shape compiles afresh, as a new process would
    return rows


def bench_generation(rounds: int, compile: bool) -> list[list]:
    rows = []
    for label, preset, overrides, batch, prompt_length, new_tokens in GENERATION:
        models = dict(zip(MODELS, twin_models(preset, overrides)))
        prompt = torch.randint(0, models["GPT-2"].config.vocab_size, (batch, prompt_length))

        def run(name: str, model, prompt=prompt, new_tokens=new_tokens):
            return generation_run(model, prompt, new_tokens, compiled=name.endswith("compiled"))

        if compile:
            runs, compile_seconds = compiled_with_time(models, run)
        else:
            runs, compile_seconds = {name: run(name, model) for name, model in models.items()}, {}
        rows.append(
            stats_row(f"generate {label}", "tokens/s", alternate(runs, rounds), batch * new_tokens, compile_seconds)
        )
        torch._dynamo.reset()
    models = dict(zip(MODELS, twin_models("shakespeare", LONG)))
    per_token = {}
    for context in (64, 512):
        seconds = decode_seconds_per_token(models, torch.randint(0, 4096, (1, context)), rounds)
        rows.append(stats_row(f"ms/token at context {context}", "ms", seconds, 1000, {}))
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


def generation_run(model, prompt: torch.Tensor, new_tokens: int, compiled: bool = False):
    """generate() as users call it; `compiled`: with a static cache, whose decoding step generate() compiles (on a
    CPU too, where it only does so when asked: `_compile_all_devices`)."""
    model.eval()
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, use_cache=True, pad_token_id=0)
    if compiled:
        compile_config = CompileConfig(fullgraph=True)
        compile_config._compile_all_devices = True
        kwargs.update(cache_implementation="static", compile_config=compile_config)

    def run():
        with torch.inference_mode():
            model.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs)

    return run


def stats_row(what: str, unit: str, seconds: dict[str, list[float]], work: float, compile_seconds: dict) -> list:
    """One row: the median of each contender in `unit` (work / s for rates, s * work for times) and the ratios."""
    rate = unit.endswith("/s")
    median = {
        name: statistics.median(work / s if rate else s * work for s in samples) for name, samples in seconds.items()
    }
    ratio = lambda a, b: (median[a] / median[b] if rate else median[b] / median[a]) if a in median else None
    cells = [median.get(name, "") for name in COLUMNS]
    ratios = [
        ratio("MiniGPT", "GPT-2"),
        ratio("MiniGPT compiled", "GPT-2 compiled"),
        ratio("MiniGPT compiled", "GPT-2"),
    ]
    compile_cell = "/".join(f"{compile_seconds[name]:.0f}" for name in MODELS) if compile_seconds else ""
    return [what, unit, *cells, *(f"{r:.2f}x" if r else "" for r in ratios), compile_cell]


COLUMNS = ("MiniGPT", "GPT-2", "MiniGPT compiled", "GPT-2 compiled")
HEADER = [
    "measure",
    "unit",
    *COLUMNS,
    "MiniGPT / GPT-2",
    "compiled / compiled",
    "MiniGPT compiled / GPT-2",
    "compile s (MiniGPT/GPT-2)",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", choices=["training", "generation"])
    parser.add_argument("--no-compile", action="store_true", help="eager only (no compile time)")
    args = parser.parse_args()
    print(machine_summary(), f"load average {os.getloadavg()[0]:.1f}")
    rows = []
    if args.only in (None, "training"):
        rows += bench_training(args.rounds, not args.no_compile)
    if args.only in (None, "generation"):
        rows += bench_generation(args.rounds, not args.no_compile)
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    print_table(HEADER, rows)
    print("Medians of interleaved rounds. Ratios are speedups (> 1: MiniGPT faster), for rates and ms/token alike.")


if __name__ == "__main__":
    main()
