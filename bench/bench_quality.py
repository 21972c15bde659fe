"""Quality against wall time: train.py on the reference corpora, compared with the published small-GPT results.

    python bench/bench_quality.py                 # both benchmarks, about 7 minutes on 2 CPU cores
    python bench/bench_quality.py names           # or: shakespeare

Each benchmark runs train.py in a fresh process and prints its validation loss against wall time (counted from the
start of train.py, imports and data preparation included), then whether it reached the target within the budget.
- names: ../shared/data/names.txt, 1,000 names held out by a seeded shuffle (as makemore does), the names preset
  and its training defaults (rows of packed names, 80 a batch, peak lr 6e-3, dropout 0.1, weight decay 0.1).
  Reference: makemore's transformer, about 1.92 nats per character after long training (its README); its default
  run on this machine reaches 1.971 after 15 minutes. Target: <= 1.92 within 5 minutes.
- shakespeare: ../shared/data/tinyshakespeare.txt, characters, first 90% train / last 10% validation, nanoGPT's CPU
  configuration (4 layers, 4 heads, width 128, context 64, batch 12, no dropout, AdamW, warmup and cosine decay)
  with a tuned schedule: peak learning rate 3e-3 instead of 1e-3, 1,600 steps instead of 2,000.
  Reference: nanoGPT's own script reaches 1.886 (its 20-batch estimate) in 86 s on this machine. Target: <= 1.88
  within 86 s. The same-run reference loop below uses nanoGPT's exact schedule (lr 1e-3, 2,000 steps).
The machine is shared and has 2 cores, so wall times swing with the load. The shakespeare benchmark therefore also
runs nanoGPT's training loop written out in plain PyTorch (same model, data, schedule; `reference_loop`) in the same
run, and reports train.py's wall time as a ratio to it: that ratio, times the 86 s nanoGPT took on a quiet machine,
is what train.py would take there.
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"

BENCHMARKS = {
    "names": dict(
        reference="makemore transformer, long training: ~1.92 (its default here: 1.971 after 900 s)",
        target_loss=1.92,
        budget_s=300,
        args=["--preset", "names", "--dataset", str(DATA / "names.txt"), "--val_size", "1000", "--seed", "3407",
              "--eval_steps", "500"],
    ),
    "shakespeare": dict(
        reference="nanoGPT, same model and batch, this machine: 1.886 in 86 s",
        target_loss=1.88,
        budget_s=86,
        args=["--preset", "shakespeare", "--tokenizer", "char", "--dataset", str(DATA / "tinyshakespeare.txt"),
              "--val_fraction", "0.1", "--n_layer", "4", "--n_head", "4", "--n_embd", "128", "--block_size", "64",
              "--per_device_train_batch_size", "12", "--max_steps", "1600", "--learning_rate", "3e-3",
              "--dropout", "0", "--eval_steps", "800", "--seed", "1337"],
    ),
}  # fmt: skip


def run(name: str, spec: dict, out: Path) -> list[dict]:
    """Trains in a fresh process; returns the validation points: step, elapsed_s, eval_loss."""
    command = [sys.executable, "train.py", *spec["args"], "--output_dir", str(out), "--save_steps", "100000",
               "--logging_steps", "100", "--disable_tqdm", "true", "--samples", "3"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{name}: train.py failed:\n{done.stderr[-3000:]}")
    total = time.perf_counter() - started
    history = json.loads((out / "log_history.json").read_text())
    points = [h for h in history if "eval_loss" in h]
    print(f"  (process wall time {total:.0f} s, model card and samples included)")
    return points


def reference_loop(steps=2000, batch=12, block=64, lr=1e-3, min_lr=1e-4, warmup=100, seed=1337) -> dict:
    """nanoGPT's train.py loop for its CPU Shakespeare configuration: random windows of block + 1 characters (block
    predictions each), AdamW (weight decay 0.1 on matrices, betas 0.9/0.99), linear warmup then cosine decay, gradient
    clipping at 1. Validation loss measured as train.py measures it (all of the last 10% in windows of `block`)."""
    started = time.perf_counter()
    text = (DATA / "tinyshakespeare.txt").read_text()
    vocab = {c: i for i, c in enumerate(sorted(set(text)))}
    tokens = torch.tensor([vocab[c] for c in text])
    split = int(0.9 * len(tokens))
    train, val = tokens[:split], tokens[split:]
    torch.manual_seed(seed)
    config = MiniGPTConfig(vocab_size=len(vocab) + 2, block_size=block, n_layer=4, n_head=4, n_embd=128)  # + eos, pad
    model = MiniGPTForCausalLM(config)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]  # fmt: skip
    optimizer = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99), fused=True)
    model.train()
    for step in range(steps):
        progress = (step - warmup) / (steps - warmup)
        cosine = min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * progress))
        rate = lr * (step + 1) / warmup if step < warmup else cosine
        for group in optimizer.param_groups:
            group["lr"] = rate
        starts = torch.randint(len(train) - block - 1, (batch,))
        x = torch.stack([train[i : i + block] for i in starts])  # (B, T)
        y = torch.stack([train[i + 1 : i + block + 1] for i in starts])  # (B, T): the next characters
        logits = model(input_ids=x, use_cache=False).logits
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    train_s = time.perf_counter() - started
    model.eval()
    windows = val[: len(val) // block * block].view(-1, block)  # (N, T)
    with torch.no_grad():
        losses = [model(input_ids=w, labels=w, use_cache=False).loss for w in windows.split(64)]
        sizes = [len(w) for w in windows.split(64)]
    val_loss = float(sum(loss * n for loss, n in zip(losses, sizes)) / sum(sizes))
    return dict(wall_s=train_s, eval_loss=val_loss)


def report(name: str, spec: dict, points: list[dict], load: float) -> dict:
    print(f"\n{name}: reference {spec['reference']}; target <= {spec['target_loss']} within {spec['budget_s']} s")
    print(f"  load average at start: {load:.2f} (2 cores)")
    print("  step   wall s   val loss")
    for p in points:
        print(f"  {p['step']:>5} {p.get('elapsed_s', float('nan')):>8.1f} {p['eval_loss']:>10.4f}")
    within = [p for p in points if p.get("elapsed_s", 1e9) <= spec["budget_s"]]
    best = min((p["eval_loss"] for p in within), default=float("nan"))
    reached = next((p for p in points if p["eval_loss"] <= spec["target_loss"]), None)
    time_to_target = reached["elapsed_s"] if reached else float("nan")
    ok = bool(reached) and time_to_target <= spec["budget_s"]
    print(f"  best within budget {best:.4f} (target ratio {best / spec['target_loss']:.3f}); "
          f"target reached at {time_to_target:.0f} s (budget ratio {time_to_target / spec['budget_s']:.2f}): "
          f"{'PASS' if ok else 'MISS'}")  # fmt: skip
    return dict(name=name, best=best, time_to_target=time_to_target, final=points[-1]["eval_loss"], ok=ok)


def compare_with_reference(points: list[dict]) -> dict:
    """The plain-PyTorch nanoGPT loop, run now: wall-time ratio of train.py to it, and its validation loss."""
    load = os.getloadavg()[0]
    reference = reference_loop()
    ours = points[-1]
    ratio = ours["elapsed_s"] / reference["wall_s"]
    print(
        f"\nshakespeare reference in this run (plain PyTorch nanoGPT loop, load {load:.2f}): "
        f"{reference['wall_s']:.0f} s training, val loss {reference['eval_loss']:.4f}"
    )
    print(f"  train.py's whole run (imports, data, evaluations included) / the reference's {2000} training steps: "
          f"{ratio:.2f}; scaled to the 86 s nanoGPT took on a quieter day: {86 * ratio:.0f} s")  # fmt: skip
    return dict(ratio=ratio, reference_loss=reference["eval_loss"])


def main(names: list[str]) -> None:
    rows = []
    for name in names or list(BENCHMARKS):
        spec = BENCHMARKS[name]
        with tempfile.TemporaryDirectory() as out:
            load = os.getloadavg()[0]
            points = run(name, spec, Path(out))
            rows.append(report(name, spec, points, load))
            if name == "shakespeare":
                rows[-1] |= compare_with_reference(points)
    print(
        "\n| benchmark | target | best val loss within budget | time to target | final val loss | "
        "wall time / plain-PyTorch loop in this run | its val loss |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        spec = BENCHMARKS[r["name"]]
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else "-"
        reference = f"{r['reference_loss']:.4f}" if "reference_loss" in r else "-"
        print(f"| {r['name']} | <= {spec['target_loss']} in {spec['budget_s']} s | {r['best']:.4f} | "
              f"{r['time_to_target']:.0f} s | {r['final']:.4f} | {ratio} | {reference} |")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
