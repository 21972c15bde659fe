"""Audit 3's defects, each as a user meets it: one spelling per snapshot (a step written otherwise, or of thousands of
digits, is refused with the real steps named, loading nothing), export file names short and safe whatever the model's
name, and heads to ablate written in digits 0-9 only, through the API."""

import threading
from pathlib import Path

import pytest

from helpers import app_error, tiny_model
from minigpt.demo.models import ModelPicker
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
    from minigpt.demo.state import DemoState
    from minigpt.demo.ui.attention import AttentionSection

    monkeypatch.setenv("MINIGPT_RUNS_DIR", str(tmp_path / "runs"))
    state = DemoState.configure(training=False)
    long_name = "m" * 250
    assert state.picker.register(long_name, str(snapshotted))
    exported = AttentionSection(state).attention_export("emma", long_name, "grid.png")
    name = Path(exported.path).name  # the file the visitor downloads, named after the model
    assert name.startswith("attention-mmmm") and name.endswith(".png") and len(name) < 100, name


def test_heads_in_other_digits_are_refused_by_the_one_head_parser(client):
    assert "Cannot read the head '٣.٣'" in app_error(client, "/ablate", text="emma", heads="٣.٣")


@pytest.fixture(scope="module")
def fixture_lms(fixture_models):
    from minigpt.demo.models import load_language_model

    names, text = fixture_models
    batching = dict(max_rows=2, max_waiting=2)
    return load_language_model("tiny-names", str(names), batching), load_language_model(
        "tiny-text", str(text), batching
    )


def test_a_corpus_has_one_limit_and_only_its_measured_start_is_tokenized(fixture_lms, monkeypatch):
    """A million characters are accepted (the README's limit) and one more refused, with the same number; a text of
    940,000 characters or a names corpus of one such line is measured on its start, and of 190,000 names only those
    the token budget holds are tokenized."""
    from minigpt.demo import head_corpus

    names_lm, text_lm = fixture_lms
    limit = head_corpus.MAX_CORPUS_CHARS
    assert limit == 1_000_000
    with pytest.raises(VisitorError, match="at most 1,000,000 are accepted"):
        head_corpus.text_corpus(text_lm, "a" * (limit + 1))
    budget = head_corpus.token_budget(text_lm.model)
    corpus = head_corpus.text_corpus(text_lm, "to be or not to be " * 49_500)  # 940,500 characters
    assert corpus.tokens == budget and corpus.notes == [f"Measured on the first {budget:,} tokens of your text."]
    one_line = head_corpus.text_corpus(names_lm, "emma" * 235_000)  # a names corpus that is one long line
    assert len(one_line.windows) == 1 and one_line.tokens == names_lm.block_size

    encoded = []
    monkeypatch.setattr(head_corpus, "encode", lambda lm, text, what: encoded.append(text) or [1] * len(text))
    many = head_corpus.text_corpus(names_lm, "liam\n" * 190_000)  # 950,000 characters
    assert many.tokens == head_corpus.token_budget(names_lm.model)
    assert len(encoded) < 2 * many.tokens / 6  # each name is a window of 6 tokens: only about the budget's are read


def raw_call(url: str, endpoint: str, values: list) -> tuple[int, str]:
    """A REST call as curl makes it: POST the values, then read the event stream's answer."""
    import httpx

    posted = httpx.post(f"{url}gradio_api/call/{endpoint}", json={"data": values}, timeout=30)
    if posted.status_code != 200:
        return posted.status_code, posted.text
    with httpx.stream("GET", f"{url}gradio_api/call/{endpoint}/{posted.json()['event_id']}", timeout=60) as answer:
        return 200, "".join(answer.iter_text())


def test_a_raw_call_with_fewer_values_gets_the_declared_defaults_and_big_bodies_are_refused(server):
    """Clients written for older signatures (3 values to /next_tokens) and curl users who send only the first values
    get the defaults the API description declares; a body over the stated bound is refused before it is read."""
    from helpers import server_log

    url, process = server
    mark = len(server_log(process))
    status, answer = raw_call(url, "next_tokens", ["emma"])
    assert status == 200 and "event: complete" in answer and '"position": 4' in answer, answer[:500]
    status, answer = raw_call(url, "next_tokens", ["emma", None, 2])
    assert status == 200 and "event: complete" in answer and '"position": 2' in answer, answer[:500]

    import httpx

    big = httpx.post(f"{url}gradio_api/call/names", content=b"x" * (9 << 20), timeout=60)
    assert big.status_code == 413 and "at most 8,388,608 bytes" in big.text and "x" * 100 not in big.text
    assert "Traceback" not in server_log(process)[mark:]


# ---- 5: the Head Finder's work bound counts attention and ablation -----------------------------------------------


def test_a_model_with_costly_attention_is_measured_within_the_bound_on_fewer_tokens(tmp_path):
    """Audit 3's model (12 layers x 16 heads, width 32, context 256: few parameters, many attention cells) took 62.9 s
    under the parameter-count bound. Its corpus is now cut so that the estimated work, counted over every window's
    attention (L x H x T^2 cells) and the (L x H + 1) ablation passes, fits the two bounds."""
    from helpers import printable_tokenizer, save_fixture_model
    from minigpt.demo import head_corpus
    from minigpt.demo.models import load_language_model
    from minigpt.heads import metrics

    shape = dict(name="shakespeare", n_layer=12, n_head=16, n_embd=32, block_size=256)
    folder = save_fixture_model(tmp_path / "wide-attention", printable_tokenizer(), seed=0, **shape)
    lm = load_language_model("wide-attention", str(folder), dict(max_rows=2, max_waiting=2))
    head_corpus.check_measurable(lm)  # one window fits: measured, on fewer tokens
    corpus = head_corpus.text_corpus(lm, "to be or not to be, that is the question. " * 2_000)
    config, ablated = lm.model.config, metrics.ablation_windows(lm.model, corpus.windows)
    recording = sum(metrics.recording_work(config, len(w)) for w in corpus.windows) / metrics.WORK_PER_SECOND
    ablation = sum(metrics.ablation_work(config, len(w)) for w in ablated) / metrics.WORK_PER_SECOND
    assert recording <= metrics.RECORD_SECONDS and ablation <= metrics.ABLATION_SECONDS
    assert metrics.measure_seconds(config, corpus.windows, ablated) == pytest.approx(recording + ablation)
    # the costly part, the ablation, reads the first tokens only, and they fill most of its bound (not cut to nothing)
    assert sum(map(len, ablated)) < corpus.tokens and ablation > metrics.ABLATION_SECONDS / 2
    # a window's cells are counted: the same tokens in windows of the full context cost more than in short ones
    assert metrics.recording_work(config, 256) > 4 * metrics.recording_work(config, 64)


def test_a_model_too_big_to_measure_gets_its_estimate_before_any_corpus_is_read(monkeypatch):
    """GPT-2 XL's shape: one window of its context alone is over the bound. The refusal names the estimate, in well
    under a second (nothing is built: the shape is all it reads), and no corpus is made."""
    from types import SimpleNamespace

    from minigpt.demo import head_corpus
    from minigpt.demo.ui import head_finder
    from modeling_minigpt import MiniGPTConfig

    config = MiniGPTConfig(n_layer=48, n_head=25, n_embd=1600, block_size=1024, vocab_size=50257)
    lm = SimpleNamespace(name="gpt2-xl", model=SimpleNamespace(config=config))
    monkeypatch.setattr(head_finder, "text_corpus", lambda *a: pytest.fail("a corpus was built"))
    with pytest.raises(VisitorError, match=r"Measuring every head of gpt2-xl would take about [\d,]+ s") as refused:
        head_finder.HeadFinder(state=None).corpus_for(lm, "a text")
    assert f"at most {head_corpus.RECORD_SECONDS} s" in str(refused.value)
