"""Every use of Gradio beyond its documented API, in one place, each checked against the pinned version
(tests/test_gradio_internals.py calls a tiny page through Gradio's own call path and fails when a patch stops taking
effect): the error rule put on every function of the built page (`demo.fns`); a component's own check replaced
(`preprocess`: `unchecked`) or its refusal made a visitor's mistake (`refusals_logged`); the folder Gradio keeps
uploads in (`gradio.utils`); the components of a built page (`demo.blocks`); the queue's record of each session's
events in flight, bounded (`session_events_bounded`). A Gradio upgrade is checked here first."""

import logging
from collections.abc import Callable
from pathlib import Path

import gradio as gr
from gradio.utils import abspath, get_upload_folder, is_in_or_equal

from minigpt.errors import shortened

logger = logging.getLogger(__name__)

# (name, python type) of each input of a named endpoint, as its API description declares them; (None, None) for an
# input the API does not take (a gr.State)
Declared = list[tuple[str | None, str | None]]


def every_function_wrapped(demo: gr.Blocks, wrap: Callable[[Callable, Declared], Callable]) -> None:
    """Each event's and endpoint's function of the built page replaced by `wrap(fn, declared)` (the error rule,
    ui/errors.answers_visitors). Done once the page is built, on Gradio's table of its functions, rather than as each
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


def unchecked(component):
    """`component`'s value reaches the handler as sent: an API client may send any value, and the handler checks it
    with a message naming the parameter (Gradio's own range and choice checks would not name it, and would print a
    traceback in the server log). Set on the instance: a subclass would make Gradio write a .pyi file beside
    its module."""
    component.preprocess = lambda payload: payload
    return component


def refusals_logged(component):
    """`component` (a gr.File), its own refusals (a file of a type it does not take: `names.exe`, `model.zip`) made a
    visitor's mistake by the error rule: Gradio's message, and one line in the log instead of a traceback. (Its
    preprocess is wrapped: a subclass of a Gradio component would have Gradio write a .pyi file beside this one.)"""
    preprocess = component.preprocess

    def checked(payload):
        try:
            return preprocess(payload)
        except gr.Error as error:
            logger.warning("Upload refused: %s", shortened(error.message, 200))
            raise gr.Error(error.message, print_exception=False) from None

    component.preprocess = checked
    return component


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
