"""Each use of Gradio's internals (minigpt/demo/ui/gradio_internals.py), checked against the pinned Gradio through a
real call: a tiny page is built and called through Gradio's own call path (Blocks.__call__: the components'
preprocess, the function, as a served request runs them). Each test fails if its patch stops taking effect (a Gradio
release that renames `fns`, stops calling `preprocess` or moves its uploads)."""

import logging
import tempfile
from pathlib import Path

import gradio as gr
import pytest

from minigpt.demo.ui.errors import under_the_rule
from minigpt.demo.ui.gradio_internals import (
    components,
    every_function_wrapped,
    is_uploaded,
    refusals_logged,
    session_events_bounded,
    unchecked,
    upload_folder,
)
from minigpt.errors import VisitorError

received = {}  # what each handler was handed, by name


def refuses(value):
    raise VisitorError("Not that one.")


def echo(value):
    received["echo"] = value
    return repr(value)


def layer_of(layer: int = 0) -> str:
    received["layer"] = layer
    return repr(layer)


def tiny_page(wrapped: bool) -> gr.Blocks:
    """One private event that refuses (fn_index 0), an event named `bounded` (a number of at most 5) and an API-only
    endpoint `layer_of` (an int); with `wrapped`, the error rule put on every function as page.build_demo puts it."""
    with gr.Blocks() as demo:
        number, out, button = gr.Number(precision=0, maximum=5), gr.Textbox(), gr.Button()
        button.click(refuses, number, out, api_visibility="private")
        button.click(echo, number, out, api_name="bounded")
        gr.api(layer_of, api_name="layer_of")
    if wrapped:
        every_function_wrapped(demo, under_the_rule)
    return demo


def test_the_error_rule_is_put_on_every_function_of_the_built_page():
    """A visitor's mistake becomes Gradio's message with no traceback; a named endpoint's value of the wrong JSON type
    is refused by name before the function runs; without the rule the mistake would escape as it is."""
    with pytest.raises(VisitorError):
        tiny_page(wrapped=False)(1, fn_index=0)
    demo = tiny_page(wrapped=True)
    with pytest.raises(gr.Error) as refused:
        demo(1, fn_index=0)
    assert refused.value.message == "Not that one." and refused.value.print_exception is False
    received.clear()
    with pytest.raises(gr.Error, match="layer must be a whole number, got a list"):
        demo([1, 2], api_name="layer_of")
    assert "layer" not in received
    assert demo(3, api_name="layer_of") == "3" and received["layer"] == 3


def test_a_named_endpoints_components_hand_the_handler_the_values_as_sent():
    """Gradio's own check of the number (at most 5) refuses 7.6 with a message naming no parameter; once the page is
    wrapped, the endpoint gets 7.6 as sent, to check with its own message."""
    with pytest.raises(gr.Error, match="greater than maximum"):
        tiny_page(wrapped=False)(7.6, api_name="bounded")
    received.clear()
    assert tiny_page(wrapped=True)(7.6, api_name="bounded") == "7.6" and received["echo"] == 7.6


def test_an_unchecked_component_hands_its_value_as_sent():
    def page(number) -> gr.Blocks:
        with gr.Blocks() as demo:
            gr.Button().click(echo, number, gr.Textbox(), api_name="echo")
        return demo

    assert page(gr.Number(precision=0))(2.6, api_name="echo") == "3"  # Gradio's own conversion: rounded
    received.clear()
    assert page(unchecked(gr.Number(precision=0)))(2.6, api_name="echo") == "2.6" and received["echo"] == 2.6


def test_a_files_refusal_is_a_visitors_mistake_and_an_upload_is_in_the_upload_folder(tmp_path, caplog):
    """A file of a type the component does not take: Gradio's message, no traceback, one line in the log. A file it
    takes reaches the handler inside Gradio's upload folder (what `is_uploaded` checks a call's file values by); the
    file sent from elsewhere is not in it."""
    with gr.Blocks() as demo:
        upload = refusals_logged(gr.File(file_types=[".txt"], type="filepath"))
        gr.Button().click(echo, upload, gr.Textbox(), api_name="upload")
    refused, taken = tmp_path / "names.exe", tmp_path / "names.txt"
    for file in (refused, taken):
        file.write_text("emma")
    with caplog.at_level(logging.WARNING), pytest.raises(gr.Error) as error:
        demo(str(refused), api_name="upload")
    assert "Invalid file type" in error.value.message and error.value.print_exception is False
    assert [r.getMessage().startswith("Upload refused: ") for r in caplog.records].count(True) == 1
    received.clear()
    demo(str(taken), api_name="upload")
    assert Path(received["echo"]).read_text() == "emma"
    assert is_uploaded(received["echo"]) and Path(received["echo"]).is_relative_to(upload_folder())
    assert not is_uploaded(str(taken)) and not is_uploaded(tempfile.gettempdir())
    assert upload in components(demo)


def test_the_queues_record_of_session_events_keeps_no_more_emptied_sessions_than_its_bound():
    """Gradio keeps each session's emptied set of events in flight for ever (every REST call is a session); bounded,
    the emptied ones go once the record holds its bound, and a session with an event in flight stays."""
    demo = tiny_page(wrapped=True).queue()
    session_events_bounded(demo, most=8)
    record = demo._queue.pending_event_ids_session
    record["in flight"] = {"event 0"}
    for i in range(100):  # as Gradio records a call: a set for its session, the event's id in, out when answered
        record[f"session {i}"] = set()
        record[f"session {i}"].add(f"event {i}")
        record[f"session {i}"].discard(f"event {i}")
        assert len(record) <= 8
    assert record["in flight"] == {"event 0"}
    assert demo._queue.pending_event_ids_session is record  # the record the queue itself reads and writes
