"""The Exercises section, laid out and wired: a set of questions on the text shown (or on texts typed one per line, or a
built-in set), each answered before its reveal; the link that opens the same set for a class; and lesson step 13's
question, answered in the lesson. Endpoints: /exercises, /grade (minigpt/demo/exercises/endpoints.py); exercises/view.py
draws them, and its .js keeps the learner's progress in the browser."""

from types import SimpleNamespace

import gradio as gr

from minigpt.demo.core.inputs import check_typed_text
from minigpt.demo.core.links import EXERCISE_KEYS, read_link
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.view import error_html
from minigpt.demo.exercises.endpoints import (
    KIND_NAMES,
    NAMED_ONLY,
    SETS,
    Exercises,
    asked_once,
    checked_ids,
    class_link,
    kinds_of,
    walk_question,
)
from minigpt.demo.exercises.view import (
    EXERCISES_JS,
    REVEAL_JS,
    WALK_FOLDED,
    asked_first_html,
    reveal_error_html,
    reveal_html,
    set_html,
)
from minigpt.demo.exercises.words import INTRO
from minigpt.errors import VISITORS_MISTAKES, VisitorError

OWN = "own"  # the set of the text shown (or the texts typed), on the maps' model
SET_CHOICES = [("The text shown above (or the texts below), on its model", OWN)] + [
    (about["title"], name) for name, about in SETS.items()
]
MAX_SET_TEXTS = 6  # texts of one set on the page: each is measured once, then kept
TICKED = [kind for kind in KIND_NAMES if kind not in NAMED_ONLY]  # the kinds ticked at first: the circuit to build
# is asked when ticked (its first ask on a model runs the circuit search)


class ExercisesSection:
    """The section on the demo's state: `carrier` holds each grade (hidden), `layout` builds the section."""

    def __init__(self, state: DemoState, circuits=None):
        self.state, self.exercises = state, Exercises(state, circuits)  # `circuits`: the Circuits section's

    def carrier(self) -> gr.HTML:
        """Where each grade is drawn (hidden; reveal.js hands it to the cards that asked), outside any
        folded section, so that the lesson's question is graded with the Exercises section folded too."""
        self.reveal = gr.HTML(js_on_load=REVEAL_JS, elem_id="exercise-reveal")
        return self.reveal

    def drawn_set(self, model: str, texts: list[str], kinds: str, ids: str = "", set_name: str = "") -> str:
        """Each text's questions (a text that cannot be read says why in its place), as a set with its class link."""
        kinds_of(kinds)  # checked before any text is read
        wanted = checked_ids(ids)
        if not texts:
            raise VisitorError("No text: show a text above, or type texts below, one per line.")
        if len(texts) > MAX_SET_TEXTS:
            raise VisitorError(f"{len(texts)} texts: a set on this page holds at most {MAX_SET_TEXTS}.")
        parts = []
        for text in texts:
            try:
                parts.append(self.exercises.exercises(text, model, kinds, ids))
            except VISITORS_MISTAKES as error:
                parts.append({"model": model, "text": text, "error": str(error)})
        title = SETS[set_name]["title"] if set_name in SETS else f"Exercises on the {model} model"
        link = class_link(model, texts, kinds, set_name, wanted)
        return set_html(asked_once(parts), title, link)

    def set_of(self, shown: dict | None, chosen: str, typed: str) -> tuple[str, list[str], str]:
        """(model, texts, set name) of the set chosen: a built-in one, or the maps' model and its texts."""
        if chosen in SETS:
            return SETS[chosen]["model"], list(SETS[chosen]["texts"]), chosen
        check_typed_text(typed or "", "texts")
        texts = [line for line in (typed or "").splitlines() if line.strip()]
        if not shown:
            raise VisitorError("No text is shown: show the attention of a text first (the button above).")
        return shown["model"], texts or [shown["text"]], ""

    def show_set(self, shown: dict | None, chosen: str, kinds: list[str], typed: str) -> str:
        """The button: the set chosen, with the kinds ticked."""
        try:
            if not kinds:
                raise VisitorError("Tick at least one kind of question.")
            model, texts, name = self.set_of(shown, chosen, typed)
            return self.drawn_set(model, texts, ",".join(kinds), "", name)
        except VISITORS_MISTAKES as error:
            return error_html(str(error))

    def set_chosen(self, chosen: str):
        """A built-in set chosen: its kinds ticked."""
        return list(SETS[chosen]["kinds"]) if chosen in SETS else gr.skip()

    def show_grade(self, event: gr.EventData) -> str:
        """A card's answer ({id, model, text, answer, asked}: the `answer` event), graded by /grade and drawn for the
        cards; a mistake is drawn for the card that asked."""
        asked = str(getattr(event, "asked", ""))[:20]
        question = getattr(event, "id", "")
        try:
            text, model = getattr(event, "text", ""), getattr(event, "model", None)
            graded = self.exercises.grade(text, model, question, getattr(event, "answer", ""))
            return reveal_html(graded, asked)
        except VISITORS_MISTAKES as error:
            return reveal_error_html(str(question)[:40], asked, str(error))

    def open_link(self, request: gr.Request):
        """A link naming a set (?set=, ?texts=, ?kinds=, ?ids=): the section unfolded on it, its questions drawn. Each
        value is checked before it reaches a component: the set a built-in one, the kinds the page's own."""
        link = read_link(request.query_params if request is not None else {})
        if not any(key in link for key in EXERCISE_KEYS):
            return [gr.skip()] * 5
        chosen = link.get("set") if link.get("set") in SETS else OWN
        model = SETS[chosen]["model"] if chosen in SETS else link.get("model") or self.state.names_default
        texts = SETS[chosen]["texts"] if chosen in SETS else (link.get("texts") or link.get("text") or "").splitlines()
        texts = [text for text in texts if text.strip()]
        kinds = link.get("kinds") or (",".join(SETS[chosen]["kinds"]) if chosen in SETS else "")  # the set's own
        try:
            ticked = kinds_of(kinds)
            drawn = self.drawn_set(model, texts, kinds, link.get("ids", ""), chosen)
        except VISITORS_MISTAKES as error:
            ticked, drawn = TICKED, error_html(str(error))
        return gr.Accordion(open=True), chosen, ticked, "\n".join(texts if chosen == OWN else []), drawn

    def layout(self, demo: gr.Blocks, maps, accordion: gr.Accordion) -> SimpleNamespace:
        """The section, inside `accordion` (which a link to a set unfolds), on the maps' text and model."""
        gr.Markdown(INTRO)
        with gr.Row():
            chosen = gr.Dropdown(SET_CHOICES, value=OWN, label="Question set", scale=2, elem_id="exercise-set-choice")
            kinds = gr.CheckboxGroup(list(KIND_NAMES), value=TICKED, label="Kinds", scale=1, elem_id="exercise-kinds")
        typed = gr.Textbox(
            "", label="Texts, one per line (empty: the text shown above)", lines=2, elem_id="exercise-texts"
        )
        make = gr.Button("Make the questions", variant="primary", elem_id="exercise-make")
        out = gr.HTML(js_on_load=EXERCISES_JS, elem_id="exercise-set")
        private = dict(api_visibility="private")
        gr.api(self.exercises.exercises, api_name="exercises")
        gr.api(self.exercises.grade, api_name="grade")
        make.click(self.show_set, [maps.shown, chosen, kinds, typed], out, **private)
        chosen.select(self.set_chosen, chosen, kinds, **private)
        out.answer(self.show_grade, None, self.reveal, **private)
        demo.load(self.open_link, None, [accordion, chosen, kinds, typed, out], **private)
        return SimpleNamespace(view=out, chosen=chosen, kinds=kinds, texts=typed)

    def answered_in(self, view: gr.HTML) -> None:
        """The question of the circuit walk a view draws (lesson step 13's, the first screen's), answered in that view
        (its `answer` event, from view.js), graded as the section's."""
        view.answer(self.show_grade, None, self.reveal, api_visibility="private")

    @staticmethod
    def asked_first(walk: dict, text: str, drawn: str) -> str:
        """The circuit walk on `text` drawn (`drawn`), folded under the question it answers; as drawn where it asks
        none."""
        question = walk_question(walk)
        if question is None:
            return drawn
        return asked_first_html(question, walk["model"], text, drawn, WALK_FOLDED)
