"""The one rule for errors, as the page and the API apply it (explorer/errors.py says the rule): every event and
endpoint of the page runs under `answers_visitors` (page.py wraps them all)."""

import contextlib
import functools
import inspect

import gradio as gr

from explorer.errors import VisitorError


@contextlib.contextmanager
def as_message():
    """The error rule (explorer/errors.py): a VisitorError inside becomes a message for the visitor, with no traceback
    in the log; any other exception goes on to Gradio, which shows its message and logs its traceback."""
    try:
        yield
    except VisitorError as error:
        raise gr.Error(str(error), print_exception=False) from None


def answers_visitors(endpoint):
    """`endpoint` (a function, coroutine function, generator or async generator) under `as_message`. Every event and
    API endpoint of the page gets it (`page.build_demo`), so the rule holds alike on all of them."""
    if getattr(endpoint, "answers_visitors", False):
        return endpoint
    if inspect.isasyncgenfunction(endpoint):

        async def answer(*args, **kwargs):
            inner = endpoint(*args, **kwargs)
            async with contextlib.aclosing(inner):  # a client that goes closes the inner stream at once
                with as_message():
                    async for item in inner:
                        yield item

    elif inspect.isgeneratorfunction(endpoint):

        def answer(*args, **kwargs):
            with as_message():
                yield from endpoint(*args, **kwargs)  # closing this closes the inner generator too

    elif inspect.iscoroutinefunction(endpoint):

        async def answer(*args, **kwargs):
            with as_message():
                return await endpoint(*args, **kwargs)

    else:

        def answer(*args, **kwargs):
            with as_message():
                return endpoint(*args, **kwargs)

    functools.update_wrapper(answer, endpoint)
    answer.answers_visitors = True
    return answer
