"""The Train tab through its API (gradio_client), on the training server (conftest.py: the fixture models, a runs
folder of its own): tiny names runs (a 1-layer, 2-head, 16-wide model, tens to hundreds of steps) train through
train.py in a subprocess."""

import asyncio
import json
import zipfile

import pytest

from helpers import HANG_S, TINY_RUN, app_error, assert_every_case, call, server_log, visitor


def numbers(output) -> dict:
    """The progress numbers of one streamed /train or /resume output (name, bar, plot, samples, numbers, roles plot)."""
    return output[4]


def events(folder) -> list[dict]:
    return [json.loads(line) for line in (folder / "progress.jsonl").read_text().splitlines()]


def test_a_names_run_streams_progress_and_its_model_generates_downloads_and_outlives_a_restart(training_server):
    client = visitor(training_server)
    job = client.submit(**TINY_RUN, max_steps=80, name="tiny-run", owner="token-a", api_name="/train")
    updates = [numbers(out) for out in job] + [numbers(job.result())]
    steps = [u["step"] for u in updates]
    assert steps == sorted(steps) and len(set(steps)) >= 3  # streamed as it went, not only at the end
    final = updates[-1]
    assert final["state"] == "finished" and final["step"] == 80 and final["name"] == "tiny-run"
    assert final["train"][-1][1] < final["train"][0][1] - 0.3  # the loss fell (3.3 = log 28 at the start)
    assert final["validation"][-1][1] < final["validation"][0][1]
    assert len(final["samples"]) == 5 and final["samples_step"] == 80  # samples of the last evaluation
    assert final["roles"][-1]["step"] == 80 and len(final["roles"]) == len(final["validation"])  # one an evaluation

    # The model is in the picker at once: the names endpoint and the maps take it by its name.
    names, _ = call(client, "/names", count=8, seed=1, model="tiny-run")
    assert len(names.split("\n")) == 8 and all(set(n) <= set("abcdefghijklmnopqrstuvwxyz") for n in names.split())
    _, grid, *_ = call(client, "/attention", text="emma", model="tiny-run")
    assert grid.count("<svg") == 1 * (2 + 1)  # 1 layer x (2 heads + their average)

    # The zip holds the model folder as train.py wrote it, without checkpoints or the run's own files.
    with zipfile.ZipFile(call(client, "/download", name="tiny-run")) as archive:
        files = set(archive.namelist())
    assert {
        f"tiny-run/{f}"
        for f in (
            "model.safetensors",
            "config.json",
            "tokenizer.json",
            "README.md",
            "loss_curve.png",
            "modeling_minigpt.py",
        )
    } <= files
    assert not any("checkpoint" in f or f.endswith(("progress.jsonl", "spec.json")) for f in files)

    # A server started afresh on the same runs folder offers the model again: the state app.py's start builds
    # (DemoState.configure, in this process: a second server would take ~8 s to start), its /names answering.
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.generation.endpoints import Generation

    with pytest.MonkeyPatch.context() as env:
        env.setenv("MINIGPT_RUNS_DIR", str(training_server[2]))
        restarted = DemoState.configure()
    names, *_ = asyncio.run(Generation(restarted).names(count=3, seed=0, model="tiny-run"))
    assert len(names.split("\n")) == 3 and "tiny-run" in restarted.picker.names


# Long enough that a Cancel sent at step 20 lands before the end on a fast machine (a tiny model's steps take ms).
RACED_STEPS = 300


def test_a_second_visitor_is_queued_and_cancel_then_resume_ends_as_the_uninterrupted_run(training_server):
    """Visitor A trains RACED_STEPS steps; visitor B asks for the same run meanwhile: B waits in the queue, then is
    cancelled part way and resumed. B ends at A's validation loss (same seed: same batches, same dropout). While A
    trains, a third visitor generates names and looks at the maps."""
    a, b, c = visitor(training_server), visitor(training_server), visitor(training_server)
    job_a = a.submit(**TINY_RUN, max_steps=RACED_STEPS, name="whole", owner="token-a", api_name="/train")
    assert numbers(next(job_a))["name"] == "whole"  # A's run is in the queue before B asks
    job_b = b.submit(**TINY_RUN, max_steps=RACED_STEPS, name="cut", owner="token-b", api_name="/train")

    answered_during_training = False
    for out in job_a:
        progress = numbers(out)
        if progress["state"] == "running" and 0 < progress["step"] < RACED_STEPS // 2 and not answered_during_training:
            assert len(call(c, "/names", count=3, seed=0)[0].split("\n")) == 3
            assert call(c, "/attention", text="anna")[1].count("<svg") == 20
            answered_during_training = True
        elif answered_during_training:
            assert progress["state"] == "running"  # the next update: the run was still going
            break
    whole = numbers(job_a.result())
    assert answered_during_training and whole["state"] == "finished"

    cancelled_at = None
    for out in job_b:
        progress = numbers(out)
        if progress["state"] == "queued":
            assert progress["position"] == 1 and progress["step"] == 0
        if progress["step"] >= 20 and cancelled_at is None:
            assert "another visitor" in app_error(c, "/cancel", name="cut")  # only its owner may cancel it
            assert "keeps a checkpoint" in call(b, "/cancel", name="cut", owner="token-b")
            cancelled_at = progress["step"]
    stopped = numbers(job_b.result())
    assert stopped["state"] == "stopped" and cancelled_at <= stopped["step"] < RACED_STEPS
    assert "checkpoint is kept" in stopped["message"]
    runs = training_server[2]
    assert (runs / "cut" / f"checkpoint-{stopped['step']}" / "trainer_state.json").is_file()
    assert any(u["state"] == "queued" for u in map(numbers, job_b.outputs()))
    a_finished = next(e["time"] for e in events(runs / "whole") if e["event"] == "finished")
    b_started = next(e["time"] for e in events(runs / "cut") if e["event"] == "start")
    assert b_started > a_finished  # one run at a time: B's training began after A's ended

    job = b.submit(name="cut", owner="token-b", api_name="/resume")
    resumed = [numbers(out) for out in job] + [numbers(job.result())]
    assert resumed[-1]["state"] == "finished" and resumed[-1]["step"] == RACED_STEPS
    assert all(u["step"] >= stopped["step"] for u in resumed)  # it went on from the checkpoint
    assert resumed[-1]["validation"][-1][1] == pytest.approx(whole["validation"][-1][1], abs=1e-4)
    assert resumed[-1]["validation"][-1][0] == RACED_STEPS


BAD_INPUT = [  # (endpoint, parameters, a fragment of its message)
    ("/train", dict(data="text", text=""), "The text is empty"),
    ("/train", dict(data="text", text="to be or not to be", tokenizer="char"), "give at least 160 characters"),
    ("/train", dict(data="text", tokenizer="names", text="anna\nzoë\nbob-by\n" * 5), "'-', 'ë'"),
    ("/train", dict(data="text", tokenizer="names", text="anna\nbob\n"), "give at least 10"),
    ("/train", dict(n_embd=30, n_head=4), "n_embd (30) must be divisible by n_head (4)"),
    ("/train", dict(n_layer=8, n_head=8, n_embd=256, max_steps=20_000), "too big for this server"),
    ("/train", dict(max_steps=10**6), "max_steps must be between 1 and 20,000"),
    ("/train", dict(n_layer="two"), "Layers must be a number, got 'two'"),
    ("/train", dict(data="wikipedia"), "data must be one of names, shakespeare, induction, text"),
    ("/train", dict(data="shakespeare", tokenizer="names"), "not a list of a-z names"),
    ("/train", dict(name="../../etc"), "is not allowed"),
    ("/train", dict(name="tiny-names"), "is taken"),
    ("/train", dict(), "A run needs an owner: send owner"),  # a run nobody could cancel (issue 48)
    ("/resume", dict(name="whole"), "A run needs an owner: send owner"),
    ("/resume", dict(name="no-such-run", owner="token-a"), "no run named 'no-such-run'"),
    ("/cancel", dict(name="no-such-run"), "No run named 'no-such-run'"),
    ("/download", dict(name="no-such-run"), "No finished model named 'no-such-run'"),
]


def test_bad_input_gets_its_message_and_no_traceback(training_server):
    """Each case of BAD_INPUT (one test for the table, from one visitor: each failure named by its case): its message,
    no traceback in the answer or the log, and no run started."""
    folder = training_server[2]
    runs_now = lambda: set(folder.iterdir()) if folder.exists() else set()  # none yet when run alone
    client, runs = visitor(training_server), runs_now()

    def check(endpoint, params, message):
        error = app_error(client, endpoint, **params)
        assert message in error and "Traceback" not in error, error
        assert "Traceback" not in server_log(training_server[1])
        assert runs_now() == runs  # no run started

    assert_every_case([(f"{case[0]} {case[1]}", case) for case in BAD_INPUT], check)


def test_an_oversized_upload_is_refused_by_its_size(training_server, tmp_path):
    from gradio_client import handle_file

    big = tmp_path / "big.txt"
    big.write_text("to be or not to be\n" * 60_000)  # 1.14 MB
    error = app_error(visitor(training_server), "/train", data="text", upload=handle_file(str(big)))
    assert "The file is 1.1 MB: the limit is 1 MB" in error
    assert "Traceback" not in server_log(training_server[1])


@pytest.mark.parametrize("name", ["names.exe", "model.zip"])
def test_an_upload_of_another_type_is_gradios_refusal_and_one_log_line(training_server, tmp_path, name):
    """Gradio's own refusal of the file's type reaches the visitor, and the log holds one line for it, no traceback."""
    from gradio_client import handle_file

    mark = len(server_log(training_server[1]))
    path = tmp_path / name
    path.write_text("emma\nolivia\n")
    error = app_error(visitor(training_server), "/train", data="text", upload=handle_file(str(path)))
    assert "Invalid file type" in error and ".txt" in error
    logged = server_log(training_server[1])[mark:]
    assert "Traceback" not in logged and logged.count("Upload refused:") == 1 and "Invalid file type" in logged


def test_a_check_that_only_training_can_make_comes_back_as_a_message(training_server):
    """160 characters pass the check made before the run (one 16-character window in the last tenth), but byte-level
    BPE turns the repeated letter into a few tokens: train.py's own message comes back, the traceback stays out."""
    params = dict(data="text", tokenizer="bpe", vocab_size=300, text="a" * 160, max_steps=5, name="too-short")
    params["owner"] = "token-a"
    error = app_error(visitor(training_server), "/train", **params)
    assert "shorter than one window of 16 tokens" in error and "Traceback" not in error
    assert "Traceback" not in server_log(training_server[1])


def test_a_server_path_given_as_the_upload_is_refused_in_one_line(training_server):
    """A raw call that names a file on the server (not one it uploaded) as the upload: Gradio refused it with a
    traceback in the log; now a message naming what to do, one log line, and nothing of the server's paths."""
    import httpx

    url, process = training_server[:2]
    mark = len(server_log(process))
    values = {"data": ["text", "", {"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}]}
    for route in ("gradio_api/call/train", "gradio_api/queue/join"):
        refused = httpx.post(f"{url}{route}", json=values, timeout=HANG_S)
        assert refused.status_code == 422 and "must be uploaded before a call names it" in refused.text
        assert "'passwd'" in refused.text and "/etc" not in refused.text
    logged = server_log(process)[mark:]
    assert "Traceback" not in logged and logged.count("Call refused:") == 2
