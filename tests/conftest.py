"""Shared test set-up: offline, quiet, deterministic, the repo importable from every test, and the fixtures more than
one module uses. The helpers they are built from (and that tests and benchmarks import) are in helpers.py."""

import os
import sys

import pytest
from helpers import REPO, build_fixture_models, running_app

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@pytest.fixture(scope="module")
def fixture_models(tmp_path_factory):
    """tiny-names and tiny-text (helpers.build_fixture_models)."""
    return build_fixture_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def server(fixture_models):
    """app.py serving the fixture models, with no other flag and the environment as it is; yields (url, process)."""
    names, text = fixture_models
    with running_app("--names-model", str(names), "--text-model", str(text)) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    """A gradio_client Client of `server`."""
    from gradio_client import Client

    return Client(server[0], verbose=False)


@pytest.fixture(scope="module")
def page_url(server):
    """The address of `server`, for the browser tests."""
    return server[0]
