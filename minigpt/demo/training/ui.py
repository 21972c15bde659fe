"""The Train tab, laid out and wired: train a model in the page through train.py's own path, watch its loss and samples,
cancel, resume, download the folder; a finished model joins every model picker. Its endpoints: training/endpoints.py
(/train and /resume, streamed; /cancel, /download), whose progress this module draws (with training/view.py)."""

import dataclasses
import re

import gradio as gr

from minigpt.demo.core.gradio_internals import refusals_logged, unchecked
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.ui import answer_drawn
from minigpt.demo.core.view import asset
from minigpt.demo.training import run_requests
from minigpt.demo.training.endpoints import FORM_FIELDS, RunForm, Training
from minigpt.demo.training.view import progress_html
from minigpt.demo.training.words import DATA_CHOICES, LOSS_NOTE, SIZE_FIELDS, TOKENIZER_LABEL, TRAIN_INTRO

OWNER_JS = asset("training/owner.js")  # the token the page keeps in the browser's storage


def drawn_progress(update: dict | None) -> tuple:
    """A run's update (training/endpoints.py's: its progress as numbers, the plots drawn again) as the tab's outputs:
    name, bar, loss plot, samples, numbers, roles plot; a plot not drawn again, or no update, leaves its output as it
    is."""
    if update is None:
        return (gr.skip(),) * 6
    numbers = update["progress"]
    apart = "\n\n" if any("\n" in sample for sample in numbers["samples"]) else "\n"  # texts, or one name a line
    plot, roles_plot = update.get("plot", gr.skip()), update.get("roles_plot", gr.skip())
    return (numbers["name"], progress_html(numbers), plot, apart.join(numbers["samples"]), numbers, roles_plot)


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
    """The Train tab's components, as `TrainingTab.layout` places them for the wiring."""

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


class TrainingTab:
    """The Train tab on the demo's state: its page handlers draw the answers of `training`, the tab's endpoints; `tab`
    builds it on the page."""

    def __init__(self, state: DemoState):
        self.state, self.training = state, Training(state)
        # /train and /resume (and a reloaded page's latest run): each update of the stream drawn as the tab shows it
        self.train = answer_drawn(self.training.train, drawn_progress)
        self.resume = answer_drawn(self.training.resume, drawn_progress)
        self.visitors_last_run = answer_drawn(self.training.visitors_last_run, drawn_progress)

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
            estimate = gr.Markdown(self.training.estimate(*dataclasses.astuple(first)), elem_id="train-estimate")
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
        tab.stop.click(self.training.cancel, [name, owner], notes, api_name="cancel", concurrency_limit=None)
        for button in (tab.start, tab.go_on):  # a new start or a resume: the note of an earlier Cancel no longer holds
            button.click(lambda: "", None, notes, api_visibility="private")
        tab.known.then(self.visitors_last_run, owner, tab.outputs, api_visibility="private", **streaming)
        tab.bar.change(note_after_progress, tab.bar, notes, api_visibility="private")
        tab.zip_button.click(self.training.download, [name], tab.zipped, api_name="download")
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
            field.change(self.training.estimate, form, estimate, **private)
        text.blur(self.training.estimate, form, estimate, **private)
        # a run that ends times this server: the estimate says so at once (and on a page opened later), not only after
        # a field changes
        for event in runs:
            event.then(self.training.estimate, form, estimate, **private)
        demo.load(self.training.estimate, form, estimate, **private)
