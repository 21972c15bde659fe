"""training_runs.py in process, without training: the limits, the progress read back from the events, the zip."""

import zipfile

import pytest

import data
from configuration_minigpt import PRESETS, TRAINING_PRESETS, MiniGPTConfig
from explorer import training_runs
from modeling_minigpt import MiniGPTForCausalLM

SIZES = dict(n_layer=2, n_head=2, n_embd=32, block_size=16, max_steps=100, learning_rate=1e-3, seed=0, vocab_size=512)


def request(**changes):
    return training_runs.check_request(
        **{"data": "names", "text": "", "tokenizer": None, "name": "", **SIZES, "taken": set(), **changes}
    )


def test_parameters_are_those_of_the_model_that_will_train():
    spec, _ = request(n_layer=3, n_embd=48, n_head=4)
    config = MiniGPTConfig.from_preset("names", n_layer=3, n_embd=48, n_head=4, block_size=16, vocab_size=28)
    assert spec.parameters == MiniGPTForCausalLM(config).num_parameters()


def test_the_largest_run_the_limit_proposes_fits_and_one_step_more_does_not():
    with pytest.raises(training_runs.RunError, match=r"use at most ([\d,]+) steps") as error:
        request(n_layer=8, n_head=8, n_embd=256, max_steps=20_000)
    fitting = int(error.value.args[0].split("use at most ")[1].split(" steps")[0].replace(",", ""))
    spec, _ = request(n_layer=8, n_head=8, n_embd=256, max_steps=fitting)
    assert spec.parameters * fitting * spec.batch_size * spec.block_size <= training_runs.MAX_WORK
    with pytest.raises(training_runs.RunError, match="too big"):
        request(n_layer=8, n_head=8, n_embd=256, max_steps=fitting + 1)


def test_visitor_names_and_texts_are_checked_and_kept():
    spec, text = request(data="text", tokenizer="names", text=" Anna\n\nbob \n" + "eve\n" * 8)
    assert spec.tokenizer == "names" and text == "Anna\nbob\n" + "eve\n" * 8  # one a line; upper case is fine
    spec, text = request(data="text", text="x" * 160)  # char by default; the last tenth holds one 16-token window
    assert spec.tokenizer == "char" and spec.preset == "shakespeare"
    with pytest.raises(training_runs.RunError, match="give at least 160 characters"):
        request(data="text", text="x" * 159)
    assert request(data="shakespeare")[0].tokenizer == "bpe"
    assert training_runs.NAME.fullmatch(request()[0].name)  # a name is picked when none is given


def test_the_induction_lab_trains_the_induction_preset_on_the_repeated_names(tmp_path):
    from explorer.training_process import train_arguments

    lab = training_runs.defaults("induction")
    spec, text = request(data="induction", **{k: lab[k] for k in SIZES}, name="lab")
    assert (spec.preset, spec.tokenizer, text) == ("induction", "names", "")
    argv = train_arguments(spec, tmp_path, resume=False)
    flag = lambda name: argv[argv.index(name) + 1]  # noqa: E731
    assert flag("--preset") == "induction" and flag("--dataset") == str(data.builtin_repeats())
    assert {k: int(flag("--" + k)) for k in ("n_layer", "n_head", "n_embd", "block_size", "max_steps")} == {
        k: {**PRESETS["induction"], **TRAINING_PRESETS["induction"]}[k]
        for k in ("n_layer", "n_head", "n_embd", "block_size", "max_steps")
    }
    with pytest.raises(training_runs.RunError, match="trains with the names tokenizer"):
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
    progress = training_runs.progress_of(events)
    assert progress.state == "running" and progress.step == 40 and progress.max_steps == 100
    assert progress.train == [(10, 3.0), (40, 2.4)] and progress.validation == [(20, 2.9)]
    assert progress.samples == ["ann", "bo"]
    assert progress.seconds_left == pytest.approx((62 - 60) / (40 - 20) * (100 - 40))
    finished = training_runs.progress_of(events + [dict(event="finished", step=100, message="done", time=70.0)])
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
        training_runs.write_event(folder, event, **fields)
    events = training_runs.read_events(folder)
    seconds_per_step = (events[1]["time"] - events[0]["time"]) / 50
    assert queue.pace() == pytest.approx(spec.work / spec.max_steps / seconds_per_step)
    assert spec.work == spec.parameters * spec.max_steps * spec.batch_size * spec.block_size
    assert training_runs.progress_of(events).vocab_size == 28


def test_the_loss_plot_draws_chance_at_ln_v_and_marks_a_resume():
    import math

    import plots

    history = [{"step": 10, "loss": 3.0}, {"step": 20, "eval_loss": 2.8}, {"step": 40, "loss": 2.5}]
    figure = plots.loss_figure(history, "run", vocab_size=28, resumed_at=[20])
    axes = figure.axes[0]
    chance = [line for line in axes.lines if line.get_label().startswith("chance")]
    assert len(chance) == 1 and list(chance[0].get_ydata()) == [math.log(28)] * 2
    resumed = [line for line in axes.lines if line.get_label() == "resumed"]
    assert len(resumed) == 1 and list(resumed[0].get_xdata()) == [20, 20]
    plots.plt.close(figure)


def test_the_zip_is_the_model_folder_without_the_run_files(tmp_path):
    folder = tmp_path / "my-model"
    (folder / "checkpoint-10").mkdir(parents=True)
    for name in ("model.safetensors", "config.json", "README.md", "spec.json", "progress.jsonl", "data.txt"):
        (folder / name).write_text(name)
    (tmp_path / "out").mkdir()
    with zipfile.ZipFile(training_runs.zip_model(folder, tmp_path / "out")) as archive:
        names = sorted(archive.namelist())
        assert names == ["my-model/README.md", "my-model/config.json", "my-model/model.safetensors"]
        assert archive.read("my-model/config.json") == b"config.json"


def test_downloads_and_exports_share_a_folder_whose_old_files_go(tmp_path, monkeypatch):
    """Each download's zip is written into the state's export folder; one older than EXPORT_KEPT_S is removed when
    the next export or download asks for a folder (it used to stay in a temporary folder for ever)."""
    import os
    import time

    from explorer import state as state_module
    from explorer.state import DemoState

    state = DemoState.configure(training=False)
    state.exports = tmp_path / "exports"
    state.exports.mkdir()
    first = state.export_folder()
    old = time.time() - state_module.EXPORT_KEPT_S - 1
    os.utime(first, (old, old))
    second = state.export_folder()
    assert not first.exists() and second.exists() and second.parent == state.exports
