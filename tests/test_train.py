"""train.py end to end, with tiny models and few steps: the loss goes down, the folder loads in a fresh process and
generates, a killed run resumes to the same validation loss, torchrun runs two processes, bad input exits with 2."""

import json
import signal
import subprocess
import sys
import time

import pytest
from conftest import REPO, SHARED_DATA
from test_save_load import assert_tokenizer_loads_silently

import train

TINY = ["--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--disable_tqdm", "true", "--samples", "3"]


@pytest.fixture(scope="module")
def names_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "names.txt"
    path.write_text("\n".join((SHARED_DATA / "names.txt").read_text().split()[:3000]) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "play.txt"
    path.write_text((SHARED_DATA / "tinyshakespeare.txt").read_text()[:40_000])
    return str(path)


def train_command(*args, launcher=()):
    return [sys.executable, *launcher, "train.py", *args]


def run_train(*args, launcher=()) -> subprocess.CompletedProcess:
    command = train_command(*args, launcher=launcher)
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


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
        cwd=folder.parent, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [eval(line) for line in done.stdout.splitlines()]


def assert_publishable(folder):
    for name in ("model.safetensors", "config.json", "modeling_minigpt.py", "configuration_minigpt.py",
                 "tokenizer.json", "loss_curve.png", "loss_log.csv", "log_history.json", "README.md"):  # fmt: skip
        assert (folder / name).is_file(), name
    assert json.loads((folder / "config.json").read_text())["auto_map"]["AutoModelForCausalLM"]
    card = (folder / "README.md").read_text()
    assert "final validation loss" in card and "AutoModelForCausalLM" in card and "## Samples" in card


def test_names_run_learns_and_writes_a_loadable_folder(tmp_path, names_file):
    out = tmp_path / "names_model"
    run_train("--preset", "names", "--dataset", names_file, "--output_dir", str(out), "--max_steps", "80",
              "--eval_steps", "20", "--save_steps", "80", *TINY)  # fmt: skip
    losses = eval_losses(out)
    assert losses[-1] < losses[0] - 0.2  # learnt something beyond letter frequencies
    assert_publishable(out)
    assert_tokenizer_loads_silently(out, tmp_path)
    names = load_and_generate(out, "em", 14)
    assert names[0].startswith("em") and all(n.isalpha() and n.islower() for n in names)


def test_bpe_text_run_writes_a_loadable_folder(tmp_path, text_file):
    out = tmp_path / "text_model"
    run_train("--preset", "shakespeare", "--dataset", text_file, "--tokenizer", "bpe", "--vocab_size", "400",
              "--block_size", "32", "--output_dir", str(out), "--max_steps", "60", "--eval_steps", "30",
              "--save_steps", "60", *TINY)  # fmt: skip
    losses = eval_losses(out)
    assert losses[-1] < losses[0]
    assert_publishable(out)
    assert json.loads((out / "tokenizer.json").read_text())["model"]["type"] == "BPE"
    assert_tokenizer_loads_silently(out, tmp_path)
    texts = load_and_generate(out, "ROMEO:", 20)
    assert texts[0].startswith("ROMEO:") and len(texts[0]) > len("ROMEO:")


def test_killed_run_resumes_to_the_same_validation_loss(tmp_path, names_file):
    args = ["--preset", "names", "--dataset", names_file, "--max_steps", "90", "--eval_steps", "30",
            "--save_steps", "30", "--dropout", "0.1", *TINY]  # fmt: skip
    run_train(*args, "--output_dir", str(tmp_path / "whole"))

    killed = tmp_path / "killed"
    process = subprocess.Popen(train_command(*args, "--output_dir", str(killed)), cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.time() + 120
    while not (killed / "checkpoint-60" / "trainer_state.json").exists() and process.poll() is None:
        assert time.time() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "model.safetensors").exists()  # it really died before the end
    resumed = run_train(*args, "--output_dir", str(killed), "--resume_from_checkpoint", "last")
    assert "missing keys" not in resumed.stderr  # the tied head is not reported missing

    assert eval_losses(killed)[-1] == pytest.approx(eval_losses(tmp_path / "whole")[-1], abs=1e-4)


def test_torchrun_two_processes_data_parallel_on_cpu(tmp_path, names_file):
    out = tmp_path / "ddp"
    run_train("--preset", "names", "--dataset", names_file, "--output_dir", str(out), "--max_steps", "30",
              "--eval_steps", "30", "--save_steps", "30", *TINY,
              launcher=("-m", "torch.distributed.run", "--nproc_per_node=2"))  # fmt: skip
    assert_publishable(out)
    assert "x 2 process(es)" in (out / "README.md").read_text()
    assert all(n.isalpha() for n in load_and_generate(out, "an", 10))


def test_bad_input_exits_2_with_a_message(tmp_path):
    done = subprocess.run(train_command("--dataset", str(tmp_path / "none.txt"), "--output_dir", str(tmp_path / "o")),
                          cwd=REPO, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert "does not exist" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dataset", "{tmp}/empty.txt"], "is empty"),
        (["--preset", "shakespeare", "--tokenizer", "char", "--dataset", "{tmp}/short.txt"], "shorter than one window"),
        (["--preset", "shakespeare", "--dataset", "{tmp}/docs.jsonl", "--text_column", "body2"], "no column 'body2'"),
        (["--n_embd", "30", "--n_head", "4", "--dataset", "{tmp}/names.txt"], "must be divisible by n_head"),
        (["--block_size", "0", "--dataset", "{tmp}/names.txt"], "block_size must be a positive integer"),
        (["--dataset", "{tmp}/docs.jsonl"], "no 'text' column"),
    ],
)
def test_each_bad_input_gets_its_message(tmp_path, monkeypatch, capsys, args, message):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "short.txt").write_text("Too short for a window.\n")
    (tmp_path / "docs.jsonl").write_text('{"body": "some text"}\n')
    (tmp_path / "names.txt").write_text("anna\nbob\n" * 20)
    argv = [a.format(tmp=tmp_path) for a in args] + ["--output_dir", str(tmp_path / "out"), "--max_steps", "1"]
    monkeypatch.setattr(sys, "argv", ["train.py", *argv])
    with pytest.raises(SystemExit) as exit_:
        train.cli()
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_resume_skips_a_checkpoint_that_a_kill_left_half_written(tmp_path):
    for step, complete in [(10, True), (20, True), (30, False)]:  # killed while saving step 30
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"")
        if complete:
            (folder / "trainer_state.json").write_text("{}")  # the Trainer writes it last
    assert train.last_complete_checkpoint(tmp_path) == str(tmp_path / "checkpoint-20")
    assert train.last_complete_checkpoint(tmp_path / "nothing") is None
