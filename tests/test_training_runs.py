"""run_requests.py and training_runs.py in process, without training: the limits, the progress read back from the
events, the zip."""

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from configuration_minigpt import PRESETS, MiniGPTConfig
from helpers import REPO
from minigpt import data
from minigpt.demo.training import run_folder, run_requests, training_runs
from minigpt.presets import TRAINING_PRESETS
from modeling_minigpt import MiniGPTForCausalLM

SIZES = dict(n_layer=2, n_head=2, n_embd=32, block_size=16, max_steps=100, learning_rate=1e-3, seed=0, vocab_size=512)


def request(**changes):
    return run_requests.check_request(
        **{"data": "names", "text": "", "tokenizer": None, "name": "", **SIZES, "taken": set(), **changes}
    )


def test_every_size_preset_has_a_training_schedule_that_loads_without_torch_or_the_trainer():
    """The schedules live on the training side (minigpt.presets), not in the config a model folder ships: one per size
    preset, in a module of plain dicts that the demo's Train tab reads without importing the Trainer."""
    assert set(TRAINING_PRESETS) == set(PRESETS)
    check = "import sys, minigpt.presets; print(sorted(m for m in sys.modules if m.startswith(('torch', 'transf'))))"
    result = subprocess.run([sys.executable, "-c", check], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_parameters_are_those_of_the_model_that_will_train():
    spec, _ = request(n_layer=3, n_embd=48, n_head=4)
    config = MiniGPTConfig.from_preset("names", n_layer=3, n_embd=48, n_head=4, block_size=16, vocab_size=28)
    assert spec.parameters == MiniGPTForCausalLM(config).num_parameters()


def test_the_largest_run_the_limit_proposes_fits_and_one_step_more_does_not():
    with pytest.raises(run_requests.RunError, match=r"use at most ([\d,]+) steps") as error:
        request(n_layer=8, n_head=8, n_embd=256, max_steps=20_000)
    fitting = int(error.value.args[0].split("use at most ")[1].split(" steps")[0].replace(",", ""))
    spec, _ = request(n_layer=8, n_head=8, n_embd=256, max_steps=fitting)
    assert spec.parameters * fitting * spec.batch_size * spec.block_size <= run_requests.MAX_WORK
    with pytest.raises(run_requests.RunError, match="too big"):
        request(n_layer=8, n_head=8, n_embd=256, max_steps=fitting + 1)


def test_visitor_names_and_texts_are_checked_and_kept():
    spec, text = request(data="text", tokenizer="names", text=" Anna\n\nbob \n" + "eve\n" * 8)
    assert spec.tokenizer == "names" and text == "Anna\nbob\n" + "eve\n" * 8  # one a line; upper case is fine
    spec, text = request(data="text", text="x" * 160)  # char by default; the last tenth holds one 16-token window
    assert spec.tokenizer == "char" and spec.preset == "shakespeare"
    with pytest.raises(run_requests.RunError, match="give at least 160 characters"):
        request(data="text", text="x" * 159)
    assert request(data="shakespeare")[0].tokenizer == "bpe"
    assert run_requests.NAME.fullmatch(request()[0].name)  # a name is picked when none is given


def test_the_induction_lab_trains_the_induction_preset_on_the_repeated_names(tmp_path):
    from minigpt.demo.training.training_process import train_arguments

    lab = run_requests.defaults("induction")
    spec, text = request(data="induction", **{k: lab[k] for k in SIZES}, name="lab")
    assert (spec.preset, spec.tokenizer, text) == ("induction", "names", "")
    argv = train_arguments(spec, tmp_path, resume=False)
    flag = lambda name: argv[argv.index(name) + 1]  # noqa: E731
    assert flag("--preset") == "induction" and flag("--dataset") == str(data.builtin_repeats())
    assert {k: int(flag("--" + k)) for k in ("n_layer", "n_head", "n_embd", "block_size", "max_steps")} == {
        k: {**PRESETS["induction"], **TRAINING_PRESETS["induction"]}[k]
        for k in ("n_layer", "n_head", "n_embd", "block_size", "max_steps")
    }
    with pytest.raises(run_requests.RunError, match="trains with the names tokenizer"):
        request(data="induction", tokenizer="char")


def test_progress_of_a_resumed_run_drops_what_came_after_its_checkpoint():
    """Killed at step 30 after a checkpoint at 20, resumed from 20: the points past 20 were made by a run that is
    gone; the time left is measured from the resumed run's own pace."""
    events = [
        dict(event="launch", time=0.0),
        dict(event="start", step=0, max_steps=100, time=1.0),
        dict(event="loss", step=10, loss=3.0, time=2.0),
        dict(event="eval", step=20, eval_loss=2.9, time=3.0),
        dict(event="samples", step=20, samples=["ann", "bo"], time=3.0),
        dict(event="loss", step=30, loss=2.5, time=4.0),
        dict(event="stopped", step=30, message="killed", time=5.0),
        dict(event="launch", time=50.0),
        dict(event="start", step=20, max_steps=100, time=60.0),
        dict(event="step", step=40, time=62.0),
        dict(event="loss", step=40, loss=2.4, time=62.0),
    ]
    progress = run_folder.progress_of(events)
    assert progress.state == "running" and progress.step == 40 and progress.max_steps == 100
    assert progress.train == [(10, 3.0), (40, 2.4)] and progress.validation == [(20, 2.9)]
    assert progress.samples == ["ann", "bo"]
    assert progress.seconds_left == pytest.approx((62 - 60) / (40 - 20) * (100 - 40))
    finished = run_folder.progress_of(events + [dict(event="finished", step=100, message="done", time=70.0)])
    assert finished.done and finished.state == "finished" and finished.seconds_left is None
    assert progress.resumed_at == [20]  # where the plot marks the resume
    assert progress.seconds_per_step == pytest.approx((62 - 60) / (40 - 20))  # the resumed run's own pace


def test_the_estimate_before_start_uses_this_servers_latest_timed_run(tmp_path):
    queue = training_runs.RunQueue(tmp_path)
    assert queue.pace() is None  # nothing timed yet: the tab uses TYPICAL_PACE
    spec, _ = request(name="timed")
    folder = tmp_path / "timed"
    folder.mkdir()
    spec.save(folder)
    for event, fields in [("start", dict(step=0, max_steps=100, vocab_size=28)), ("step", dict(step=50))]:
        run_folder.write_event(folder, event, **fields)
    events = run_folder.read_events(folder)
    seconds_per_step = (events[1]["time"] - events[0]["time"]) / 50
    assert queue.pace() == pytest.approx(spec.work / spec.max_steps / seconds_per_step)
    assert spec.work == spec.parameters * spec.max_steps * spec.batch_size * spec.block_size
    assert run_folder.progress_of(events).vocab_size == 28


def test_the_loss_plot_draws_chance_at_ln_v_and_marks_a_resume():
    import math

    from minigpt import plots

    history = [{"step": 10, "loss": 3.0}, {"step": 20, "eval_loss": 2.8}, {"step": 40, "loss": 2.5}]
    figure = plots.loss_figure(history, "run", vocab_size=28, resumed_at=[20])
    axes = figure.axes[0]
    chance = [line for line in axes.lines if line.get_label().startswith("chance")]
    assert len(chance) == 1 and list(chance[0].get_ydata()) == [math.log(28)] * 2
    resumed = [line for line in axes.lines if line.get_label() == "resumed"]
    assert len(resumed) == 1 and list(resumed[0].get_xdata()) == [20, 20]
    plots.plt.close(figure)


def test_the_zip_is_the_model_folder_without_the_run_files_or_the_servers_paths(tmp_path):
    folder = tmp_path / "my-model"
    (folder / "checkpoint-10").mkdir(parents=True)
    for name in ("model.safetensors", "config.json", "README.md", "spec.json", "progress.jsonl", "data.txt", "owner"):
        (folder / name).write_text(name)
    cached = str(Path.home() / ".cache" / "minigpt" / "names_32000_2008.txt")
    args = dict(preset="names", dataset=cached, output_dir=str(folder), val_size=1000, tokenizer=None)
    (folder / "training_args.json").write_text(json.dumps(args))
    (tmp_path / "out").mkdir()
    with zipfile.ZipFile(run_folder.zip_model(folder, tmp_path / "out")) as archive:
        names = sorted(archive.namelist())
        assert names == [
            f"my-model/{name}" for name in ("README.md", "config.json", "model.safetensors", "training_args.json")
        ]
        assert archive.read("my-model/config.json") == b"config.json"
        shipped = json.loads(archive.read("my-model/training_args.json"))
    assert str(tmp_path) not in json.dumps(shipped) and str(Path.home()) not in json.dumps(shipped)
    assert shipped == {**args, "dataset": "~/.cache/minigpt/names_32000_2008.txt", "output_dir": "my-model"}


def test_downloads_and_exports_share_a_folder_whose_old_files_go(tmp_path, monkeypatch):
    """Each download's zip is written into the state's export folder; one older than EXPORT_KEPT_S is removed when
    the next export or download asks for a folder (it used to stay in a temporary folder for ever)."""
    import os
    import time

    from minigpt.demo.core import state as state_module
    from minigpt.demo.core.state import DemoState

    state = DemoState.configure(training=False)
    state.exports = tmp_path / "exports"
    state.exports.mkdir()
    first = state.export_folder()
    old = time.time() - state_module.EXPORT_KEPT_S - 1
    os.utime(first, (old, old))
    second = state.export_folder()
    assert not first.exists() and second.exists() and second.parent == state.exports


def test_runs_the_server_could_not_hold_are_refused_before_they_start():
    """The audit's runs: 12 x 16 heads at context 512 (over 7 GB measured), and a char text of 249,000 distinct
    characters (one 8.2 GB tensor). Every preset's own sizes still fit."""
    big = dict(n_layer=12, n_head=16, n_embd=32, block_size=512, max_steps=10)
    with pytest.raises(run_requests.RunError, match=r"would need about [\d.]+ GiB of memory .* shorter context"):
        request(**big)
    spec, _ = request(**big | dict(block_size=64))
    assert run_requests.training_bytes(spec, 28) <= run_requests.MAX_TRAINING_BYTES
    scripts = "".join(map(chr, range(0x4E00, 0x4E00 + 9000))) * 2  # 9,000 CJK characters, and the newline
    with pytest.raises(run_requests.RunError, match="9,001 distinct characters: the char tokenizer takes at most"):
        request(data="text", text=scripts + "\n")
    for kind in run_requests.DATA:
        sizes = {k: run_requests.defaults(kind)[k] for k in SIZES}
        spec, _ = request(data=kind, text="to be or not to be\n" * 2000 if kind == "text" else "", **sizes)
        assert run_requests.training_bytes(spec, 4096) <= run_requests.MAX_TRAINING_BYTES


def test_a_windows_text_trains_as_its_lines():
    _, text = request(data="text", tokenizer="names", text="anna\r\nbob\r\n" * 5)
    assert text == "anna\nbob\n" * 5
    _, text = request(data="text", text="to be\r\nor not\r\n" * 20)
    assert "\r" not in text


def run_folder_with(root: Path, name: str, events: list[str], finished=False, checkpoint=False) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    spec, _ = request(name=name)
    spec.save(folder)
    for event in events:
        run_folder.write_event(folder, event, step=0, max_steps=100)
    if checkpoint:
        (folder / "checkpoint-50").mkdir()
        (folder / "checkpoint-50" / "trainer_state.json").write_text("{}")
    if finished:
        (folder / "training_args.json").write_text("{}")
    return folder


def test_a_run_cancelled_before_training_says_the_step_it_keeps(tmp_path):
    """Cancel lands before the Trainer's first step (a loaded machine): a resumed run stands at the checkpoint it was
    to continue from, which stays; a new run has nothing. A checkpoint not written to the end does not count."""
    from minigpt.demo.training.training_process import write_cancelled

    resumed = run_folder_with(tmp_path, "resumed", ["launch", "start", "stopped", "launch"], checkpoint=True)
    (resumed / "checkpoint-80").mkdir()  # its trainer_state.json never written: not resumable
    new = run_folder_with(tmp_path, "new", ["launch"])
    for folder in (resumed, new):
        write_cancelled(folder)
    last = {folder.name: run_folder.read_events(folder)[-1] for folder in (resumed, new)}
    assert last["resumed"]["event"] == "stopped" and last["resumed"]["step"] == 50
    assert "checkpoint of step 50 is kept" in last["resumed"]["message"] and run_folder.has_checkpoint(resumed)
    assert last["new"]["event"] == "stopped" and last["new"]["step"] == 0
    assert "nothing to keep" in last["new"]["message"]


def test_a_restarted_server_says_interrupted_runs_stopped_and_frees_what_nobody_can_use(tmp_path):
    """A server that died leaves runs queued or running: the next one says them stopped (their owner may resume).
    A finished run loses its checkpoints; a run with nothing to resume goes after an hour, a stopped one after a
    week; one younger stays."""
    import os
    import time

    interrupted = run_folder_with(tmp_path, "interrupted", ["launch", "start"], checkpoint=True)
    finished = run_folder_with(tmp_path, "finished", ["launch", "start", "finished"], finished=True, checkpoint=True)
    failed_early = run_folder_with(tmp_path, "failed-early", ["launch", "error"])
    fresh_failure = run_folder_with(tmp_path, "fresh-failure", ["launch", "error"])
    forgotten = run_folder_with(tmp_path, "forgotten", ["launch", "start", "stopped"], checkpoint=True)
    for folder, age in ((failed_early, training_runs.UNUSABLE_KEPT_S), (forgotten, training_runs.STOPPED_KEPT_S)):
        then = time.time() - age - 60
        os.utime(folder / "progress.jsonl", (then, then))

    runs = training_runs.RunQueue(tmp_path)
    progress = run_folder.progress_of(run_folder.read_events(interrupted))
    assert progress.state == "stopped" and "server restarted" in progress.message
    assert interrupted.is_dir() and (interrupted / "checkpoint-50").is_dir()
    assert finished.is_dir() and not any(finished.glob("checkpoint-*"))
    assert runs.finished() == [("finished", finished)]
    assert not failed_early.exists() and not forgotten.exists() and fresh_failure.is_dir()


def test_a_run_that_starts_slowly_holds_up_no_one_and_a_cancel_meanwhile_stops_it(tmp_path, monkeypatch):
    """The first run's start waits for the fork server to import the training code (seconds; minutes on a busy
    machine). The queue's lock stays free meanwhile: the server's event loop takes it when a progress stream opens
    (RunQueue.watching), and the whole server waited while a run started. A cancel meanwhile stops the run's process
    as soon as it has one."""
    import threading
    import time

    from helpers import HANG_S

    starting, go_on, terminated = threading.Event(), threading.Event(), threading.Event()

    class Process:  # a started run's process, ending when terminated
        exitcode = -15

        def terminate(self):
            terminated.set()

        def kill(self):
            pass

        def join(self):
            terminated.wait()

    def start(run):
        starting.set()
        go_on.wait()
        return Process()

    monkeypatch.setattr(training_runs, "CANCEL_GRACE_SECONDS", 0)
    runs = training_runs.RunQueue(tmp_path)
    monkeypatch.setattr(runs, "start", start)
    run = runs.submit(*request(name="slow"), owner="me")
    assert starting.wait(HANG_S)
    assert runs.changed.acquire(blocking=False), "the queue's lock is held while a run starts"
    runs.changed.release()
    with runs.watching(run):
        assert runs.progress(run).state == "running"
    assert runs.cancel("slow", owner="me") == "Cancelling 'slow': it stops at its next step and keeps a checkpoint."
    assert not terminated.is_set()
    go_on.set()
    assert terminated.wait(HANG_S)  # stopped once it had its process
    deadline = time.monotonic() + HANG_S
    while run.state != "done":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    progress = runs.progress(run)
    assert progress.state == "stopped" and "exit code -15" in progress.message


SERVER_THAT_DIES = """
import os, sys, time
from pathlib import Path
from minigpt.demo.training import run_folder, run_requests, training_runs
spec, text = run_requests.check_request(
    data="names", text="", tokenizer=None, name="orphan", n_layer=1, n_head=2, n_embd=16, block_size=16,
    max_steps=20_000, learning_rate=1e-3, seed=0, vocab_size=512, taken=set(),
)
run = training_runs.RunQueue(Path(sys.argv[1])).submit(spec, text, owner=None)
while run_folder.progress_of(run_folder.read_events(run.folder)).step < 5:  # training, not only started
    time.sleep(0.1)
os._exit(0)  # the server dies without a word: no cancel, no shutdown
"""


def test_a_run_whose_server_dies_stops_with_a_checkpoint(tmp_path):
    """The run's process is forked by a fork server that ends with the server: the run sees its parent go and stops
    at its next step with a checkpoint, instead of training on for nobody."""
    import subprocess
    import sys
    import time

    from helpers import REPO

    subprocess.run([sys.executable, "-c", SERVER_THAT_DIES, str(tmp_path)], cwd=REPO, check=True, timeout=120)
    folder, deadline = tmp_path / "orphan", time.monotonic() + 60
    while not (progress := run_folder.progress_of(run_folder.read_events(folder))).done:
        assert time.monotonic() < deadline, "the orphaned run is still training"
        time.sleep(0.2)
    assert progress.state == "stopped" and "the server stopped" in progress.message
    assert (folder / f"checkpoint-{progress.step}" / "trainer_state.json").is_file()
