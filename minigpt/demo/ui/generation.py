"""Generation: names (a batch of N from the names model) and text (streamed as it is written), each tab with its
sampling settings. Endpoints: /names, /text (streamed)."""

import asyncio
import contextlib
from types import SimpleNamespace

import gradio as gr

from minigpt.demo.choices import clamped, number, parse_sampling
from minigpt.demo.state import DemoState
from minigpt.demo.texts import from_boundary, keep_context
from minigpt.demo.ui.components import notes_markdown, unchecked
from minigpt.errors import VisitorError

MAX_NAMES = 100  # names per request


MAX_NEW_TOKENS = 500  # text tokens per request


MAX_NAME_TOKENS = 32  # tokens per name, when a model with a long context is used for names


class Generation:
    """The section's endpoints, on the demo's state; `sampling_controls` and `tabs` build it on the page."""

    def __init__(self, state: DemoState):
        self.state = state

    async def names(
        self,
        prefix: str = "",
        count: float = 10,
        temperature: float = 1.0,
        top_k: float = 0,
        top_p: float = 1.0,
        seed: float = -1,
        model: str | None = None,
    ):
        """N names from the names model, each starting with `prefix`. Returns the names (one a line), notes about the
        input, and (for the attention maps) each name with the text the maps read (its boundary tokens)."""
        lm = await asyncio.to_thread(
            self.state.picker.get, model or self.state.names_default
        )  # loading a model must not stall the other streams
        notes = []
        most = min(MAX_NAMES, lm.batcher.max_rows)  # a names request is one batch of `count` rows
        count = clamped("Number of names", number("Number of names", count, 10, int), 1, most, notes)
        sampling = parse_sampling(temperature, top_k, top_p, seed, lm.vocab_size, notes)
        prefix = (prefix or "").strip()
        prompt = from_boundary(lm, prefix, "prefix")
        room = min(lm.block_size - len(prompt), MAX_NAME_TOKENS)
        if room < 1:
            raise VisitorError(
                f"The prefix is too long: the {lm.name} model's context is {lm.block_size} tokens, the "
                f"start token included, so use at most {lm.block_size - 2} characters."
            )
        if sampling.greedy and count > 1:
            notes.append("Greedy decoding gives the same name every time.")
        samples = await lm.batcher.agenerate(prompt, room, sampling, rows=count)  # waits holding no thread
        decoded = [lm.tokenizer.decode(prompt[1:] + s, skip_special_tokens=True) for s in samples]
        if empty := decoded.count(""):
            notes.append(f"{empty} of the names are empty (blank lines): the model ended them at once.")
        mapped = [lm.tokenizer.decode(prompt + sample, skip_special_tokens=False) for sample in samples]
        return "\n".join(decoded), notes_markdown(notes), list(zip(decoded, mapped))

    async def text(
        self,
        prompt: str = "",
        max_new_tokens: float = 200,
        temperature: float = 1.0,
        top_k: float = 0,
        top_p: float = 1.0,
        seed: float = -1,
        model: str | None = None,
    ):
        """Continues `prompt` token by token (a generator: each yield is the text so far and the notes). The tokens come
        from the model's continuous batch; a client that goes closes this generator, which takes its row out at once."""
        lm = await asyncio.to_thread(self.state.picker.get, model or self.state.text_default)
        notes = []
        max_new = clamped(
            "Max new tokens", number("Max new tokens", max_new_tokens, 200, int), 1, MAX_NEW_TOKENS, notes
        )
        sampling = parse_sampling(temperature, top_k, top_p, seed, lm.vocab_size, notes)
        if not prompt:
            notes.append(f"Empty prompt: the model starts from its boundary token {lm.boundary!r}.")
        ids = keep_context(lm, from_boundary(lm, prompt or "", "prompt"), "prompt", notes)
        shown = lm.tokenizer.decode(ids, skip_special_tokens=True)  # what the model sees (the kept part of the prompt)
        yield shown, notes_markdown(notes)
        new: list[int] = []
        async with contextlib.aclosing(lm.batcher.astream(ids, max_new, sampling, **self.state.stream)) as ready:
            async for steps in ready:  # the tokens decoded since the last update
                new += [tokens[0] for tokens in steps]
                # A multi-byte character split across tokens decodes to U+FFFD until its last byte arrives.
                yield shown + lm.tokenizer.decode(new, skip_special_tokens=True).rstrip("\ufffd"), notes_markdown(notes)
        ended = " (the model wrote its end-of-text token)" if new and new[-1] == lm.eos_id else ""
        notes.append(f"{len(new)} new tokens{ended}.")
        yield shown + lm.tokenizer.decode(new, skip_special_tokens=True), notes_markdown(notes)

    def sampling_controls(self, tab: str) -> list:
        """Temperature, top-k, top-p and seed, inside a generation tab (the Text tab's also serve the head tools'
        generations: the ablated text, the sampled probabilities)."""
        with gr.Accordion("Sampling settings", open=False, elem_id=f"{tab}-sampling"):
            with gr.Row():
                temperature = unchecked(gr.Slider(0, 2, value=1.0, step=0.05, label="Temperature (0 = greedy)"))
                top_k = unchecked(gr.Number(value=0, precision=0, label="Top-k (0 = off)"))
                top_p = unchecked(gr.Slider(0, 1, value=1.0, step=0.01, label="Top-p (1 = off)"))
                seed = unchecked(gr.Number(value=-1, precision=0, label="Seed (-1 = random; same seed, same output)"))
        return [temperature, top_k, top_p, seed]

    def tabs(self) -> SimpleNamespace:
        """The Names and Text tabs (inside the page's gr.Tabs), each with its sampling settings, wired; returns what
        the later sections follow: each generation's event, output, model and sampling settings."""
        state = self.state
        with gr.Tab("Names", id="names"):
            with gr.Row():
                names_model = unchecked(gr.Dropdown(state.picker.names, value=state.names_default, label="Model"))
                prefix = gr.Textbox("", label="Starts with (optional)", placeholder="e.g. em")
                count = unchecked(gr.Number(value=10, precision=0, label=f"How many names (1-{MAX_NAMES})"))
            names_sampling = self.sampling_controls("names")
            names_button = gr.Button("Generate names", variant="primary")
            names_out = gr.Textbox(label="Names", lines=6, elem_id="names-output")
            names_notes = gr.Markdown(label="Notes")
            generated = gr.State([])  # (name, the text the maps read) of each name generated
            name_pick = gr.Radio(
                [], label="The maps below show this name: pick another", visible=False, elem_id="names-pick"
            )
        with gr.Tab("Text", id="text"):
            with gr.Row():
                text_model = unchecked(gr.Dropdown(state.picker.names, value=state.text_default, label="Model"))
                max_new = unchecked(gr.Number(value=200, precision=0, label=f"Max new tokens (1-{MAX_NEW_TOKENS})"))
            prompt = gr.Textbox("", label="Prompt (may be empty)", lines=3, placeholder="ROMEO:")
            text_sampling = self.sampling_controls("text")
            text_button = gr.Button("Generate text", variant="primary")
            text_out = gr.Textbox(label="Text", lines=10, elem_id="text-output")
            text_notes = gr.Markdown(label="Notes")
        names_event = names_button.click(
            self.names,
            [prefix, count, *names_sampling, names_model],
            [names_out, names_notes, generated],
            api_name="names",
            concurrency_limit=None,  # every request goes to the model's batch, which has its own limits
        )
        names_listed = names_event.success(name_choices, generated, name_pick, api_visibility="private")
        text_event = text_button.click(
            self.text,
            [prompt, max_new, *text_sampling, text_model],
            [text_out, text_notes],
            api_name="text",
            concurrency_limit=None,
        )
        return SimpleNamespace(
            names_event=names_listed,
            name_pick=name_pick,
            names_model=names_model,
            text_event=text_event,
            text_out=text_out,
            text_model=text_model,
            prompt=prompt,
            text_sampling=text_sampling,
        )


def name_choices(generated: list) -> gr.Radio:
    """The names just generated as choices of which one the maps show (the first at first); hidden for one name."""
    choices = [(name or "(empty)", mapped) for name, mapped in generated]
    return gr.Radio(choices=choices, value=choices[0][1] if choices else None, visible=len(choices) > 1)
