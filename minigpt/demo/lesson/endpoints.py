"""The lesson's numbers, as plain JSON: every number of one attention head at work on one token of a text (the `step`
endpoint, from minigpt/heads/steps.py, worded by words.py), and what lesson steps 11 and 12 show besides (the
specimen's head roles, where the weights are). lesson/ui.py puts them on the page; lesson/steps_view.py and
lesson/view.py draw them. No Gradio here."""

from minigpt.demo.core.attention_maps import token_labels
from minigpt.demo.core.inputs import flag, number
from minigpt.demo.core.state import DemoState
from minigpt.demo.exercises.endpoints import walk_question
from minigpt.demo.head_tools.endpoints import Insights
from minigpt.demo.lesson.words import worded
from minigpt.errors import VISITORS_MISTAKES
from minigpt.heads.block_steps import parameter_counts
from minigpt.heads.steps import attention_steps, steps_json

SPECIMEN = "specimen"  # the shipped model whose heads lesson step 11 shows (an induction head, a previous-token head)


class Steps:
    """The lesson's endpoint, on the demo's state. `roles` is the head roles' endpoint (text, model) -> its JSON,
    which lesson step 11 draws (left out: the head tools' own, on `state`); `walk` the circuit walk's, which step 13
    draws (left out: step 13 has no walk)."""

    def __init__(self, state: DemoState, roles=None, walk=None):
        self.state, self.roles, self.walk = state, roles or Insights(state).head_roles, walk

    def step(
        self,
        text: str = "emma",
        model: str | None = None,
        layer: int = 0,
        head: int = 0,
        query: int | None = None,
        training: bool = False,
        seed: int = 0,
    ) -> dict:
        """Every number of one attention head at work on one token of `text`: the textbook steps from the sublayer's
        input to what the next sublayer receives (attention_steps.py). `query` is the token's position (0: the start
        token; default: the last token); `training` applies the model's attention dropout, drawn with `seed`."""
        model = model or self.state.names_default
        view = self.state.text_view(model, text or "")
        choice = dict(
            layer=number("Layer", layer, 0, int),
            head=number("Head", head, 0, int),
            query=number("Query position", query, None, int),
            training=flag("Training", training, False),
            seed=number("Seed", seed, 0, int),
        )
        steps = attention_steps(view.lm.model, view.recorded, **choice, rng_lock=self.state.rng_lock)
        label = lambda ids: token_labels(view.lm.tokenizer, ids)  # noqa: E731
        return worded(steps_json(steps, view.tokens, model=model, notes=view.notes, label=label))

    def lesson_parts(self, number: int, shown: dict) -> dict:
        """What lesson steps 11 to 13 show besides the step view's numbers: the head roles, by the head roles' own
        endpoint, of the specimen model (the one with an induction head; else the model shown) on the text; where the
        shown model's weights are; the circuit walk on the text, and the question it answers (the exercises')."""
        if number == 11:
            roles_of = SPECIMEN if SPECIMEN in self.state.picker.names else shown["model"]
            return dict(roles=self.roles(shown["text"], roles_of), roles_of=roles_of, text=shown["text"])
        if number == 12:
            return dict(weights=parameter_counts(self.state.picker.get(shown["model"]).model))
        if number == 13 and self.walk is not None:
            try:
                walk = self.walk(shown["text"], shown["model"])
            except VISITORS_MISTAKES as error:  # a text too short or too long for the walk: the section says why
                return dict(walk=str(error), text=shown["text"])
            return dict(walk=walk, text=shown["text"], question=walk_question(walk))  # asked before the walk is shown
        return {}
