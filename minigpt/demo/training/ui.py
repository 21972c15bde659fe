"""The Train tab: train a model in the page through train.py's own path (minigpt/demo/training/training_runs.py queues
the runs, training_process.py runs each), watch its loss and samples, cancel, resume, download the folder; a finished
model joins every model picker. Endpoints: /train and /resume (streamed), /cancel, /download."""

import asyncio
import dataclasses
import io
import os
import re
import threading
import time
from pathlib import Path

import gradio as gr

from minigpt import plots
from minigpt.demo.core.gradio_internals import refusals_logged, unchecked
from minigpt.demo.core.inputs import number
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.ui import session
from minigpt.demo.core.view import asset
from minigpt.demo.training import run_folder, run_requests, training_runs
from minigpt.demo.training.view import duration, progress_html
from minigpt.errors import VISITORS_MISTAKES, VisitorError, shortened

POLL_SECONDS = 1.0  # a watcher reads its run's progress this often


PLOT_SECONDS = 3.0  # and redraws the loss plot at most this often (a matplotlib figure costs tens of ms)


ROLES_PLOT_SECONDS = 10.0  # and the head roles' plot (five panels, a line per head), and once at the end


SIZE_FIELDS = {
    "n_layer": "Layers",
    "n_head": "Heads",
    "n_embd": "Width (n_embd)",
    "block_size": "Context (tokens)",
    "max_steps": "Steps",
    "seed": "Seed",
    "vocab_size": "BPE vocabulary size",
}


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


TOKENIZER_LABEL = "Tokenizer (none chosen: names for names, bpe for Shakespeare, char for your text)"


DATA_CHOICES = [
    ("Built-in names", "names"),
    ("Built-in Shakespeare", "shakespeare"),
    ("Induction lab: names written twice", "induction"),
    ("Your names or text", "text"),
]


LOSS_NOTE = (
    "Validation can sit below training loss: each training point is the mean over the steps since the previous one "
    "(the model was worse at their start) and is measured with dropout on; validation is measured at that step, "
    "dropout off. The dotted line is chance: a uniform guess over the vocabulary, ln V nats a token."
)


TRAIN_INTRO = f"""Train a small GPT here, watch its loss fall, then look inside it: when it finishes, it joins the
model picker of every view and can be downloaded as a zip of its folder (ready to push to the Hub). Training runs
train.py (the Trainer, its data pipeline and checkpoints), one run at a time on this server: yours waits in a queue
if another is going. Cancel stops it within a step and keeps a checkpoint; Resume (same name) continues from it. A run
is yours by a token this browser keeps: only you watch, cancel and resume it, also after reloading the page.

**Limits:** your text or file at most {run_requests.MAX_TEXT_BYTES / 1e6:g} MB; names are a-z only, one a line, at
least {run_requests.MIN_NAMES}; a text at least {run_requests.HELD_OUT} contexts long (its last tenth is held out to
validate); at most {run_requests.MAX_PARAMETERS / 1e6:g}M parameters and {run_requests.MAX_STEPS:,} steps, and
parameters x steps x tokens a step at most {run_requests.MAX_WORK:.1e} (about 15 minutes on 2 CPU cores), and
about {run_requests.MAX_TRAINING_BYTES / 2**30:g} GiB of memory (attention grows with batch x heads x context^2); a
run stops, with a checkpoint, after {run_requests.MAX_RUN_SECONDS // 60} minutes; {training_runs.MAX_RUNS_PER_VISITOR}
runs of yours queued or training at a time. Model names: a-z, digits and '-'.
"""


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


def visitor(token, request: gr.Request | None) -> str | None:
    """Who asks, as runs keep it (training_runs.owner_key): the token the page keeps in the browser's storage, so that
    a run stays its visitor's across page reloads (an API client sends a token of its own, or is known by its
    session alone)."""
    if token is not None and not isinstance(token, str) or len(token or "") > MAX_TOKEN_CHARS:
        raise VisitorError(f"owner must be a text of at most {MAX_TOKEN_CHARS} characters (a token you keep secret).")
    return training_runs.owner_key(token or session(request))


def starter(token, request: gr.Request | None) -> str:
    """Who starts (or resumes) a run: a token is needed. A REST call's Gradio session ends with the call, so a run
    owned by it could be neither watched nor cancelled by anyone, and would train to its end."""
    who = visitor(token, request)
    if not token:
        raise VisitorError(
            "A run needs an owner: send owner, a token of your own that you keep secret (the page sends the one it "
            "keeps in your browser). Only who sends it can watch, cancel and resume the run."
        )
    return who


OWNER_JS = asset("training/owner.js")  # the token the page keeps in the browser's storage


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
    """One progress stream's drawing: the update of each poll, plots redrawn only when they have something new."""

    def __init__(self, runs: training_runs.RunQueue, run: training_runs.Run, plots: SharedPlots):
        self.runs, self.run, self.plots = runs, run, plots
        self.drawn, self.drawn_at, self.drawn_roles, self.roles_at = None, 0.0, 0, time.monotonic()

    def update(self) -> tuple[tuple, run_folder.Progress]:
        """The outputs for the run's progress now (name, bar, loss plot, samples, numbers, roles plot)."""
        run, progress = self.run, self.runs.progress(self.run)
        points = (len(progress.train), len(progress.validation))
        plot = gr.skip()
        if points != self.drawn and (progress.done or time.monotonic() - self.drawn_at > PLOT_SECONDS):
            drawn = (*points, *progress.resumed_at)
            plot = self.plots.path(run.name, "loss", drawn, lambda: loss_png(run.name, progress))
            self.drawn, self.drawn_at = points, time.monotonic()
        roles = run_folder.roles_of(run.folder)  # a line per evaluation: the heads' role scores
        roles_plot = gr.skip()  # five panels cost more than the loss plot: at most every ROLES_PLOT_SECONDS
        due = progress.done or time.monotonic() - self.roles_at > ROLES_PLOT_SECONDS
        if len(roles) != self.drawn_roles and due:
            roles_plot = self.plots.path(run.name, "roles", (len(roles),), lambda: roles_png(run.name, roles))
            self.drawn_roles, self.roles_at = len(roles), time.monotonic()
        numbers = {"name": run.name, **dataclasses.asdict(progress), "roles": roles}
        apart = "\n\n" if any("\n" in sample for sample in progress.samples) else "\n"  # texts, or one name a line
        return (run.name, progress_html(progress), plot, apart.join(progress.samples), numbers, roles_plot), progress


def note_after_progress(bar: str):
    """Cancel's note ("Cancelling ...: it stops at its next step") holds until the run has stopped; then the progress
    bar says how it ended, and the note goes."""
    ended = re.search(r'data-state="(stopped|finished|failed)"', bar or "")
    return "" if ended else gr.skip()


def training_defaults(data: str):
    """The tokenizer and sizes the tab proposes for the chosen data."""
    default = run_requests.defaults(data)
    return [default[key] for key in ("tokenizer", *SIZE_FIELDS, "learning_rate")]


def fields_for(data: str, tokenizer: str | None):
    """Only the fields that apply: the text box and upload for your own data, the tokenizers the data can use, the BPE
    vocabulary size for the bpe tokenizer."""
    choices = list(run_requests.TOKENIZERS_FOR.get(data, run_requests.TOKENIZERS))
    tokenizer = tokenizer if tokenizer in choices else run_requests.DEFAULT_TOKENIZER.get(data, "names")
    own = gr.update(visible=data == "text")
    return own, own, gr.Radio(choices=choices, value=tokenizer), gr.update(visible=tokenizer == "bpe")


@dataclasses.dataclass
class TabComponents:
    """The Train tab's components, as `Training.layout` places them for the wiring."""

    fields: dict  # RunForm's fields by name, but the sizes
    numbers: dict  # the sizes' fields (SIZE_FIELDS)
    owner: gr.Textbox  # the visitor's token, from the browser's storage
    known: object  # the page's load event that reads it
    estimate: gr.Markdown
    start: gr.Button
    stop: gr.Button
    go_on: gr.Button
    bar: gr.HTML
    notes: gr.Markdown
    plot: gr.Image
    samples: gr.Textbox
    roles_plot: gr.Image
    as_json: gr.JSON
    zip_button: gr.Button
    zipped: gr.File

    @property
    def form(self) -> list:
        """The form's fields, in RunForm's order (the /train endpoint's parameters)."""
        return [{**self.fields, **self.numbers}[field] for field in FORM_FIELDS]

    @property
    def outputs(self) -> list:
        """What a run's progress updates; the roles last: earlier clients' positions kept."""
        return [self.fields["name"], self.bar, self.plot, self.samples, self.as_json, self.roles_plot]


def progress_views() -> tuple:
    """Below the buttons: the progress bar and notes, the loss plot beside the samples, the roles plot, the progress
    as numbers, and the download (in the order of TabComponents' fields)."""
    bar = gr.HTML(elem_id="train-progress")
    notes = gr.Markdown(elem_id="train-notes")
    with gr.Row():
        plot = gr.Image(label="Loss", type="filepath", interactive=False, elem_id="train-plot", scale=3)
        samples = gr.Textbox(label="Samples at the latest evaluation", lines=10, elem_id="train-samples", scale=2)
    gr.Markdown(LOSS_NOTE)
    roles_plot = gr.Image(
        label="Head roles over training (at each evaluation, on the first validation text)",
        type="filepath",
        interactive=False,
        elem_id="train-roles",
    )
    with gr.Accordion("The progress as numbers (what the API streams)", open=False):
        as_json = gr.JSON(label="Progress")
    with gr.Row():
        zip_button = gr.Button("Download the model (zip)")
        zipped = gr.File(label="Model folder (zip)", interactive=False, height=80)
    return bar, notes, plot, samples, roles_plot, as_json, zip_button, zipped


class Training:
    """The tab's endpoints, on the demo's state (its run queue and model picker); `tab` builds it on the page."""

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
        request: gr.Request = None,
    ):
        """Trains a model with train.py (queued behind any other run) and streams its progress: the name, the progress
        bar, the loss plot, the latest samples and the numbers. Left out, the tokenizer follows the data (names, bpe for
        Shakespeare, char for a text) and the sizes are the tab's first ones (the names preset). `owner`: a token you
        keep (the page keeps its own in the browser): only who sends it watches, cancels and resumes the run."""
        form = RunForm.of(locals())  # the parameters above are the form's fields
        spec, text = await asyncio.to_thread(self.requested, form, taken=self.state.picker.names)
        who = starter(owner, request)
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

    async def resume(self, name: str = "", owner: str | None = None, request: gr.Request = None):
        """Continues your stopped run from its last checkpoint (or shows your queued or running one), streaming as
        `train`; `owner`: the token the run was started with."""
        who = starter(owner, request)
        run = await asyncio.to_thread(self.state.runs.resume, (name or "").strip(), owner=who)
        async for update in self.watch(run):
            yield update

    async def visitors_last_run(self, owner: str | None = None, request: gr.Request = None):
        """A page opened again (a reload): the visitor's latest run as it stands, its name in the field, followed while
        it trains; so that a stopped run's Resume needs no name from memory. Nothing without one."""
        run = self.state.runs.latest_of(visitor(owner, request))
        if run is None:
            yield (gr.skip(),) * 6
        elif run.state == "done":
            yield (await asyncio.to_thread(Watcher(self.state.runs, run, self.plots).update))[0]
        else:
            async for update in self.watch(run):
                yield update

    def cancel(self, name: str = "", owner: str | None = None, request: gr.Request = None) -> str:
        """Stops your run at its next step, keeping a checkpoint (or takes it out of the queue); `owner`: the token
        the run was started with."""
        return self.state.runs.cancel((name or "").strip(), owner=visitor(owner, request))

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

    def tab(self, demo: gr.Blocks) -> list:
        """The Train tab, wired; returns the events whose end may bring a new model (for `pickers_follow_training`)."""
        tab = self.layout(demo)
        started, resumed = self.wire_runs(tab)
        self.wire_form(demo, tab, (started, resumed))
        return [started, resumed]

    def layout(self, demo: gr.Blocks) -> TabComponents:
        """The tab's components, placed: the form, the buttons, the progress, the download."""
        default = run_requests.defaults("names")
        with gr.Tab("Train", id="train", elem_id="train-tab"):
            # The visitor's token, kept in the browser's storage across page reloads (read there by the browser itself
            # as the page loads: a gr.BrowserState's stored value reaches the server's load event too late).
            owner = gr.Textbox("", visible=False, elem_id="train-owner")
            known = demo.load(None, None, owner, js=OWNER_JS, api_visibility="private")
            gr.Markdown(TRAIN_INTRO)
            with gr.Row():
                data = unchecked(gr.Radio(DATA_CHOICES, value="names", label="Data"))
                tokenizer = unchecked(gr.Radio(list(run_requests.TOKENIZERS), value=None, label=TOKENIZER_LABEL))
            with gr.Row():  # the fields that apply to the data chosen (fields_for): built-in names first
                text = gr.Textbox("", label="Your names (one a line) or text", lines=4, scale=3, visible=False)
                upload = refusals_logged(
                    gr.File(label="... or a .txt file", file_types=[".txt"], type="filepath", scale=1, visible=False)
                )
            with gr.Row():
                numbers = {
                    key: unchecked(gr.Number(default[key], precision=0, label=label, visible=key != "vocab_size"))
                    for key, label in SIZE_FIELDS.items()
                }
                learning_rate = unchecked(gr.Number(default["learning_rate"], label="Learning rate"))
            first = RunForm(**{key: default[key] for key in (*SIZE_FIELDS, "learning_rate")})
            estimate = gr.Markdown(self.estimate(*dataclasses.astuple(first)), elem_id="train-estimate")
            with gr.Row():
                name = gr.Textbox("", label="Model name (empty: one is picked)", elem_id="train-name", scale=2)
                start = gr.Button("Start training", variant="primary", scale=1)
                stop = gr.Button("Cancel", variant="stop", scale=1)
                go_on = gr.Button("Resume", scale=1)
            fields = dict(
                data=data, text=text, tokenizer=tokenizer, learning_rate=learning_rate, name=name, upload=upload
            )
            return TabComponents(fields, numbers, owner, known, estimate, start, stop, go_on, *progress_views())

    def wire_runs(self, tab: TabComponents) -> tuple:
        """The run's endpoints (/train, /resume, /cancel, /download) and what follows a run's progress; returns the
        events of a start and of a resume."""
        owner, name, notes = tab.owner, tab.fields["name"], tab.notes
        streaming = dict(concurrency_limit=None, show_progress="hidden")  # watchers only read files; runs: state.runs
        started = tab.start.click(self.train, [*tab.form, owner], tab.outputs, api_name="train", **streaming)
        resumed = tab.go_on.click(self.resume, [name, owner], tab.outputs, api_name="resume", **streaming)
        tab.stop.click(self.cancel, [name, owner], notes, api_name="cancel", concurrency_limit=None)
        for button in (tab.start, tab.go_on):  # a new start or a resume: the note of an earlier Cancel no longer holds
            button.click(lambda: "", None, notes, api_visibility="private")
        tab.known.then(self.visitors_last_run, owner, tab.outputs, api_visibility="private", **streaming)
        tab.bar.change(note_after_progress, tab.bar, notes, api_visibility="private")
        tab.zip_button.click(self.download, [name], tab.zipped, api_name="download")
        return started, resumed

    def wire_form(self, demo: gr.Blocks, tab: TabComponents, runs: tuple) -> None:
        """The form follows the data chosen (its tokenizers, sizes and fields), and the estimate follows the form."""
        private, form, estimate = dict(api_visibility="private"), tab.form, tab.estimate
        data, tokenizer, text, upload = (tab.fields[key] for key in ("data", "tokenizer", "text", "upload"))
        numbers = [*tab.numbers.values(), tab.fields["learning_rate"]]
        shown = [text, upload, tokenizer, tab.numbers["vocab_size"]]
        data.input(training_defaults, data, [tokenizer, *numbers], **private).then(
            fields_for, [data, tokenizer], shown, **private
        )
        tokenizer.input(fields_for, [data, tokenizer], shown, **private)
        for field in [data, tokenizer, *numbers, upload]:
            field.change(self.estimate, form, estimate, **private)
        text.blur(self.estimate, form, estimate, **private)
        # a run that ends times this server: the estimate says so at once (and on a page opened later), not only after
        # a field changes
        for event in runs:
            event.then(self.estimate, form, estimate, **private)
        demo.load(self.estimate, form, estimate, **private)
