"""The circuits section, on the text and model the maps show: direct logit attribution, activation and path patching
against a corrupted text (with a "change one token" helper), composition scores drawn as a circuit graph, and one
head's OV and positional QK circuits with its map redrawn after an earlier head is ablated. Endpoints:
/logit_attribution, /patching, /composition, /head_circuit (plain JSON; the page draws those same answers)."""

from types import SimpleNamespace

import gradio as gr

from minigpt.demo import circuits
from minigpt.demo.choices import parse_heads
from minigpt.demo.state import DemoState
from minigpt.demo.texts import TextView
from minigpt.demo.ui.components import drawn
from minigpt.demo.ui.gradio_internals import unchecked
from minigpt.demo.views.circuits import (
    CIRCUITS_JS,
    attribution_html,
    composition_html,
    head_circuit_html,
    patching_html,
)
from minigpt.errors import VisitorError

PROGRESS = gr.Progress()  # Gradio fills a handler's progress parameter when its default is one


class Circuits:
    """The section's endpoints, on the demo's state; `layout` builds it on the page."""

    def __init__(self, state: DemoState):
        self.state = state
        self.compositions = circuits.CompositionCache()

    def view(self, text: str, model: str | None, what: str = "text") -> TextView:
        view = self.state.text_view(model or self.state.names_default, text or "")
        if len(view.ids) < 2:
            raise VisitorError(
                f"The {what} is empty: type at least one character (the start token alone predicts nothing)."
            )
        return view

    def logit_attribution(
        self, text: str = "emma", model: str | None = None, position: int = -1, token: str = "", other_token: str = ""
    ) -> dict:
        """Each component's direct contribution (embeddings, every head, attention biases, MLPs) to the logit of
        `token` (a token's text; empty: the model's top-1 there) after `position` (from 0; -1: the last), or to
        logit(token) - logit(other_token); the heads as a layer x head grid, the largest named."""
        return circuits.attribution(self.view(text, model), position, token, other_token)

    def patching(
        self,
        text: str = "emma",
        corrupted_text: str = "",
        model: str | None = None,
        sender: str = "",
        receiver: str = "",
        receiver_input: str = "k",
        key_position: int = -1,
    ) -> dict:
        """Head patching (layer x head) and residual patching (layer x position) of `text` (clean) into
        `corrupted_text` (the same token count, another top-1 answer; empty: one token changed for you): effect =
        (LD_patched - LD_corrupted) / (LD_clean - LD_corrupted). With `receiver` (layer.head), path patching too: the
        clean residual stream into its q, k and v in turn, and `sender` ('0.2', 'mlp 0', 'resid 1', 'embed') into its
        `receiver_input` alone, with its attention from the last query on `key_position` (-1: the token after the
        first copy of the text's repeated end)."""
        return self.patched(text, corrupted_text, model, sender, receiver, receiver_input, key_position)

    def patched(self, text, corrupted_text, model, sender, receiver, receiver_input, key_position, progress=None):
        if str(receiver_input or "k").strip().lower() not in ("q", "k", "v"):
            raise VisitorError(f"receiver_input must be 'q', 'k' or 'v', got {str(receiver_input)[:40]!r}.")
        clean = self.view(text, model)
        circuits.check_patch_length(clean)
        corrupted, note = self.corrupted_view(clean, corrupted_text)
        circuits.check_same_length(clean, corrupted)
        path = dict(sender=sender, receiver=receiver, receiver_input=receiver_input, key_position=key_position)
        answer = circuits.patching(clean, corrupted, path, self.state.cores, progress)
        answer["notes"] += [note] if note else []
        return answer

    def corrupted_view(self, clean: TextView, corrupted_text: str) -> tuple[TextView, str | None]:
        """The corrupted text as the model reads it; empty: the clean text with one token changed (and a note)."""
        if (corrupted_text or "").strip():
            return self.view(corrupted_text, clean.lm.name, "corrupted text"), None
        ids, note = circuits.one_token_changed(clean)
        text = clean.lm.tokenizer.decode(ids[1:], skip_special_tokens=False)
        return self.view(text, clean.lm.name, "corrupted text"), f"Corrupted text: “{text}”. {note}"

    def composition(self, model: str | None = None) -> dict:
        """Q, K and V composition scores of every earlier head into every later one (layer x head x layer x head,
        layer norm weights folded), the random baseline of this width, and the edges above it, strongest first."""
        return circuits.composition(self.state.picker.get(model or self.state.names_default), self.compositions)

    def head_circuit(
        self, text: str = "emma", model: str | None = None, layer: int = 0, head: int = 0, ablate: str = ""
    ) -> dict:
        """One head's OV circuit over tokens (whole for a small vocabulary, else the text's rows' top targets) with
        its copying score, its positional QK circuit, and with `ablate` (earlier heads, '0.2') its map on the text
        before and after they are zero-ablated, with the weight on the induction stripe."""
        return circuits.head_circuit(self.view(text, model), layer, head, ablate)

    # ---- the page ----

    def show_attribution(self, shown, position, token, other_token):
        return drawn(shown, lambda t, m: attribution_html(self.logit_attribution(t, m, position, token, other_token)))

    def show_patching(self, shown, corrupted_text, sender, receiver, receiver_input, key_position, progress=PROGRESS):
        """Patching's answer drawn, and kept (the composition view puts its path patching beside the scores)."""
        kept = {}

        def draw(text, model):
            tell = lambda fraction, what: progress(fraction, desc=what)  # noqa: E731
            answer = self.patched(text, corrupted_text, model, sender, receiver, receiver_input, key_position, tell)
            kept.update(answer)
            return patching_html(answer)

        return drawn(shown, draw), kept or None

    def change_one_token(self, shown):
        """The "Change one token" button: a corrupted text proposed for the text shown."""
        if not shown:
            raise VisitorError("No text is shown: show the attention of a text first (the button above).")
        ids, note = circuits.one_token_changed(self.view(shown["text"], shown["model"]))
        view = self.view(shown["text"], shown["model"])
        gr.Info(note, duration=4)
        return view.lm.tokenizer.decode(ids[1:], skip_special_tokens=False)

    def show_composition(self, shown, evidence):
        return drawn(shown, lambda t, m: composition_html(self.composition(m), evidence))

    def show_head(self, shown, chosen, ablate):
        def draw(text, model):
            config = self.state.picker.get(model).model.config
            heads = parse_heads(chosen or "", config.n_layer, config.n_head)
            if len(heads) != 1:
                raise VisitorError(f"Name one head as layer.head (e.g. 1.1), got {str(chosen)[:40]!r}.")
            return head_circuit_html(self.head_circuit(text, model, *heads[0], ablate))

        return drawn(shown, draw)

    def pick_head(self, shown, ablate, event: gr.EventData):
        chosen = f"{int(event.layer)}.{int(event.head)}"
        return chosen, self.show_head(shown, chosen, ablate)

    def layout(self, maps):
        """The section, on the text and model the maps show (`maps.shown`); it follows the page's head selection."""
        shown = maps.shown
        gr.Markdown(
            "## Circuits: how heads work together\nOn the text and model above. Which components write the answer "
            "(attribution), which heads carry it (patching a corrupted text), how heads read each other "
            "(composition), and what one head does to tokens and positions. Click a head in any grid or in the graph "
            "to see its circuits. How to read each view: docs/circuits.md."
        )
        with gr.Row():
            position = unchecked(gr.Number(-1, precision=0, label="Position (from 0; -1 = last)", scale=1))
            token = gr.Textbox("", label="Token (empty: the model's top-1)", scale=1, elem_id="circuit-token")
            other_token = gr.Textbox("", label="Minus the logit of (optional)", scale=1)
            attribution_button = gr.Button("Attribution", scale=1, elem_id="circuit-attribution-button")
        attribution_out = gr.HTML(js_on_load=CIRCUITS_JS, elem_id="circuit-attribution")
        gr.Markdown("### Patching: run the corrupted text with clean activations put back")
        with gr.Row(equal_height=True):
            corrupted = gr.Textbox(
                "",
                label="Corrupted text (same token count, another answer; empty: one token changed for you)",
                scale=4,
                elem_id="circuit-corrupted",
            )
            change = gr.Button("Change one token", scale=1, elem_id="circuit-change")
        with gr.Row():
            receiver = gr.Textbox("1.1", label="Path patching: receiver head (empty: none)", elem_id="circuit-receiver")
            receiver_input = gr.Radio(["q", "k", "v"], value="k", label="Sender into its")
            sender = gr.Textbox("0.2", label="Sender ('0.2', 'mlp 0', 'resid 1', 'embed')", elem_id="circuit-sender")
            key_position = unchecked(gr.Number(-1, precision=0, label="Key position (-1: after the repeat's 1st copy)"))
        patch_button = gr.Button("Patch", variant="primary", elem_id="circuit-patch")
        patching_out = gr.HTML(js_on_load=CIRCUITS_JS, elem_id="circuit-patching")
        evidence = gr.State(None)
        composition_button = gr.Button("Composition scores: the circuit graph", elem_id="circuit-composition-button")
        composition_out = gr.HTML(js_on_load=CIRCUITS_JS, elem_id="circuit-composition")
        gr.Markdown("### One head: its OV and positional QK circuits, and its map with an earlier head ablated")
        with gr.Row():
            chosen = gr.Textbox("1.1", label="Head (layer.head)", elem_id="circuit-chosen")
            ablate = gr.Textbox("0.2", label="Ablate (earlier heads; empty: none)", elem_id="circuit-ablate")
            head_button = gr.Button("Ablate and redraw", variant="primary", elem_id="circuit-head-button")
        head_out = gr.HTML(elem_id="circuit-head")

        for endpoint in (self.logit_attribution, self.patching, self.composition, self.head_circuit):
            gr.api(endpoint, api_name=endpoint.__name__)
        private = dict(api_visibility="private")
        attribution_button.click(
            self.show_attribution, [shown, position, token, other_token], attribution_out, **private
        )
        change.click(self.change_one_token, [shown], corrupted, **private)
        patch_inputs = [shown, corrupted, sender, receiver, receiver_input, key_position]
        patch_button.click(self.show_patching, patch_inputs, [patching_out, evidence], **private)
        composition_button.click(self.show_composition, [shown, evidence], composition_out, **private)
        head_button.click(self.show_head, [shown, chosen, ablate], head_out, **private)
        for view in (attribution_out, patching_out, composition_out):
            view.pick(self.pick_head, [shown, ablate], [chosen, head_out], **private)
        follow = lambda layer, head: f"{layer}.{head}" if str(head).isdigit() else gr.skip()  # noqa: E731
        maps.head.change(follow, [maps.layer, maps.head], chosen, **private)
        return SimpleNamespace(attribution=attribution_out, patching=patching_out, head=head_out)
