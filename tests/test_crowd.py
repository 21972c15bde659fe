"""The Train tab under a crowd (issue 30), through its API on the training server (conftest.py): progress streams
hold no worker thread and are bounded, the queue is bounded per visitor and in all, and a run is its owner's (by the
token the page keeps, not by a Gradio session)."""

import contextlib
import re
import time
from collections import Counter
from pathlib import Path

import pytest
import torch

from helpers import HANG_S, REPO, TINY_RUN, app_error, call, server_log, server_threads, visitor
from minigpt.demo.training import training_runs


def streaming(job) -> bool:
    """Waits for a stream's first update (True) or its refusal (False)."""
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        if job.outputs():
            return True
        if job.done():
            return bool(job.outputs())
        time.sleep(0.05)
    raise TimeoutError("the stream neither answered nor was refused")


def running(job) -> bool:
    """Waits until the run a stream watches has left the queue for the worker (True), or the stream ended (False).
    Its first update may still say queued: the worker takes the run from the queue when it next gets the processor."""
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        if any(update[4]["state"] == "running" for update in job.outputs()):
            return True
        if job.done():
            return False
        time.sleep(0.05)
    raise TimeoutError("the run neither started nor ended")


# The server's worker pools: Gradio's (anyio's worker threads: each update's pre- and postprocessing) and asyncio's
# default executor (asyncio.to_thread: each poll's drawing). Their threads come and go with the work in flight, which a
# slow machine makes longer: on 2 cores at a load of 30, Gradio's went from 8 threads at 9 streams to 23 at 32, and
# no thread outside the pools came (issue 48).
POOLS = re.compile(r"AnyIO worker thread|asyncio_\d+")


def outside_pools(threads: list[dict]) -> int:
    return sum(not POOLS.fullmatch(thread["name"]) for thread in threads)


def stream_code() -> set[tuple[str, str]]:
    """The Train tab's streamed endpoints and their watching loop, as a server's stack names them (file, function)."""
    from minigpt.demo.training.endpoints import Training

    functions = (Training.train, Training.resume, Training.visitors_last_run, Training.watch)
    return {(f.__code__.co_filename, f.__code__.co_qualname) for f in functions}


@pytest.fixture
def started(training_server):
    """The runs a test starts on the shared training server, {name: owner token}, for the test to forget those it has
    cancelled: any left when it ends (it failed on the way) are cancelled then, so that none stays queued or training
    for the next test. (On a loaded machine, a crowd test that failed at its thread bound left its nine runs, and the
    next test's /train was refused: "The queue is full (8 runs waiting)".)"""
    from gradio_client.exceptions import AppError

    runs = {}
    yield runs
    if runs:
        owner = visitor(training_server)
        for name, token in runs.items():
            with contextlib.suppress(AppError):  # one that had ended already
                call(owner, "/cancel", name=name, owner=token)


def test_a_crowd_of_streams_holds_no_threads_and_every_bound_answers_with_a_message(training_server, started):
    """One running run and a full queue, each watched in as many places as allowed: the streams past the bounds are
    refused with a message, the open ones hold no worker thread, and /names answers meanwhile."""
    process = training_server[1]
    mark = len(server_log(process))
    visitors = [f"token-{i}" for i in range(5)]  # five visitors, each with the token its page would keep
    http = [visitor(training_server) for _ in range(4)]

    # The running run (out of the queue), then a queue of eight: two runs for each of four other visitors.
    started["long"] = visitors[0]
    jobs = [http[0].submit(**TINY_RUN, max_steps=20_000, name="long", owner=visitors[0], api_name="/train")]
    assert running(jobs[0])
    names = [f"queued-{i}" for i in range(training_runs.MAX_QUEUED)]
    for i, name in enumerate(names):
        started[name] = owner = visitors[1 + i // training_runs.MAX_RUNS_PER_VISITOR]
        jobs.append(http[i % 4].submit(**TINY_RUN, max_steps=50, name=name, owner=owner, api_name="/train"))
        assert streaming(jobs[-1])
    refused = app_error(http[1], "/train", **TINY_RUN, name="third", owner=visitors[1])
    assert "You have 2 runs queued or training" in refused
    assert "The queue is full (8 runs waiting)" in app_error(http[1], "/train", **TINY_RUN, owner="token-new")

    with_nine_streams = server_threads(process)

    # Watch each run from more places than allowed (its owner, from other sessions: a reloaded page): 45 streams in
    # all, 32 open at once.
    owners = {"long": visitors[0]} | {name: visitors[1 + i // 2] for i, name in enumerate(names)}
    watched, refused = [], []
    for name, owner in owners.items():
        for _ in range(training_runs.MAX_WATCHERS_PER_RUN):  # its /train stream was the first
            job = http[len(watched) % 4].submit(name=name, owner=owner, api_name="/resume")
            (watched if streaming(job) else refused).append(job)
    assert len(jobs) + len(watched) + len(refused) >= 40
    assert len(jobs) + len(watched) == training_runs.MAX_WATCHERS
    messages = [str(job.exception()) for job in refused]
    assert all("watched in 4 places already" in m or "the most this server serves" in m for m in messages)
    assert any("watched in 4 places already" in m for m in messages)
    assert any("the most this server serves" in m for m in messages)

    # 32 open streams hold no thread each. No thread but the event loop's is inside a stream's code (a stream that
    # waited on a worker thread between polls, as a sync generator that sleeps does, held one: 32 threads would be),
    # and from 9 streams to 32 the server gains fewer threads outside its worker pools than half the 23 new streams (a
    # thread of its own per stream would be +23). The pools' threads are not counted: they follow the work in flight
    # (each poll's drawing, each update's processing), which the machine's speed sets, not the number of streams. The
    # other endpoints answer.
    with_32_streams = server_threads(process)
    main_thread = next(t["stack"] for t in with_32_streams if t["name"] == "MainThread")
    assert [str(REPO / "minigpt/demo/app.py"), "main"] in main_thread  # the stacks name files as stream_code does
    inside = [t["name"] for t in with_32_streams if any(tuple(frame) in stream_code() for frame in t["stack"])]
    assert len(inside) <= 1, f"{len(inside)} threads inside a stream's code, for 32 streams: {Counter(inside)}"
    added = outside_pools(with_32_streams) - outside_pools(with_nine_streams)
    assert added < 23 / 2, f"{added} threads more outside the worker pools for 23 more streams"
    answer = http[3].submit(count=3, seed=0, api_name="/names").result(timeout=HANG_S)
    assert len(answer[0].split("\n")) == 3

    # A run is its owner's: another visitor (another token, or none) can neither watch, resume nor cancel it.
    assert "only they can watch it" in app_error(http[2], "/resume", name="queued-0", owner=visitors[2])
    assert "only they can cancel it" in app_error(http[2], "/cancel", name="long")

    # The owners cancel; every stream ends; the queue takes runs again.
    for name, owner in owners.items():
        assert "Cancel" in call(http[0], "/cancel", name=name, owner=owner)
        del started[name]
    assert {job.result(timeout=HANG_S)[4]["state"] for job in jobs + watched} == {"stopped"}
    assert "Traceback" not in server_log(process)[mark:]


def test_a_stopped_run_resumes_only_for_its_owner_and_a_page_reload_keeps_it(training_server, started):
    """The token is the owner, not the session: a new session (a reloaded page) with the token resumes the run;
    another token, or none, is refused by name."""
    first, reloaded, other = visitor(training_server), visitor(training_server), visitor(training_server)
    started["mine"] = "my-token"
    job = first.submit(**TINY_RUN, max_steps=20_000, name="mine", owner="my-token", api_name="/train")
    assert streaming(job)
    assert "Cancel" in call(reloaded, "/cancel", name="mine", owner="my-token")
    assert job.result(timeout=HANG_S)[4]["state"] == "stopped"
    assert "only they can resume it" in app_error(other, "/resume", name="mine", owner="their-token")
    assert "A run needs an owner" in app_error(other, "/resume", name="mine")  # no token: nobody's run to resume
    assert "owner must be a text of at most 200" in app_error(other, "/resume", name="mine", owner="x" * 201)
    resumed = reloaded.submit(name="mine", owner="my-token", api_name="/resume")
    assert streaming(resumed)
    assert "Cancel" in call(first, "/cancel", name="mine", owner="my-token")
    del started["mine"]
    assert resumed.result(timeout=HANG_S)[4]["state"] == "stopped"


@pytest.fixture(scope="module")
def big_model_views(tmp_path_factory):
    """The sections' endpoints in process, on the widest model a visitor could ask for by heads (12 layers x 16
    heads, context 512, random weights) beside the fixture models."""
    from helpers import LOWERCASE, char_tokenizer, save_fixture_model
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.head_tools.ui import InsightsSection
    from minigpt.demo.maps.ui import AttentionSection

    root = tmp_path_factory.mktemp("big")
    big = dict(n_layer=12, n_head=16, n_embd=32, block_size=512)
    folder = save_fixture_model(root / "wide", char_tokenizer(LOWERCASE, "."), seed=0, name="names", **big)
    state = DemoState.configure([str(folder)], training=False)
    return state, InsightsSection(state), AttentionSection(state)


def test_a_view_of_every_map_is_refused_past_its_size_and_importance_is_bounded(big_model_views, monkeypatch):
    """Compare's answer and the exports of every map hold L x H x T^2 numbers: refused for a long text (with the
    longest that fits), served for a short one; the page's Compare (one head) is drawn at any length. Importance is
    measured over the start of the text that fits its work bound, with a note, and equals the importance of that
    start."""
    from minigpt.demo.core import work_budgets
    from minigpt.demo.core.texts import MAX_ANSWER_NUMBERS
    from minigpt.errors import VisitorError
    from minigpt.heads.ablation import head_importance

    state, section, maps = big_model_views
    insights = section.insights
    longest = int((MAX_ANSWER_NUMBERS / (12 * 16)) ** 0.5)
    long_text, short_text = "abcdefgh" * 60, "emma"
    with pytest.raises(VisitorError, match=f"over this server's limit .* at most {longest} tokens"):
        insights.compare(long_text, "anna" * 100, "wide")
    assert insights.compare(short_text, "anna", "wide")["compared_tokens"] == 5
    with pytest.raises(VisitorError, match="limit of 32,000,000. .*export one head's map"):
        maps.attention_export(long_text, "wide", "npz")
    assert maps.attention_export(long_text, "wide", "map.png", 11, "15").path.endswith(".png")
    shown = state.text_view("wide", long_text).shown
    page = section.show_compare(shown, "anna" * 100, 11, "15")
    assert "Mean |difference| of each head" in page and "view-error" not in page

    view = state.text_view("wide", "emma" * 10)
    half = work_budgets.importance_work(view.lm.model.config, len(view.ids) // 2)
    monkeypatch.setattr(work_budgets, "IMPORTANCE_WORK", half)  # a bound that holds about half the text
    measured = work_budgets.importance_tokens(view.lm.model.config, len(view.ids))
    assert 2 < measured < len(view.ids)
    answer = insights.importance("emma" * 10, "wide")
    assert f"over the first {measured} tokens of {len(view.ids)}" in " ".join(answer["notes"])
    start = state.text_view("wide", state.picker.get("wide").tokenizer.decode(view.ids[1:measured]))
    expected, _ = head_importance(view.lm.model, start.recorded)
    torch.testing.assert_close(torch.tensor(answer["importance"]), expected, atol=1e-5, rtol=0)


def resident_mib(process) -> float:
    status = Path(f"/proc/{process.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


def test_fresh_sessions_leave_bounded_memory(bounded_server):
    """Every REST call is a new Gradio session, and Gradio keeps a copy of the page's configuration per session (0.4
    MB of this page's): --sessions bounds how many are kept (20 on conftest's bounded_server, which has served nothing
    before this test). After the first 50 calls fill the 20 kept, 150 more leave the server's memory within 20 MB
    (unbounded, they would keep about 55 MB)."""
    import httpx

    url, process, _ = bounded_server
    with httpx.Client(timeout=HANG_S) as http:

        def call_once():
            asked = http.post(f"{url}gradio_api/call/attention_values", json={"data": ["emma", None, 0, "0", 1, None]})
            answer = http.get(f"{url}gradio_api/call/attention_values/{asked.json()['event_id']}").text
            assert "event: complete" in answer

        for _ in range(50):
            call_once()
        filled = resident_mib(process)
        for _ in range(150):
            call_once()
        assert resident_mib(process) - filled < 20


def test_a_model_loading_does_not_hold_up_a_loaded_ones_requests(monkeypatch):
    """While one model loads (a Hub download, a big folder), a loaded model is served; the loading one loads once
    for all who wait on it."""
    import threading

    from minigpt.demo.core import models

    started, release, loads = threading.Event(), threading.Event(), []

    def slow_load(name, source, batching, step=None, device="cpu"):
        loads.append(name)
        if name == "slow":
            started.set()
            release.wait(HANG_S)
        return f"model {name}"

    monkeypatch.setattr(models, "load_language_model", slow_load)
    picker = models.ModelPicker({"fast": "a", "slow": "b"}, {})
    assert picker.get("fast") == "model fast"
    waiting = [threading.Thread(target=picker.get, args=("slow",)) for _ in range(3)]
    for thread in waiting:
        thread.start()
    assert started.wait(HANG_S)
    assert picker.get("fast") == "model fast" and not release.is_set()  # served while "slow" is still loading
    release.set()
    for thread in waiting:
        thread.join(HANG_S)
    assert picker.get("slow") == "model slow" and loads == ["fast", "slow"]


def test_concurrent_exports_all_succeed_while_old_ones_are_removed(big_model_views):
    """20 exports at once while the export folder holds expired ones (each request removes those it finds): every
    export is served, whole; the expired folders are gone (the audit saw 9 in 20 fail with the server's path)."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from minigpt.demo.core import state as state_module

    state, _, maps = big_model_views
    expired = [state.export_folder() for _ in range(30)]
    for folder in expired:
        (folder / "old.npz").write_bytes(b"x")
        then = time.time() - state_module.EXPORT_KEPT_S - 60
        os.utime(folder, (then, then))

    def export(i: int) -> Path:
        return Path(maps.attention_export("emma" + "abcdefghij"[i % 10] * (i + 1), "wide", "npz").path)

    with ThreadPoolExecutor(20) as pool:
        files = list(pool.map(export, range(20)))
    assert all(np.load(file)["layer_0"].shape[:2] == (1, 16) for file in files)
    assert not any(folder.exists() for folder in expired)


def test_an_export_is_stored_once_inside_gradios_cache(big_model_views):
    """The page puts the export folder inside Gradio's cache, whence Gradio serves a returned file as it is: one copy
    on the disk (the audit saw each export stored twice)."""
    from minigpt.demo.page.ui import build_demo

    state, _, maps = big_model_views
    demo = build_demo(state)
    path = maps.attention_export("emma", "wide", "npz").path
    assert demo.move_resource_to_block_cache(path) == path


def test_watchers_of_one_run_share_its_plot_files_written_whole(tmp_path):
    """Eight watchers asking for one run's plot at once get one file, written whole (a temporary file renamed; Gradio
    rewrote equal images in place, and a watcher downloading one then got a cut file); a new version is a new file."""
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from minigpt.demo.training.endpoints import SharedPlots

    plots = SharedPlots(SimpleNamespace(exports=tmp_path))
    image = bytes(range(256)) * 400

    def draw():
        time.sleep(0.01)
        return image

    with ThreadPoolExecutor(8) as pool:
        paths = set(pool.map(lambda _: plots.path("my-run", "loss", (3, 1), draw), range(8)))
    assert len(paths) == 1 and Path(paths.pop()).read_bytes() == image
    newer = plots.path("my-run", "loss", (4, 1), lambda: b"newer")
    assert Path(newer).read_bytes() == b"newer" and len(list((tmp_path / "plots-my-run").iterdir())) == 2
    assert plots.path("my-run", "roles", (0,), lambda: None) is None  # nothing to draw yet
