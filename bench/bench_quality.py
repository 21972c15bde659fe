"""Quality against wall time: train.py on the reference corpora, compared with the published small-GPT results.

    python bench/bench_quality.py                 # both benchmarks, about 15 minutes on 2 quiet CPU cores
    python bench/bench_quality.py names           # or: shakespeare
    python bench/bench_quality.py names -- --n_embd 96 --max_steps 5000   # more train.py flags: a sweep point
    python bench/bench_quality.py names --jobs 3  # the splits side by side, 1 thread each (sweeps on a busy machine)

Each benchmark runs train.py in a fresh process and prints its validation loss against wall time (counted from the
start of train.py, imports and data preparation included), then whether it reached the target within the budget.
- names: ../shared/data/names.txt, three splits: 2,000 names held out by a seeded shuffle (as makemore does) with
  seeds 3407, 1 and 2 (the seed also sets the initialisation and the order of the training names), the names preset
  and its training defaults. One split of 1,000-2,000 names carries +-0.01-0.02 of sampling noise, so the target is
  stated on the mean over the splits, step by step: mean and spread (standard deviation, min-max) of the validation
  loss, against the mean wall time. Reference: makemore's transformer, about 1.92 nats per character after long
  training (its README); its default run on this machine reaches 1.971 after 15 minutes. Target: mean <= 1.92 within
  5 minutes. As wall times swing with the load, each split also prints the step at which it crossed the target, its
  process CPU time (user + system: what the run cost, less moved by other processes than wall time) and the load.
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
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from modeling_minigpt import MiniGPTConfig, MiniGPTForCausalLM  # noqa: E402
from timing import reference_corpus  # noqa: E402  (bench/timing.py: the script's folder is on sys.path)

REPO = Path(__file__).resolve().parent.parent

BENCHMARKS = {
    "names": dict(
        reference="makemore transformer, long training: ~1.92 (its default here: 1.971 after 900 s)",
        target_loss=1.92,
        budget_s=300,
        seeds=[3407, 1, 2],  # one split, initialisation and order of the training names each
        args=[
            "--preset",
            "names",
            "--dataset",
            str(reference_corpus("names.txt")),
            "--val_size",
            "2000",
            "--eval_steps",
            "250",
        ],
    ),
    "shakespeare": dict(
        reference="nanoGPT, same model and batch, this machine: 1.886 in 86 s",
        target_loss=1.88,
        budget_s=86,
        args=[
            "--preset",
            "shakespeare",
            "--tokenizer",
            "char",
            "--dataset",
            str(reference_corpus("tinyshakespeare.txt")),
            "--val_fraction",
            "0.1",
            "--n_layer",
            "4",
            "--n_head",
            "4",
            "--n_embd",
            "128",
            "--block_size",
            "64",
            "--per_device_train_batch_size",
            "12",
            "--max_steps",
            "1600",
            "--learning_rate",
            "3e-3",
            "--dropout",
            "0",
            "--eval_steps",
            "800",
        ],
        seeds=[1337],
    ),
}


def run(name: str, spec: dict, out: Path, seed: int, extra: list[str], threads: int | None = None) -> dict:
    """Trains in a fresh process; returns the validation points (step, elapsed_s, eval_loss), the process's CPU time
    and the load averages (1, 5, 15 minutes) at its start and end. `threads`: torch's threads (default: all cores)."""
    command = [
        sys.executable,
        "train.py",
        *spec["args"],
        "--seed",
        str(seed),
        *extra,
        "--output_dir",
        str(out),
        "--save_steps",
        "100000",
        "--logging_steps",
        "100",
        "--disable_tqdm",
        "true",
        "--samples",
        "3",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    load_before, started = os.getloadavg(), time.perf_counter()
    with open(out.parent / f"{out.name}.log", "w+") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)  # this process's own CPU time, even with others running beside it
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            log.seek(0)
            sys.exit(f"{name}: train.py failed:\n{log.read()[-3000:]}")
    total, cpu_s = time.perf_counter() - started, usage.ru_utime + usage.ru_stime
    history = json.loads((out / "log_history.json").read_text())
    points = [h for h in history if "eval_loss" in h]
    load = f"load {' '.join(f'{x:.1f}' for x in load_before)} -> {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    print(
        f"  {name} seed {seed}: process wall time {total:.0f} s (model card and samples included), "
        f"CPU time {cpu_s:.0f} s, {load}",
        flush=True,
    )
    return dict(seed=seed, points=points, cpu_s=cpu_s, load_before=load_before[0], load_after=os.getloadavg()[0])


def reference_loop(steps=2000, batch=12, block=64, lr=1e-3, min_lr=1e-4, warmup=100, seed=1337) -> dict:
    """nanoGPT's train.py loop for its CPU Shakespeare configuration: random windows of block + 1 characters (block
    predictions each), AdamW (weight decay 0.1 on matrices, betas 0.9/0.99), linear warmup then cosine decay, gradient
    clipping at 1. Validation loss measured as train.py measures it (all of the last 10% in windows of `block`)."""
    started = time.perf_counter()
    text = reference_corpus("tinyshakespeare.txt").read_text()
    vocab = {c: i for i, c in enumerate(sorted(set(text)))}
    tokens = torch.tensor([vocab[c] for c in text])
    split = int(0.9 * len(tokens))
    train, val = tokens[:split], tokens[split:]
    torch.manual_seed(seed)
    config = MiniGPTConfig(vocab_size=len(vocab) + 2, block_size=block, n_layer=4, n_head=4, n_embd=128)  # + eos, pad
    model = MiniGPTForCausalLM(config)
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
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


def crossing(points: list[dict], target: float) -> dict | None:
    """The first validation point at or below the target."""
    return next((p for p in points if p["eval_loss"] <= target), None)


def mean_curve(runs: list[dict]) -> list[dict]:
    """Step by step over the splits: mean and spread of the validation loss, mean wall time."""
    curve = []
    for column in zip(*(r["points"] for r in runs)):  # the splits share the evaluation schedule
        losses = [p["eval_loss"] for p in column]
        elapsed = statistics.mean(p.get("elapsed_s", math.nan) for p in column)
        spread = statistics.stdev(losses) if len(losses) > 1 else 0.0
        curve.append(
            dict(
                step=column[0]["step"],
                elapsed_s=elapsed,
                eval_loss=statistics.mean(losses),
                sd=spread,
                low=min(losses),
                high=max(losses),
            )
        )
    return curve


def report(name: str, spec: dict, runs: list[dict]) -> dict:
    """Per split: its curve, when it crossed the target, its CPU time and load; then the mean over the splits, which
    the target is judged on."""
    target, budget = spec["target_loss"], spec["budget_s"]
    print(f"\n{name}: reference {spec['reference']}; target <= {target} (mean over the splits) within {budget} s")
    print("  step " + "".join(f" | seed {r['seed']:>4}: wall s  val loss" for r in runs))
    for column in zip(*(r["points"] for r in runs)):
        print(
            f"  {column[0]['step']:>4} "
            + "".join(f" | {p.get('elapsed_s', math.nan):>18.1f} {p['eval_loss']:>9.4f}" for p in column)
        )
    for r in runs:
        hit = crossing(r["points"], target)
        where = f"step {hit['step']} at {hit['elapsed_s']:.0f} s" if hit else "never"
        print(
            f"  seed {r['seed']}: crossed {target} at {where}; final {r['points'][-1]['eval_loss']:.4f}, "
            f"best {min(p['eval_loss'] for p in r['points']):.4f}; CPU time {r['cpu_s']:.0f} s; "
            f"load {r['load_before']:.1f} -> {r['load_after']:.1f}"
        )
    curve = mean_curve(runs)
    if len(runs) > 1:
        print(f"  mean over {len(runs)} splits:  step  wall s  mean loss   sd     min-max")
        for c in curve:
            print(
                f"  {'':>26}{c['step']:>5} {c['elapsed_s']:>7.1f} {c['eval_loss']:>9.4f} {c['sd']:>7.4f}  "
                f"{c['low']:.4f}-{c['high']:.4f}"
            )
    within = [c for c in curve if c["elapsed_s"] <= budget]
    best = min((c["eval_loss"] for c in within), default=math.nan)
    reached = crossing(curve, target)
    time_to_target = reached["elapsed_s"] if reached else math.nan
    ok = bool(reached) and time_to_target <= budget
    step = reached["step"] if reached else "-"
    print(
        f"  mean: best within budget {best:.4f} (target ratio {best / target:.3f}); target reached at step {step}, "
        f"{time_to_target:.0f} s (budget ratio {time_to_target / budget:.2f}): "
        f"{'PASS' if ok else 'MISS'}"
    )
    final = curve[-1]
    return dict(
        name=name,
        best=best,
        time_to_target=time_to_target,
        step=step,
        final=final["eval_loss"],
        sd=final["sd"],
        low=final["low"],
        high=final["high"],
        cpu_s=statistics.mean(r["cpu_s"] for r in runs),
        load=max(r["load_before"] for r in runs),
        ok=ok,
    )


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
    print(
        f"  train.py's whole run (imports, data, evaluations included) / the reference's {2000} training steps: "
        f"{ratio:.2f}; scaled to the 86 s nanoGPT took on a quieter day: {86 * ratio:.0f} s"
    )
    return dict(ratio=ratio, reference_loss=reference["eval_loss"])


def main(argv: list[str]) -> None:
    names, extra = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    jobs = 1
    if "--jobs" in names:  # splits run side by side, one torch thread each: for sweeps, not for wall times
        jobs = int(names.pop(names.index("--jobs") + 1))
        names.remove("--jobs")
    rows = []
    for name in names or list(BENCHMARKS):
        spec = BENCHMARKS[name]
        threads = max(1, (os.cpu_count() or 1) // jobs) if jobs > 1 else None
        with tempfile.TemporaryDirectory() as root, ThreadPoolExecutor(jobs) as pool:
            futures = [
                pool.submit(run, name, spec, Path(root) / f"seed{seed}", seed, extra, threads) for seed in spec["seeds"]
            ]
            runs = [future.result() for future in futures]
        rows.append(report(name, spec, runs))
        if name == "shakespeare":
            rows[-1] |= compare_with_reference(runs[0]["points"])
    print(
        "\n| benchmark | splits | target | mean val loss: best within budget | mean: step and time to target | "
        "final: mean, sd, min-max | CPU time a run | load (1 min) | wall time / plain-PyTorch loop | its val loss |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        spec = BENCHMARKS[r["name"]]
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else "-"
        reference = f"{r['reference_loss']:.4f}" if "reference_loss" in r else "-"
        print(
            f"| {r['name']} | {len(spec['seeds'])} | <= {spec['target_loss']} in {spec['budget_s']} s | "
            f"{r['best']:.4f} | {r['step']}, {r['time_to_target']:.0f} s | {r['final']:.4f} +- {r['sd']:.4f}, "
            f"{r['low']:.4f}-{r['high']:.4f} | {r['cpu_s']:.0f} s | {r['load']:.1f} | {ratio} | "
            f"{reference} |"
        )
    if extra:
        print(f"train.py flags added: {' '.join(extra)}")


if __name__ == "__main__":
    main(sys.argv[1:])
