"""Many visitors at once, through the running demo: a seeded text is the same alone and while others decode in the
same batch, a full batch says so, and a client that goes frees its row at once."""

import json
import time
import uuid
from pathlib import Path

import httpx

from helpers import HANG_S, gradio_client, server_log, stream

MINE = dict(prompt="to be", max_new_tokens=40, temperature=0.9, top_k=20, top_p=0.95, seed=11)
# Long texts with their own settings, still running when mine ends (seeds whose texts run the 150 tokens)
OTHERS = [
    dict(prompt="ab" * (i + 1), max_new_tokens=150, temperature=t, top_k=k, top_p=p, seed=seed)
    for i, (t, k, p, seed) in enumerate(
        [
            (0, 0, 1, 0),
            (0.5, 2, 1, 100),
            (1.0, 3, 1, 100),
            (1.5, 3, 0.9, 100),
            (0.8, 2, 1, 101),
            (1.2, 4, 0.7, 101),
            (0, 0, 1, 0),
            (1.0, 2, 1, 100),
        ]
    )
]


def test_seeded_text_is_the_same_alone_and_while_eight_others_run(server, client):
    """On the shared server (conftest.py): its default batch takes all nine."""
    alone = stream(client, **MINE)[-1][0]
    others_alone = [stream(client, **other)[-1][0] for other in OTHERS]
    assert all(len(text) > 100 for text in others_alone)

    clients = [gradio_client(server[0]) for _ in OTHERS]  # (connecting takes a while: before submitting)
    jobs = [own.submit(**other, api_name="/text") for own, other in zip(clients, OTHERS)]
    # Every other client streaming, mine joins a running batch. (Their first update, not more: on a loaded machine
    # the server paces a stream into fewer, longer updates, and waiting for a fourth let the first ones end before
    # mine joined.)
    deadline = time.monotonic() + HANG_S
    while not all(job.outputs() or job.done() for job in jobs):
        assert time.monotonic() < deadline, "the other texts neither answered nor ended"
        time.sleep(0.02)
    running = sum(not job.done() for job in jobs)
    in_crowd = stream(client, **MINE)[-1][0]
    assert running == len(OTHERS)  # (150 tokens each, 40 for mine: they decode all along)
    assert in_crowd == alone
    assert [job.result(timeout=HANG_S)[0] for job in jobs] == others_alone


def session_messages(response):
    """The messages of a Gradio session's event stream (/gradio_api/queue/data), in the order the server sent them."""
    for line in response.iter_lines():
        if line.startswith("data:"):
            yield json.loads(line[len("data:") :])


def test_a_full_batch_says_so_and_a_client_that_goes_frees_its_row(bounded_server):
    """Two rows, no waiting line (conftest's bounded_server): while two long texts decode, another request gets the busy
    message; when the client of the first goes away, its row is free at once: a short text gets it and ends while the
    second long text, shorter than what the first had left, still decodes. The second text is the clock, counted in
    decoding steps: had the first kept its row to its end, the second would have ended first, its row the one the
    short text got. (Timed in seconds against a text timed before, the test held only while the machine's load stayed
    as it was.) The server's text model is wide, so that the steps a freed row takes to show (a few round trips) are
    few against the clock's."""
    url, process, text = bounded_server
    busy = "The server is busy (requests in progress: 2, waiting: 0). Try again"
    with httpx.Client(timeout=HANG_S) as http:
        config = http.get(f"{url}config").json()
        text_fn = next(fn["id"] for fn in config["dependencies"] if fn.get("api_name") == "text")
        session = uuid.uuid4().hex  # the clock's and the short texts' session: one event stream, in the server's order

        def join(prompt: str, tokens: int, temperature: float, seed: int) -> str:
            """A /text request in the session, as the page makes one; its event's id."""
            data = [prompt, tokens, temperature, 0, 1.0, seed, Path(text).name]
            body = {"data": data, "fn_index": text_fn, "session_hash": session, "event_data": None, "trigger_id": None}
            return http.post(f"{url}gradio_api/queue/join", json=body).json()["event_id"]

        # The first long text, greedy (500 tokens: this model writes no end token), by a client that will go away.
        first = http.post(f"{url}gradio_api/call/text", json={"data": ["ab", 500, 0, 0, 1.0, 0, Path(text).name]})
        with http.stream("GET", f"{url}gradio_api/call/text/{first.json()['event_id']}") as going:
            updates = (line for line in going.iter_lines() if line == "event: generating")
            next(updates), next(updates)  # its prompt, then its first tokens: it decodes in a row
            clock = join("ab", 250, 0, 0)  # the second: 250 tokens, from a few after the first's start
            with http.stream("GET", f"{url}gradio_api/queue/data", params={"session_hash": session}) as events:
                messages = session_messages(events)

                def next_of(event: str, kind: str) -> dict:
                    """The event's next message of that kind; the clock must not end first."""
                    for message in messages:
                        if message.get("event_id") == clock and message["msg"] == "process_completed":
                            raise AssertionError("the clock's text ended before a row came free")
                        if message.get("event_id") == event and message["msg"] == kind:
                            return message
                    raise AssertionError("the session's event stream ended")

                next_of(clock, "process_generating"), next_of(clock, "process_generating")  # it decodes: both rows
                refused = next_of(join("cd", 5, 1.0, 1), "process_completed")
                assert not refused["success"] and busy in refused["output"]["error"]
                going.close()  # the first client goes away
                while not (answer := next_of(join("cd", 5, 1.0, 1), "process_completed"))["success"]:
                    assert busy in answer["output"]["error"]  # its row is not free yet: try again
        log = server_log(process)
        assert "Traceback" not in log and "busy" not in log  # the busy message is the user's, not the log's
