"""Head roles over training: at every evaluation, each head's role scores (previous token, first token, self,
induction on the probe, and the probe's first-half and repeated-half losses) on a fixed validation sample, computed by
the Head roles view's own code (role_scores.measured_roles), one JSON line per evaluation in the run folder's
roles_log.jsonl, beside its loss log. train.py's RoleLog callback calls it in every run (the Train tab's too); the
Train tab and the model folder's roles_curve.png (plots.roles_figure) read the lines back. No Gradio, no Trainer."""

import json
from pathlib import Path

import torch

from minigpt.heads.recorded_pass import run_forward_pass
from minigpt.heads.role_scores import above_chance, measured_roles

LOG_NAME = "roles_log.jsonl"

ROLES = ("previous_token", "first_token", "self", "induction")


def sample_text(tokenizer, validation, block_size: int) -> tuple[str, list[int]]:
    """The fixed sample: the first validation row's text (special tokens dropped), cut to fit the context after the
    start token; and its ids as the demo reads a text (the start token, then the text's tokens)."""
    text = tokenizer.decode(validation[0]["input_ids"], skip_special_tokens=True)
    while True:
        ids = [tokenizer.bos_token_id] + tokenizer.encode(text, add_special_tokens=False, verbose=False)  # cut below
        if len(ids) <= block_size:
            return text, ids
        text = text[: len(text) - max(1, len(ids) - block_size)]


def induction_forms(lines: list[dict]) -> dict | None:
    """The phase change, in numbers: the first evaluation at which some head's induction score is clearly above chance
    (halfway from chance to 1, as the Head roles view outlines it), that head and its score, and the score the
    evaluation before; None when no head ever gets there."""
    before = 0.0
    for line in lines:
        scores = torch.tensor(line["induction"])  # (L, H)
        best = int(scores.argmax())
        layer, head = divmod(best, scores.shape[1])
        if above_chance(float(scores.max()), line["chance"]["induction"]):
            return {"step": line["step"], "layer": layer, "head": head, "score": float(scores.max()), "before": before}
        before = float(scores.max())
    return None


def read_roles(folder: Path) -> list[dict]:
    """The lines logged so far (none: an empty list)."""
    try:
        lines = (Path(folder) / LOG_NAME).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def keep_until(folder: Path, step: int) -> None:
    """A resumed run drops the lines the run before logged after its checkpoint (it stopped between checkpoints)."""
    kept = [line for line in read_roles(folder) if line["step"] <= step]
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / LOG_NAME).write_text("".join(json.dumps(line) + "\n" for line in kept))


def log_roles(folder: Path, model, step: int, text: str, ids: list[int], tokenizer, eval_loss: float | None) -> None:
    """Appends one line: the heads' roles on the sample (`text`, token `ids`) at `step`, the model left in the mode
    it was in."""
    training = model.training
    model.eval()
    special = {tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id} - {None}
    recorded = run_forward_pass(model, ids)
    scores = measured_roles(model, recorded, tokenizer.bos_token_id, special, len(tokenizer))
    model.train(training)
    line = {
        "step": step,
        "text": text,
        "eval_loss": eval_loss,
        **{role: scores[role].tolist() for role in ROLES},
        "first_half_loss": scores["first_half_loss"],
        "repeated_half_loss": scores["repeated_half_loss"],
        "chance": {role: scores["chance"][role] for role in ROLES},
    }
    with open(Path(folder) / LOG_NAME, "a") as log:
        log.write(json.dumps(line) + "\n")


# ---- snapshots: the weights at a few log-spaced steps, for the views at step N ---------------------------------------

SNAPSHOTS = "snapshots"  # the folder's subfolder: step-<N>.safetensors, the model's weights at step N
SNAPSHOT_FRACTIONS = (0.01, 0.03, 0.1, 0.2, 0.35, 0.5, 0.75)  # of max_steps, log-spaced early where heads form
SNAPSHOT_MAX_PARAMETERS = 2_000_000  # small models only: at most 7 x 8 MB of float32 weights a run


def snapshot_steps(max_steps: int) -> list[int]:
    """The steps whose weights a run keeps (the last step is the folder's own model)."""
    return sorted({max(1, round(max_steps * f)) for f in SNAPSHOT_FRACTIONS} - {max_steps})


def snapshot_path(folder: Path, step: int) -> Path:
    return Path(folder) / SNAPSHOTS / f"step-{step}.safetensors"


def save_snapshot(folder: Path, model, step: int) -> None:
    """The weights at `step`, written whole (a temporary file renamed: a killed run leaves none half-written)."""
    from safetensors.torch import save_model

    path = snapshot_path(folder, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    save_model(model, str(partial))  # tied weights (the LM head is the token embedding) stored once
    partial.replace(path)


def snapshots_of(folder: Path) -> list[int]:
    """The steps a model folder has snapshots of, in order."""
    found = Path(folder).glob(f"{SNAPSHOTS}/step-*.safetensors") if Path(folder).is_dir() else []
    return sorted(int(path.stem.split("-")[1]) for path in found)


def load_snapshot(model, folder: Path, step: int):
    """`model` (of the folder's config) with the weights of its snapshot at `step`."""
    from safetensors.torch import load_model

    load_model(model, str(snapshot_path(folder, step)))
    return model
