"""One selection shared by the views: the layer, head and query token the page is about. A click anywhere that names
one (a tile of the grid, a row of the enlarged map, a cell of the head roles or importance table, a token of the
next-token strip) or a change of the maps' or the lesson's pickers moves it, and the maps and the lesson follow: the
enlarged map shows that head with the query's row outlined, the line view that layer and head with the query's token
marked, the lesson that layer, head and query."""

import gradio as gr

from minigpt.demo.core.inputs import head_index, layer_index
from minigpt.demo.lesson.ui import StepByStep
from minigpt.demo.maps.ui import AttentionSection, layer_and_head_choices


class Selection:
    """The shared selection, on the maps' and the lesson's own functions; `wire` connects every view that moves it."""

    def __init__(self, maps: AttentionSection, steps: StepByStep):
        self.maps, self.steps = maps, steps

    def select(self, shown: dict | None, layer, head, query, step_head, training, seed, lesson, depth, lines_of):
        """Layer, head (a number, or "mean": the layer's average, whose lesson keeps its own head `step_head`) and query
        (None: keep the lesson's) -> the maps' pickers, enlarged map and line view, and the lesson's pickers, step and
        view."""
        if not shown:
            return [gr.skip()] * 9
        config = self.steps.state.picker.get(shown["model"]).model.config
        layer, head = layer_index(layer, config.n_layer), head_index(head, config.n_head)
        lesson_head = step_head if head == "mean" else head
        if query is None or query == "":  # none chosen yet: the last token, as the lesson shows it
            query = len(self.steps.state.text_view(shown["model"], shown["text"]).ids) - 1
        *controls, view = self.steps.step_view(shown, layer, lesson_head, query, training, seed, lesson, depth)
        large = self.maps.show_head(shown, layer, str(head), int(query))
        lines = self.maps.show_lines(shown, layer, head, lines_of, int(query))
        return (*layer_and_head_choices(config.n_layer, config.n_head, layer, head), large, lines, *controls, view)

    def wire(self, maps, lesson, tables: list, token_strip) -> None:
        """`maps` and `lesson`: the sections' parts; `tables`: the gr.HTML whose `pick` event names a head (the head
        tools' tables, the lesson's head roles); `token_strip`: the gr.HTML whose `pick` event names a position."""
        private = dict(api_visibility="private")
        kept = [lesson.training, lesson.seed, lesson.lesson, lesson.depth, maps.lines_of]
        outputs = [
            maps.layer,
            maps.head,
            maps.large,
            maps.lines,
            lesson.layer,
            lesson.head,
            lesson.query,
            lesson.lesson,
            lesson.view,
        ]

        # Gradio hands the event to a parameter annotated gr.EventData, after the inputs: each named, no *args.
        def picked(shown, query, step_head, training, seed, lesson, depth, lines_of, event: gr.EventData):
            """A click that names a head ({layer, head}), a query row too ({layer, head, query})."""
            kept = (training, seed, lesson, depth, lines_of)
            # The event's data are its attributes (gr.EventData's public access); a head's click carries no query.
            return self.select(shown, event.layer, event.head, getattr(event, "query", query), step_head, *kept)

        def positioned(shown, layer, step_head, training, seed, lesson, depth, lines_of, event: gr.EventData):
            """A click on a token of the strip ({position}): that token is the query, in the lesson's layer and head."""
            kept = (training, seed, lesson, depth, lines_of)
            return self.select(shown, layer, step_head, event.position, step_head, *kept)

        for source in (maps.grid, maps.large, *tables):
            event = source.query if source is maps.large else source.pick
            event(picked, [maps.shown, lesson.query, lesson.head, *kept], outputs, **private)
        token_strip.pick(positioned, [maps.shown, lesson.layer, lesson.head, *kept], outputs, **private)
        # `select`, not `input`: a dropdown's input comes twice for one choice (the choice, then the blur)
        for picker in (maps.layer, maps.head):
            picker.select(
                self.select, [maps.shown, maps.layer, maps.head, lesson.query, lesson.head, *kept], outputs, **private
            )
        for picker in (lesson.layer, lesson.head, lesson.query):
            picker.select(
                self.select,
                [maps.shown, lesson.layer, lesson.head, lesson.query, lesson.head, *kept],
                outputs,
                **private,
            )
