"""Gradio's routes that run a function of the page, tried through raw HTTP as a hostile visitor would (issue 57): too
few values, JSON nested too deep, names the page does not have. Each probe gets a 4xx answer (or the endpoint's own)
saying what to change, no value echoed, and grows the server log by at most one short line, never a traceback."""

import json
import uuid

import httpx
import pytest

from helpers import HANG_S, server_log

HUGE = "x" * 1_000_000  # the audit's 1 MB value: quoted whole into the log before


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=HANG_S) as client:
        yield client


@pytest.fixture(scope="module")
def page(server, http) -> dict:
    """The page's configuration (/config): its functions ("dependencies") and components."""
    return http.get(f"{server[0]}config").json()


def index_of(page: dict, api_name: str) -> int:
    return next(fn["id"] for fn in page["dependencies"] if fn["api_name"] == api_name)


def probed(server, http, probes) -> str:
    """Each probe (route, JSON body or raw bytes, expected status, a phrase of the answer) sent; its answer checked: the
    status, the phrase, short (no value echoed). What the server logged meanwhile is returned, checked: at most one
    line a probe, each under 300 bytes, no traceback. (A refusal is logged before its answer is sent.)"""
    url, process = server
    mark = len(server_log(process))
    for route, body, status, phrase in probes:
        sent = dict(content=body) if isinstance(body, bytes) else dict(json=body)
        answer = http.post(f"{url}{route}", **sent, headers={"content-type": "application/json"})
        assert (answer.status_code, phrase in answer.text) == (status, True), (route, answer.text[:300])
        assert len(answer.content) < 400, route
    logged = server_log(process)[mark:]
    lines = logged.splitlines()
    assert "Traceback" not in logged and len(lines) <= len(probes) and all(len(line) < 300 for line in lines), logged[
        -3000:
    ]
    return logged


def queue_answer(server, http, session: str) -> dict:
    """The end of the session's event (/gradio_api/queue/data): its process_completed message."""
    with http.stream("GET", f"{server[0]}gradio_api/queue/data", params={"session_hash": session}) as events:
        for line in events.iter_lines():
            message = json.loads(line[len("data:") :]) if line.startswith("data:") else {}
            if message.get("msg") == "process_completed":
                return message
    raise AssertionError("the event stream ended without the event's end")


def test_too_few_values_get_their_defaults_or_one_line_on_every_route_that_runs_a_function(server, http, page):
    """Item 1: /queue/join (the page's own route) with fewer values than /names takes, one of them 1 MB, logged the
    whole value (Gradio's "didn't receive enough input values"); now the defaults are filled as on /call/NAME, and
    the endpoint answers the 1 MB prefix with its own message. A value left out with no default (a private event's)
    is named, on /queue/join and on /run (the page's route for its unqueued events); /call/v2 names an unknown key
    cut; a body whose "data" is not a list gets FastAPI's 422 without the value; /run of a queued endpoint is closed."""
    session = uuid.uuid4().hex
    join = {"data": [HUGE], "fn_index": index_of(page, "names"), "session_hash": session}
    probes = [("gradio_api/queue/join", join, 200, "event_id")]
    probed(server, http, probes)
    error = queue_answer(server, http, session)["output"]["error"]
    assert "The prefix is 1,000,000 characters long: at most 20,000 are accepted" in error and len(error) < 300
    last_run, selection = index_of(page, "visitors_last_run"), index_of(page, "selection_of")
    probes = [
        (
            "gradio_api/queue/join",
            {"data": [], "fn_index": last_run, "session_hash": session},
            422,
            "/visitors_last_run takes 1 value (owner): got 0, and owner has no default.",
        ),
        (
            "gradio_api/run/selection_of",
            {"data": [HUGE], "fn_index": selection, "session_hash": session},
            422,
            "/selection_of takes 2 values (layer, head): got 1, and head has no default.",
        ),
        ("gradio_api/call/v2/names", {"k" * 5000: HUGE}, 422, "/names has no parameter 'kkk"),
        ("gradio_api/call/names", {"data": HUGE}, 422, "Input should be a valid list"),
        ("gradio_api/run/names", {"data": [HUGE]}, 404, "does not accept direct HTTP POST requests"),
    ]
    assert "x" * 100 not in probed(server, http, probes)


def test_json_nested_too_deep_is_refused_in_one_line_before_anything_parses_it(server, http):
    """Item 2: a body nested 5,000 levels deep got HTTP 500 and a 2.6 KB traceback (json.loads' RecursionError) on
    every named call, on /queue/join and on unknown names; now 400 saying how deep JSON may nest, and Gradio's own
    parsing never sees it. A value at the limit (32 levels with the body's) still reaches the endpoint's own check."""
    deep = "[" * 5000 + "]" * 5000
    refused = "A request's JSON nests lists and objects at most 32 deep: send flatter values."
    probes = [
        (route, f'{{"data": [{deep}], "fn_index": 0, "session_hash": "deep"}}'.encode(), 400, refused)
        for route in ("gradio_api/call/names", "gradio_api/queue/join", "gradio_api/call/nosuch")
    ]
    probes.append(("gradio_api/call/names", b'{"data": [' + b"[" * 5000 + b"]}", 400, "must be JSON"))
    at_limit = {"data": [json.loads("[" * 30 + "]" * 30)]}
    probes.append(("gradio_api/call/names", at_limit, 200, "event_id"))
    probed(server, http, probes)
    event = http.post(f"{server[0]}gradio_api/call/names", json=at_limit).json()["event_id"]
    answer = http.get(f"{server[0]}gradio_api/call/names/{event}").text
    assert "event: error" in answer and "prefix must be text, got a list" in answer


def test_unknown_names_get_404_and_hidden_functions_take_a_missing_value_in_one_line(server, http, page):
    """Item 4: an unknown name got HTTP 500 and a traceback (+9.7 KB for a 5,000-character name); now 404 naming it
    cut, on every route that runs a function by name or index. Every private function of the page called by name
    with no value (visitors_last_run logged a traceback) gets one line naming what it takes."""
    missing = "No endpoint named 'nosuch' here: GET /gradio_api/info lists them."
    probes = [(f"gradio_api/{route}/nosuch", {"data": []}, 404, missing) for route in ("call", "call/v2", "run", "api")]
    probes.append((f"gradio_api/call/{'n' * 5000}", {"data": []}, 404, "No endpoint named 'nnnnn"))
    no_function = "This page has no function 99999 (fn_index)."
    probes.append(("gradio_api/queue/join", {"data": [], "fn_index": 99999, "session_hash": "s"}, 404, no_function))
    states = {c["id"] for c in page["components"] if c["type"] == "state"}
    hidden = [
        fn["api_name"]
        for fn in page["dependencies"]
        if fn["api_visibility"] == "private" and set(fn["inputs"]) - states
    ]
    assert "visitors_last_run" in hidden
    probes += [(f"gradio_api/call/{name}", {"data": []}, 422, f"/{name} takes ") for name in hidden]
    assert probed(server, http, probes).count("Call refused: ") == len(probes)  # one line each
