"""The loss log and loss curve of a training run, from the Trainer's `state.log_history`, and its head roles over
training (minigpt/heads/role_log.py's lines)."""

import csv
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and in tests
import matplotlib.pyplot as plt  # noqa: E402

from minigpt.heads.role_log import induction_forms  # noqa: E402  (after matplotlib.use)


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


ROLE_TITLES = {
    "previous_token": "previous token",
    "first_token": "first token (sink)",
    "self": "self",
    "induction": "induction (probe)",
}


def roles_figure(lines: list[dict], title: str = "MiniGPT", leading: int = 2):
    """Each role's score of every head against the step (a line per head; the `leading` heads at the last evaluation
    drawn bold and named), and below, on the same step axis, the validation loss and the probe's two halves: an
    induction head forming shows as a jump in its score where the repeated half's loss drops."""
    steps = [line["step"] for line in lines]
    fig, axes = plt.subplots(len(ROLE_TITLES) + 1, 1, figsize=(7, 11), dpi=100, sharex=True)
    for ax, (role, label) in zip(axes, ROLE_TITLES.items()):
        scores = [line[role] for line in lines]  # (evaluations, layers, heads)
        heads = [(layer, head) for layer in range(len(scores[0])) for head in range(len(scores[0][0]))]
        first = sorted(heads, key=lambda lh: -scores[-1][lh[0]][lh[1]])[:leading]
        for layer, head in heads:
            bold = (layer, head) in first
            values = [s[layer][head] for s in scores]
            ax.plot(
                steps,
                values,
                lw=2 if bold else 0.8,
                alpha=1 if bold else 0.35,
                label=f"head {layer}.{head}" if bold else None,
            )
        ax.set(ylabel=label, ylim=(0, 1.02))
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    formed = induction_forms(lines)
    if formed:  # the phase change, said on the plot: a line through every panel at its step, and its words
        for panel in axes:
            panel.axvline(formed["step"], color="black", ls=":", lw=1)
        words = (
            f"step {formed['step']}: head {formed['layer']}.{formed['head']} becomes an induction head "
            f"({formed['before']:.2f} -> {formed['score']:.2f})"
        )
        right = formed["step"] > (steps[0] + steps[-1]) / 2  # the words on the side of the line with room
        axes[list(ROLE_TITLES).index("induction")].annotate(
            words,
            (formed["step"], 0.95),
            xytext=(-4 if right else 4, 0),
            textcoords="offset points",
            fontsize=8,
            va="top",
            ha="right" if right else "left",
        )
    ax = axes[-1]
    for key, label in (
        ("eval_loss", "validation loss"),
        ("first_half_loss", "probe, first half"),
        ("repeated_half_loss", "probe, repeated half"),
    ):
        points = [(line["step"], line[key]) for line in lines if line.get(key) is not None]
        if points:
            ax.plot(*zip(*points), "o-", markersize=3, label=label)
    ax.set(xlabel="step", ylabel="loss (nats)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    axes[0].set_title(f"{title}: head roles over training")
    fig.tight_layout()
    return fig


def plot_roles(lines: list[dict], path, title: str = "MiniGPT") -> None:
    """roles_figure saved as a PNG."""
    fig = roles_figure(lines, title)
    fig.savefig(path)
    plt.close(fig)
