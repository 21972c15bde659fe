"""Each use of Gradio's internals (minigpt/demo/core/gradio_internals.py), checked against the pinned Gradio through a
real call: a tiny page is built and called through Gradio's own call path (Blocks.__call__, or Blocks.process_api
which every route calls: the count of values, the components' preprocess, the function, as a served request runs
them). Each test fails if its patch stops taking effect (a Gradio
release that renames `fns`, stops calling `preprocess` or moves its uploads)."""

import asyncio
import logging
import tempfile
from pathlib import Path

import gradio as gr
import pytest

from minigpt.demo.core.error_rule import under_the_rule, values_completed_by_the_rule
from minigpt.demo.core.gradio_internals import (
    Parameter,
    components,
    every_function_wrapped,
    every_refusal_logged,
    is_uploaded,
    page_functions,
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


def pair(text, number, kept):
    received["pair"] = (text, number, kept)
    return repr((text, number, kept))


def test_every_function_is_listed_with_what_it_takes_and_values_left_out_are_never_quoted():
    """page_functions: an endpoint's parameters as its API description declares them, a gr.State marked, a private
    event's named after its handler. Gradio's count of the values (on every route's way to a function) quoted every
    value received; replaced, the values left out get their defaults (a gr.State's its own), or a message naming the
    one without a default, no value quoted, no traceback."""
    with gr.Blocks() as demo:
        number, out, button = gr.Number(), gr.Textbox(), gr.Button()
        button.click(pair, [gr.Textbox("emma"), number, gr.State(7)], out, api_name="pair")
        button.click(pair, [number, number, number], out, api_visibility="private")
    functions = page_functions(demo)
    assert functions[0].parameters == (
        Parameter("text", True, "emma"),
        Parameter("number"),
        Parameter("kept", True, None, True),
    )
    assert functions[1].parameters == (Parameter("text"), Parameter("number"), Parameter("kept"))
    assert functions[0].documented and not functions[1].documented and functions[1].name == "pair_1"
    run = lambda index, values: asyncio.run(demo.process_api(block_fn=index, inputs=values, state=None))["data"]
    with pytest.raises(ValueError, match="didn't receive enough input values") as quoted:
        run(1, ["x" * 1000])
    assert "x" * 1000 in str(quoted.value)
    values_completed_by_the_rule(demo)
    with pytest.raises(gr.Error) as refused:
        run(1, ["x" * 1000])
    message = "/pair_1 takes 3 values (text, number, kept): got 1, and number, kept have no default."
    assert refused.value.message == message and refused.value.print_exception is False
    assert run(0, ["ab", 3]) == [repr(("ab", 3, 7))]
    with pytest.raises(gr.Error, match="number has no default"):
        run(0, ["ab"])


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


def test_every_components_refusal_is_a_visitors_mistake_with_the_value_cut(caplog):
    """Gradio's own check of a value sent to a page's event (a choice not offered, a text for a number) quoted the
    value whole, with a traceback; on every input (`every_refusal_logged`): a message of at most ~300 characters
    saying what is wrong with the value, no traceback, one short line in the log."""
    with gr.Blocks() as demo:
        button, out = gr.Button(), gr.Textbox()
        button.click(echo, gr.Dropdown(["a", "b"]), out, api_visibility="private")
        button.click(echo, gr.Number(maximum=5, label="Layer"), out, api_visibility="private")
    huge = "x" * 1_000_000
    with pytest.raises(gr.Error) as quoted:
        demo(huge, fn_index=0)
    assert huge in quoted.value.message and quoted.value.print_exception  # the value whole, and a traceback
    every_refusal_logged(demo)
    for index, says in [(0, "xxx is not in the list of choices: ['a', 'b']"), (1, "Layer cannot take 'xxx")]:
        caplog.clear()
        with caplog.at_level(logging.WARNING), pytest.raises(gr.Error) as refused:
            demo(huge, fn_index=index)
        message, logged = refused.value.message, [r.getMessage() for r in caplog.records]
        assert says in message and len(message) <= 310 and refused.value.print_exception is False
        assert len(logged) == 1 and logged[0].startswith("Value refused: ") and len(logged[0]) < 300
    assert demo("b", fn_index=0) == "'b'" and demo(3, fn_index=1) == "3"


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
