"""One training run of the web app, in its own process (forked by training_runs.RunQueue from its fork server, or
`python -m minigpt.demo.training.training_process FOLDER [--resume]` by hand): train.py's `main` with a callback that
writes the progress events the server reads (run_folder.progress_of) and stops the Trainer, with a checkpoint, when the
server asks (SIGTERM), goes away, or the time limit passes. Here alone does the demo import the Trainer."""

import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

from minigpt import data, training
from minigpt.demo.training.run_folder import last_checkpoint_step, write_event
from minigpt.demo.training.run_requests import HELD_OUT, MAX_RUN_SECONDS, SAMPLES, RunSpec
from minigpt.training_outputs import generate_samples


class Cancelled(BaseException):
    """Raised by the SIGTERM handler before training has begun (nothing to keep); a BaseException so that no library
    `except Exception` swallows it."""


class ReportAndStop(TrainerCallback):
    """Writes the progress events, and stops the Trainer (which then saves a checkpoint) when asked to: SIGTERM from
    the server's Cancel, the server gone, or the time limit."""

    def __init__(self, folder: Path, names: bool, seed: int):
        self.folder, self.names, self.seed = folder, names, seed
        self.stop_reason, self.training, self.last_step_event = None, False, 0.0
        self.server = multiprocessing.parent_process()  # the server that started this run; None when run by hand
        self.started = time.monotonic()
        signal.signal(signal.SIGTERM, self.on_sigterm)

    def on_sigterm(self, signum, frame):
        self.stop_reason = "cancelled"
        if not self.training:
            raise Cancelled

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.training, self.started = True, time.monotonic()
        write_event(
            self.folder,
            "start",
            step=state.global_step,
            max_steps=state.max_steps,
            parameters=model.num_parameters(),
            vocab_size=model.config.vocab_size,  # the loss of a uniform guess is ln V: the plot's chance line
        )

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() - self.started > MAX_RUN_SECONDS:
            self.stop_reason = self.stop_reason or f"the time limit ({MAX_RUN_SECONDS // 60} minutes)"
        if self.server is not None and not self.server.is_alive():  # the server went away: nobody is watching
            self.stop_reason = self.stop_reason or "the server stopped"
        if self.stop_reason:  # the Trainer saves a checkpoint at this step, logs its loss, then leaves its loop
            control.should_save = control.should_log = control.should_training_stop = True
        if self.stop_reason or time.time() - self.last_step_event > 0.5 or state.global_step == state.max_steps:
            write_event(self.folder, "step", step=state.global_step)
            self.last_step_event = time.time()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if "loss" in logs:
            write_event(self.folder, "loss", step=state.global_step, loss=logs["loss"])
        if "eval_loss" in logs:
            write_event(self.folder, "eval", step=state.global_step, eval_loss=logs["eval_loss"])

    def on_evaluate(self, args, state, control, model=None, processing_class=None, **kwargs):
        with torch.random.fork_rng(devices=[]):  # own seed: the training's random numbers stay as they were
            torch.manual_seed(self.seed + state.global_step)
            samples = generate_samples(model, processing_class, SAMPLES, names=self.names)
        write_event(self.folder, "samples", step=state.global_step, samples=samples)


def train_arguments(spec: RunSpec, folder: Path, resume: bool) -> list[str]:
    """train.py's command line for the run: its sizes, an evaluation (and checkpoint) every tenth of the run, a loss
    point every fiftieth."""
    dataset = data.BUILTIN_CORPORA.get(spec.data)  # None: the visitor's text
    every = max(1, spec.max_steps // 10)
    # The built-in Shakespeare's last tenth (480K characters) would make each of the 10 evaluations cost minutes on
    # a CPU; its last 2% (96K characters, hundreds of windows) measures the loss as well.
    held_out = 50 if spec.data == "shakespeare" else HELD_OUT
    argv = [
        "--preset",
        spec.preset,
        "--tokenizer",
        spec.tokenizer,
        "--vocab_size",
        str(spec.vocab_size),
        "--dataset",
        str(dataset() if dataset else folder / "data.txt"),
        "--val_fraction",
        str(1 / held_out),
        "--n_layer",
        str(spec.n_layer),
        "--n_head",
        str(spec.n_head),
        "--n_embd",
        str(spec.n_embd),
        "--block_size",
        str(spec.block_size),
        "--max_steps",
        str(spec.max_steps),
        "--learning_rate",
        str(spec.learning_rate),
        "--seed",
        str(spec.seed),
        "--output_dir",
        str(folder),
        "--eval_steps",
        str(every),
        "--save_steps",
        str(every),
        "--save_total_limit",
        "1",
        "--logging_steps",
        str(max(1, spec.max_steps // 50)),
        "--disable_tqdm",
        "true",
        "--samples",
        str(SAMPLES),
        "--overwrite_output_dir",  # the folder is the run's own: it holds spec.json, progress.jsonl, data.txt
        "true",
    ]
    return argv + (["--resume_from_checkpoint", "last"] if resume else [])


def write_cancelled(folder: Path) -> None:
    """The terminal event of a run cancelled before training (re)began: a resumed run keeps the checkpoint it was to
    continue from (the step it stands at), a new one has nothing to keep."""
    kept = last_checkpoint_step(folder)
    if kept:
        message = f"Cancelled before training went on: the checkpoint of step {kept} is kept, Resume continues from it."
    else:
        message = "Cancelled before training began: nothing to keep."
    write_event(folder, "stopped", step=kept, message=message)


def run_in_this_process(folder: Path, resume: bool) -> int:
    """The subprocess's work: training.main with the reporting callback; every outcome ends with one terminal event."""
    spec = RunSpec.load(folder)
    torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))  # one core stays with the server
    os.nice(10)  # and the server's requests go first when they want the cores: training waits, a visitor would not
    reporter = ReportAndStop(folder, names=spec.tokenizer == "names", seed=spec.seed)
    try:
        metrics = training.main(train_arguments(spec, folder, resume), callbacks=[reporter])
    except Cancelled:
        write_cancelled(folder)
        return 0
    except (
        data.DataError,
        training.UsageError,
    ) as error:  # the data did not fit after all (e.g. BPE made fewer tokens)
        write_event(folder, "error", message=str(error))
        return 2
    except Exception as error:  # the traceback goes to the run's train.log, the visitor gets one line
        write_event(folder, "error", message=f"Training failed: {type(error).__name__}: {error}")
        raise
    if not metrics:  # train.py found the folder finished already: nothing was trained
        write_event(folder, "finished", message="This run had finished already.")
    elif metrics.get("stopped"):
        write_event(
            folder,
            "stopped",
            step=metrics["steps"],
            message=f"Stopped at step {metrics['steps']} ({reporter.stop_reason}): the checkpoint is kept, "
            "Resume continues from it.",
        )
    else:
        loss, steps = metrics["eval_loss"], metrics["steps"]
        message = f"Finished: validation loss {loss:.4f} after {steps} steps."
        write_event(folder, "finished", step=steps, eval_loss=loss, message=message)
    return 0


def run_logged(folder: Path, resume: bool) -> None:
    """A run as the RunQueue starts it, in a process forked for it: everything it prints, and any traceback, goes to
    the run's train.log (file descriptors 1 and 2, so the libraries' own output too). Its exit code is the run's;
    multiprocessing then releases what the run held (tqdm's lock, a semaphore) and leaves without the interpreter's
    slow teardown."""
    log = os.open(folder / "train.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    code = run_in_this_process(folder, resume)
    sys.stdout.flush()
    sys.exit(code)


def main(argv: list[str]) -> None:
    """python -m minigpt.demo.training.training_process FOLDER [--resume]: one run, by hand, printing to the
    terminal."""
    code = run_in_this_process(Path(argv[0]), resume="--resume" in argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the outcome is written: skip the libraries' slow teardown (seconds)


if __name__ == "__main__":
    main(sys.argv[1:])
