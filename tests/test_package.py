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
    views = {name.rsplit("/", 1)[-1] for name in names if name.startswith("minigpt/demo/views/")}
    assert {"head.js", "maps.css", "lesson.js", "steps.css", "head_finder.js"} <= views
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
