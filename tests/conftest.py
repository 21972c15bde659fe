"""Shared test set-up: offline, quiet, deterministic, the repo importable from every test, and the fixtures more than
one module uses. The helpers they are built from (and that tests and benchmarks import) are in helpers.py."""

import inspect
import os
import random
import sys
from pathlib import Path

import pytest

from helpers import (
    LONG_CONTEXT,
    LOWERCASE,
    REPO,
    SPECIMEN,
    build_fixture_models,
    char_tokenizer,
    gradio_client,
    needs_chromium,
    printable_tokenizer,
    running_app,
    save_fixture_model,
    save_gpt2,
    stop_chromium,
    training_app,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Inductor's compiled kernels kept between runs (its default, /tmp/torchinductor_<user>, is empty on a fresh CI
# machine): a compile found there takes ~1 s instead of 2-25 s (test_flex, test_train's --torch_compile). In the
# user's cache folder, so that a fresh clone on the same machine finds it; a TORCHINDUCTOR_CACHE_DIR set wins.
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minigpt-tests"
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(CACHE / "torchinductor"))

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# pytest-xdist runs the tests in a worker process per core: each worker's own computations take one thread, so that
# two workers do not fight over two cores (a team of threads that waits for a busy core spins). Subprocesses (the
# servers, train.py) keep their defaults; a test that sets threads (CoreShare) sets them against this.
if os.environ.get("PYTEST_XDIST_WORKER"):
    import torch

    torch.set_num_threads(1)


# The groups that take longest go first: pytest-xdist hands out whole groups (--dist loadgroup) in collection order
# (--no-loadscope-reorder: by default it orders them by their number of tests), so that the short ones fill in around
# them instead of one long group running alone at the end. By each group's seconds in one run (pytest --durations=0,
# summed by group; docs/testing.md has the figures): SHARED's names, or a module's for its tests outside them.
LONGEST_FIRST = (
    "fixture-server",
    "inductor",  # test_flex and test_train's compile: second, for a first run (5 to 10 times as long, cache empty)
    "training-server",
    "test_train.py",  # its tests that do not compile
    "test_lesson.py",
    "broken-server",
    "test_selection_browser.py",
    "test_links.py",
    "test_head_finder.py",
    "test_training_runs.py",
    "bounded-server",
    "test_robustness.py",  # its tests in process, and app.py run to its end
    "test_specimens.py",
    "test_crowd.py",  # its tests in process
    "test_save_load.py",
    "test_lines.py",
    "test_house.py",
    "test_selection.py",
    "test_circuits_api.py",
    "test_interop.py",
    "test_app_api.py",  # its tests in process, and plain app.py's server
)


# Modules that share something costly (a session-scoped server, a process's first compile) run on one worker
# (pytest-xdist's loadgroup), so that it is paid once; every other module is a group of its own, as --dist loadfile
# had it (its module-scoped fixtures made once).
SHARED = {
    "fixture-server": (  # `server`: the fixture models, tiny-dropout and tiny-gpt2, no other flag
        "test_app_api.py",
        "test_head_insights_api.py",
        "test_app_browser.py",
        "test_head_insights_browser.py",
        "test_app_batching.py",
        "test_app_steps.py",
        "test_attention_scale.py",
        "test_attention_why.py",
        "test_circuit_walk_browser.py",
        "test_exercises.py",
        "test_hostile_routes.py",
    ),
    "broken-server": ("test_error_rule.py", "test_robustness.py"),  # `broken_server`: two broken model folders
    "training-server": ("test_app_train.py", "test_app_train_browser.py", "test_crowd.py"),  # `training_server`
    # Not a server: inductor's first compile in a process (its CPU checks, built on a fresh machine) costs ~10 s;
    # the modules that compile pay it once, in one process.
    "inductor": ("test_flex.py", "test_train.py"),
    "bounded-server": ("test_crowd.py", "test_app_batching.py"),  # `bounded_server`: the fresh sessions' test first
}
# What a test of a SHARED module must use to run in that group; a module's tests that use none of its groups' (in
# process, or a server of their own) are a group of their own, which the other worker may take meanwhile.
USES_THE_SHARED = {
    "fixture-server": lambda item: "server" in item.fixturenames,
    "broken-server": lambda item: "broken_server" in item.fixturenames,
    "training-server": lambda item: "training_server" in item.fixturenames,
    "inductor": lambda item: item.path.name == "test_flex.py" or "torch_compile" in item.name,
    "bounded-server": lambda item: "bounded_server" in item.fixturenames,
}


def group_of(item) -> str:
    """The item's pytest-xdist group: the first SHARED group of its module whose shared thing it uses, else its
    module (a module may be in more than one: test_crowd's tests use the training server or the bounded one)."""
    module = item.path.name
    uses = (group for group, modules in SHARED.items() if module in modules and USES_THE_SHARED[group](item))
    return next(uses, module)


# Marks (registered in pyproject.toml), so that a part of the suite can be run alone (docs/testing.md): `browser`,
# `server` and `slow` found from what a test uses (its fixtures, and the names its code and the functions it calls
# use), `training` and `slow` also by module.
TRAINING = (  # they train a model: train.py, the Train tab's runs, the training server
    "test_train.py",
    "test_training_runs.py",
    "test_app_train.py",
    "test_app_train_browser.py",
    "test_crowd.py",
    "test_specimens.py",
)
SLOW = (*TRAINING, "test_flex.py", "test_interop.py", "test_package.py")  # compiles, the docs scripts, pip's builds
SERVER_FIXTURES = {
    "server",
    "broken_server",
    "training_server",
    "bounded_server",
}  # conftest's (a module's own uses one)
STARTS_A_SERVER = {"running_app", "training_app"}  # a test that starts app.py itself names one of these


def names_used(function, depth: int = 2) -> set[str]:
    """The global names a function's code uses (its nested functions' included), and those of the functions it calls
    by such a name (its module's, those it imported from helpers), `depth` calls deep."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None:
        return set()
    codes, names = [code], set()
    while codes:
        code = codes.pop()
        names |= set(code.co_names)
        codes += [const for const in code.co_consts if inspect.iscode(const)]
    called = [function.__globals__.get(name) for name in names] if depth else []
    return names.union(*(names_used(f, depth - 1) for f in called if inspect.isfunction(f)))


def marks_of(item) -> list[str]:
    marks = []
    names = names_used(item.function) if hasattr(item, "function") else set()
    if "chromium_page" in names or needs_chromium.mark in item.iter_markers():  # it drives Chromium
        marks.append("browser")
    if SERVER_FIXTURES & set(item.fixturenames) or STARTS_A_SERVER & names:
        marks.append("server")
    if item.path.name in TRAINING:
        marks.append("training")
    if item.path.name in SLOW or "executable" in names:  # sys.executable: a Python of its own imports torch and more
        marks.append("slow")
    return marks


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups off the marks
def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def place(item) -> tuple[int, int]:
        """Its group's rank, then its module's place in the group (the sort is stable: a module's tests keep their
        order)."""
        group = group_of(item)
        return rank.get(group, len(rank)), SHARED.get(group, (item.path.name,)).index(item.path.name)

    items.sort(key=place)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))
        for mark in marks_of(item):
            item.add_marker(mark)


@pytest.fixture(scope="session", autouse=True)
def chromium_closed_at_the_end():
    """The Chromium the browser tests of this process share (helpers.chromium_page) is closed when the run ends."""
    yield
    stop_chromium()


# ---- the app on the fixture models: one server for the whole run -------------------------------------------------
# Every module that wants app.py on the fixture models with no other flag and no environment of its own shares
# `server` (the modules of SHARED["fixture-server"], and any other that asks for it). A module that needs other flags
# or environment starts its own server in a fixture of its own (test_robustness, test_error_rule, test_app_train, ...):
# named `server` too where its tests are written against that name, it overrides this one in that module. The shared
# server's log holds what every module caused: a test reads its own part from a mark taken at its start
# (helpers.server_log).


@pytest.fixture(scope="module")
def specimen():
    """The shipped specimen and a function from a text to its ids (the start token first), as the circuits' tests
    read it; a module that wants the model alone defines its own `specimen`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(SPECIMEN).eval()
    tokenizer = AutoTokenizer.from_pretrained(SPECIMEN)
    return model, lambda text: [tokenizer.bos_token_id, *tokenizer.encode(text, add_special_tokens=False)]


@pytest.fixture(scope="session")
def fixture_models(tmp_path_factory):
    """tiny-names and tiny-text (helpers.build_fixture_models), built once; nothing writes into their folders."""
    return build_fixture_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def dropout_model(tmp_path_factory):
    """tiny-dropout: a names model with attention dropout p = 0.5 (the other fixture models have none)."""
    folder = tmp_path_factory.mktemp("models") / "tiny-dropout"
    return save_fixture_model(folder, char_tokenizer(LOWERCASE, "."), seed=2, name="names", attention_dropout=0.5)


@pytest.fixture(scope="session")
def long_model(tmp_path_factory):
    """tiny-gpt2: a GPT2LMHeadModel of LONG_CONTEXT positions, converted with from_gpt2 when the app loads it."""
    folder = tmp_path_factory.mktemp("models") / "tiny-gpt2"
    return save_gpt2(folder, printable_tokenizer(), n_positions=LONG_CONTEXT, n_embd=32, n_layer=2, n_head=2)


@pytest.fixture(scope="session")
def server(fixture_models, dropout_model, long_model):
    """app.py serving tiny-names, tiny-text, tiny-dropout and tiny-gpt2, no other flag, the environment as it is;
    yields (url, process)."""
    names, text = fixture_models
    models = ("--model", str(dropout_model), "--model", str(long_model))
    with running_app("--names-model", str(names), "--text-model", str(text), *models) as running:
        yield running


@pytest.fixture(scope="session")
def broken_models(fixture_models, tmp_path_factory):
    """The fixture models and two folders a host may break: `broken-weights` (its config.json and tokenizer good, its
    weights garbage) and `broken` (its config.json cut short)."""
    names, text = fixture_models
    root = tmp_path_factory.mktemp("broken-models")
    weights = save_fixture_model(root / "broken-weights", char_tokenizer(LOWERCASE, "."), seed=0, name="names")
    (weights / "model.safetensors").write_bytes(random.Random(0).randbytes(4096))
    config = root / "broken"
    config.mkdir()
    (config / "config.json").write_text('{"model_type": "minigpt", "n_la')
    return names, text, weights, config


@pytest.fixture(scope="session")
def broken_server(broken_models, tmp_path_factory):
    """app.py on the fixture models and both broken folders, its runs folder empty (no finished run of the repo joins
    the picker): test_error_rule's and test_robustness's server."""
    names, text, weights, config = broken_models
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MINIGPT_RUNS_DIR", str(tmp_path_factory.mktemp("runs")))
        args = ("--names-model", str(names), "--text-model", str(text), "--model", str(weights), "--model", str(config))
        with running_app(*args) as running:
            yield running


@pytest.fixture(scope="module")
def client(server):
    """A gradio_client Client of `server`: one per module, as each module had before the server was shared."""
    return gradio_client(server[0])


@pytest.fixture(scope="session")
def page_url(server):
    """The address of `server`, for the browser tests."""
    return server[0]


@pytest.fixture(scope="session")
def bounded_server(fixture_models, tmp_path_factory):
    """app.py with two rows, no waiting line and 20 sessions kept, on tiny-names and a wide text model (random weights,
    28M parameters: a decoding step takes long against a request's round trip): test_crowd's fresh sessions (first, on
    a server that has served nothing else) and test_app_batching's full batch; yields (url, process, the wide model's
    folder)."""
    wide = dict(name="shakespeare", block_size=128, n_layer=4, n_head=4, n_embd=768)
    text = save_fixture_model(tmp_path_factory.mktemp("models") / "wide-text", printable_tokenizer(), seed=1, **wide)
    bounds = ("--max-batch", "2", "--max-waiting", "0", "--sessions", "20")
    with running_app("--names-model", str(fixture_models[0]), "--text-model", str(text), *bounds) as (url, process):
        yield url, process, text


@pytest.fixture(scope="session")
def training_server(tmp_path_factory):
    """app.py on the fixture models with a runs folder of its own, shared by the modules that train through it (their
    runs have names of their own, and each test leaves no run queued or training); yields (url, process, runs
    folder)."""
    with training_app(tmp_path_factory.mktemp("train")) as server:
        yield server
