"""A training run's folder, as the web app keeps it (training_runs.py): its progress log (progress.jsonl, one JSON
event a line, written by the run's process, training_process.py, and by the queue; read back as a Progress), its roles
log, its checkpoints, and its model as a zip for visitors. Knows nothing of Gradio."""

import contextlib
import json
import os
import shutil
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from minigpt.heads.role_log import read_roles


def write_event(folder: Path, event: str, **fields) -> None:
    """One JSON line in progress.jsonl; a line is written whole, so a reader sees complete events."""
    with open(folder / "progress.jsonl", "a") as log:
        log.write(json.dumps({"event": event, "time": time.time(), **fields}) + "\n")


def read_events(folder: Path) -> list[dict]:
    try:
        lines = (folder / "progress.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written as we read
            pass
    return events


def roles_of(folder: Path) -> list[dict]:
    """The heads' role scores at each evaluation so far: a line of the run's roles log each (written by the run's roles
    callback, minigpt/heads/role_log.py)."""
    return read_roles(folder)


@dataclass
class Progress:
    state: str  # queued | running | finished | stopped | failed
    position: int = 0  # in the queue: 1 = next; 0 when not queued
    step: int = 0
    max_steps: int = 0
    seconds_left: float | None = None
    train: list[tuple[int, float]] = field(default_factory=list)  # (step, training loss)
    validation: list[tuple[int, float]] = field(default_factory=list)  # (step, validation loss)
    samples: list[str] = field(default_factory=list)  # at the latest evaluation
    samples_step: int = 0
    message: str = ""
    seconds_per_step: float | None = None  # measured since the latest start
    resumed_at: list[int] = field(default_factory=list)  # the steps a resumed run started again from
    vocab_size: int | None = None

    @property
    def done(self) -> bool:
        return self.state in ("finished", "stopped", "failed")


TERMINAL = {"finished": "finished", "stopped": "stopped", "error": "failed"}


def progress_of(events: list[dict]) -> Progress:
    """What the events say. A resumed run writes a new start event at its checkpoint's step: points logged after it
    by the run before (killed between checkpoints) are dropped, and the time left is measured since that start."""
    progress = Progress(state="queued")
    timing = []  # (time, step) since the latest start
    for e in events:
        kind = e["event"]
        if kind == "launch":  # the process is starting (again): data and model are being prepared
            progress.state, progress.message = "running", "Preparing the data and the model..."
        elif kind == "start":
            if progress.max_steps:  # an earlier start: this one resumes
                progress.resumed_at.append(e["step"])
            progress.state, progress.step, progress.max_steps = "running", e["step"], e["max_steps"]
            progress.vocab_size = e.get("vocab_size", progress.vocab_size)
            progress.train = [p for p in progress.train if p[0] <= e["step"]]
            progress.validation = [p for p in progress.validation if p[0] <= e["step"]]
            timing, progress.message = [(e["time"], e["step"])], ""
        elif kind == "step":
            progress.step = e["step"]
            timing.append((e["time"], e["step"]))
        elif kind == "loss":
            progress.train.append((e["step"], e["loss"]))
            progress.step = max(progress.step, e["step"])
        elif kind == "eval":
            progress.validation.append((e["step"], e["eval_loss"]))
            progress.step = max(progress.step, e["step"])
        elif kind == "samples":
            progress.samples, progress.samples_step = e["samples"], e["step"]
        elif kind in TERMINAL:
            progress.state, progress.message = TERMINAL[kind], e.get("message", "")
            progress.step = e.get("step", progress.step)
    if len(timing) > 1 and timing[-1][1] > timing[0][1]:
        (t0, s0), (t1, s1) = timing[0], timing[-1]
        progress.seconds_per_step = (t1 - t0) / (s1 - s0)
        if progress.state == "running":
            progress.seconds_left = progress.seconds_per_step * (progress.max_steps - s1)
    return progress


def last_event_time(folder: Path) -> float:
    """When the run last wrote progress (0 if it never did)."""
    log = folder / "progress.jsonl"
    return log.stat().st_mtime if log.exists() else 0.0


def is_finished(folder: Path) -> bool:
    """train.py writes training_args.json last: a folder with it holds a whole model."""
    return (folder / "spec.json").is_file() and (folder / "training_args.json").is_file()


def has_checkpoint(folder: Path) -> bool:
    """Whether a checkpoint was written to the end (its trainer_state.json, written last): something to resume."""
    return any(folder.glob("checkpoint-*/trainer_state.json"))


def last_checkpoint_step(folder: Path) -> int:
    """The step of the latest checkpoint written to the end, what Resume continues from (0: none)."""
    steps = [state.parent.name.removeprefix("checkpoint-") for state in folder.glob("checkpoint-*/trainer_state.json")]
    return max((int(step) for step in steps if step.isdigit()), default=0)


def drop_checkpoints(folder: Path) -> None:
    """A finished run's checkpoints: its model is whole, and nothing resumes a finished run."""
    for checkpoint in folder.glob("checkpoint-*"):
        shutil.rmtree(checkpoint, ignore_errors=True)


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under `folder`; one removed while counted (a checkpoint rotated out) counts nothing."""
    total = 0
    for path in folder.rglob("*"):
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size if path.is_file() else 0
    return total


def without_server_paths(value):
    """A training argument as a download may show it: a path in the server's home as ~/..., any other absolute path
    by its name alone (the folder layout of the server is nobody's business; head_corpus still finds a built-in
    corpus by its cache folder's name)."""
    if not isinstance(value, str) or not os.path.isabs(value):
        return value
    home = str(Path.home())
    return "~" + value[len(home) :] if value.startswith(home + os.sep) else Path(value).name


def zip_model(folder: Path, into: Path) -> Path:
    """The model folder as NAME.zip in the folder `into`, without checkpoints, the run's own files or the server's
    paths: what `upload_folder` would push to the Hub."""
    own = {"spec.json", "progress.jsonl", "train.log", "data.txt", "owner"}
    target = into / f"{folder.name}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            if not path.is_file() or path.name in own:
                continue
            if path.name == "training_args.json":
                args = {key: without_server_paths(value) for key, value in json.loads(path.read_text()).items()}
                archive.writestr(f"{folder.name}/{path.name}", json.dumps(args, indent=1))
            else:
                archive.write(path, f"{folder.name}/{path.name}")
    return target
