"""The Train tab under a crowd (issue 30), through its API on a server of its own: progress streams hold no worker
thread and are bounded, the queue is bounded per visitor and in all, and a run is its owner's (by the token the page
keeps, not by a Gradio session)."""

import time
from pathlib import Path

import pytest

from explorer import training_runs
from helpers import app_error, call, server_log, training_app

TINY = dict(data="names", n_layer=1, n_head=2, n_embd=16, seed=3)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with training_app(tmp_path_factory.mktemp("crowd")) as server:
        yield server


def client(server):
    from gradio_client import Client

    return Client(server[0], verbose=False)


def threads(process) -> int:
    """The server process's threads now (Linux)."""
    status = Path(f"/proc/{process.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


def streaming(job, timeout: float = 60.0) -> bool:
    """Waits for a stream's first update (True) or its refusal (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job.outputs():
            return True
        if job.done():
            return bool(job.outputs())
        time.sleep(0.05)
    raise TimeoutError("the stream neither answered nor was refused")


def test_a_crowd_of_streams_holds_no_threads_and_every_bound_answers_with_a_message(server):
    """One running run and a full queue, each watched in as many places as allowed: the streams past the bounds are
    refused with a message, the open ones hold no worker thread, and /names answers meanwhile."""
    process = server[1]
    mark = len(server_log(process))
    visitors = [f"token-{i}" for i in range(5)]  # five visitors, each with the token its page would keep
    http = [client(server) for _ in range(4)]
    baseline = threads(process)

    # The running run, then a queue of eight: two runs for each of four other visitors.
    jobs = [http[0].submit(**TINY, max_steps=20_000, name="long", owner=visitors[0], api_name="/train")]
    assert streaming(jobs[0])
    names = [f"queued-{i}" for i in range(training_runs.MAX_QUEUED)]
    for i, name in enumerate(names):
        owner = visitors[1 + i // training_runs.MAX_RUNS_PER_VISITOR]
        jobs.append(http[i % 4].submit(**TINY, max_steps=50, name=name, owner=owner, api_name="/train"))
        assert streaming(jobs[-1])
    assert "You have 2 runs queued or training" in app_error(http[1], "/train", **TINY, name="third", owner=visitors[1])
    assert "The queue is full (8 runs waiting)" in app_error(http[1], "/train", **TINY, owner="token-new")

    # Watch each run in as many places as allowed (the run's owner, from other sessions: a reloaded page).
    owners = {"long": visitors[0]} | {name: visitors[1 + i // 2] for i, name in enumerate(names)}
    watched, refused = [], []
    for name, owner in owners.items():
        for _ in range(training_runs.MAX_WATCHERS_PER_RUN - 1):  # its /train stream is the first
            job = http[len(watched) % 4].submit(name=name, owner=owner, api_name="/resume")
            (watched if streaming(job) else refused).append(job)
    assert len(watched) + len(jobs) == training_runs.MAX_WATCHERS
    assert refused and all("the most this server serves" in str(job.exception()) for job in refused)
    assert "watched in 4 places already" in app_error(http[0], "/resume", name="long", owner=visitors[0])

    # 32 open streams: no more threads than a handful, and the other endpoints answer.
    assert threads(process) < baseline + 16
    answer = http[3].submit(count=3, seed=0, api_name="/names").result(timeout=60)
    assert len(answer[0].split("\n")) == 3

    # A run is its owner's: another visitor (another token, or none) can neither watch, resume nor cancel it.
    assert "only they can watch it" in app_error(http[2], "/resume", name="queued-0", owner=visitors[2])
    assert "only they can cancel it" in app_error(http[2], "/cancel", name="long")

    # The owners cancel; every stream ends; the queue takes runs again.
    for name, owner in owners.items():
        assert "Cancel" in call(http[0], "/cancel", name=name, owner=owner)
    assert {job.result(timeout=60)[4]["state"] for job in jobs + watched} == {"stopped"}
    assert "Traceback" not in server_log(process)[mark:]


def test_a_stopped_run_resumes_only_for_its_owner_and_a_page_reload_keeps_it(server):
    """The token is the owner, not the session: a new session (a reloaded page) with the token resumes the run;
    another token, or none, is refused by name."""
    first, reloaded, other = client(server), client(server), client(server)
    job = first.submit(**TINY, max_steps=20_000, name="mine", owner="my-token", api_name="/train")
    assert streaming(job)
    assert "Cancel" in call(reloaded, "/cancel", name="mine", owner="my-token")
    assert job.result(timeout=60)[4]["state"] == "stopped"
    assert "only they can resume it" in app_error(other, "/resume", name="mine", owner="their-token")
    assert "only they can resume it" in app_error(other, "/resume", name="mine")
    assert "owner must be a text of at most 200" in app_error(other, "/resume", name="mine", owner="x" * 201)
    resumed = reloaded.submit(name="mine", owner="my-token", api_name="/resume")
    assert streaming(resumed)
    assert "Cancel" in call(first, "/cancel", name="mine", owner="my-token")
    assert resumed.result(timeout=60)[4]["state"] == "stopped"
