"""The Train tab's endpoints, on the demo's state (its run queue and model picker): /train and /resume (a run's progress
streamed as plain JSON, its plots as files drawn once for every watcher), /cancel and /download; the estimate of a run
before it starts, and a reloaded page's latest run. The queue and the runs: training_runs.py, run_requests.py,
run_folder.py; training/ui.py puts them on the page and draws the progress. No Gradio here."""

import asyncio
import dataclasses
import io
import os
import threading
import time
from pathlib import Path

from minigpt import plots
from minigpt.demo.core.inputs import lone_surrogates, number
from minigpt.demo.core.state import DemoState
from minigpt.demo.training import run_folder, run_requests, training_runs
from minigpt.demo.training.words import SIZE_FIELDS, duration
from minigpt.errors import VISITORS_MISTAKES, VisitorError, shortened

POLL_SECONDS = 1.0  # a watcher reads its run's progress this often


PLOT_SECONDS = 3.0  # and redraws the loss plot at most this often (a matplotlib figure costs tens of ms)


ROLES_PLOT_SECONDS = 10.0  # and the head roles' plot (five panels, a line per head), and once at the end


@dataclasses.dataclass
class RunForm:
    """The Train tab's fields, once: in the order of the /train endpoint's parameters (its API), of the page's inputs
    and of the estimate's. The numbers are as the form or a client sends them, read by `requested`."""

    data: str = "names"
    text: str = ""
    tokenizer: str | None = None
    n_layer: float | None = None
    n_head: float | None = None
    n_embd: float | None = None
    block_size: float | None = None
    max_steps: float | None = None
    learning_rate: float | None = None
    seed: float | None = None
    name: str = ""
    vocab_size: float | None = None
    upload: str | None = None

    @classmethod
    def of(cls, values: dict) -> "RunForm":
        """The form from a mapping that holds its fields (and maybe more: an endpoint's other arguments)."""
        return cls(**{field.name: values[field.name] for field in dataclasses.fields(cls)})


FORM_FIELDS = [field.name for field in dataclasses.fields(RunForm)]


FORM_FIELDS = [field.name for field in dataclasses.fields(RunForm)]


def loss_png(name: str, progress: run_folder.Progress) -> bytes | None:
    """Training and validation loss against step, drawn by the same code as the model folder's loss_curve.png."""
    if not progress.train and not progress.validation:
        return None
    history = [{"step": s, "loss": v} for s, v in progress.train]
    history += [{"step": s, "eval_loss": v} for s, v in progress.validation]
    image = io.BytesIO()
    plots.plot_losses(history, image, f"{name}: loss", progress.vocab_size, progress.resumed_at)
    return image.getvalue()


def roles_png(name: str, roles: list[dict]) -> bytes | None:
    """Each head's role scores at each evaluation so far, drawn by the code of the model folder's roles_curve.png."""
    if not roles:
        return None
    image = io.BytesIO()
    plots.plot_roles(roles, image, name)
    return image.getvalue()


MAX_TOKEN_CHARS = 200  # the owner token a client sends


def checked_token(token) -> str | None:
    """The owner token as sent, checked before anything reads it (owner_key encodes it to hash it): a text of at most
    MAX_TOKEN_CHARS whole characters, or None. Never echoed: it is a secret."""
    if token is None:
        return None
    if not isinstance(token, str):
        wrong = f"got {shortened(token)}"
    elif len(token) > MAX_TOKEN_CHARS:
        wrong = f"got {len(token):,} characters"
    elif halves := lone_surrogates(token):
        wrong = f"it holds {halves}, half of a character (a lone UTF-16 surrogate)"
    else:
        return token
    raise VisitorError(
        f"owner must be a text of at most {MAX_TOKEN_CHARS} whole characters, a token you keep secret "
        f"(Python's secrets.token_urlsafe() makes one): {wrong}."
    )


def visitor(token) -> str | None:
    """Who asks, as runs keep it (training_runs.owner_key): the token the page keeps in the browser's storage, so that
    a run stays its visitor's across page reloads (an API client sends a token of its own; without one, it owns no
    run)."""
    return training_runs.owner_key(checked_token(token))


def starter(token) -> str:
    """Who starts (or resumes) a run: a token is needed. A REST call's Gradio session ends with the call, so a run
    owned by it could be neither watched nor cancelled by anyone, and would train to its end."""
    who = visitor(token)
    if not token:
        raise VisitorError(
            "A run needs an owner: send owner, a token of your own that you keep secret (the page sends the one it "
            "keeps in your browser). Only who sends it can watch, cancel and resume the run."
        )
    return who


class SharedPlots:
    """Each run's plots, drawn once for all who watch it and written whole (a temporary file renamed) into the export
    folder, inside Gradio's cache, whence Gradio serves a file as it is. Watchers handing Gradio equal images would
    have it rewrite one file in place while another watcher downloads it: a cut download. A run's folder goes with
    the export folder's expiry once nobody has drawn in it for EXPORT_KEPT_S."""

    def __init__(self, state: DemoState):
        self.state, self.lock, self.latest = state, threading.Lock(), {}

    def path(self, run: str, kind: str, version: tuple, draw) -> str | None:
        """The file of `run`'s `kind` plot at `version` (what it shows: points, evaluations), drawn if new."""
        with self.lock:
            known = self.latest.get((run, kind))
        if known and known[0] == version and Path(known[1]).is_file():
            return known[1]
        image = draw()
        if image is None:
            return None
        folder = self.state.exports / f"plots-{run}"  # run names are checked: a-z, digits and '-'
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{kind}-{'-'.join(map(str, version))}.png"
        written = folder / f".{target.name}.{threading.get_ident()}.tmp"
        written.write_bytes(image)
        os.replace(written, target)  # whole or not at all, for a reader
        with self.lock:
            self.latest[(run, kind)] = (version, str(target))
        return str(target)


class Watcher:
    """One progress stream's updates: the progress of each poll as numbers, plots redrawn only when they have
    something new."""

    def __init__(self, runs: training_runs.RunQueue, run: training_runs.Run, plots: SharedPlots):
        self.runs, self.run, self.plots = runs, run, plots
        self.drawn, self.drawn_at, self.drawn_roles, self.roles_at = None, 0.0, 0, time.monotonic()

    def update(self) -> tuple[dict, run_folder.Progress]:
        """The run's progress now: {progress: the numbers (name, state, step, losses, samples, roles, ...), plot and
        roles_plot: a plot's file (None: nothing to draw yet), only where it was drawn again}, and the progress."""
        run, progress = self.run, self.runs.progress(self.run)
        update = {}
        points = (len(progress.train), len(progress.validation))
        if points != self.drawn and (progress.done or time.monotonic() - self.drawn_at > PLOT_SECONDS):
            drawn = (*points, *progress.resumed_at)
            update["plot"] = self.plots.path(run.name, "loss", drawn, lambda: loss_png(run.name, progress))
            self.drawn, self.drawn_at = points, time.monotonic()
        roles = run_folder.roles_of(run.folder)  # a line per evaluation: the heads' role scores
        # five panels cost more than the loss plot: at most every ROLES_PLOT_SECONDS
        due = progress.done or time.monotonic() - self.roles_at > ROLES_PLOT_SECONDS
        if len(roles) != self.drawn_roles and due:
            update["roles_plot"] = self.plots.path(run.name, "roles", (len(roles),), lambda: roles_png(run.name, roles))
            self.drawn_roles, self.roles_at = len(roles), time.monotonic()
        update["progress"] = {"name": run.name, **dataclasses.asdict(progress), "roles": roles}
        return update, progress


class Training:
    """The tab's endpoints, on the demo's state (its run queue and model picker); training/ui.py puts them on the
    page."""

    def __init__(self, state: DemoState):
        self.state = state
        self.plots = SharedPlots(state)

    async def train(
        self,
        data: str = "names",
        text: str = "",
        tokenizer: str | None = None,
        n_layer: float | None = None,
        n_head: float | None = None,
        n_embd: float | None = None,
        block_size: float | None = None,
        max_steps: float | None = None,
        learning_rate: float | None = None,
        seed: float | None = None,
        name: str = "",
        vocab_size: float | None = None,
        upload: str | None = None,
        owner: str | None = None,
    ):
        """Trains a model with train.py (queued behind any other run) and streams its progress: the name, the progress
        bar, the loss plot, the latest samples and the numbers. Left out, the tokenizer follows the data (names, bpe for
        Shakespeare, char for a text) and the sizes are the tab's first ones (the names preset). `owner`: a token you
        keep (the page keeps its own in the browser): only who sends it watches, cancels and resumes the run."""
        form = RunForm.of(locals())  # the parameters above are the form's fields
        spec, text = await asyncio.to_thread(self.requested, form, taken=self.state.picker.names)
        who = starter(owner)
        run = await asyncio.to_thread(self.state.runs.submit, spec, text, owner=who)
        async for update in self.watch(run):
            yield update

    def requested(self, form: RunForm, taken) -> tuple[run_requests.RunSpec, str]:
        """The run the tab's fields ask for and its text, every limit checked (run_requests.check_request)."""
        data = form.data or "names"
        default = run_requests.defaults(data)
        sizes = {key: number(label, getattr(form, key), default[key], int) for key, label in SIZE_FIELDS.items()}
        rate = number("Learning rate", form.learning_rate, default["learning_rate"])
        text = run_requests.read_upload(form.upload) if form.upload else form.text
        return run_requests.check_request(
            data, text, form.tokenizer, **sizes, learning_rate=rate, name=form.name, taken=taken
        )

    def estimate(self, *values) -> str:
        """Before Start: the run's size and how long it should take at this server's measured pace (its latest timed
        run's work a second; before any, a typical 2-core CPU's), or what to change. `values`: the form's fields, in
        RunForm's order (the page's inputs)."""
        try:
            spec, _ = self.requested(RunForm(*values), taken=())
        except VISITORS_MISTAKES as error:
            return f"Before Start: {error}"
        pace = self.state.runs.pace() if self.state.runs else None
        source = "this server's latest run" if pace else "a typical 2-core CPU (no run timed on this server yet)"
        seconds = spec.work / (pace or run_requests.TYPICAL_PACE)
        return (
            f"**{spec.parameters:,} parameters**, {spec.max_steps:,} steps of {spec.batch_size} x {spec.block_size} "
            f"tokens: about **{duration(seconds)}** of training at the pace of {source}, plus a few seconds to prepare."
        )

    async def resume(self, name: str = "", owner: str | None = None):
        """Continues your stopped run from its last checkpoint (or shows your queued or running one), streaming as
        `train`; `owner`: the token the run was started with."""
        who = starter(owner)
        run = await asyncio.to_thread(self.state.runs.resume, (name or "").strip(), owner=who)
        async for update in self.watch(run):
            yield update

    async def visitors_last_run(self, owner: str | None = None):
        """A page opened again (a reload): the visitor's latest run as it stands, followed while it trains; so that a
        stopped run's Resume needs no name from memory. None without one."""
        run = self.state.runs.latest_of(visitor(owner))
        if run is None:
            yield None
        elif run.state == "done":
            yield (await asyncio.to_thread(Watcher(self.state.runs, run, self.plots).update))[0]
        else:
            async for update in self.watch(run):
                yield update

    def cancel(self, name: str = "", owner: str | None = None) -> str:
        """Stops your run at its next step, keeping a checkpoint (or takes it out of the queue); `owner`: the token
        the run was started with."""
        return self.state.runs.cancel((name or "").strip(), owner=visitor(owner))

    def download(self, name: str = "") -> str:
        """A finished model's folder as a zip (model, tokenizer, model card, loss curve; no checkpoints)."""
        folder = dict(self.state.runs.finished()).get((name or "").strip())
        if folder is None:
            raise VisitorError(f"No finished model named {shortened(name)}: train one first.")
        return str(run_folder.zip_model(folder, self.state.export_folder()))

    async def watch(self, run: training_runs.Run):
        """Yields the run's progress every POLL_SECONDS until it is finished, stopped or failed. Between polls the
        stream holds no worker thread (it awaits), and each poll is drawn on a thread of its own: open streams do not
        starve the other endpoints; RunQueue.watching bounds their number."""
        watcher = Watcher(self.state.runs, run, self.plots)
        with self.state.runs.watching(run):
            while True:
                update, progress = await asyncio.to_thread(watcher.update)
                yield update
                if progress.state == "failed":
                    raise VisitorError(progress.message)
                if progress.done:
                    return
                await asyncio.sleep(POLL_SECONDS)
