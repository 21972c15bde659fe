"""A model's name as visitors write it: one spelling per snapshot (a step written otherwise, or of thousands of digits,
is refused with the real steps named, loading nothing), and export file names short and safe whatever the model's
name."""

import threading
from pathlib import Path

import pytest

from helpers import tiny_model
from minigpt.demo.core.models import ModelPicker
from minigpt.errors import VisitorError
from minigpt.heads.role_log import save_snapshot


@pytest.fixture(scope="module")
def snapshotted(tmp_path_factory):
    """A model folder (the fixture's tiny names model) with snapshots at steps 4 and 40."""
    from helpers import LOWERCASE, char_tokenizer, save_fixture_model

    folder = save_fixture_model(
        tmp_path_factory.mktemp("snap") / "snap", char_tokenizer(LOWERCASE, "."), seed=0, name="names"
    )
    model = tiny_model("sdpa", vocab_size=28, block_size=16, n_layer=4, n_head=4, n_embd=64)  # the names preset's
    for step in (4, 40):
        save_snapshot(folder, model, step)
    return folder


def test_each_snapshot_has_one_spelling_and_others_load_nothing(snapshotted):
    picker = ModelPicker({"snap": str(snapshotted)}, batching=dict(max_rows=4, max_waiting=4, min_decode_rows=1))
    assert picker.get("snap@4").name == "snap@4"
    loaded, threads = dict(picker.loaded), threading.active_count()
    spellings = [f"snap@{'0' * zeros}4" for zeros in range(1, 20)] + ["snap@+4", "snap@4.0", "snap@٤", "snap@ 4"]
    spellings += ["snap@" + "0" * 4400 + "4"]
    for name in spellings:
        with pytest.raises(VisitorError) as refused:
            picker.get(name)
        message = str(refused.value)
        assert "names no snapshot: its snapshots are snap@4, snap@40" in message and len(message) < 300, message
    assert picker.loaded == loaded and threading.active_count() == threads  # no model, no batching thread more


def test_a_step_of_thousands_of_digits_gets_a_message_not_pythons(snapshotted):
    picker = ModelPicker({"snap": str(snapshotted)}, batching=dict(max_rows=4, max_waiting=4, min_decode_rows=1))
    for step in ("9" * 5000, "123456789012345"):  # past int()'s 4,300 digits; past any run's length
        with pytest.raises(VisitorError, match="names no snapshot: its snapshots are snap@4, snap@40"):
            picker.get(f"snap@{step}")
    with pytest.raises(VisitorError, match="has no snapshot at step 5: its snapshots are snap@4, snap@40"):
        picker.get("snap@5")


def test_an_export_of_a_model_with_a_long_name_has_a_short_file_name(snapshotted, tmp_path, monkeypatch):
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.maps.ui import AttentionSection

    monkeypatch.setenv("MINIGPT_RUNS_DIR", str(tmp_path / "runs"))
    state = DemoState.configure(training=False)
    long_name = "m" * 250
    assert state.picker.register(long_name, str(snapshotted))
    exported = AttentionSection(state).attention_export("emma", long_name, "grid.png")
    name = Path(exported.path).name  # the file the visitor downloads, named after the model
    assert name.startswith("attention-mmmm") and name.endswith(".png") and len(name) < 100, name
