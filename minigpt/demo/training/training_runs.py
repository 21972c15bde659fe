"""Training runs for the web app, one at a time per server, through train.py's own code path: the server's side (the
queue, the progress read back; the request's checks are run_requests.py). Knows nothing of Gradio, and does not
import the Trainer.

    spec, text = check_request(data="names", ...)       # run_requests.py: the request checked into a RunSpec
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
import multiprocessing
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from minigpt.demo.training.run_folder import (
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
from minigpt.demo.training.run_process import RUN_PROCESSES, train_in_child
from minigpt.demo.training.run_requests import NAME, RunError, RunSpec
from minigpt.errors import shortened

CANCEL_GRACE_SECONDS = 20  # a run that has not stopped by then (a long evaluation) is killed: its checkpoints stay

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


def runs_dir() -> Path:
    """Where runs live: $MINIGPT_RUNS_DIR (a Space's persistent /data, say), else runs/web in the folder the demo was
    started from (a clone's root, as `python app.py` is run)."""
    return Path(os.environ.get("MINIGPT_RUNS_DIR") or Path("runs") / "web").absolute()


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
            from minigpt.checkpoints import last_complete_checkpoint  # here alone: read after a crash only

            kept = last_complete_checkpoint(run.folder)
            message = "the last checkpoint is kept, Resume continues from it" if kept else "there was no checkpoint yet"
            code = run.process.exitcode
            message = f"The training process ended (exit code {code}): {message}."
            write_event(run.folder, "stopped" if code < 0 else "error", message=message)
        elif last.state == "finished":
            drop_checkpoints(run.folder)
            self.on_finished(run.name, run.folder)
        run.state = "done"
