"""The demo's house rules (docs/architecture.md), checked: the API keeps its endpoints and parameters, gradio lives in
app.py and explorer/ui alone, the server does not load the Trainer, and the top level stays the textbook."""

import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Every named endpoint with its parameters (name, default, type), as Gradio describes them to clients; saved from the
# app before the demo moved into the explorer package (commit ffc0f55), so that a change of the API shows here.
SAVED_API = Path(__file__).resolve().parent / "data" / "api_description.json"


def api_description(demo) -> dict:
    named = demo.get_api_info()["named_endpoints"]
    return {
        name: [
            {
                "name": p["parameter_name"],
                "default": p.get("parameter_default"),
                "has_default": p["parameter_has_default"],
                "type": p.get("python_type", {}).get("type"),
            }
            for p in endpoint["parameters"]
        ]
        for name, endpoint in sorted(named.items())
    }


def test_every_endpoint_keeps_its_name_and_parameters(tmp_path, monkeypatch):
    from explorer.state import DemoState
    from explorer.ui.page import build_demo

    monkeypatch.setenv("MINIGPT_RUNS_DIR", str(tmp_path))  # no finished run of this checkout joins the picker
    demo = build_demo(DemoState.configure())
    assert api_description(demo) == json.loads(SAVED_API.read_text())


def python_files() -> list[Path]:
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    return [REPO / line for line in tracked.stdout.split() if not line.startswith(("tests/", "bench/", "models/"))]


def imports_of(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_gradio_is_imported_by_app_py_and_the_ui_part_only():
    files = python_files()
    assert any(path.parts[-2:] == ("ui", "page.py") for path in files)  # the scan sees the package
    importers = {str(path.relative_to(REPO)) for path in files if "gradio" in imports_of(path)}
    assert importers and all(name == "app.py" or name.startswith("explorer/ui/") for name in importers), importers


def test_the_server_does_not_load_the_trainer():
    """`import app` (the server) leaves transformers.trainer out: the training process alone imports it."""
    check = "import sys, app; print('transformers.trainer' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", check], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_top_level_is_the_textbook_and_modules_stay_short():
    top = sorted(path.name for path in REPO.glob("*.py"))
    assert len(top) <= 8, top
    assert len((REPO / "app.py").read_text().splitlines()) <= 200
    long = {str(p.relative_to(REPO)): n for p in python_files() if (n := len(p.read_text().splitlines())) > 600}
    assert set(long) <= {"modeling_minigpt.py"}, long
