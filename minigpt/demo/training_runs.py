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

A run is a process of its own (training_process.py) that calls `minigpt.training.main` with a callback: it writes the
progress events and stops the Trainer, with a checkpoint, when the server asks (SIGTERM) or goes away. A process
rather than a thread: a cancel cannot hang the server, its memory goes back when it ends, and it uses one core of
the two while the server answers generation and attention requests on the other. Each run is forked from a fork
server that imported train.py's path once (run_process.py): later runs start at once.
"""

import contextlib
import hashlib
import json
import multiprocessing
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from configuration_minigpt import PRESETS, TRAINING_PRESETS, MiniGPTConfig
from minigpt import tokenization
from minigpt.demo.run_folder import (
    Progress,
    drop_checkpoints,
    folder_bytes,
    has_checkpoint,
    is_finished,
    last_event_time,
    progress_of,
    read_events,
    write_event,
)
from minigpt.demo.run_process import RUN_PROCESSES, train_in_child
from minigpt.errors import VisitorError, shortened
from modeling_minigpt import MiniGPTForCausalLM

# Limits, checked before anything runs (and stated on the page).
MAX_TEXT_BYTES = 1_000_000  # pasted or uploaded text (an upload's size is read from the disk before its text)

MAX_PARAMETERS = 10_000_000

MAX_STEPS = 20_000

# Work a second of a run on a 2-core CPU (one thread at nice 10, as training_process runs it), the estimate before a
# run has been timed on this server: the lab's defaults 5.3e9 (8,000 steps in 161 s), the names defaults 4.8e9
# (6,000 steps in 326 s), through the RunQueue on this project's 2-core machine.
TYPICAL_PACE = 5.0e9
MAX_WORK = 4.5e12  # parameters x training tokens (steps x batch x context): about 15 minutes at TYPICAL_PACE

MAX_RUN_SECONDS = 15 * 60  # a run that is still going then stops with a checkpoint (Resume queues it again)

SIZE_RANGES = dict(n_layer=(1, 12), n_head=(1, 16), n_embd=(8, 768), block_size=(4, 512), vocab_size=(260, 8192))

NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")

MIN_NAMES = 10  # train.py holds a tenth out to validate

HELD_OUT = 10  # the last 1/HELD_OUT of a text is the validation text

CANCEL_GRACE_SECONDS = 20  # a run that has not stopped by then (a long evaluation) is killed: its checkpoints stay

SAMPLES = 5  # generated at every evaluation

# What one run may ask of the server's memory (training_bytes, estimated before it starts): the audit's 12 x 16-head
# names run at context 512 needed over 7 GB and a 249,000-character vocabulary one tensor of 8.2 GB.
MAX_TRAINING_BYTES = 2 << 30

MAX_CHAR_VOCABULARY = 8192  # distinct characters of a char-tokenized text

# The queue: runs waiting or training per visitor, and runs waiting in all.
MAX_RUNS_PER_VISITOR = 2
MAX_QUEUED = 8

# Watchers of a run's progress (streams of /train and /resume), per run and in all; each polls its run's log.
MAX_WATCHERS_PER_RUN = 4
MAX_WATCHERS = 32

# The runs folder's disk: a new run is refused past the quota; what nobody can use any more goes (see RunQueue.tidy).
RUNS_QUOTA_BYTES = int(os.environ.get("MINIGPT_RUNS_QUOTA_BYTES", 5 << 30))
UNUSABLE_KEPT_S = 3600  # a run that ended with nothing to resume (failed early, cancelled while queued)
STOPPED_KEPT_S = 7 * 24 * 3600  # a stopped run its owner has not resumed

# Built-in names, built-in Shakespeare, the induction lab's names written twice, the visitor's names or text.
DATA = ("names", "shakespeare", "induction", "text")

TOKENIZERS = ("names", "char", "bpe")

# The tokenizers each data can train with (the Train tab offers only these).
TOKENIZERS_FOR = {"names": ("names",), "induction": ("names",), "shakespeare": ("char", "bpe"), "text": TOKENIZERS}
DEFAULT_TOKENIZER = {"names": "names", "shakespeare": "bpe", "induction": "names", "text": "char"}


def runs_dir() -> Path:
    """Where runs live: $MINIGPT_RUNS_DIR (a Space's persistent /data, say), else runs/web in the folder the demo was
    started from (a clone's root, as `python app.py` is run)."""
    return Path(os.environ.get("MINIGPT_RUNS_DIR") or Path("runs") / "web").absolute()


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
    """The visitor's training text, checked: not empty, small enough, a-z names, long enough for one window, few
    enough distinct characters for the char tokenizer. Line ends become newlines (a Windows file's CR LF too)."""
    if len(text.encode("utf-8")) > MAX_TEXT_BYTES:
        raise RunError(f"The text is {len(text.encode('utf-8')):,} bytes: the limit is {MAX_TEXT_BYTES:,}. Use a part.")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise RunError("The text is empty: type or paste names (one a line) or a text, or upload a .txt file.")
    if tokenizer == "names":
        names = [line.strip() for line in text.splitlines() if line.strip()]
        unknown = tokenization.unknown_characters(tokenization.names_tokenizer(), "".join(set("".join(names))))
        if unknown:
            raise RunError(
                f"Names may hold only the letters a-z, one name a line; these characters are not: "
                f"{', '.join(map(repr, unknown[:20]))}{' ...' * (len(unknown) > 20)}. Remove them, or choose the "
                "char tokenizer."
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
    if tokenizer == "char" and len(set(text)) > MAX_CHAR_VOCABULARY:
        raise RunError(
            f"The text holds {len(set(text)):,} distinct characters: the char tokenizer takes at most "
            f"{MAX_CHAR_VOCABULARY:,} (each is a row of the model's embedding and a column of its logits). Choose the "
            "bpe tokenizer, or a text in fewer scripts."
        )
    return text


def written(number: float) -> str:
    """A number as a visitor reads it: 2,147,483,647 rather than 2.14748e+09; 0.0001 and 1e-06 as they are."""
    return f"{number:,}" if float(number).is_integer() and abs(number) < 1e15 else f"{number:g}"


def in_range(label: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise RunError(f"{label} must be between {written(low)} and {written(high)}, got {written(value)}.")


def count_parameters(config: MiniGPTConfig) -> int:
    """Parameters of the model `config` makes, built on the meta device (no memory, no initialisation cost)."""
    with torch.device("meta"):
        return MiniGPTForCausalLM(config).num_parameters()


def training_bytes(spec: RunSpec, vocabulary: int) -> int:
    """A run's peak memory, estimated (4 bytes a number). Training keeps, for the backward pass, every layer's
    attention weights and their gradient (batch x heads x context^2 each) and the logits with their softmax and
    gradient (batch x context x vocabulary); evaluation holds one layer's weights at a time for a bigger batch; the
    weights come four times (themselves, gradients, Adam's two moments)."""
    context, rows = spec.block_size, TRAINING_PRESETS[spec.preset]["per_device_eval_batch_size"]
    training = spec.batch_size * (2 * spec.n_layer * spec.n_head * context**2 + 3 * context * vocabulary)
    evaluation = rows * (spec.n_head * context**2 + context * vocabulary)
    return 4 * (max(training, evaluation) + 4 * spec.parameters)


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
        raise RunError(f"data must be one of {', '.join(DATA)}, got {shortened(data)}.")
    tokenizer = tokenizer or DEFAULT_TOKENIZER[data]
    if tokenizer not in TOKENIZERS:
        raise RunError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, got {shortened(tokenizer)}.")
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
    memory = training_bytes(spec, config.vocab_size)
    if memory > MAX_TRAINING_BYTES:
        raise RunError(
            f"This run would need about {memory / 2**30:.1f} GiB of memory (attention: batch x heads x context^2 in "
            f"each of {n_layer} layers; logits: batch x context x a vocabulary of {config.vocab_size:,}), over this "
            f"server's {MAX_TRAINING_BYTES / 2**30:g} GiB a run: use a shorter context, fewer heads or layers, or a "
            "smaller vocabulary."
        )
    work = spec.work
    if work > MAX_WORK:
        fitting = int(MAX_WORK / (spec.parameters * spec.batch_size * block_size))
        raise RunError(
            f"This run is too big for this server: {spec.parameters:,} parameters x {max_steps:,} steps x "
            f"{spec.batch_size * block_size:,} tokens a step = {work:.1e}, over the limit of "
            f"{MAX_WORK:.1e}: use at most {fitting:,} steps at these sizes or a smaller model."
        )
    return spec, text


@dataclass
class Run:
    name: str
    folder: Path
    owner: str | None  # who started it (owner_key of the visitor's token): only they watch, cancel and resume it
    resume: bool = False
    state: str = "queued"  # queued | running | done
    process: multiprocessing.Process | None = None  # None while it starts
    watchers: int = 0  # progress streams open on it
    stop_asked: bool = False  # cancelled while its process was starting: stopped once it has one


def owner_key(token: str | None) -> str | None:
    """What a run keeps of its owner: a hash of the visitor's token (the page keeps the token in its browser storage;
    an API client sends its own), so that the run folder on the disk holds no secret."""
    return hashlib.sha256(token.encode()).hexdigest()[:32] if token else None


class RunQueue:
    """Runs one training at a time, in the order asked, in a worker thread that starts each run's process; bounds
    what visitors can make it hold (runs queued, watchers, disk) and keeps each run to its owner."""

    def __init__(self, root: Path, on_finished: Callable[[str, Path], None] = lambda name, folder: None):
        self.root, self.on_finished = root, on_finished
        self.runs: dict[str, Run] = {}  # this server's runs, by name
        self.pending: list[Run] = []
        self.changed = threading.Condition()
        self.worker: threading.Thread | None = None
        self.watchers = 0
        self.admitting = threading.Lock()  # one submit or resume at a time: its checks, tidying and enqueueing
        self.end_interrupted()
        self.tidy()

    def pace(self) -> float | None:
        """Work a second (RunSpec.work) of this server's latest timed run, or None before any run was timed."""
        logs = self.root.glob("*/progress.jsonl") if self.root.is_dir() else []
        for log in sorted(logs, key=lambda path: path.stat().st_mtime, reverse=True):  # newest first: read few
            seconds = progress_of(read_events(log.parent)).seconds_per_step
            if seconds and (log.parent / "spec.json").is_file():
                spec = RunSpec.load(log.parent)
                return spec.work / spec.max_steps / seconds
        return None

    def folders(self) -> list[Path]:
        return sorted(f.parent for f in self.root.glob("*/spec.json")) if self.root.is_dir() else []

    def finished(self) -> list[tuple[str, Path]]:
        """(name, folder) of every finished run in the folder, from this server's life or before."""
        return [(folder.name, folder) for folder in self.folders() if is_finished(folder)]

    def end_interrupted(self) -> None:
        """Runs a server's earlier life left queued or running (it died): said stopped, so their owner can resume
        them (from their last checkpoint, if any) and tidy can free what nobody resumes."""
        for folder in self.folders():
            if not is_finished(folder) and not progress_of(read_events(folder)).done:
                message = "The server restarted while this run was queued or running: Resume continues it."
                write_event(folder, "stopped", message=message)

    def tidy(self) -> None:
        """Frees the disk of what nobody can use: a finished run's checkpoints (its model is whole), a run that ended
        with nothing to resume after UNUSABLE_KEPT_S, a stopped run not resumed within STOPPED_KEPT_S."""
        now = time.time()
        for folder in self.folders():
            if folder.name in self.runs and self.runs[folder.name].state != "done":
                continue
            if is_finished(folder):
                drop_checkpoints(folder)
                continue
            age = now - last_event_time(folder) if (folder / "progress.jsonl").exists() else 0
            kept = STOPPED_KEPT_S if has_checkpoint(folder) else UNUSABLE_KEPT_S
            if age > kept:
                shutil.rmtree(folder, ignore_errors=True)
                self.runs.pop(folder.name, None)

    def check_room(self, owner: str | None) -> None:
        """A new or resumed run's place: within the visitor's runs, the queue's length and the disk's quota."""
        active = [run for run in self.runs.values() if run.state != "done"]
        if owner is not None and sum(run.owner == owner for run in active) >= MAX_RUNS_PER_VISITOR:
            raise RunError(
                f"You have {MAX_RUNS_PER_VISITOR} runs queued or training, the most a visitor may: wait for one to "
                "end, or cancel one."
            )
        if len(self.pending) >= MAX_QUEUED:
            raise RunError(f"The queue is full ({MAX_QUEUED} runs waiting): try again when a run has ended.")
        used = folder_bytes(self.root) if self.root.is_dir() else 0
        if used > RUNS_QUOTA_BYTES:
            raise RunError(
                f"This server's disk for trained models is full ({used / 2**30:.1f} of "
                f"{RUNS_QUOTA_BYTES / 2**30:g} GiB): try again later, or train with train.py on your machine."
            )

    def submit(self, spec: RunSpec, text: str, owner: str | None) -> Run:
        """A new run in the queue; its folder is made here, so that its name is taken at once."""
        with self.admitting:  # two visitors' checks cannot both pass on the same room
            self.tidy()
            self.check_room(owner)
            folder = self.root / spec.name
            try:
                folder.mkdir(parents=True)
            except FileExistsError:
                raise RunError(f"The name {spec.name!r} is taken: choose another.") from None
            spec.save(folder)
            (folder / "owner").write_text(owner or "")
            if text:
                (folder / "data.txt").write_text(text, encoding="utf-8")
            return self.enqueue(Run(spec.name, folder, owner))

    def check_owner(self, name: str, owner: str | None, kept: str | None, what: str) -> None:
        if kept and kept != owner:
            raise RunError(f"The run {name!r} was started by another visitor: only they can {what} it.")

    def resume(self, name: str, owner: str | None) -> Run:
        """A stopped run queued again to continue from its checkpoint; a queued or running one, as it is (to watch).
        Only for the visitor who started it."""
        with self.admitting:  # two Resumes of one stopped run: the second watches the first's
            run = self.runs.get(name)
            if run and run.state != "done":
                self.check_owner(name, owner, run.owner, "watch")
                return run
            folder = self.root / (name or "")
            if not NAME.fullmatch(name or "") or not (folder / "spec.json").is_file():
                raise RunError(f"There is no run named {shortened(name)} to resume: give the name of a stopped run.")
            if is_finished(folder):
                raise RunError(f"The run {name!r} is finished: its model is in the model picker.")
            kept = (folder / "owner").read_text() if (folder / "owner").is_file() else None  # None: from before
            self.check_owner(name, owner, kept, "resume")
            self.check_room(owner)
            return self.enqueue(Run(name, folder, kept or owner, resume=True))

    def latest_of(self, owner: str | None) -> Run | None:
        """The visitor's most recent run (by its last event), for a reloaded page to show again; None without one."""
        if not owner:
            return None
        mine = [f for f in self.folders() if (f / "owner").is_file() and (f / "owner").read_text() == owner]
        if not mine:
            return None
        folder = max(mine, key=last_event_time)
        return self.runs.get(folder.name) or Run(folder.name, folder, owner, state="done")

    def enqueue(self, run: Run) -> Run:
        with self.changed:
            self.runs[run.name] = run
            self.pending.append(run)
            if self.worker is None:
                self.worker = threading.Thread(target=self.work, name="training-runs", daemon=True)
                self.worker.start()
            self.changed.notify_all()
        return run

    @contextlib.contextmanager
    def watching(self, run: Run):
        """One progress stream on `run` while inside, within MAX_WATCHERS_PER_RUN and MAX_WATCHERS."""
        with self.changed:
            if run.watchers >= MAX_WATCHERS_PER_RUN:
                raise RunError(
                    f"The run {run.name!r} is watched in {run.watchers} places already, the most allowed: close one."
                )
            if self.watchers >= MAX_WATCHERS:
                raise RunError(f"{self.watchers} runs' progress is being watched, the most this server serves: later.")
            run.watchers += 1
            self.watchers += 1
        try:
            yield
        finally:
            with self.changed:
                run.watchers -= 1
                self.watchers -= 1

    def cancel(self, name: str, owner: str | None) -> str:
        """Removes a queued run, or asks a running one to stop (it saves a checkpoint at its next step)."""
        with self.changed:  # the worker cannot take the run meanwhile: it is queued, starting or has its process
            run = self.runs.get(name)
            if run is None or run.state == "done":
                raise RunError(f"No run named {shortened(name)} is queued or running.")
            self.check_owner(name, owner, run.owner, "cancel")
            if run in self.pending:
                self.pending.remove(run)
                run.state = "done"
                write_event(run.folder, "stopped", message="Cancelled while queued.")
                return f"Cancelled {name!r} while it was queued."
            run.stop_asked = True
            process = run.process
        if process is not None:  # else the worker stops it as soon as its process has started
            self.stop(run, process)
        return f"Cancelling {name!r}: it stops at its next step and keeps a checkpoint."

    def stop(self, run: Run, process: multiprocessing.Process) -> None:
        process.terminate()  # SIGTERM: training_process stops the Trainer at its next step
        threading.Timer(CANCEL_GRACE_SECONDS, lambda: run.state != "done" and process.kill()).start()

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
                run = self.pending.pop(0)  # under the lock: a cancel finds it queued, or running
                run.state = "running"
                write_event(run.folder, "launch")
            # Started outside the lock: the first run's start waits for the fork server to import the training code
            # (seconds; minutes on a loaded machine), and the event loop takes the lock when a progress stream opens
            # (RunQueue.watching): the whole server would wait with it.
            try:
                process = self.start(run)
            except OSError as error:  # no process (out of memory, say): that run fails, the queue goes on
                write_event(run.folder, "error", message=f"The training process could not start: {error}")
                run.state = "done"
                continue
            with self.changed:
                run.process = process
                stop = run.stop_asked
            if stop:  # cancelled while it started
                self.stop(run, process)
            process.join()
            self.wrap_up(run)

    def start(self, run: Run) -> multiprocessing.Process:
        process = RUN_PROCESSES.Process(target=train_in_child, args=(str(run.folder), run.resume), name=run.name)
        process.start()
        return process

    def wrap_up(self, run: Run) -> None:
        """After the process: a terminal event if it left none (killed), the picker told of a finished model."""
        last = progress_of(read_events(run.folder))
        if not last.done:
            from minigpt.training import (
                last_complete_checkpoint,  # here alone: the server imports the Trainer only after a crash
            )

            kept = last_complete_checkpoint(run.folder)
            message = "the last checkpoint is kept, Resume continues from it" if kept else "there was no checkpoint yet"
            code = run.process.exitcode
            message = f"The training process ended (exit code {code}): {message}."
            write_event(run.folder, "stopped" if code < 0 else "error", message=message)
        elif last.state == "finished":
            drop_checkpoints(run.folder)
            self.on_finished(run.name, run.folder)
        run.state = "done"
