"""The Names and Text tabs, each with its sampling settings, laid out and wired to generation's endpoints
(minigpt/demo/generation/endpoints.py): /names, /text (streamed)."""

from types import SimpleNamespace

import gradio as gr

from minigpt.demo.core.gradio_internals import unchecked
from minigpt.demo.core.state import DemoState
from minigpt.demo.generation.endpoints import MAX_NAMES, MAX_NEW_TOKENS, Generation


class GenerationTabs:
    """The Names and Text tabs on the demo's state: `tabs` builds them on the page."""

    def __init__(self, state: DemoState):
        self.state, self.generation = state, Generation(state)

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
            self.generation.names,
            [prefix, count, *names_sampling, names_model],
            [names_out, names_notes, generated],
            api_name="names",
            concurrency_limit=None,  # every request goes to the model's batch, which has its own limits
        )
        names_listed = names_event.success(name_choices, generated, name_pick, api_visibility="private")
        text_event = text_button.click(
            self.generation.text,
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
