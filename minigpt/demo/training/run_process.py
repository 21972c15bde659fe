"""Where the Train tab's runs get their process (training_runs.RunQueue starts one a run): forked from a fork server
that imports train.py's path (torch, transformers, the Trainer) once, when the first run starts, so that each later
run starts in a fraction of a second instead of after a fresh interpreter's seconds of imports. Where there is no fork
server (Windows), a fresh interpreter per run."""

import importlib
import multiprocessing
from pathlib import Path

# The run's own module, named (as `python -m` named it) rather than imported: it imports the Trainer, which the server
# never imports.
RUN_MODULE = "minigpt.demo.training.training_process"


def run_processes():
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # "__main__" too, for the Pythons where that preload works (3.13.8 on; before, CPython gh-126631, each child runs
    # the server's script again as multiprocessing prepares it: app.py imports nothing outside its main guard, so
    # that this costs nothing either way).
    context.set_forkserver_preload(["__main__", RUN_MODULE])
    return context


RUN_PROCESSES = run_processes()


def train_in_child(folder: str, resume: bool) -> None:
    """A run's process: training_process.run_logged (its output and any traceback go to the run's train.log). The
    fork server imported the module already: no cost here."""
    importlib.import_module(RUN_MODULE).run_logged(Path(folder), resume)
