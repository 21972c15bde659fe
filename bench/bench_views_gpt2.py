"""The page's heavy views on a new text at GPT-2's shape, each against an attribution call in the same run.

    python bench/bench_views_gpt2.py                 # 16-token texts (start token included), 3 rounds
    python bench/bench_views_gpt2.py --tokens 64 --rounds 2
    python bench/bench_views_gpt2.py --tokens 1024 --rounds 1 --views Why   # attribution and the views named alone

A GPT-2-shaped random model (transformers' GPT2LMHeadModel, 12 layers x 12 heads x 768, 50,257 tokens, converted by
the demo with from_gpt2, as `--model openai-community/gpt2` is) served by the demo's own endpoint bodies in this
process, with one thread as the server sets (`app.main`: a heavy pass takes the machine's cores through CoreShare).
Every call reads a text the server has not seen (its forward pass is not cached): the learner's new text.

- cold: each view's first call on the model (nothing kept per model yet: the roles probe, the effective embedding);
- warm: its median over `--rounds` later calls, each on another new text.

The ratio is each view's seconds over the attribution call's (/logit_attribution on a new text) of the same phase.
"""

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "bench")]

from helpers import PRINTABLE, printable_tokenizer, save_gpt2  # noqa: E402
from minigpt.demo.circuits.endpoints import Circuits  # noqa: E402
from minigpt.demo.core.state import DemoState  # noqa: E402
from minigpt.demo.head_tools.endpoints import Insights  # noqa: E402
from minigpt.demo.maps.endpoints import AttentionMaps  # noqa: E402
from timing import machine_summary, print_table  # noqa: E402

GPT2_SHAPE = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
LETTERS = [c for c in PRINTABLE if c.isalpha()]


def seconds(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


class NewTexts:
    """Texts of `tokens` tokens (the start token and tokens - 1 letters) never served before, and for patching a
    corrupted text of the same length whose top-1 answer differs (a random model: the last letter changed)."""

    def __init__(self, circuits: Circuits, model: str, tokens: int):
        self.circuits, self.model, self.length, self.random = circuits, model, tokens - 1, random.Random(0)

    def text(self) -> str:
        return "".join(self.random.choice(LETTERS) for _ in range(self.length))

    def pair(self) -> tuple[str, str]:
        clean = self.text()
        view = self.circuits.view(clean, self.model)
        answer = int(view.recorded.logits(view.lm.model)[-1].argmax())
        for letter in LETTERS:
            corrupted = clean[:-1] + letter
            other = self.circuits.view(corrupted, self.model)
            if int(other.recorded.logits(other.lm.model)[-1].argmax()) != answer:
                self.circuits.state.passes.clear()  # the clean text is new again to the timed call
                return clean, corrupted
        raise SystemExit("no one-letter change moves the answer: try another seed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=16, help="tokens of each new text, start token included")
    parser.add_argument("--rounds", type=int, default=3, help="warm calls of each view (their median)")
    parser.add_argument("--layer", type=int, default=5, help="the head of Head circuit: its layer")
    parser.add_argument("--head", type=int, default=1, help="the head of Head circuit")
    parser.add_argument("--why-layer", type=int, default=11, help="Why's head: its layer (head: --head)")
    parser.add_argument("--views", nargs="*", default=None, help="time only these views (a word of each name)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as app.main sets it
    print(machine_summary())
    with tempfile.TemporaryDirectory() as tmp:
        folder = save_gpt2(Path(tmp) / "gpt2-shaped", printable_tokenizer(), **GPT2_SHAPE)
        state = DemoState.configure([str(folder)], training=False)
        circuits, insights, maps, model = Circuits(state), Insights(state), AttentionMaps(state), "gpt2-shaped"
        state.picker.get(model)
        texts = NewTexts(circuits, model, args.tokens)
        # Each view: a new text (prepared untimed), then the call that is timed.
        views = {
            "attribution (/logit_attribution)": lambda text=None: lambda: circuits.logit_attribution(text, model),
            "Head roles (/head_roles)": lambda text=None: lambda: insights.head_roles(text, model),
            "Head circuit (/head_circuit)": lambda text=None: (
                lambda: circuits.head_circuit(text, model, args.layer, args.head)
            ),
            "patching (/patching)": lambda text=None: lambda: circuits.patching(*text, model),
            "Why (/attention_why)": lambda text=None: (
                lambda: maps.attention_why(text, model, args.why_layer, args.head)
            ),
        }
        if args.views:  # the reference always, and the views asked for
            views = {n: v for i, (n, v) in enumerate(views.items()) if not i or any(w in n for w in args.views)}
        new = {name: texts.pair if name.startswith("patching") else texts.text for name in views}
        timed = lambda name: seconds(views[name](new[name]()))  # noqa: E731
        cold = {name: timed(name) for name in views}
        warm = {name: statistics.median(timed(name) for _ in range(args.rounds)) for name in views}
    reference = "attribution (/logit_attribution)"
    rows = [
        [name, f"{cold[name]:.2f}", f"{cold[name] / cold[reference]:.1f}x", f"{warm[name]:.2f}",
         f"{warm[name] / warm[reference]:.1f}x"]
        for name in views
    ]  # fmt: skip
    print(f"\nGPT-2-shaped random model (12 x 12 x 768, 50,257 tokens), new texts of {args.tokens} tokens:")
    print_table(["view", "cold s", "cold ratio", "warm s", "warm ratio"], rows)


if __name__ == "__main__":
    main()
