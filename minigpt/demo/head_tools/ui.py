"""The "What does this head do?" section, laid out and wired, on the text and model the maps show: next-token
probabilities and the logit lens, head ablation (with the text generated again), head importance, head roles, and two
texts compared. Its endpoints and numbers: minigpt/demo/head_tools/endpoints.py (/next_tokens, /logit_lens, /ablate,
/importance, /head_roles, /compare); the page draws those same answers with head_tools/view.py."""

from types import SimpleNamespace

import gradio as gr

from minigpt.demo.core.gradio_internals import unchecked
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.ui import drawn
from minigpt.demo.core.view import belongs_to
from minigpt.demo.head_tools.endpoints import MAX_INSIGHT_TOKENS, Insights
from minigpt.demo.head_tools.view import (
    PICK_HEAD_JS,
    PICK_TOKEN_JS,
    VALUES_JS,
    ablation_html,
    compare_html,
    generation_html,
    importance_html,
    next_tokens_html,
    roles_html,
    sampled_html,
)
from minigpt.demo.head_tools.words import HEAD_TOOLS_INTRO, SAMPLED_NOTE


class InsightsSection:
    """The section on the demo's state: each page handler calls an endpoint of `insights` and draws its answer;
    `layout` builds the section on the page."""

    def __init__(self, state: DemoState):
        self.state, self.insights = state, Insights(state)

    def sampled_colours(self, generated: str, model: str, prompt: str, temperature, top_k, top_p, seed) -> str:
        """After a generation: each new token coloured by the probability it was sampled with."""
        answer = self.insights.sampled_probabilities(generated, model, prompt, temperature, top_k, top_p, seed)
        body = sampled_html(answer["pieces"], answer["probabilities"], SAMPLED_NOTE)
        return belongs_to(answer["key"], answer["label"], body)

    def show_next_tokens(self, shown, position, temperature=1.0, top_k=0, top_p=1.0):
        def draw(text, model):
            answer = self.insights.next_tokens(text, model, position, temperature, top_k, top_p)
            return next_tokens_html(answer, self.insights.logit_lens(text, model, position))

        return drawn(shown, draw)

    def pick_position(self, shown, temperature, top_k, top_p, event: gr.EventData):
        position = int(event.position)
        return position, self.show_next_tokens(shown, position, temperature, top_k, top_p)

    def show_ablation(self, shown, ticked, mode, position):
        ablate = self.insights.ablate
        return drawn(shown, lambda t, m: ablation_html(ablate(t, m, ", ".join(ticked or []), mode, position)))

    def show_generation(self, shown, ticked, mode, prompt, new_tokens, temperature, top_k, top_p, seed):
        """The Ablate button's second half: the prompt continued plain and ablated."""

        def draw(text, model):
            heads = ", ".join(ticked or [])
            answer = self.insights.regenerated(
                text, model, heads, mode, prompt, new_tokens, temperature, top_k, top_p, seed
            )
            return generation_html(answer["generation"]) if answer else ""

        return drawn(shown, draw)

    def show_importance(self, shown, mode):
        return drawn(shown, lambda t, m: importance_html(self.insights.importance(t, m, mode)))

    def show_roles(self, shown):
        return drawn(shown, lambda t, m: roles_html(self.insights.head_roles(t, m)))

    def show_compare(self, shown, other_text, layer=0, head="0"):
        """Compare's answer drawn, with the maps of the chosen head on both texts beside their difference."""
        return drawn(shown, lambda t, m: compare_html(*self.insights.compared_head(t, other_text, m, layer, head)))

    def head_choices(self, shown: dict | None, ticked: list[str] | None):
        """The heads of the shown text's model to tick; those ticked stay ticked while the model has them."""
        if not shown:
            return gr.skip()
        choices = self.insights.head_names(shown["model"])
        return gr.CheckboxGroup(choices=choices, value=[head for head in ticked or [] if head in choices])

    def layout(self, maps, sampling, prompt, generated_text, text_model, after_text):
        """The "What does this head do?" section, on the text and model the maps show (`maps`: the attention maps
        section's parts); a click on a head's cell in the importance or roles table opens that head's map."""
        shown = maps.shown
        gr.Markdown(HEAD_TOOLS_INTRO)
        with gr.Row():
            position = unchecked(gr.Number(-1, precision=0, label="Position (from 0; -1 = last)", scale=1))
            next_button = gr.Button("Next-token probabilities and logit lens", scale=2)
        with gr.Row(elem_id="next-sampling"):  # the bars follow these as they move
            bar_temperature = unchecked(gr.Slider(0, 2, value=1.0, step=0.05, label="Temperature (0 = greedy)"))
            bar_top_k = unchecked(gr.Number(value=0, precision=0, label="Top-k (0 = off)"))
            bar_top_p = unchecked(gr.Slider(0.01, 1, value=1.0, step=0.01, label="Top-p (1 = off)"))
        next_out = gr.HTML(js_on_load=PICK_TOKEN_JS, elem_id="next-tokens")
        gr.Markdown("### Ablate heads")
        with gr.Row():
            heads = gr.CheckboxGroup([], label="Heads to ablate (layer.head)", elem_id="ablate-heads", scale=3)
            mode = gr.Radio(
                [("zeros", "zero"), ("its mean on the text", "mean"), ("its output on a variant", "resample")],
                value="zero",
                label="Replace their output by",
                scale=1,
            )
        with gr.Row():
            insight_prompt = gr.Textbox("", label="Prompt to generate again with the ablation", scale=3)
            new_tokens = unchecked(gr.Number(60, precision=0, label=f"New tokens (0-{MAX_INSIGHT_TOKENS})", scale=1))
        ablate_button = gr.Button("Ablate", variant="primary")
        ablation_out = gr.HTML(js_on_load=VALUES_JS, elem_id="ablation")
        generation_out = gr.HTML(elem_id="ablated-generation")
        with gr.Row():
            importance_button = gr.Button("Head importance map")
            roles_button = gr.Button("Head roles")
        importance_out = gr.HTML(js_on_load=PICK_HEAD_JS, elem_id="importance")
        roles_out = gr.HTML(js_on_load=PICK_HEAD_JS, elem_id="head-roles")
        gr.Markdown("### Compare two texts")
        other_text = gr.Textbox(
            "",
            label="Second text (empty: the text above with its last token changed to the model's "
            "most likely other token; any length: the maps are compared over the common positions)",
            elem_id="compare-text",
        )
        compare_button = gr.Button("Compare")
        compare_out = gr.HTML(js_on_load=VALUES_JS, elem_id="compare")
        sampled_out = gr.HTML(js_on_load=VALUES_JS, elem_id="sampled-probabilities")

        insights = self.insights
        endpoints = (
            insights.next_tokens,
            insights.logit_lens,
            insights.ablate,
            insights.importance,
            insights.head_roles,
            insights.compare,
        )
        for endpoint in endpoints:
            gr.api(endpoint, api_name=endpoint.__name__)
        private = dict(api_visibility="private")
        bars = [bar_temperature, bar_top_k, bar_top_p]
        next_button.click(self.show_next_tokens, [shown, position, *bars], next_out, **private)
        next_out.pick(self.pick_position, [shown, *bars], [position, next_out], **private)
        # live: the bars redrawn as a slider moves, one event for the three sliders so that the last move wins
        changes = [setting.change for setting in bars]
        gr.on(changes, self.show_next_tokens, [shown, position, *bars], next_out, trigger_mode="always_last", **private)
        ablate_button.click(self.show_ablation, [shown, heads, mode, position], ablation_out, **private).then(
            self.show_generation, [shown, heads, mode, insight_prompt, new_tokens, *sampling], generation_out, **private
        )
        importance_button.click(self.show_importance, [shown, mode], importance_out, **private)
        roles_button.click(self.show_roles, [shown], roles_out, **private)
        compare_button.click(self.show_compare, [shown, other_text, maps.layer, maps.head], compare_out, **private)
        shown.change(self.head_choices, [shown, heads], heads, **private)
        sampled = after_text.success(
            self.sampled_colours, [generated_text, text_model, prompt, *sampling], sampled_out, **private
        )
        sampled.success(lambda p: p, prompt, insight_prompt, **private)
        return SimpleNamespace(tables=[importance_out, roles_out], token_strip=next_out)
