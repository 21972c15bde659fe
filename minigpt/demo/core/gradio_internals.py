"""Every use of Gradio beyond its documented API, in one place, each checked against the pinned version
(tests/test_gradio_internals.py calls a tiny page through Gradio's own call path and fails when a patch stops taking
effect): the error rule put on every function of the built page (`demo.fns`); what each function takes, and Gradio's
count of its values replaced (`page_functions`, `values_completed`); a component's own check replaced (`preprocess`:
`unchecked`) or its refusals made a visitor's mistake (`refusals_logged`, on every input: `every_refusal_logged`); the
folder Gradio keeps uploads in (`gradio.utils`); the components of a built page (`demo.blocks`); the queue's record of
each session's events in flight, bounded (`session_events_bounded`). A Gradio upgrade is checked here first."""

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.utils import abspath, get_upload_folder, is_in_or_equal

from minigpt.errors import shortened

logger = logging.getLogger(__name__)

# (name, python type) of each input of a named endpoint, as its API description declares them; (None, None) for an
# input the API does not take (a gr.State)
Declared = list[tuple[str | None, str | None]]


def every_function_wrapped(demo: gr.Blocks, wrap: Callable[[Callable, Declared], Callable]) -> None:
    """Each event's and endpoint's function of the built page replaced by `wrap(fn, declared)` (the error rule,
    error_rule.answers_visitors). Done once the page is built, on Gradio's table of its functions, rather than as each
    event is registered: the type check needs each named endpoint's API description, which Gradio makes from the
    built page (a gr.api endpoint's parameters, from its annotations, and an event's, from its components), and one
    pass over the table leaves no event of any section without the rule."""
    named = demo.get_api_info()["named_endpoints"]
    for block_function in demo.fns.values():
        if block_function.fn is not None:
            block_function.fn = wrap(block_function.fn, declared_parameters(block_function, named))


def declared_parameters(block_function, named: dict) -> Declared:
    """(name, python type) of each input of a named endpoint, as its API description declares it, for the error
    rule's type check; its components then hand the handler the values as sent (Gradio's own conversions would turn a
    list into "['x']" or fail with a traceback). A file keeps Gradio's upload handling. The page's own events: none."""
    info = named.get(f"/{block_function.api_name}") if block_function.api_name else None
    if info is None:
        return []
    parameters = iter(info["parameters"])
    declared = []
    for component in block_function.inputs:
        if getattr(component, "skip_api", False):
            declared.append((None, None))
            continue
        parameter = next(parameters)
        declared.append((parameter["parameter_name"], parameter["python_type"]["type"]))
        if not isinstance(component, gr.File):
            unchecked(component)
    return declared


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One input of a function of the page, as a client sends its value."""

    name: str
    has_default: bool = False
    default: Any = None
    state: bool = False  # a gr.State: the server keeps its value, a client sends none (its place holds null)


@dataclasses.dataclass(frozen=True)
class PageFunction:
    """A function of the built page (an event's or an endpoint's), as a request names it: by `fn_index` (the page's
    own calls) or by `name` (its api_name: Gradio gives every function one, a private event's its handler's name)."""

    index: int
    name: str
    parameters: tuple[Parameter, ...]  # one per input, in order, gr.State included
    documented: bool  # in the page's API description (the only ones Gradio's /call/v2 route knows)


def page_functions(demo: gr.Blocks) -> dict[int, PageFunction]:
    """Every function of the built page by its index, with what it takes: a documented endpoint's parameters as its
    API description declares them (names, defaults); a private event's named after its handler's parameters (Gradio's
    `input_parameter_names`), without defaults: the page sends all its values, and nothing declares any."""
    named = demo.get_api_info()["named_endpoints"]
    functions = {}
    for index, block_function in demo.fns.items():
        about = named.get(f"/{block_function.api_name}")
        described = iter(about["parameters"] if about else ())
        handlers = block_function.input_parameter_names
        parameters = []
        for i, component in enumerate(block_function.inputs):
            name = (handlers[i] if i < len(handlers) else None) or f"value {i + 1}"
            if getattr(component, "skip_api", False):
                parameters.append(Parameter(name, has_default=True, state=True))
            elif about is not None:
                declared = next(described)
                default = declared.get("parameter_default")
                parameters.append(Parameter(declared["parameter_name"], declared["parameter_has_default"], default))
            else:
                parameters.append(Parameter(name))
        functions[index] = PageFunction(index, block_function.api_name, tuple(parameters), about is not None)
    return functions


def values_completed(demo: gr.Blocks, complete: Callable[[int, list], list]) -> None:
    """Gradio's check that a function got all its values (`Blocks.validate_inputs`, which every route that runs a
    function passes through) replaced by `complete(fn_index, values)`: the values whole, the missing ones filled, or
    its own error. Gradio's refused too few values with a message quoting every value received: a 1 MB text went whole
    into the log and back to the client. Set on the instance; Gradio reads the list it handed on afterwards."""

    def validate_inputs(block_function, inputs: list) -> None:
        inputs[:] = complete(block_function._id, inputs)

    demo.validate_inputs = validate_inputs


def unchecked(component):
    """`component`'s value reaches the handler as sent: an API client may send any value, and the handler checks it
    with a message naming the parameter (Gradio's own range and choice checks would not name it, and would print a
    traceback in the server log). Set on the instance: a subclass would make Gradio write a .pyi file beside
    its module."""
    component.preprocess = lambda payload: payload
    return component


def refusals_logged(component):
    """`component`'s own refusals of a value (a file of a type it does not take: `names.exe`, `model.zip`; a choice it
    does not offer; a text for a number) made a visitor's mistake by the error rule: its message, any value in it cut,
    and one line in the log instead of a traceback (Gradio quoted the value whole: a 1 MB text into the log and back).
    Its preprocess is wrapped: a subclass of a Gradio component would have Gradio write a .pyi file beside this one."""
    preprocess, kind = component.preprocess, "Upload" if isinstance(component, gr.File) else "Value"
    if getattr(preprocess, "refusals_logged", False):
        return component

    def checked(payload):
        try:
            return preprocess(payload)
        except Exception as error:  # the value a client sent: a component of the page fails on no other
            if isinstance(error, gr.Error):
                message = cut(error.message)
            else:  # Python's own words (a comparison of a text with a number): which value, and which component
                name = component.label or type(component).__name__
                message = f"{name} cannot take {shortened(payload)} ({cut(str(error))})."
            logger.warning("%s refused: %s", kind, cut(message, 200))
            raise gr.Error(message, print_exception=False) from None

    checked.refusals_logged = True
    component.preprocess = checked
    return component


def every_refusal_logged(demo: gr.Blocks) -> None:
    """`refusals_logged` on each input of each function of the built page: a client may send the page's own events
    any value too (a named endpoint's components take any value already: `unchecked`)."""
    for block_function in demo.fns.values():
        for component in block_function.inputs:
            refusals_logged(component)


def cut(message: str, limit: int = 300) -> str:
    """`message` with its middle cut when it is long: a value it quotes goes, what it says of it stays (its start
    and end)."""
    return message if len(message) <= limit else f"{message[: limit // 2]} ... {message[-limit // 2 :]}"


def upload_folder() -> Path:
    """Where Gradio keeps uploaded files and the files it serves (its cache)."""
    return Path(get_upload_folder())


def is_uploaded(path: str) -> bool:
    """Whether `path` names a file inside Gradio's upload folder (as a call's file value must)."""
    return is_in_or_equal(abspath(path), get_upload_folder())


def components(demo: gr.Blocks) -> list:
    """Every component of the built page."""
    return list(demo.blocks.values())


SESSION_EVENTS_KEPT = 256  # sessions the queue's record of events in flight keeps when none of theirs is in flight


class SessionEvents(dict):
    """The queue's events in flight per session (Gradio's `Queue.pending_event_ids_session`: session -> event ids).
    Gradio takes an event's id out once its last message is sent, but keeps the session's emptied set for ever: ~240
    bytes a session, and every REST call is a session. Here the emptied sets go when a new session finds `most`
    recorded; the next sweep comes when twice as many as are left are recorded (at least `most`), so a sweep's cost is
    spread over as many new sessions. A set still holding an event is never dropped."""

    def __init__(self, held: dict, most: int):
        super().__init__(held)
        self.most = self.sweep_at = most

    def __setitem__(self, session, events):
        if session not in self and len(self) >= self.sweep_at:
            for emptied in [s for s, ids in self.items() if not ids]:
                del self[emptied]
            self.sweep_at = max(self.most, 2 * len(self))
        super().__setitem__(session, events)


def session_events_bounded(demo: gr.Blocks, most: int = SESSION_EVENTS_KEPT) -> None:
    """The queue's per-session record of events (made by `demo.queue()`) bounded: `SessionEvents`."""
    queue = demo._queue
    queue.pending_event_ids_session = SessionEvents(queue.pending_event_ids_session, most)
