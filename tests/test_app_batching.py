"""Many visitors at once, through the running demo: a seeded text is the same alone and while others decode in the
same batch, a full batch says so, and a client that goes frees its row at once."""

import time
from pathlib import Path

import httpx

from helpers import app_error, printable_tokenizer, running_app, save_fixture_model, server_log, stream

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
    from gradio_client import Client

    alone = stream(client, **MINE)[-1][0]
    others_alone = [stream(client, **other)[-1][0] for other in OTHERS]
    assert all(len(text) > 100 for text in others_alone)

    clients = [Client(server[0], verbose=False) for _ in OTHERS]  # (connecting takes a while: before submitting)
    jobs = [own.submit(**other, api_name="/text") for own, other in zip(clients, OTHERS)]
    deadline = time.monotonic() + 60
    while not all(job.outputs() or job.done() for job in jobs) and time.monotonic() < deadline:
        time.sleep(0.02)  # every other client is streaming: mine joins a running batch
    # (Their first update, not more: on a loaded machine the server paces a stream into fewer, longer updates, and
    # waiting for a fourth let the first ones end before mine joined.)
    running = sum(not job.done() for job in jobs)
    in_crowd = stream(client, **MINE)[-1][0]
    assert running == len(OTHERS)  # (150 tokens each, 40 for mine: they decode all along)
    assert in_crowd == alone
    assert [job.result()[0] for job in jobs] == others_alone


def test_a_full_batch_says_so_and_a_client_that_goes_frees_its_row(fixture_models, tmp_path):
    """One row, no waiting line: while a long text decodes, another request gets the busy message; when its client
    disconnects, the row is free well before the text would have ended."""
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    names = fixture_models[0]
    # A wider text model than tiny-text (random weights, 7M parameters): its 500 tokens take seconds, so that the
    # time a freed row takes to show (a few requests' round trips on a busy machine) is well below a text's time.
    text = save_fixture_model(
        tmp_path / "wide-text",
        printable_tokenizer(),
        seed=1,
        name="shakespeare",
        block_size=128,
        n_layer=4,
        n_head=4,
        n_embd=384,
    )
    args = ("--names-model", str(names), "--text-model", str(text), "--max-batch", "1", "--max-waiting", "0")
    with running_app(*args) as (url, process):
        client = Client(url, verbose=False)
        long_text = dict(prompt="ab", max_new_tokens=500, temperature=0)  # greedy: 500 tokens, no end token
        start = time.monotonic()
        assert "500 new tokens" in stream(client, **long_text)[-1][1]
        whole = time.monotonic() - start

        with httpx.Client(timeout=60) as http:
            data = ["ab", 500, 0, 0, 1.0, 0, Path(text).name]
            event = http.post(f"{url}gradio_api/call/text", json={"data": data}).json()["event_id"]
            with http.stream("GET", f"{url}gradio_api/call/text/{event}") as response:
                partials = (line for line in response.iter_lines() if line == "event: generating")
                for _ in range(5):  # a few tokens in: the client is decoding in the only row
                    next(partials)
                message = app_error(client, "/text", prompt="cd", max_new_tokens=5, seed=1)
                assert "The server is busy (requests in progress: 1, waiting: 0). Try again" in message
            gone = time.monotonic()  # the connection is closed: the client went away mid-text

        while True:
            try:
                stream(client, prompt="cd", max_new_tokens=5, seed=1)
                break
            except AppError as error:
                assert "busy" in str(error) and time.monotonic() - gone < whole
                time.sleep(0.02)
        freed = time.monotonic() - gone
        assert freed < whole / 2, (freed, whole)
        log = server_log(process)
        assert "Traceback" not in log and "busy" not in log  # the busy message is the user's, not the log's
