"""A training run's checkpoints: which ones are whole (a kill while saving leaves a half-written one), where a run
resumes (`--resume_from_checkpoint PATH|last`), whether it is finished, and that a resumed run asks for the model and
tokenizer its checkpoint holds."""

import json
from pathlib import Path

from transformers import AutoTokenizer, TrainingArguments

from configuration_minigpt import MiniGPTConfig
from minigpt import tokenization
from minigpt.training_flags import UsageError


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
