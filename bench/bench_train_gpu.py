"""train.py's path against a bare training loop over the same model, batch and optimizer, and the data pipeline alone.

    python bench/bench_train_gpu.py                  # CPU: 1 layer, 32 wide, 64 rows of 256 tokens, one thread
    python bench/bench_train_gpu.py --gpu            # a GPU: the gpt2 preset (bf16, compiled), 16 rows of 1,024

Three rows, measured in the same run on the same corpus (tinyshakespeare from ../shared/data when it is there, else
the built-in Shakespeare), the same tokenizer and the same seed:
- bare loop: the model (MiniGPTForCausalLM), AdamW and random windows of the tokenized text already on the device,
  forward, backward, clip, step: what the hardware gives this model;
- train.py: `minigpt.training.main` with the same flags, timed per step by a callback after a warm-up (the
  Trainer, its data pipeline, its logging);
- pipeline: train.py's training batches alone (its DataLoader, collated), tokens a second delivered; and the same
  text read as a Hub dataset is (streamed and tokenized as it is read, here 4 shards: its quarters), with no DataLoader
  worker and with 2, each worker tokenizing shards of its own.
With a GPU, MFU: 6 x parameters x tokens a second (plus attention's 12 x layers x T x width) over the card's bf16
peak (989 TFLOP/s for an H100/H200 SXM, dense).
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from transformers import TrainerCallback  # noqa: E402

from minigpt import data, streams, training  # noqa: E402
from modeling_minigpt import MiniGPTForCausalLM  # noqa: E402
from timing import machine_summary, print_table, reference_corpus  # noqa: E402

PEAK_FLOPS = 989e12  # bf16 dense, H100/H200 SXM
SHAPES = {
    "cpu": dict(layers=1, width=32, heads=2, rows=64, block=256, steps=80, warmup=10, extra=[]),
    "gpu": dict(
        layers=12, width=768, heads=12, rows=16, block=1024, steps=60, warmup=15, extra=["--bf16", "--torch_compile"]
    ),
}


def flags(shape: dict, corpus: Path, output: Path) -> list[str]:
    return [
        "--preset", "shakespeare", "--dataset", str(corpus), "--tokenizer", "char",
        "--n_layer", str(shape["layers"]), "--n_embd", str(shape["width"]), "--n_head", str(shape["heads"]),
        "--block_size", str(shape["block"]), "--per_device_train_batch_size", str(shape["rows"]),
        "--max_steps", str(shape["steps"]), "--eval_steps", "100000", "--save_steps", "100000",
        "--logging_steps", "100000", "--output_dir", str(output), "--overwrite_output_dir", "true",
        "--disable_tqdm", "true", *shape["extra"],
    ]  # fmt: skip


class StepTimes(TrainerCallback):
    def __init__(self):
        self.stamps = []

    def on_step_end(self, args, state, control, **kwargs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # the step's work done, not just queued
        self.stamps.append(time.perf_counter())


def train_py_step(argv: list[str], warmup: int) -> float:
    """train.py's median seconds a step after `warmup` steps."""
    times = StepTimes()
    training.main(argv, callbacks=[times])
    gaps = [b - a for a, b in zip(times.stamps, times.stamps[1:])][warmup:]
    return statistics.median(gaps)


def prepared(argv: list[str]):
    """train.py's flags, its data (tokenized as it tokenizes) and its model's configuration."""
    script, args = training.parse_args(argv)
    splits = training.load_splits(script, args, script.block_size, None)
    return script, args, splits, training.model_config(script, splits.tokenizer)


def training_tokens(argv: list[str], splits):
    """The training text's token ids: train.py's cached ones (or, on a checkout before the cache, tokenized here by
    that checkout's data module, which read the corpus too)."""
    if getattr(splits, "train_ids", None) is not None:
        return np.asarray(splits.train_ids, dtype=np.int64)
    script, _ = training.parse_args(argv)
    corpus = data.open_corpus(script.dataset)
    n_train = int(sum(len(t) for t, _ in data.pieces(corpus)) * (1 - script.val_fraction))
    return np.concatenate(list(data.token_chunks(data.head(data.pieces(corpus), n_train), splits.tokenizer)))


def bare_step(argv: list[str], shape: dict, device: str) -> tuple[float, int]:
    """The bare loop's median seconds a step, and the model's parameters: random windows of the training tokens."""
    script, args, splits, config = prepared(argv)
    model = MiniGPTForCausalLM(config).to(device)
    if "--torch_compile" in argv:
        model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, fused=device == "cuda")
    ids = torch.as_tensor(training_tokens(argv, splits), dtype=torch.long).to(device)
    rows, block = shape["rows"], shape["block"]
    generator = torch.Generator().manual_seed(0)
    stamps = []
    for _ in range(shape["steps"]):
        starts = torch.randint(0, len(ids) - block, (rows,), generator=generator)
        batch = torch.stack([ids[s : s + block] for s in starts.tolist()])
        with torch.autocast(device, dtype=torch.bfloat16, enabled="--bf16" in argv):
            loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        stamps.append(time.perf_counter())
    gaps = [b - a for a, b in zip(stamps, stamps[1:])][shape["warmup"] :]
    return statistics.median(gaps), sum(p.numel() for p in model.parameters())


def pipeline_tokens_per_second(argv: list[str], batches: int) -> float:
    """train.py's training batches alone: its dataset in a DataLoader as the Trainer makes it (workers, pinned memory,
    its collator), tokens a second."""
    script, args, splits, config = prepared(argv)
    loader = torch.utils.data.DataLoader(
        splits.train,
        batch_size=args.per_device_train_batch_size,
        collate_fn=lambda batch: streams.collate(batch, config.pad_token_id),
        num_workers=args.dataloader_num_workers,
        pin_memory=args.dataloader_pin_memory,
    )
    iterator = iter(loader)
    next(iterator)  # the first batch starts the workers and the stream: not the steady rate
    started, tokens = time.perf_counter(), 0
    for _ in range(batches):
        tokens += next(iterator)["input_ids"].numel()
    return tokens / (time.perf_counter() - started)


def streamed_tokens_per_second(argv: list[str], shape: dict, workers: int, batches: int) -> float:
    """The corpus read as a Hub dataset is, cut into 4 shards (its quarters, by lines): the batches a DataLoader with
    `workers` workers delivers from the stream, tokens a second."""
    script, args, splits, config = prepared(argv)
    lines = Path(script.dataset).read_text().splitlines(keepends=True)
    with tempfile.TemporaryDirectory() as folder:
        for i in range(4):
            Path(folder, f"part-{i}.txt").write_text("".join(lines[i * len(lines) // 4 : (i + 1) * len(lines) // 4]))
        from minigpt import reading  # data read the corpus itself before minigpt/reading.py

        stream = reading.open_corpus(folder)
        stream.files = None  # as a Hub dataset is: no token file, tokenized as read
        block = shape["block"]
        streamed = data.text_splits(stream, "char", block, block, 0.1, seed=0, tokenizer=splits.tokenizer)
        loader = torch.utils.data.DataLoader(
            streamed.train,
            batch_size=shape["rows"],
            collate_fn=lambda batch: streams.collate(batch, config.pad_token_id),
            num_workers=workers,
        )
        iterator = iter(loader)
        next(iterator)  # the workers' start: not the steady rate
        started, tokens = time.perf_counter(), 0
        for _ in range(batches):
            tokens += next(iterator)["input_ids"].numel()
        return tokens / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="the gpt2 preset on a CUDA GPU")
    args = parser.parse_args()
    device = "cuda" if args.gpu else "cpu"
    shape = SHAPES["gpu" if args.gpu else "cpu"]
    if not args.gpu:
        torch.set_num_threads(1)
    corpus = reference_corpus("tinyshakespeare.txt", required=False) or data.builtin_shakespeare()
    print(machine_summary(), f"device {device}", sep=", ")
    with tempfile.TemporaryDirectory() as output:
        argv = flags(shape, corpus, Path(output) / "run")
        pipeline = pipeline_tokens_per_second(argv, batches=200)
        streamed = {workers: streamed_tokens_per_second(argv, shape, workers, batches=100) for workers in (0, 2)}
        bare, parameters = bare_step(argv, shape, device)
        step = train_py_step(argv, shape["warmup"])
    tokens = shape["rows"] * shape["block"]
    rows = [
        ["bare loop", f"{bare * 1000:.1f}", f"{tokens / bare:,.0f}", "1.00"],
        ["train.py", f"{step * 1000:.1f}", f"{tokens / step:,.0f}", f"{bare / step:.2f}"],
        ["pipeline alone", "", f"{pipeline:,.0f}", ""],
        *[[f"streamed pipeline, {n} workers", "", f"{rate:,.0f}", ""] for n, rate in streamed.items()],
    ]
    header = ["path", "ms a step", "tokens a second", "speed vs bare"]
    if args.gpu:
        flops_per_token = 6 * parameters + 12 * shape["layers"] * shape["block"] * shape["width"]
        for row, seconds in zip(rows, (bare, step)):
            row.append(f"{flops_per_token * tokens / seconds / PEAK_FLOPS:.1%}")
        for row in rows[2:]:
            row.append("")
        header.append("MFU")
    print_table(header, rows)
    print(f"train.py's step costs {1000 * (step - bare):+.1f} ms over the bare loop's ({tokens:,} tokens a step).")


if __name__ == "__main__":
    main()
