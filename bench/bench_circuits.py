"""What the circuits cost on GPT-2's shape (minigpt.heads.circuits), against one plain forward pass in the same run.

    python bench/bench_circuits.py                 # 1,024 tokens for the one-pass instruments, 38 for patching
    python bench/bench_circuits.py --patch-tokens 1024      # patching at 1,024 tokens too (about half an hour)

A GPT-2-shaped MiniGPT (12 layers x 12 heads x 768, 1,024 context, 50,257 tokens) with random weights: the numbers'
meaning does not matter here, their cost does. Each row is one call, timed after a warm-up call, with the ratio to one
plain forward pass over the same tokens. Patching runs the model once per head (and per layer and position for the
residual stream), so the page caps its texts (minigpt/demo/circuits/measures.py: 38 tokens at GPT-2's size); the bench
measures it at that cap by default."""

import argparse
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from minigpt.heads import circuits  # noqa: E402
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM  # noqa: E402
from timing import machine_summary, print_table  # noqa: E402


def seconds(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def pair(vocabulary: int, tokens: int, generator) -> tuple[list[int], list[int]]:
    """A clean text and a corrupted one: the same random tokens but the last (random weights: the answer changes)."""
    clean = torch.randint(0, vocabulary, (tokens,), generator=generator).tolist()
    corrupted = clean[:-1] + [(clean[-1] + 1) % vocabulary]
    return clean, corrupted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1024, help="tokens for attribution and the plain pass")
    parser.add_argument("--patch-tokens", type=int, default=38, help="tokens for patching (the page's GPT-2 cap: 38)")
    args = parser.parse_args()
    torch.manual_seed(0)
    print(machine_summary())
    model = MiniGPTForCausalLM(MiniGPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50257))
    model.eval()
    generator = torch.Generator().manual_seed(0)
    text = torch.randint(0, 50257, (args.tokens,), generator=generator)
    clean, corrupted = pair(50257, args.patch_tokens, generator)

    def plain(ids):
        with torch.no_grad():
            model(input_ids=torch.as_tensor([ids]), use_cache=False)

    calls = {
        f"one plain forward pass, {args.tokens:,} tokens": lambda: plain(text.tolist()),
        f"logit attribution, {args.tokens:,} tokens": lambda: circuits.logit_attribution(model, text),
        "composition scores (K), folded": lambda: circuits.composition_scores(model, "k"),
        "OV circuit of one head, top 10 a row": lambda: circuits.ov_circuit(model, 1, 1, top=10),
        f"one plain forward pass, {args.patch_tokens:,} tokens": lambda: plain(clean),
        f"head patching, {args.patch_tokens:,} tokens": lambda: circuits.patch_heads(model, clean, corrupted),
        f"residual patching, {args.patch_tokens:,} tokens": lambda: circuits.patch_residual(model, clean, corrupted),
        f"path patching into 5.1's key, {args.patch_tokens:,} tokens": lambda: circuits.patch_path(
            model, clean, corrupted, ("resid", 5), (5, 1), "k"
        ),
    }
    rows, reference = [], 1.0
    for name, call in calls.items():
        try:
            call()  # warm-up
            took = seconds(call)
        except ValueError as error:  # random texts with the same answer: patching refuses them, and says why
            rows.append([name, "refused", str(error)[:60]])
            continue
        if name.startswith("one plain"):
            reference = took
        rows.append([name, f"{took:.2f}", f"{took / reference:.1f}x"])
    print_table(["call", "seconds", "vs one plain pass"], rows)


if __name__ == "__main__":
    main()
