"""The one rule for errors, as the page and the API apply it (minigpt/errors.py says the rule): every event and
endpoint of the page runs under `answers_visitors` (page.py puts it on them all, through gradio_internals)."""

import contextlib
import functools
import inspect
import json
import logging
import re
from pathlib import Path

import gradio as gr

from minigpt.demo.core.gradio_internals import Declared, is_uploaded
from minigpt.errors import VISITORS_MISTAKES, VisitorError, shortened

logger = logging.getLogger(__name__)


MAX_MESSAGE_CHARS = 2000  # a message naming each of 20,000 characters a model does not know would be 600 KB


@contextlib.contextmanager
def as_message():
    """The error rule (minigpt/errors.py): a VisitorError inside becomes a message for the visitor, with no traceback
    in the log; any other exception goes on to Gradio, which shows its message and logs its traceback."""
    try:
        yield
    except VISITORS_MISTAKES as error:
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
    API endpoint of the page gets it (`page.build_demo`, `under_the_rule`), so the rule holds alike on all of them."""
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


def under_the_rule(endpoint, declared: Declared):
    """`answers_visitors` for a function of the built page, each input's kind read from the python type its API
    description declares (gradio_internals.every_function_wrapped hands them)."""
    return answers_visitors(endpoint, [(name, declared_kind(python_type)) for name, python_type in declared])


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


MAX_BODY_BYTES = 8 << 20  # a request's body: the largest a visitor sends is a 1,000,000-character text, JSON-escaped
CALL_PATH = re.compile(r"/gradio_api/call/([\w-]+)/?")  # the REST route of a named endpoint: POST {"data": [...]}


class RawCalls:
    """ASGI middleware for what a client not written for this page sends. A body over MAX_BODY_BYTES is refused
    (HTTP 413) before it is read. A REST call (`POST /gradio_api/call/NAME`) with fewer values than NAME has
    parameters gets the missing ones' declared defaults, as the API description promises (Gradio answered "didn't
    receive enough input values", echoed every value and logged a traceback); one that leaves out a parameter with
    no default is refused in one line naming it (HTTP 422), no value echoed. `parameters`: each named endpoint's, from
    the page's API description (Blocks.get_api_info)."""

    def __init__(self, app, parameters: dict[str, list[dict]], max_body: int = MAX_BODY_BYTES):
        self.app, self.parameters, self.max_body = app, parameters, max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"].endswith("/upload"):
            return await self.app(scope, receive, send)  # uploads: Gradio's own bound (max_file_size)
        length = dict(scope["headers"]).get(b"content-length", b"0")
        if not length.isdigit() or int(length) > self.max_body:
            return await answer(send, 413, f"A request's body is at most {self.max_body:,} bytes.")
        body, more = b"", True
        while more:  # at most content-length bytes: the server reads no more than that header promised
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False) and len(body) <= self.max_body
        if len(body) > self.max_body:
            return await answer(send, 413, f"A request's body is at most {self.max_body:,} bytes.")
        call = CALL_PATH.fullmatch(scope["path"])
        try:
            if call and f"/{call[1]}" in self.parameters:
                body = self.completed(f"/{call[1]}", body)
            check_uploaded(body)
        except VISITORS_MISTAKES as error:
            logger.warning("Call refused: %s", shortened(str(error), 200))
            return await answer(send, 422, str(error))
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()  # the client's disconnect, when it comes
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)

    def completed(self, endpoint: str, body: bytes) -> bytes:
        """The body with the values left out filled with their defaults; unchanged when it is not such a call."""
        with contextlib.suppress(ValueError):
            payload = json.loads(body)
            values, declared = payload.get("data"), self.parameters[endpoint]
            if isinstance(values, list) and len(values) < len(declared):
                missing = [p for p in declared[len(values) :] if not p["has_default"]]
                if missing:
                    names = ", ".join(p["name"] for p in missing)
                    raise VisitorError(
                        f"{endpoint} takes {len(declared)} values ({', '.join(p['name'] for p in declared)}): "
                        f"got {len(values)}, and {names} has no default."
                    )
                payload["data"] = values + [p["default"] for p in declared[len(values) :]]
                return json.dumps(payload).encode()
        return body


def check_uploaded(body: bytes) -> None:
    """Refuses a call whose file values name a path on the server instead of a file uploaded to it (Gradio refused it
    too, a traceback in the log each time). A file value is an object with a "path", as gradio_client sends it."""
    try:
        payload = json.loads(body)
    except ValueError:
        return  # not JSON: not a call with values
    values = payload.get("data") if isinstance(payload, dict) else None
    for value in values if isinstance(values, list) else []:
        for file in value if isinstance(value, list) else [value]:
            path = file.get("path") if isinstance(file, dict) else None
            if isinstance(path, str) and not is_uploaded(path):
                raise VisitorError(
                    f"A file must be uploaded before a call names it (POST /gradio_api/upload, or gradio_client's "
                    f"handle_file): {shortened(Path(path).name, 80)!r} is not a file uploaded to this server."
                )


async def answer(send, status: int, message: str) -> None:
    """A JSON error answer, sent before the request's body is read further."""
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def endpoint_parameters(demo) -> dict[str, list[dict]]:
    """Each named endpoint's parameters as its API description declares them: name, has_default, default."""
    named = demo.get_api_info()["named_endpoints"]
    return {
        endpoint: [
            {
                "name": p["parameter_name"],
                "has_default": p["parameter_has_default"],
                "default": p.get("parameter_default"),
            }
            for p in about["parameters"]
        ]
        for endpoint, about in named.items()
    }


def raw_call_middleware(demo) -> list:
    """The server's middleware for `demo` (app.py passes it to launch): RawCalls, knowing each endpoint's parameters."""
    from fastapi.middleware import Middleware

    return [Middleware(RawCalls, parameters=endpoint_parameters(demo))]
