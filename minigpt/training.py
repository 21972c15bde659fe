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

Here: the run itself (`main`: data, model, Trainer) and `cli`. Its flags and their checks are in training_flags.py,
checkpoints and resuming in checkpoints.py, the callbacks, the output folder and the model card in
training_outputs.py, the data in data.py.
"""

# ruff: noqa: E402 (the clock starts before the heavy imports)
import time

STARTED = time.perf_counter()  # before the heavy imports: the wall times in the log count the whole run

import sys
from pathlib import Path

from datasets.distributed import split_dataset_by_node
from transformers import AutoTokenizer, Trainer, TrainerCallback, TrainerState, TrainingArguments, set_seed

from configuration_minigpt import PRESETS, MiniGPTConfig
from minigpt import data, reading, streams
from minigpt.checkpoints import (
    check_same_model,
    check_same_tokenizer,
    checkpoint_step,
    has_final_model,
    resolve_checkpoint,
)
from minigpt.heads.role_log import sample_text
from minigpt.training_flags import ScriptArguments, UsageError, check_run, parse_args, tokenizer_kind
from minigpt.training_outputs import PrintValidation, RoleLog, Snapshots, corpus_description, push, write_outputs
from modeling_minigpt import MiniGPTForCausalLM


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
