"""What finding a circuit costs (minigpt.heads.find_circuit), and attribution patching against one plain pass.

    python bench/bench_find_circuit.py                     # the specimen, GPT-2's shape with 4 prompts of 21 tokens
    python bench/bench_find_circuit.py --gpt2-prompts 8 --gpt2-half 20
    python bench/bench_find_circuit.py --patching-only     # attribution patching against one plain pass alone

Rows:
- find_circuit on the shipped specimen (2 x 4 x 128), its defaults: EAP-IG (5 steps), mean ablation, 20 induction
  prompts of 41 tokens (and again with corrupted ablation); and on a GPT-2-shaped MiniGPT (12 layers x 12 heads x
  768, 50,257 tokens) with random weights, a short induction prompt set (its circuit means nothing: a random model
  copies nothing; the cost is what it measures). Each: seconds, passes of the prompt set (forward, backward among
  them), edges kept, heads, faithfulness.
- attribution patching (every head at every position, from one forward pass on each text and one backward pass:
  `exact_top=0`) and the same with its 3 largest cells patched exactly (the default, `exact_top=3`: 3 more forward
  passes in one batch), against one plain forward pass over the same tokens, on the specimen at its 128 tokens and on
  the GPT-2-shaped model at 1,024: the three alternate (A B C A B C, after a warm-up round) so that the machine's noise
  hits them alike; the medians. The texts are random tokens, the corrupted one with its last token changed so that
  the answer changes.

find_circuit is timed once after a warm-up call of its own.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from minigpt import heads  # noqa: E402
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM  # noqa: E402
from timing import alternate, machine_summary, print_table  # noqa: E402


def timed(call) -> tuple[float, object]:
    call()  # warm-up
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def circuit_row(name: str, model, **kwargs) -> list:
    took, found = timed(lambda: heads.find_circuit(model, **kwargs))
    return [
        name,
        f"{took:.2f}",
        f"{found.forward_passes} / {found.backward_passes}",
        f"{found.kept_edges} / {found.total_edges}",
        f"{len(found.heads)} / {model.config.n_layer * model.config.n_head}",
        f"{found.faithfulness:.3f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpt2-prompts", type=int, default=4, help="induction prompts on the GPT-2-shaped model")
    parser.add_argument("--gpt2-half", type=int, default=10, help="tokens a copy on the GPT-2-shaped model")
    parser.add_argument("--tokens", type=int, default=1024, help="tokens for attribution patching and the plain pass")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the plain pass and attribution")
    parser.add_argument("--patching-only", action="store_true", help="attribution patching's rows alone")
    args = parser.parse_args()
    print(machine_summary())
    specimen = MiniGPTForCausalLM.from_pretrained(REPO / "minigpt" / "models" / "specimen").eval()
    torch.manual_seed(0)
    gpt2 = MiniGPTForCausalLM(MiniGPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50257))
    gpt2.eval()
    if not args.patching_only:
        shape = f"{args.gpt2_prompts} prompts of {2 * args.gpt2_half + 1} tokens"
        rows = [
            circuit_row("find_circuit, specimen, 20 prompts of 41 tokens", specimen),
            circuit_row("find_circuit, specimen, the same, corrupted ablation", specimen, ablation="corrupted"),
            circuit_row(f"find_circuit, GPT-2 shape, {shape}", gpt2, prompts=args.gpt2_prompts, half=args.gpt2_half),
        ]
        print_table(["call", "seconds", "passes (forward / backward)", "edges kept", "heads", "faithfulness"], rows)
        print()
    rows = patching_rows("specimen", specimen, specimen.config.block_size, args.rounds)
    rows += patching_rows("GPT-2 shape", gpt2, args.tokens, args.rounds)
    print_table(["call (median of alternating rounds)", "seconds", "vs one plain pass"], rows)


def changed_pair(model, tokens: int) -> tuple[list[int], list[int]]:
    """Random tokens and the same with the last one changed, the first change that changes the model's answer."""
    vocab = model.config.vocab_size
    clean = torch.randint(0, vocab, (tokens,), generator=torch.Generator().manual_seed(0)).tolist()
    for shift in range(1, vocab):
        corrupted = clean[:-1] + [(clean[-1] + shift) % vocab]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([clean, corrupted]), use_cache=False, logits_to_keep=1).logits
        if logits[0, -1].argmax() != logits[1, -1].argmax():
            return clean, corrupted
    raise SystemExit("no one-token change of the last token changes this model's answer")


def patching_rows(name: str, model, tokens: int, rounds: int) -> list[list[str]]:
    """One plain forward pass, first-order attribution patching and the same with its top 3 cells patched exactly,
    in alternating rounds over one pair of `tokens`-token texts: each median and its ratio to the plain pass."""
    clean, corrupted = changed_pair(model, tokens)

    def plain():
        with torch.no_grad():
            model(input_ids=torch.tensor([clean]), use_cache=False)

    contenders = {
        "one plain forward pass": plain,
        "attribution_patching, first order (exact_top=0)": lambda: heads.attribution_patching(
            model, clean, corrupted, exact_top=0
        ),
        "attribution_patching, top 3 cells exact (exact_top=3)": lambda: heads.attribution_patching(
            model, clean, corrupted, exact_top=3
        ),
    }
    medians = {call: statistics.median(taken) for call, taken in alternate(contenders, rounds).items()}
    reference = medians["one plain forward pass"]
    return [[f"{call}, {name}, {tokens:,} tokens", f"{took:.3f}", f"{took / reference:.2f}x"] for call, took in
            medians.items()]  # fmt: skip


if __name__ == "__main__":
    main()
