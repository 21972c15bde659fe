"""What logging the head roles at each evaluation costs a training run (minigpt/heads/role_log.py, train.py's RoleLog).

    python bench/bench_roles_cost.py

For the names and shakespeare presets (their sizes, batch and evaluation interval; random weights, which cost the same
as trained ones), one training step (forward, loss, backward, AdamW) and one role scoring (the recorded pass of a
context-long sample and the induction probe, `role_scores.measured_roles`), timed in alternating rounds. The ratio
is the scoring's share of the training time between two evaluations: eval_steps training steps, then one scoring.
"""

import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from configuration_minigpt import MiniGPTConfig  # noqa: E402
from minigpt.heads.recorded_pass import run_forward_pass  # noqa: E402
from minigpt.heads.role_scores import measured_roles  # noqa: E402
from minigpt.presets import TRAINING_PRESETS  # noqa: E402
from modeling_minigpt import MiniGPTForCausalLM  # noqa: E402
from timing import alternate, machine_summary, print_table, summarise  # noqa: E402


def contenders(preset: str) -> tuple[dict, int]:
    config = MiniGPTConfig.from_preset(preset)
    schedule = TRAINING_PRESETS[preset]
    torch.manual_seed(0)
    model = MiniGPTForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = torch.randint(3, config.vocab_size, (schedule["per_device_train_batch_size"], config.block_size))
    sample = [0] + torch.randint(3, config.vocab_size, (config.block_size - 1,)).tolist()  # the start token first

    def train_step():
        model.train()
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    def score_roles():
        model.eval()
        measured_roles(model, run_forward_pass(model, sample), 0, {0, 1, 2}, config.vocab_size)
        model.train()

    return {"training step": train_step, "role scoring": score_roles}, schedule["eval_steps"]


def main() -> None:
    print(machine_summary())
    rows = []
    for preset in ("names", "shakespeare"):
        runs, eval_steps = contenders(preset)
        seconds = alternate(runs, rounds=5)
        step, scoring = summarise(seconds["training step"])[1], summarise(seconds["role scoring"])[1]
        share = scoring / (eval_steps * step + scoring)
        rows.append([preset, f"{step * 1000:.1f}", eval_steps, f"{scoring * 1000:.1f}", f"{share:.2%}"])
    print_table(
        ["preset", "training step (ms)", "steps between evaluations", "role scoring (ms)", "share of training time"],
        rows,
    )


if __name__ == "__main__":
    main()
