"""train.py's command line: its own flags (ScriptArguments) beside the Trainer's (TrainingArguments), the defaults each
preset sets for the Trainer's flags (on a CUDA GPU too), and the checks of what the Trainer or the tokenizer trainer
would only fail on later, each a UsageError that names the flag and says what to change."""

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import HfArgumentParser, TrainingArguments

from configuration_minigpt import PRESETS
from minigpt.presets import TRAINING_PRESETS

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
    # Each process streams its own share of the training examples (see `training.main`): batches of names differ in
    # length, which accelerate's default (the main process reads and sends every batch) cannot concatenate.
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
