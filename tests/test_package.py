"""What `pip install .` installs, read from the wheel pip builds of this tree: the minigpt package with its views'
.js and .css and the shipped models, the two model files, nothing else at the top of site-packages, and the two
commands, which name functions that exist. (The install itself, in a fresh venv, is checked by hand: see
docs/testing.md.)"""

import configparser
import importlib
import subprocess
import sys
import zipfile

from helpers import REPO


def test_the_wheel_holds_the_package_its_data_and_two_commands(tmp_path):
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path)]
    done = subprocess.run([*build, str(REPO)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = zipfile.ZipFile(next(tmp_path.glob("minigpt-*.whl")))
    names = set(wheel.namelist())
    top = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top == {"minigpt", "modeling_minigpt.py", "configuration_minigpt.py"}, top
    views = {name.removeprefix("minigpt/demo/") for name in names if name.endswith((".js", ".css"))}
    assert {"maps/head.js", "maps/view.css", "lesson/view.js", "lesson/steps_view.css", "head_finder/view.js"} <= views
    for model in ("names", "shakespeare", "induction", "specimen"):
        for file in ("model.safetensors", "config.json", "tokenizer.json", "modeling_minigpt.py"):
            assert f"minigpt/models/{model}/{file}" in names, (model, file)
    info = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
    entry_points = configparser.ConfigParser()
    entry_points.read_string(wheel.read(info).decode())
    commands = dict(entry_points["console_scripts"])
    assert commands == {"minigpt-demo": "minigpt.demo.app:command", "minigpt-train": "minigpt.training:cli"}
    for target in commands.values():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function))
    metadata = wheel.read(info.replace("entry_points.txt", "METADATA")).decode()
    assert "Requires-Dist: torch" in metadata and "Requires-Dist: gradio" in metadata  # the dependencies go along


def test_the_readmes_notebook_example_runs_on_a_shipped_model():
    """The README's "instruments in a notebook" block, as written, on the shipped names model (the block loads
    runs/names, what `minigpt-train --preset names` writes): the recorded weights come out, the ablation runs."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("without the demo (torch and transformers only):\n\n```python\n", 1)[1].split("```", 1)[0]
    shipped = str(REPO / "minigpt" / "models" / "names")
    script = block.replace('"runs/names"', repr(shipped)).replace("    ...", "    model(torch.tensor([ids]))")
    script = "import torch\n" + script + "\nprint(tuple(recorded.attentions.shape))\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "(4, 4, 5, 5)"  # layers, heads, and '.emma' + the end token
