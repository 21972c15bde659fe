"""What finding a circuit costs (minigpt.heads.find_circuit), and attribution patching against one plain pass.

    python bench/bench_find_circuit.py                     # the specimen, GPT-2's shape with 4 prompts of 21 tokens
    python bench/bench_find_circuit.py --gpt2-prompts 8 --gpt2-half 20

Rows:
- find_circuit on the shipped specimen (2 x 4 x 128), its defaults: EAP-IG (5 steps), mean ablation, 20 induction
  prompts of 41 tokens (and again with corrupted ablation); and on a GPT-2-shaped MiniGPT (12 layers x 12 heads x
  768, 50,257 tokens) with random weights, a short induction prompt set (its circuit means nothing: a random model
  copies nothing; the cost is what it measures). Each: seconds, passes of the prompt set (forward, backward among
  them), edges kept, heads, faithfulness.
- attribution_patching (every head at every position, from one forward pass on each text and one backward pass) on
  the GPT-2-shaped model at 1,024 tokens, against one plain forward pass over the same tokens: the two alternate
  (A B A B, after a warm-up round) so that the machine's noise hits both alike; the medians.

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
    args = parser.parse_args()
    print(machine_summary())
    specimen = MiniGPTForCausalLM.from_pretrained(REPO / "minigpt" / "models" / "specimen").eval()
    torch.manual_seed(0)
    gpt2 = MiniGPTForCausalLM(MiniGPTConfig(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50257))
    gpt2.eval()
    shape = f"{args.gpt2_prompts} prompts of {2 * args.gpt2_half + 1} tokens"
    rows = [
        circuit_row("find_circuit, specimen, 20 prompts of 41 tokens", specimen),
        circuit_row("find_circuit, specimen, the same, corrupted ablation", specimen, ablation="corrupted"),
        circuit_row(f"find_circuit, GPT-2 shape, {shape}", gpt2, prompts=args.gpt2_prompts, half=args.gpt2_half),
    ]
    print_table(["call", "seconds", "passes (forward / backward)", "edges kept", "heads", "faithfulness"], rows)

    generator = torch.Generator().manual_seed(0)
    clean = torch.randint(0, 50257, (args.tokens,), generator=generator).tolist()
    corrupted = clean[:-1] + [(clean[-1] + 1) % 50257]  # the last token changed: random weights, the answer changes

    def plain():
        with torch.no_grad():
            gpt2(input_ids=torch.tensor([clean]), use_cache=False)

    seconds = alternate(
        {"plain": plain, "attribution": lambda: heads.attribution_patching(gpt2, clean, corrupted)}, args.rounds
    )
    reference, took = (statistics.median(seconds[name]) for name in ("plain", "attribution"))
    print()
    print_table(
        ["call (median of alternating rounds)", "seconds", "vs one plain pass"],
        [
            [f"one plain forward pass, GPT-2 shape, {args.tokens:,} tokens", f"{reference:.2f}", "1.0x"],
            [f"attribution_patching, GPT-2 shape, {args.tokens:,} tokens", f"{took:.2f}", f"{took / reference:.1f}x"],
        ],
    )


if __name__ == "__main__":
    main()
