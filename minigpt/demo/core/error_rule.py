"""The one rule for errors, as the page and the API apply it (minigpt/errors.py says the rule): every event and
endpoint of the page runs under `answers_visitors` (page.py puts it on them all, through gradio_internals)."""

import contextlib
import copy
import functools
import inspect
import json
import logging
import re
from pathlib import Path

import gradio as gr

from minigpt.demo.core.gradio_internals import Declared, PageFunction, is_uploaded, page_functions, values_completed
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
    KeyError keeps the rule: its traceback goes to the log, a 500 to the client. A body that does not fit a route's
    fields (`"data"` not a list) gets FastAPI's answer without the value it quoted whole (a 1 MB text came back)."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    async def visitor_error(request, error: gr.Error):
        return JSONResponse({"error": str(error.message)}, status_code=400)  # ours: any value in it is cut

    async def unknown_key(request, error: KeyError):
        if request.url.path.rstrip("/").endswith("/component_server"):
            return JSONResponse({"error": f"No component or session {shortened(str(error))} here."}, status_code=404)
        logger.error("Unexpected error on %s", request.url.path, exc_info=error)
        return JSONResponse({"error": "Internal Server Error"}, status_code=500)

    async def unfit(request, error: RequestValidationError):
        fields = [{key: problem[key] for key in ("type", "loc", "msg")} for problem in error.errors()[:5]]
        return JSONResponse({"detail": fields}, status_code=422)  # the field and what it should be, not the value

    return {gr.Error: visitor_error, KeyError: unknown_key, RequestValidationError: unfit}


MAX_BODY_BYTES = 8 << 20  # a request's body: the largest a visitor sends is a 1,000,000-character text, JSON-escaped
# Lists and objects inside each other in a request's JSON: the page's own calls nest 4 deep (a file's value), 6 with a
# table's. Deeper, Gradio's own walks over the values recurse (~1,000 levels made json.loads raise RecursionError).
MAX_JSON_DEPTH = 32
NAMED_ROUTE = re.compile(r"/gradio_api/(call/v2|call|run|api)/([^/]+)/?")  # Gradio's routes that run a function by name
JOIN_ROUTE = "/gradio_api/queue/join"  # ... and by its index (fn_index), as the page's own calls and gradio_client do


class Refused(VisitorError):
    """A request refused before Gradio reads it, with the HTTP status of its answer."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class RawCalls:
    """ASGI middleware for what a client not written for this page sends, checked before Gradio reads it. A body over
    MAX_BODY_BYTES is refused (HTTP 413) before it is read; a JSON body is parsed once, and refused when it nests
    deeper than MAX_JSON_DEPTH (400). On every route that runs a function of the page (NAMED_ROUTE, JOIN_ROUTE), a
    function the page does not have is refused in one line (404, the name cut), and a call with fewer values than the
    function takes gets the missing ones' declared defaults, as the API description promises; one that leaves out a
    value with no default is refused in one line naming it (422). Gradio answered those with HTTP 500 and a traceback,
    and quoted every value received into the log ("didn't receive enough input values": 1 MB a 1 MB text). A file value
    must name an uploaded file (422). `functions`: the page's (gradio_internals.page_functions)."""

    def __init__(self, app, functions: dict[int, PageFunction], max_body: int = MAX_BODY_BYTES):
        self.app, self.functions, self.max_body = app, functions, max_body
        self.by_name = {function.name: function for function in functions.values()}

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
        try:
            body = self.checked(scope["path"], body)
        except VISITORS_MISTAKES as error:
            logger.warning("Call refused: %s", shortened(str(error), 200))
            return await answer(send, getattr(error, "status", 422), str(error))
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()  # the client's disconnect, when it comes
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)

    def checked(self, path: str, body: bytes) -> bytes:
        """The body as Gradio will read it, its values left out filled in; or a Refused (or VisitorError) saying why
        not."""
        payload = parsed(body)
        if not isinstance(payload, dict):
            return body  # not JSON, or not an object: not a call with values (Gradio answers 422)
        route, function = self.called(path, payload)
        if route == "call/v2":  # the values by name: Gradio fills the defaults itself
            check_keywords(function, payload)
            check_uploaded(list(payload.values()))
            return body
        values = payload.get("data")
        check_uploaded(values)
        if function is None or not isinstance(values, list):
            return body
        whole = completed(function, values, by_api=route == "call")
        return body if whole is values else json.dumps({**payload, "data": whole}).encode()

    def called(self, path: str, payload: dict) -> tuple[str | None, PageFunction | None]:
        """The route a request takes and the function of the page it runs (None, None: a route that runs none); a
        function the page does not have: refused (404). The page's own calls name a function by its index."""
        named = NAMED_ROUTE.fullmatch(path)
        if not named and path != JOIN_ROUTE:
            return None, None
        route = named[1] if named else "queue/join"
        index = payload.get("fn_index") if route in ("run", "api", "queue/join") else None
        if index is not None:  # Gradio looks a function up by its index first, whatever the route's name says
            function = self.functions.get(index) if type(index) is int else None
            if function is None:
                raise Refused(f"This page has no function {shortened(index)} (fn_index).", 404)
            return route, function
        if not named:
            return route, None  # no fn_index: Gradio's own 400
        function = self.by_name.get(named[2])
        if function is None or (route == "call/v2" and not function.documented):
            raise Refused(f"No endpoint named {shortened(named[2])} here: GET /gradio_api/info lists them.", 404)
        return route, function


def parsed(body: bytes):
    """The body's JSON, parsed once for every check (None: not JSON, a form or a file). Nested deeper than
    MAX_JSON_DEPTH, or not JSON after all: refused (400), before json.loads or Gradio's own parsing meets it (json.loads
    recursed, ~1,000 levels deep, into RecursionError: HTTP 500 and a traceback)."""
    if not JSON_START.match(body):
        return None
    if nesting(body, MAX_JSON_DEPTH + 1) > MAX_JSON_DEPTH:
        raise Refused(
            f"A request's JSON nests lists and objects at most {MAX_JSON_DEPTH} deep: send flatter values.", 400
        )
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as error:  # RecursionError: brackets opened and never closed
        raise Refused(f"A request's body that starts as JSON must be JSON: {str(error)[:100]}.", 400) from None


JSON_START = re.compile(rb"\s*[\[{]")
STRING = re.compile(rb'"[^"]*"')  # once its escaped quotes are gone
BRACKETS, NOT_BRACKETS = bytes.maketrans(b"{}", b"[]"), bytes(set(range(256)) - set(b"[]{}"))


def nesting(text: bytes, limit: int) -> int:
    """How deep lists and objects nest in the JSON `text` (a number: 0; [] and {}: 1), counted up to `limit`: its
    brackets outside strings, the innermost pairs taken away a level at a time. Each pass runs at C speed over the text
    (8 MB in ~0.1 s; a walk over the parsed values took seconds). Brackets that do not pair up: json.loads says why."""
    unescaped = text.replace(b"\\\\", b"").replace(b'\\"', b"")  # left to right, as JSON reads its escapes
    brackets = STRING.sub(b"", unescaped).translate(BRACKETS, NOT_BRACKETS)
    for depth in range(limit):
        inner = brackets.replace(b"[]", b"")
        if len(inner) == len(brackets):
            return depth
        brackets = inner
    return limit


def completed(function: PageFunction, values: list, by_api: bool = False) -> list:
    """`values` with those left out at the end filled with their defaults (a gr.State's place with null). `by_api`:
    the values of the API's parameters alone, as /gradio_api/call/NAME takes them (no place for a gr.State); else one
    for each input, as the page sends them. A value left out with no default: refused, naming it, no value echoed."""
    parameters = [p for p in function.parameters if not (by_api and p.state)]
    if len(values) >= len(parameters):
        return values
    left_out = parameters[len(values) :]
    missing = [p.name for p in left_out if not p.has_default]
    if missing:
        takes = f"{len(parameters)} value{'s' * (len(parameters) != 1)} ({', '.join(p.name for p in parameters)})"
        verb = "has" if len(missing) == 1 else "have"
        raise VisitorError(
            f"/{function.name} takes {takes}: got {len(values)}, and {', '.join(missing)} {verb} no default."
        )
    return values + [copy.deepcopy(p.default) for p in left_out]


def check_keywords(function: PageFunction, keywords: dict) -> None:
    """A call by keywords (/gradio_api/call/v2/NAME): each key one of the endpoint's parameters, each parameter with
    no default given (Gradio answered HTTP 500 and logged a traceback, the key whole)."""
    parameters = [p.name for p in function.parameters if not p.state]
    unknown = [key for key in keywords if key not in parameters and key != "oauth_token"]
    if unknown:
        raise VisitorError(
            f"/{function.name} has no parameter {shortened(unknown[0])}: it takes {', '.join(parameters)}."
        )
    missing = ", ".join(p.name for p in function.parameters if not p.has_default and p.name not in keywords)
    if missing:
        raise VisitorError(f"/{function.name} needs {missing}: it has no default.")


def check_uploaded(values) -> None:
    """Refuses a call whose file values name a path on the server instead of a file uploaded to it (Gradio refused it
    too, a traceback in the log each time). A file value is an object with a "path", as gradio_client sends it."""
    for value in values if isinstance(values, list) else []:
        for file in value if isinstance(value, list) else [value]:
            path = file.get("path") if isinstance(file, dict) else None
            if isinstance(path, str) and not is_uploaded(path):
                raise VisitorError(
                    f"A file must be uploaded before a call names it (POST /gradio_api/upload, or gradio_client's "
                    f"handle_file): {shortened(Path(path).name, 80)!r} is not a file uploaded to this server."
                )


def values_completed_by_the_rule(demo) -> None:
    """Whatever route brings a function of the page too few values (the queue, /gradio_api/stream/EVENT, one a later
    Gradio adds), they are filled with their defaults or refused in one line by the error rule, never quoted: Gradio's
    own count (gradio_internals.values_completed) replaced by `completed`. RawCalls refuses them earlier on the routes
    it knows, with an HTTP status."""
    functions = page_functions(demo)

    def complete(index: int, values: list) -> list:
        with as_message():
            return completed(functions[index], values)

    values_completed(demo, complete)


async def answer(send, status: int, message: str) -> None:
    """A JSON error answer, sent before the request's body is read further."""
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def raw_call_middleware(demo) -> list:
    """The server's middleware for `demo` (app.py passes it to launch): RawCalls, knowing the page's functions."""
    from fastapi.middleware import Middleware

    return [Middleware(RawCalls, functions=page_functions(demo))]
