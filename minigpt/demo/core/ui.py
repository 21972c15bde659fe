"""Small pieces every section's ui uses: a view of the text shown, drawn or its mistake in its place; and an endpoint of
a computing module registered with the page's drawing of its answer."""

import functools
import inspect

from minigpt.demo.core.view import belongs_to, belongs_to_model, error_html
from minigpt.errors import VISITORS_MISTAKES


def drawn(shown: dict | None, draw, of_model: bool = False, measured_on: str = "its corpus") -> str:
    """One view of the text the maps show: `draw(text, model)`'s HTML, marked with the (model, token ids) it belongs
    to (greyed as out of date once the page shows another), or `of_model`, with the model alone (a view whose numbers
    do not depend on the text; `measured_on`: what they were measured on, as its note names it). A visitor's mistake
    is drawn in its place, so that no earlier result stays up beneath the message."""
    if not shown:
        return error_html("No text is shown: show the attention of a text first (the button above).")
    try:
        body = draw(shown["text"], shown["model"])
    except VISITORS_MISTAKES as error:
        body = error_html(str(error))
    if of_model:
        return belongs_to_model(shown["model"], body, measured_on)
    return belongs_to(shown["key"], shown["label"], body)


def answer_drawn(endpoint, draw, returns=inspect.Signature.empty):
    """`endpoint` (a method of a section's computing module: JSON in and out, no Gradio) as the page registers it: under
    its name, with its parameters, defaults and docstring (the API's, as Gradio reads them), each answer drawn by
    `draw` into what the event's outputs take; `returns`: the answer's type where Gradio must know it (gr.FileData: a
    file it serves). An endpoint that streams (an async generator) streams its answers drawn."""
    if inspect.isasyncgenfunction(endpoint):

        @functools.wraps(endpoint)
        async def registered(*args, **kwargs):
            async for answer in endpoint(*args, **kwargs):
                yield draw(answer)

    else:

        @functools.wraps(endpoint)
        def registered(*args, **kwargs):
            return draw(endpoint(*args, **kwargs))

    if returns is not inspect.Signature.empty:
        registered.__signature__ = inspect.signature(endpoint).replace(return_annotation=returns)
    return registered
