"""Per-forward time of the eager path (returns the weights) against sdpa (fused kernel), same model, same weights.

python bench/bench_attention.py [--rounds 10]
"""

import argparse
import copy
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM  # noqa: E402
from timing import alternate, machine_summary, print_table, summarise  # noqa: E402

SIZES = [  # (preset, batch, sequence length)
    ("names", 64, 16),
    ("shakespeare", 8, 128),
    ("gpt2", 1, 512),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    print(machine_summary())
    rows = []
    for preset, batch, length in SIZES:
        torch.manual_seed(0)
        model = MiniGPTForCausalLM(MiniGPTConfig.from_preset(preset)).eval()
        ids = torch.randint(0, model.config.vocab_size, (batch, length))
        models = {"eager": model, "sdpa": copy.deepcopy(model)}  # the same weights, each path set once
        for implementation, twin in models.items():
            twin.set_attn_implementation(implementation)

        def forward(implementation, models=models, ids=ids):
            with torch.inference_mode():
                return models[implementation](ids, use_cache=False).logits

        torch.testing.assert_close(forward("eager"), forward("sdpa"), atol=1e-4, rtol=1e-4)
        seconds = alternate({"eager": lambda: forward("eager"), "sdpa": lambda: forward("sdpa")}, args.rounds)
        eager, sdpa = summarise(seconds["eager"], 1000), summarise(seconds["sdpa"], 1000)
        rows.append(
            [f"{preset} ({model.num_parameters() / 1e6:.1f}M)", f"{batch}x{length}", *eager, *sdpa, eager[1] / sdpa[1]]
        )
    print_table(
        [
            "model",
            "batch x T",
            "eager min ms",
            "eager median ms",
            "eager max ms",
            "sdpa min ms",
            "sdpa median ms",
            "sdpa max ms",
            "eager / sdpa",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
