"""The one rule for errors, as the page and the API apply it (minigpt/errors.py says the rule): every event and
endpoint of the page runs under `answers_visitors` (page.py wraps them all)."""

import contextlib
import functools
import inspect
import logging

import gradio as gr

from minigpt.errors import VisitorError, shortened

logger = logging.getLogger(__name__)


MAX_MESSAGE_CHARS = 2000  # a message naming each of 20,000 characters a model does not know would be 600 KB


@contextlib.contextmanager
def as_message():
    """The error rule (minigpt/errors.py): a VisitorError inside becomes a message for the visitor, with no traceback
    in the log; any other exception goes on to Gradio, which shows its message and logs its traceback."""
    try:
        yield
    except VisitorError as error:
        message = str(error)  # every value in it is cut where it is written; a list of them (characters) here
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[: MAX_MESSAGE_CHARS - 3] + "..."
        raise gr.Error(message, print_exception=False) from None


# What an endpoint's parameter may arrive as, by the type its API description gives (Gradio's `python_type`): a
# number may come typed as text ("3"), which the endpoint reads with its own message; None is a value left out.
ACCEPTED = {"str": (str,), "int": (int, float, str), "float": (int, float, str), "bool": (bool, int, str)}
EXPECTED = {"str": "text", "int": "a whole number", "float": "a number", "bool": "true or false"}


def declared_kind(python_type: str | None) -> str | None:
    """'str', 'None | int', "Literal['a', 'b']" ... -> the kind checked (str, int, float, bool); None: not checked
    (a file's path, which Gradio's upload route checks)."""
    if python_type is None:
        return None
    if python_type.startswith("Literal["):
        return "str"
    kind = python_type.removeprefix("None | ")
    return kind if kind in ACCEPTED else None


def json_kind(value) -> str:
    """A value's JSON type in words, without echoing it (it may be megabytes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return {list: "a list", dict: "an object", str: "text"}.get(type(value), "a number")


def check_types(parameters: list[tuple[str, str | None]], args: tuple) -> None:
    """Each value against its parameter's declared kind: the wrong JSON type is the visitor's mistake, named."""
    for (name, kind), value in zip(parameters, args):
        if kind is None or value is None:
            continue
        wrong_number = kind in ("int", "float") and isinstance(value, bool)
        if wrong_number or not isinstance(value, ACCEPTED[kind]):
            raise VisitorError(f"{name} must be {EXPECTED[kind]}, got {json_kind(value)}.")


def answers_visitors(endpoint, parameters: list[tuple[str, str | None]] = ()):
    """`endpoint` (a function, coroutine function, generator or async generator) under `as_message`, its values first
    checked against `parameters` ((name, kind) of each input, as its API description declares them). Every event and
    API endpoint of the page gets it (`page.build_demo`), so the rule holds alike on all of them."""
    if getattr(endpoint, "answers_visitors", False):
        return endpoint
    if inspect.isasyncgenfunction(endpoint):

        async def answer(*args, **kwargs):
            with as_message():
                check_types(parameters, args)
            inner = endpoint(*args, **kwargs)
            async with contextlib.aclosing(inner):  # a client that goes closes the inner stream at once
                with as_message():
                    async for item in inner:
                        yield item

    elif inspect.isgeneratorfunction(endpoint):

        def answer(*args, **kwargs):
            with as_message():
                check_types(parameters, args)
                yield from endpoint(*args, **kwargs)  # closing this closes the inner generator too

    elif inspect.iscoroutinefunction(endpoint):

        async def answer(*args, **kwargs):
            with as_message():
                check_types(parameters, args)
                return await endpoint(*args, **kwargs)

    else:

        def answer(*args, **kwargs):
            with as_message():
                check_types(parameters, args)
                return endpoint(*args, **kwargs)

    functools.update_wrapper(answer, endpoint)
    answer.answers_visitors = True
    return answer


def route_errors() -> dict:
    """FastAPI exception handlers (app.py passes them to the server) for what Gradio's unqueued component route lets
    through: a server function's visitor error, and a component id that is not on the page, answer with a message
    and a 4xx status, no traceback (Gradio answered 500 and logged 6 KB, or reset the connection). Any other
    KeyError keeps the rule: its traceback goes to the log, a 500 to the client."""
    from fastapi.responses import JSONResponse

    async def visitor_error(request, error: gr.Error):
        return JSONResponse({"error": str(error.message)}, status_code=400)  # ours: any value in it is cut

    async def unknown_key(request, error: KeyError):
        if request.url.path.rstrip("/").endswith("/component_server"):
            return JSONResponse({"error": f"No component or session {shortened(str(error))} here."}, status_code=404)
        logger.error("Unexpected error on %s", request.url.path, exc_info=error)
        return JSONResponse({"error": "Internal Server Error"}, status_code=500)

    return {gr.Error: visitor_error, KeyError: unknown_key}
