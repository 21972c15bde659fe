"""The loss log and loss curve of a training run, from the Trainer's `state.log_history`."""

import csv
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and in tests
import matplotlib.pyplot as plt  # noqa: E402


def loss_points(history: list[dict], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one logged quantity: "loss" (training) or "eval_loss" (validation)."""
    points = [(h["step"], h[key]) for h in history if key in h]
    return [s for s, _ in points], [v for _, v in points]


def write_loss_log(history: list[dict], path: Path) -> None:
    """step, train_loss, eval_loss, learning_rate: one row per logged step (empty cells where not measured)."""
    rows: dict[int, dict] = {}
    for h in history:
        row = rows.setdefault(h["step"], {"step": h["step"]})
        for key, column in (("loss", "train_loss"), ("eval_loss", "eval_loss"), ("learning_rate", "learning_rate")):
            if key in h:
                row[column] = h[key]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "train_loss", "eval_loss", "learning_rate"])
        writer.writeheader()
        writer.writerows(rows[step] for step in sorted(rows))


def plot_losses(
    history: list[dict], path: Path, title: str = "MiniGPT", vocab_size: int | None = None, resumed_at=()
) -> None:
    """Training and validation loss against step, saved as a PNG (see loss_figure)."""
    fig = loss_figure(history, title, vocab_size, resumed_at)
    fig.savefig(path)
    plt.close(fig)


def loss_figure(history: list[dict], title: str = "MiniGPT", vocab_size: int | None = None, resumed_at=()):
    """Training and validation loss against step; with `vocab_size`, the chance line (a uniform guess over the
    vocabulary: ln V nats), and a mark at each step a run resumed from."""
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    for key, label, style in (("loss", "training", "-"), ("eval_loss", "validation", "o-")):
        steps, values = loss_points(history, key)
        if steps:
            ax.plot(steps, values, style, label=label, markersize=4)
    if vocab_size:
        chance = math.log(vocab_size)
        ax.axhline(chance, color="grey", linestyle=":", label=f"chance: ln {vocab_size} = {chance:.2f}")
    for n, step in enumerate(resumed_at):
        ax.axvline(step, color="tab:red", linestyle="--", alpha=0.6, label="resumed" if n == 0 else None)
    ax.set(xlabel="step", ylabel="loss (nats per token)", title=title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig
