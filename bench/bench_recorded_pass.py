"""The recorded pass near its floor, and a lone visitor's heavy view on every core (issue 27).

    python bench/bench_recorded_pass.py

A GPT-2-shaped MiniGPT (12 layers x 12 heads x 768, vocabulary 50,257; random weights) at 1,024 tokens, in one
process, timed in alternating rounds on 1 and on 2 threads: a plain sdpa forward (the floor's reference), the recorded
pass as it was before issue 27 (`git show BEFORE:...`: the eager path's scores scaled, masked and soft-maxed into new
tensors, then every layer's weights stacked into one), and the recorded pass now (the weights written once, by the
softmax, into their final buffer). Then the app, served on 127.0.0.1 to a lone visitor: the attention view of a new
text each time (so that its pass is computed, not read from the cache), against the in-process recorded pass on 2
threads. Goals: recorded / plain <= 1.25x; served view / in-process pass on 2 threads <= 1.3x.
"""

import importlib.util
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench"), str(REPO / "tests")]

from helpers import printable_tokenizer, running_app, save_gpt2  # noqa: E402
from minigpt.heads.recorded_pass import run_forward_pass  # noqa: E402
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM  # noqa: E402
from timing import alternate, machine_summary, print_table, summarise  # noqa: E402

BEFORE = "637652c"  # the last commit before issue 27's recorded pass
SHAPE = dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50257)


def module_from_git(path: str, name: str):
    """A file of the repository as it was at BEFORE, imported as a module of its own."""
    source = subprocess.run(["git", "show", f"{BEFORE}:{path}"], cwd=REPO, check=True, capture_output=True, text=True)
    file = Path(tempfile.mkdtemp()) / f"{name}.py"
    file.write_text(source.stdout)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_process(threads: int, rounds: int) -> dict[str, float]:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = MiniGPTForCausalLM(MiniGPTConfig(**SHAPE)).eval()
    old_modeling = module_from_git("modeling_minigpt.py", "modeling_before")
    old_pass = module_from_git("explorer/forward_pass.py", "forward_pass_before")
    old_model = old_modeling.MiniGPTForCausalLM(old_modeling.MiniGPTConfig(**SHAPE)).eval()
    old_model.load_state_dict(model.state_dict())
    ids = torch.randint(1, SHAPE["vocab_size"], (1024,)).tolist()

    def plain():
        with torch.no_grad():
            model(input_ids=torch.tensor([ids]), use_cache=False, logits_to_keep=1)

    contenders = {
        "plain sdpa forward": plain,
        "recorded pass, before": lambda: old_pass.run_forward_pass(old_model, ids),
        "recorded pass, now": lambda: run_forward_pass(model, ids),
    }
    seconds = alternate(contenders, rounds=rounds)
    return {name: summarise(samples)[1] for name, samples in seconds.items()}


def shipped_before_and_now(rounds: int) -> list[list[str]]:
    """The shipped models' recorded pass (names: a name; shakespeare: its 128-token context), before and now, on the
    server's one thread, alternating."""
    from minigpt.demo.core.models import SHIPPED

    torch.set_num_threads(1)
    old_modeling = module_from_git("modeling_minigpt.py", "modeling_before")
    old_pass = module_from_git("explorer/forward_pass.py", "forward_pass_before")
    rows = []
    for name, length in (("names", 8), ("shakespeare", 128)):
        model = MiniGPTForCausalLM.from_pretrained(SHIPPED[name]).eval()
        old_model = old_modeling.MiniGPTForCausalLM(old_modeling.MiniGPTConfig(**model.config.to_dict())).eval()
        old_model.load_state_dict(model.state_dict())
        ids = [0] + torch.randint(1, model.config.vocab_size - 1, (length - 1,)).tolist()
        seconds = alternate(
            {
                "before": partial(old_pass.run_forward_pass, old_model, ids),
                "now": partial(run_forward_pass, model, ids),
            },
            rounds=rounds,
        )
        before, now = summarise(seconds["before"], 1000)[1], summarise(seconds["now"], 1000)[1]
        rows.append([f"{name}, {length} tokens", f"{before:.2f}", f"{now:.2f}", f"{now / before:.2f}x"])
    return rows


def served_against_in_process(rounds: int) -> tuple[float, float]:
    """Median seconds of the served attention view of a new 1,024-token text (a lone visitor), and of the in-process
    recorded pass on 2 threads, timed in alternation (the machine's noise hits both alike)."""
    import httpx

    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = MiniGPTForCausalLM(MiniGPTConfig(**SHAPE)).eval()
    ids = torch.randint(1, SHAPE["vocab_size"], (1024,)).tolist()
    with tempfile.TemporaryDirectory() as root:
        shape = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
        folder = save_gpt2(Path(root) / "gpt2-shaped", printable_tokenizer(), **shape)
        base = ("It was the best of times, it was the worst of times, it was the age of wisdom. " * 20)[:1021]
        with running_app("--model", str(folder)) as (url, _):
            http = httpx.Client(timeout=600)

            def view(i: int) -> None:
                text = f"{i:02d}" + base  # a new text: its pass is computed, not read from the cache
                event = http.post(f"{url}gradio_api/call/attention", json={"data": [text, "gpt2-shaped"]})
                body = http.get(f"{url}gradio_api/call/attention/{event.json()['event_id']}").text
                assert "event: complete" in body, body[-500:]

            view(99)  # loads the model
            views, passes = [], []
            for i in range(rounds):
                start = time.perf_counter()
                view(i)
                views.append(time.perf_counter() - start)
                start = time.perf_counter()
                run_forward_pass(model, ids)
                passes.append(time.perf_counter() - start)
    return summarise(views)[1], summarise(passes)[1]


def main() -> None:
    print(machine_summary())
    one, two = in_process(1, 5), in_process(2, 5)
    rows = [
        [
            name,
            f"{one[name]:.2f}",
            f"{one[name] / one['plain sdpa forward']:.2f}x",
            f"{two[name]:.2f}",
            f"{two[name] / two['plain sdpa forward']:.2f}x",
        ]
        for name in one
    ]
    print_table(["GPT-2 shape, 1,024 tokens", "1 thread (s)", "/ plain", "2 threads (s)", "/ plain"], rows)
    print_table(["shipped model, 1 thread", "before (ms)", "now (ms)", "now / before"], shipped_before_and_now(30))
    view, in_process_pass = served_against_in_process(7)
    print_table(
        ["a lone visitor, GPT-2 shape at 1,024 tokens", "seconds", "/ in-process recorded pass on 2 threads"],
        [
            ["attention view, served (a new text each time)", f"{view:.2f}", f"{view / in_process_pass:.2f}x"],
            ["in-process recorded pass, 2 threads (alternating)", f"{in_process_pass:.2f}", "1.00x"],
        ],
    )


if __name__ == "__main__":
    main()
