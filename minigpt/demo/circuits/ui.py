"""The circuits section, on the text and model the maps show: direct logit attribution, activation and path patching
against a corrupted text (with a "change one token" helper), composition scores drawn as a circuit graph, and one
head's OV and positional QK circuits with its map redrawn after an earlier head is ablated, and the circuit found
(edge attribution over a prompt set, checked by exact runs), laid out and wired. Its endpoints: circuits/endpoints.py
(/logit_attribution, /patching, /composition, /head_circuit, /circuit_walk, /find_circuit); the page draws those same
answers with the views (view.py, head_circuit_view.py, circuit_walk_view.py, find_circuit_view.py)."""

from types import SimpleNamespace

import gradio as gr

from minigpt.demo.circuits.circuit_walk_view import walk_html
from minigpt.demo.circuits.endpoints import Circuits
from minigpt.demo.circuits.find_circuit_view import FIND_CIRCUIT_JS, found_circuit_html, own_circuit_html
from minigpt.demo.circuits.head_circuit import copying_head, previous_token_head_before
from minigpt.demo.circuits.head_circuit_view import head_circuit_html
from minigpt.demo.circuits.measures import PARTS, one_token_changed
from minigpt.demo.circuits.view import CIRCUITS_JS, attribution_html, composition_html, patching_html
from minigpt.demo.circuits.words import CIRCUITS_INTRO, FOUND_INTRO
from minigpt.demo.core.gradio_internals import unchecked
from minigpt.demo.core.inputs import parse_heads
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.ui import drawn
from minigpt.demo.core.view import belongs_to, page_doc
from minigpt.errors import VisitorError

PATCH_OPTIONS = ("sender", "receiver", "receiver_input", "key_position", "part", "intermediate", "prompts")
# The boxes that name a head: their label with a head measured to fill them (`copying_head`), and without one
RECEIVER_LABELS = (
    "Path patching: receiver head (the model does not copy on this text: type a layer.head above layer 0; empty: none)",
    "Path patching: receiver head (the one measured to copy most on this text; empty: none)",
)
CHOSEN_LABELS = (
    "Head (layer.head): the model does not copy on this text, type the one to look at",
    "Head (layer.head; the one measured to copy most on this text)",
)
PROGRESS = gr.Progress()  # Gradio fills a handler's progress parameter when its default is one


def box_and_button(label: str, box_id: str, button_label: str, button_id: str) -> tuple[gr.Textbox, gr.Button]:
    """A wide text box with its button on one row (the button's height the box's)."""
    with gr.Row(equal_height=True):
        box = gr.Textbox("", label=label, scale=4, elem_id=box_id)
        button = gr.Button(button_label, scale=1, elem_id=button_id)
    return box, button


class CircuitsSection:
    """The section on the demo's state: its page handlers draw the answers of `circuits`, the section's endpoints;
    `layout` builds it on the page."""

    def __init__(self, state: DemoState):
        self.state, self.circuits = state, Circuits(state)

    def show_walk(self, text: str, model: str, asked_first=None) -> str:
        """The walk drawn, marked with the text it belongs to (greyed once another text is shown); `asked_first(walk,
        text, drawn)` puts the question the walk answers before it (the first screen's)."""
        return self.walk_and_its_head(text, model, asked_first)[0]

    def walk_and_its_head(self, text: str, model: str, asked_first=None) -> tuple:
        """The walk drawn (`show_walk`) and the head it follows as the page's selection ({layer, head}, what the maps'
        pickers hold), so that the maps, their strip over training and the chosen head follow it (gr.skip(): none)."""
        view = self.circuits.view(text, model)
        walk = self.circuits.circuit_walk(text, model)
        drawn = walk_html(walk)
        drawn = belongs_to(view.key, view.label, asked_first(walk, view.text, drawn) if asked_first else drawn)
        if not walk["head"]:
            return drawn, gr.skip()
        layer, head = walk["head"].split(".")
        return drawn, {"layer": int(layer), "head": head}

    def show_attribution(self, shown, position, token, other_token, prompts):
        attribution = self.circuits.logit_attribution
        return drawn(shown, lambda t, m: attribution_html(attribution(t, m, position, token, other_token, prompts)))

    def show_patching(self, shown, corrupted_text, *choices, progress=PROGRESS, exact_cell=""):
        """Patching's answer drawn, and kept (the composition view puts its path patching beside the scores).
        `choices`: the patching options in PATCH_OPTIONS' order, as the page's inputs give them."""
        kept, options = {}, {**dict(zip(PATCH_OPTIONS, choices)), "exact_cell": exact_cell}

        def draw(text, model):
            tell = lambda fraction, what: progress(fraction, desc=what)  # noqa: E731
            answer = self.circuits.patched(text, corrupted_text, model, options, tell)
            kept.update(answer)
            return patching_html(answer)

        return drawn(shown, draw), kept or None

    def show_exact_cell(
        self, shown, corrupted_text, sender, receiver, receiver_input, key_position, part, intermediate, prompts,
        event: gr.EventData,
    ):  # fmt: skip
        """A click on an estimated cell: patching drawn again with that cell's exact value (one run more); the
        parameters are the page's patching inputs, in PATCH_OPTIONS' order."""
        choices = (sender, receiver, receiver_input, key_position, part, intermediate, prompts)
        return self.show_patching(shown, corrupted_text, *choices, exact_cell=str(event.cell))

    def change_one_token(self, shown):
        """The "Change one token" button: a corrupted text proposed for the text shown."""
        if not shown:
            raise VisitorError("No text is shown: show the attention of a text first (the button above).")
        ids, note = one_token_changed(self.circuits.view(shown["text"], shown["model"]))
        view = self.circuits.view(shown["text"], shown["model"])
        gr.Info(note, duration=4)
        return view.lm.tokenizer.decode(ids[1:], skip_special_tokens=False)

    def show_composition(self, shown, evidence):
        return drawn(shown, lambda t, m: composition_html(self.circuits.composition(m), evidence))

    def show_head(self, shown, chosen, ablate, source="auto", ablation="zero"):
        def draw(text, model):
            config = self.state.picker.get(model).model.config
            heads = parse_heads(chosen or "", config.n_layer, config.n_head)
            if len(heads) != 1:
                raise VisitorError(f"Name one head as layer.head (e.g. 1.1), got {str(chosen)[:40]!r}.")
            return head_circuit_html(self.circuits.head_circuit(text, model, *heads[0], ablate, source, ablation))

        return drawn(shown, draw)

    def show_found(self, shown, task, ablation, corrupted_text):
        """The circuit found for the model shown (the induction task: of the model alone; the text task: of the text
        shown, against the Patching part's corrupted text)."""
        corrupted_text = corrupted_text if task == "text" else ""
        draw = lambda t, m: found_circuit_html(self.circuits.find_circuit(t, m, task, corrupted_text, 0, ablation))  # noqa: E731
        return drawn(shown, draw, of_model=task == "induction", measured_on="random tokens written twice")

    def show_own(self, shown, task, ablation, corrupted_text, circuit):
        """The visitor's own circuit, measured on the prompts the circuit of the same task and ablation was found on."""
        corrupted_text = corrupted_text if task == "text" else ""
        circuits = self.circuits
        draw = lambda t, m: own_circuit_html(circuits.test_circuit(t, m, task, corrupted_text, circuit, 0, ablation))  # noqa: E731
        return drawn(shown, draw, of_model=task == "induction", measured_on="random tokens written twice")

    def pick_head(self, shown, ablate, source, ablation, event: gr.EventData):
        """A click on a head of a circuits view: its circuits, with the Ablate box kept to the heads that come before
        it (a layer-0 head reads no earlier head: the box empties), so that a click never meets an error."""
        layer, head = int(event.layer), int(event.head)
        kept = self.suggested_ablation(shown, ablate, layer)
        chosen = f"{layer}.{head}"
        return chosen, kept, self.show_head(shown, chosen, kept, source, ablation)

    def earlier_heads(self, shown, ablate, layer: int) -> str:
        """The heads of `ablate` in layers before `layer` (what the box may keep for a head of that layer)."""
        if not shown:
            return ablate or ""
        config = self.state.picker.get(shown["model"]).model.config
        try:
            heads = parse_heads(ablate or "", config.n_layer, config.n_head)
        except VisitorError:
            return ""
        return ", ".join(f"{a}.{b}" for a, b in heads if a < layer)

    def suggested_ablation(self, shown, ablate, layer: int) -> str:
        """The Ablate box for a head of `layer`: the heads it holds from earlier layers, or where none is left, the
        previous-token head this model was measured to have before that layer on the text shown (or none)."""
        kept = self.earlier_heads(shown, ablate, layer)
        if kept or not shown:
            return kept
        return previous_token_head_before(self.circuits.view(shown["text"], shown["model"]), layer)

    def measured_defaults(self, shown):
        """Another text or model shown: the receiver and the chosen head start as the head measured to copy most on
        it (`copying_head`; the receiver's above layer 0); where none does, empty, the label saying what to type."""
        if not shown:
            return gr.skip(), gr.skip()
        view = self.state.text_view(shown["model"], shown["text"])
        receiver, chosen = copying_head(view, 1), copying_head(view)
        return (
            gr.Textbox(receiver, label=RECEIVER_LABELS[bool(receiver)]),
            gr.Textbox(chosen, label=CHOSEN_LABELS[bool(chosen)]),
        )

    def followed_head(self, shown, layer, head, ablate):
        """The page's selection moved: the chosen head follows, the Ablate box keeps only the heads before it (or
        suggests the measured previous-token head before it)."""
        if not str(head).isdigit():  # the layer's average: no one head
            return gr.skip(), gr.skip()
        return f"{layer}.{head}", self.suggested_ablation(shown, ablate, int(layer))

    def layout(self, maps):
        """The section, on the text and model the maps show (`maps.shown`); it follows the page's head selection."""
        shown = maps.shown
        gr.Markdown(CIRCUITS_INTRO)
        self.doc_layout()
        prompts = unchecked(gr.Number(1, precision=0, label="Prompts (1: the text; up to 16: with its variants)"))
        attribution = self.attribution_layout(shown, prompts)
        patching = self.patching_layout(shown, prompts)
        evidence, patching_corrupted = patching.evidence, patching.corrupted
        composition_button = gr.Button("Composition scores: the circuit graph", elem_id="circuit-composition-button")
        composition_out = gr.HTML(js_on_load=CIRCUITS_JS, elem_id="circuit-composition")
        found = self.found_layout(shown, patching_corrupted)
        head = self.head_layout(shown)
        circuits = self.circuits
        endpoints = (circuits.logit_attribution, circuits.patching, circuits.composition, circuits.head_circuit)
        for endpoint in (*endpoints, circuits.circuit_walk, circuits.find_circuit, circuits.test_circuit):
            gr.api(endpoint, api_name=endpoint.__name__)
        private = dict(api_visibility="private")
        composition_button.click(self.show_composition, [shown, evidence], composition_out, **private)
        picked = [shown, head.ablate, head.source, head.ablation]
        for view in (attribution, patching.out, composition_out, found):
            view.pick(self.pick_head, picked, [head.chosen, head.ablate, head.out], **private)
        selection = [maps.shown, maps.layer, maps.head, head.ablate]
        maps.head.change(self.followed_head, selection, [head.chosen, head.ablate], **private)
        # Inputs that belong to a text are cleared when another text is shown: a corrupted text of the same length
        # would otherwise be patched against the new text without a word
        maps.shown.change(lambda shown: "", maps.shown, patching_corrupted, **private)
        maps.shown.change(self.measured_defaults, maps.shown, [patching.receiver, head.chosen], **private)
        return SimpleNamespace(
            attribution=attribution, patching=patching.out, composition=composition_out, found=found, head=head.out
        )

    @staticmethod
    def doc_layout():
        """How to read each view: docs/circuits.md in a fold (the project names no repository to link to, so the doc
        travels with the app), its text sent when the fold opens, so that the page stays light; none without docs/."""
        doc = page_doc("circuits.md")
        title = "How to read each view (docs/circuits.md)"
        with gr.Accordion(title, open=False, visible=doc is not None, elem_id="circuits-doc") as fold:
            text = gr.Markdown(elem_id="circuits-doc-text")
        fold.expand(lambda: doc, None, text, api_visibility="private")

    def found_layout(self, shown, corrupted):
        """ "Find the circuit": the task, the ablation, the button, the circuit drawn (`corrupted`: the Patching part's
        corrupted text, which the text task reads)."""
        gr.Markdown(FOUND_INTRO)
        with gr.Row():
            task = gr.Radio(
                [("random tokens written twice", "induction"), ("the text shown, against the corrupted text", "text")],
                value="induction",
                label="Task",
                elem_id="found-task",
            )
            ablation = gr.Radio(
                [("their mean over the prompts", "mean"), ("the corrupted prompt's", "corrupted")],
                value="mean",
                label="Replace the outputs of edges left out by",
                elem_id="found-ablation",
            )
        button = gr.Button("Find the circuit", variant="primary", elem_id="found-button")
        out = gr.HTML(js_on_load=FIND_CIRCUIT_JS, elem_id="found-circuit")
        button.click(self.show_found, [shown, task, ablation, corrupted], out, api_visibility="private")
        circuit, test = box_and_button(
            "Test your own circuit: heads ('L.H, L.H') or paths ('L.H -> mlp L -> L.H k, L.H -> logits')",
            "own-circuit-text",
            "Test your circuit",
            "own-circuit-button",
        )
        own = gr.HTML(elem_id="own-circuit")
        inputs = [shown, task, ablation, corrupted, circuit]
        for event in (test.click, circuit.submit):
            event(self.show_own, inputs, own, api_visibility="private")
        return out

    def attribution_layout(self, shown, prompts):
        with gr.Row():
            position = unchecked(gr.Number(-1, precision=0, label="Position (from 0; -1 = last)", scale=1))
            token = gr.Textbox("", label="Token (empty: the model's top-1)", scale=1, elem_id="circuit-token")
            other_token = gr.Textbox("", label="Minus the logit of (optional)", scale=1)
            button = gr.Button("Attribution", scale=1, elem_id="circuit-attribution-button")
        out = gr.HTML(js_on_load=CIRCUITS_JS, elem_id="circuit-attribution")
        inputs = [shown, position, token, other_token, prompts]
        button.click(self.show_attribution, inputs, out, api_visibility="private")
        return out

    def patching_layout(self, shown, prompts):
        gr.Markdown("### Patching: run the corrupted text with clean activations put back")
        corrupted, change = box_and_button(
            "Corrupted text (same token count, another answer; empty: one token changed for you)",
            "circuit-corrupted",
            "Change one token",
            "circuit-change",
        )
        part = gr.Radio(list(PARTS), value="output", label="Patch each head's", elem_id="circuit-part")
        with gr.Row():
            # No shipped model's head as a default: each text shown fills it (measured_defaults)
            receiver = gr.Textbox("", label=RECEIVER_LABELS[0], elem_id="circuit-receiver")
            key_position = unchecked(gr.Number(-1, precision=0, label="Key position (-1: after the repeat's 1st copy)"))
        with gr.Row():
            sender = gr.Textbox("", label="Two-step path: sender ('0.2', 'embed')", elem_id="circuit-sender")
            intermediate = gr.Textbox("", label="through ('mlp 0', '0.3')", elem_id="circuit-intermediate")
            receiver_input = gr.Radio(["q", "k", "v"], value="k", label="into the receiver's")
        button = gr.Button("Patch", variant="primary", elem_id="circuit-patch")
        out = gr.HTML(js_on_load=CIRCUITS_JS, elem_id="circuit-patching")
        evidence = gr.State(None)
        private = dict(api_visibility="private")
        change.click(self.change_one_token, [shown], corrupted, **private)
        choices = dict(
            sender=sender, receiver=receiver, receiver_input=receiver_input, key_position=key_position, part=part,
            intermediate=intermediate, prompts=prompts,
        )  # fmt: skip
        inputs = [shown, corrupted, *(choices[o] for o in PATCH_OPTIONS)]
        button.click(self.show_patching, inputs, [out, evidence], **private)
        out.exact(self.show_exact_cell, inputs, [out, evidence], **private)
        return SimpleNamespace(out=out, evidence=evidence, corrupted=corrupted, receiver=receiver)

    def head_layout(self, shown) -> SimpleNamespace:
        gr.Markdown("### One head: its OV and QK circuits, and its map with an earlier head ablated")
        with gr.Row():
            # No shipped model's head as a default: each text shown fills the chosen head (measured_defaults), a
            # chosen head the Ablate box, with the previous-token head measured before it (suggested_ablation)
            chosen = gr.Textbox("", label=CHOSEN_LABELS[0], elem_id="circuit-chosen")
            ablate = gr.Textbox("", label="Ablate (earlier heads; empty: none)", elem_id="circuit-ablate")
            ablation = gr.Radio(
                [("zeros", "zero"), ("its mean", "mean"), ("its output on a variant", "resample")],
                value="zero",
                label="Replace their output by",
                elem_id="circuit-ablation",
            )
        with gr.Row():
            source = gr.Radio(
                [("through earlier layers (above layer 0)", "auto"), ("bare embedding", "bare")],
                value="auto",
                label="Read the tokens",
                elem_id="circuit-source",
            )
            button = gr.Button("Ablate and redraw", variant="primary", elem_id="circuit-head-button")
        out = gr.HTML(elem_id="circuit-head")
        button.click(self.show_head, [shown, chosen, ablate, source, ablation], out, api_visibility="private")
        return SimpleNamespace(chosen=chosen, ablate=ablate, source=source, ablation=ablation, out=out)
