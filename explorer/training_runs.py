"""Training runs for the web app, one at a time per server, through train.py's own code path: the server's side (the
checks, the queue, the progress read back). Knows nothing of Gradio, and does not import the Trainer.

    spec, text = check_request(data="names", text="", tokenizer=None, ..., name="my-names", taken={"names"})
    runs = RunQueue(runs_dir(), on_finished=lambda name, folder: ...)
    run = runs.submit(spec, text, owner="session id")    # queued; a worker thread runs the queue in order
    runs.progress(run)                                   # state, queue position, step, losses, samples, time left
    runs.cancel("my-names", owner="session id")          # stops within a step, keeping a checkpoint
    runs.resume("my-names", owner="session id")          # continues from that checkpoint

Each run is a folder `runs_dir()/NAME` (NAME checked to be a plain a-z name, never a path from the visitor) that
holds spec.json (what was asked), data.txt (the visitor's text, if any), progress.jsonl (one event a line, written by
the run) and, once finished, the model folder train.py writes (model, tokenizer, model card, loss curve).

A run is a subprocess (`python -m explorer.training_process FOLDER`, training_process.py) that calls `train.main` with
a callback: it writes the progress events and stops the Trainer, with a checkpoint, when the server asks (SIGTERM) or
goes away. A subprocess
rather than a thread: a cancel cannot hang the server, its memory goes back when it ends, and it uses one core of
the two while the server answers generation and attention requests on the other.
"""

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

import tokenization
from configuration_minigpt import PRESETS, TRAINING_PRESETS, MiniGPTConfig
from explorer.errors import VisitorError, shortened
from modeling_minigpt import MiniGPTForCausalLM

REPO = Path(__file__).resolve().parent.parent  # the repository: train.py and the built-in data live there

# Limits, checked before anything runs (and stated on the page).
MAX_TEXT_BYTES = 1_000_000  # pasted or uploaded text (an upload's size is read from the disk before its text)

MAX_PARAMETERS = 10_000_000

MAX_STEPS = 20_000

MAX_WORK = 5e12  # parameters x training tokens (steps x batch x context): about 10 minutes on 2 CPU cores
TYPICAL_PACE = MAX_WORK / 600  # work a second on 2 CPU cores: the estimate before a run has been timed here

MAX_RUN_SECONDS = 15 * 60  # a run that is still going then stops with a checkpoint (Resume queues it again)

SIZE_RANGES = dict(n_layer=(1, 12), n_head=(1, 16), n_embd=(8, 768), block_size=(4, 512), vocab_size=(260, 8192))

NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")

MIN_NAMES = 10  # train.py holds a tenth out to validate

HELD_OUT = 10  # the last 1/HELD_OUT of a text is the validation text

CANCEL_GRACE_SECONDS = 20  # a run that has not stopped by then (a long evaluation) is killed: its checkpoints stay

SAMPLES = 5  # generated at every evaluation

# Built-in names, built-in Shakespeare, the induction lab's names written twice, the visitor's names or text.
DATA = ("names", "shakespeare", "induction", "text")

TOKENIZERS = ("names", "char", "bpe")

# The tokenizers each data can train with (the Train tab offers only these).
TOKENIZERS_FOR = {"names": ("names",), "induction": ("names",), "shakespeare": ("char", "bpe"), "text": TOKENIZERS}
DEFAULT_TOKENIZER = {"names": "names", "shakespeare": "bpe", "induction": "names", "text": "char"}


def runs_dir() -> Path:
    """Where runs live: $MINIGPT_RUNS_DIR (a Space's persistent /data, say), else runs/web in the repository."""
    return Path(os.environ.get("MINIGPT_RUNS_DIR") or REPO / "runs" / "web")


class RunError(VisitorError):
    """A visitor's mistake (bad input, a taken name, a run that is not theirs): the message says what to change."""


@dataclass
class RunSpec:
    name: str
    data: str  # names | shakespeare | induction | text
    tokenizer: str  # names | char | bpe
    n_layer: int
    n_head: int
    n_embd: int
    block_size: int
    max_steps: int
    learning_rate: float
    seed: int
    vocab_size: int  # bpe only
    parameters: int = 0  # filled in by check_request

    @property
    def preset(self) -> str:
        if self.data == "induction":
            return "induction"
        return "names" if self.tokenizer == "names" else "shakespeare"

    @property
    def batch_size(self) -> int:
        return TRAINING_PRESETS[self.preset]["per_device_train_batch_size"]

    @property
    def work(self) -> int:
        """Parameters x training tokens (steps x batch x context): what a run's time grows with."""
        return self.parameters * self.max_steps * self.batch_size * self.block_size

    def save(self, folder: Path) -> None:
        (folder / "spec.json").write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, folder: Path) -> "RunSpec":
        return cls(**json.loads((folder / "spec.json").read_text()))


def defaults(data_kind: str) -> dict:
    """The sizes and schedule the tab starts from: the names preset for names, the induction preset for the lab; for
    text, the shipped Shakespeare model's sizes (the shakespeare preset's 3.5M parameters x 3,000 steps is over
    MAX_WORK)."""
    if DEFAULT_TOKENIZER.get(data_kind, "names") == "names":
        preset = "induction" if data_kind == "induction" else "names"
        sizes = {k: PRESETS[preset][k] for k in ("n_layer", "n_head", "n_embd", "block_size")}
        schedule = {k: TRAINING_PRESETS[preset][k] for k in ("max_steps", "learning_rate")}
        return dict(tokenizer="names", **sizes, **schedule, seed=42, vocab_size=2048)
    return dict(
        tokenizer=DEFAULT_TOKENIZER[data_kind],
        n_layer=4,
        n_head=4,
        n_embd=128,
        block_size=128,
        max_steps=2000,
        learning_rate=2e-3,
        seed=42,
        vocab_size=2048,
    )


def check_name(name: str, taken: Collection[str]) -> str:
    """A new run's name: a-z, digits and '-', free; empty picks one."""
    name = (name or "").strip()
    if not name:
        return f"model-{secrets.token_hex(3)}"
    if not NAME.fullmatch(name):
        raise RunError(
            f"The model name {shortened(name)} is not allowed: use 1-32 lower-case letters a-z, digits and '-', "
            "starting with a letter (e.g. my-names)."
        )
    if name in taken:
        raise RunError(f"The name {name!r} is taken: choose another (or Resume it, if it is your stopped run).")
    return name


def read_upload(path: str) -> str:
    """The text of an uploaded file, its size checked on the disk before a byte is read."""
    size = os.path.getsize(path)
    if size > MAX_TEXT_BYTES:
        raise RunError(f"The file is {size / 1e6:.1f} MB: the limit is {MAX_TEXT_BYTES / 1e6:g} MB. Use a part of it.")
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise RunError("The file is not UTF-8 text: upload a plain .txt file.") from None


def check_training_text(text: str, tokenizer: str, block_size: int) -> str:
    """The visitor's training text, checked: not empty, small enough, a-z names, long enough for one window."""
    if len(text.encode("utf-8")) > MAX_TEXT_BYTES:
        raise RunError(f"The text is {len(text.encode('utf-8')):,} bytes: the limit is {MAX_TEXT_BYTES:,}. Use a part.")
    if not text.strip():
        raise RunError("The text is empty: type or paste names (one a line) or a text, or upload a .txt file.")
    if tokenizer == "names":
        names = [line.strip() for line in text.splitlines() if line.strip()]
        unknown = tokenization.unknown_characters(tokenization.names_tokenizer(), "".join(set("".join(names))))
        if unknown:
            raise RunError(
                f"Names may hold only the letters a-z, one name a line; these characters are not: "
                f"{', '.join(map(repr, unknown))}. Remove them, or choose the char tokenizer."
            )
        if len(names) < MIN_NAMES:
            raise RunError(
                f"{len(names)} names are too few: give at least {MIN_NAMES} (a tenth is held out to validate)."
            )
        return "\n".join(names) + "\n"
    need = block_size * HELD_OUT  # the held-out last tenth must hold a whole window (BPE: tokens <= characters)
    if len(text) < need:
        raise RunError(
            f"The text is {len(text):,} characters, shorter than needed for one window of {block_size} "
            f"tokens in its last tenth (held out to validate): give at least {need:,} characters or lower "
            "the context (block size)."
        )
    return text


def in_range(label: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise RunError(f"{label} must be between {low:g} and {high:g}, got {value:g}.")


def count_parameters(config: MiniGPTConfig) -> int:
    """Parameters of the model `config` makes, built on the meta device (no memory, no initialisation cost)."""
    with torch.device("meta"):
        return MiniGPTForCausalLM(config).num_parameters()


def vocabulary_estimate(tokenizer: str, text: str, vocab_size: int) -> int:
    if tokenizer == "names":
        return len(tokenization.names_tokenizer())
    if tokenizer == "char":
        return len(set(text)) + 2 if text else 256  # the built-in Shakespeare has fewer characters than that
    return vocab_size


def check_request(
    data: str,
    text: str,
    tokenizer: str | None,
    n_layer: int,
    n_head: int,
    n_embd: int,
    block_size: int,
    max_steps: int,
    learning_rate: float,
    seed: int,
    vocab_size: int,
    name: str,
    taken: Collection[str],
) -> tuple[RunSpec, str]:
    """The run a visitor asks for, every limit checked, and its training text ("" for built-in data); raises
    RunError with what to change."""
    if data not in DATA:
        raise RunError(f"data must be one of {', '.join(DATA)}, got {data!r}.")
    tokenizer = tokenizer or DEFAULT_TOKENIZER[data]
    if tokenizer not in TOKENIZERS:
        raise RunError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, got {tokenizer!r}.")
    if tokenizer not in TOKENIZERS_FOR[data]:
        if data == "shakespeare":
            raise RunError("Shakespeare is not a list of a-z names: choose the char or bpe tokenizer.")
        raise RunError(f"The built-in {data} data trains with the names tokenizer (letters a-z): choose names.")
    sizes = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size, vocab_size=vocab_size)
    for key, (low, high) in SIZE_RANGES.items():
        in_range(key, sizes[key], low, high)
    in_range("max_steps", max_steps, 1, MAX_STEPS)
    in_range("learning_rate", learning_rate, 1e-6, 0.1)
    in_range("seed", seed, 0, 2**31 - 1)
    text = check_training_text(text or "", tokenizer, block_size) if data == "text" else ""
    spec = RunSpec(
        check_name(name, taken),
        data,
        tokenizer,
        n_layer,
        n_head,
        n_embd,
        block_size,
        max_steps,
        learning_rate,
        seed,
        vocab_size,
    )
    try:
        config = MiniGPTConfig.from_preset(
            spec.preset,
            n_layer=n_layer,
            n_head=n_head,
            n_embd=n_embd,
            block_size=block_size,
            vocab_size=vocabulary_estimate(tokenizer, text, vocab_size),
        )
    except ValueError as error:  # sizes that do not fit together: the config names the field and the fix
        raise RunError(str(error)) from None
    spec.parameters = count_parameters(config)
    if spec.parameters > MAX_PARAMETERS:
        raise RunError(
            f"{spec.parameters:,} parameters is over the limit of {MAX_PARAMETERS:,}: fewer layers or a smaller width."
        )
    work = spec.work
    if work > MAX_WORK:
        fitting = int(MAX_WORK / (spec.parameters * spec.batch_size * block_size))
        raise RunError(
            f"This run is too big for this server: {spec.parameters:,} parameters x {max_steps:,} steps x "
            f"{spec.batch_size * block_size:,} tokens a step = {work:.1e}, over the limit of "
            f"{MAX_WORK:.0e}: use at most {fitting:,} steps at these sizes or a smaller model."
        )
    return spec, text


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


@dataclass
class Run:
    name: str
    folder: Path
    owner: str | None  # the session that started it: only it may cancel
    resume: bool = False
    state: str = "queued"  # queued | running | done
    process: subprocess.Popen | None = None


def is_finished(folder: Path) -> bool:
    """train.py writes training_args.json last: a folder with it holds a whole model."""
    return (folder / "spec.json").is_file() and (folder / "training_args.json").is_file()


class RunQueue:
    """Runs one training at a time, in the order asked, in a worker thread that starts each run's subprocess."""

    def __init__(self, root: Path, on_finished: Callable[[str, Path], None] = lambda name, folder: None):
        self.root, self.on_finished = root, on_finished
        self.runs: dict[str, Run] = {}  # this server's runs, by name
        self.pending: list[Run] = []
        self.changed = threading.Condition()
        self.worker: threading.Thread | None = None

    def pace(self) -> float | None:
        """Work a second (RunSpec.work) of this server's latest timed run, or None before any run was timed."""
        logs = self.root.glob("*/progress.jsonl") if self.root.is_dir() else []
        for log in sorted(logs, key=lambda path: path.stat().st_mtime, reverse=True):  # newest first: read few
            seconds = progress_of(read_events(log.parent)).seconds_per_step
            if seconds and (log.parent / "spec.json").is_file():
                spec = RunSpec.load(log.parent)
                return spec.work / spec.max_steps / seconds
        return None

    def finished(self) -> list[tuple[str, Path]]:
        """(name, folder) of every finished run in the folder, from this server's life or before."""
        folders = sorted(self.root.glob("*/spec.json")) if self.root.is_dir() else []
        return [(f.parent.name, f.parent) for f in folders if is_finished(f.parent)]

    def submit(self, spec: RunSpec, text: str, owner: str | None) -> Run:
        """A new run in the queue; its folder is made here, so that its name is taken at once."""
        folder = self.root / spec.name
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            raise RunError(f"The name {spec.name!r} is taken: choose another.") from None
        spec.save(folder)
        if text:
            (folder / "data.txt").write_text(text, encoding="utf-8")
        return self.enqueue(Run(spec.name, folder, owner))

    def resume(self, name: str, owner: str | None) -> Run:
        """A stopped run queued again to continue from its checkpoint; a queued or running one, as it is (to watch)."""
        run = self.runs.get(name)
        if run and run.state != "done":
            return run
        folder = self.root / (name or "")
        if not NAME.fullmatch(name or "") or not (folder / "spec.json").is_file():
            raise RunError(f"There is no run named {shortened(name)} to resume: give the name of a stopped run.")
        if is_finished(folder):
            raise RunError(f"The run {name!r} is finished: its model is in the model picker.")
        return self.enqueue(Run(name, folder, owner, resume=True))

    def enqueue(self, run: Run) -> Run:
        with self.changed:
            self.runs[run.name] = run
            self.pending.append(run)
            if self.worker is None:
                self.worker = threading.Thread(target=self.work, name="training-runs", daemon=True)
                self.worker.start()
            self.changed.notify_all()
        return run

    def cancel(self, name: str, owner: str | None) -> str:
        """Removes a queued run, or asks a running one to stop (it saves a checkpoint at its next step)."""
        with self.changed:  # the worker cannot take the run meanwhile: it is either queued or has its process
            run = self.runs.get(name)
            if run is None or run.state == "done":
                raise RunError(f"No run named {shortened(name)} is queued or running.")
            if run.owner != owner:
                raise RunError(f"The run {name!r} was started by another visitor: only they can cancel it.")
            if run in self.pending:
                self.pending.remove(run)
                run.state = "done"
                write_event(run.folder, "stopped", message="Cancelled while queued.")
                return f"Cancelled {name!r} while it was queued."
            process = run.process
        process.send_signal(signal.SIGTERM)
        threading.Timer(CANCEL_GRACE_SECONDS, lambda: process.poll() is None and process.kill()).start()
        return f"Cancelling {name!r}: it stops at its next step and keeps a checkpoint."

    def progress(self, run: Run) -> Progress:
        progress = progress_of(read_events(run.folder))
        with self.changed:
            if run in self.pending:
                position = progress.position = self.pending.index(run) + 1
                ahead = f" and the {position - 1} queued before it" if position > 1 else ""
                progress.state = "queued"
                progress.message = f"Queued, number {position} in line: it starts after the run going now{ahead}."
        if progress.done and run.state != "done":  # the process wrote its end; the worker has yet to see it exit
            progress.state = "running"
        return progress

    def work(self) -> None:
        while True:
            with self.changed:
                while not self.pending:
                    self.changed.wait()
                run = self.pending.pop(0)  # under the lock: a cancel finds it queued, or with its process
                try:
                    run.process = self.start(run)
                except OSError as error:  # no process (out of memory, say): that run fails, the queue goes on
                    write_event(run.folder, "error", message=f"The training process could not start: {error}")
                    run.state = "done"
                    continue
                run.state = "running"
            run.process.wait()
            self.wrap_up(run)

    def start(self, run: Run) -> subprocess.Popen:
        write_event(run.folder, "launch")
        with open(run.folder / "train.log", "a") as log:  # the run's output and any traceback stay in its folder
            command = [sys.executable, "-m", "explorer.training_process", str(run.folder), *(["--resume"] * run.resume)]
            return subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wrap_up(self, run: Run) -> None:
        """After the process: a terminal event if it left none (killed), the picker told of a finished model."""
        last = progress_of(read_events(run.folder))
        if not last.done:
            from train import last_complete_checkpoint  # here alone: the server imports the Trainer only after a crash

            kept = last_complete_checkpoint(run.folder)
            message = "the last checkpoint is kept, Resume continues from it" if kept else "there was no checkpoint yet"
            code = run.process.returncode
            message = f"The training process ended (exit code {code}): {message}."
            write_event(run.folder, "stopped" if code < 0 else "error", message=message)
        elif last.state == "finished":
            self.on_finished(run.name, run.folder)
        run.state = "done"


def zip_model(folder: Path, into: Path) -> Path:
    """The model folder as NAME.zip in the folder `into`, without checkpoints or the run's own files: what
    `upload_folder` would push to the Hub."""
    own = {"spec.json", "progress.jsonl", "train.log", "data.txt"}
    target = into / f"{folder.name}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.name not in own:
                archive.write(path, f"{folder.name}/{path.name}")
    return target
