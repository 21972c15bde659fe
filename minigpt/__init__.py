"""MiniGPT: a small, readable GPT as a `transformers` model, the instruments that show how its attention heads compute
(`minigpt.heads`), its training (`minigpt.training`, `minigpt.data`, `minigpt.tokenization`) and the demo
(`minigpt.demo`, the only part that imports Gradio).

The model itself is `modeling_minigpt` / `configuration_minigpt`, two top-level modules: what a Hub repo ships for
`trust_remote_code`. Submodules load when first used: `import minigpt` alone imports nothing heavy.
"""

import importlib
from pathlib import Path

__version__ = "0.1.0"

# The models shipped as package data: found from any working folder, in this clone or where `pip install .` put them
SHIPPED_MODELS = ("names", "shakespeare", "induction", "specimen")
SHIPPED_FOLDER = Path(__file__).resolve().parent / "models"

SUBMODULES = ("heads", "data", "tokenization", "plots", "training", "lens", "errors", "demo")


def __getattr__(name: str):
    if name in SUBMODULES:
        return importlib.import_module(f"minigpt.{name}")
    raise AttributeError(f"module 'minigpt' has no attribute {name!r}")


def model_folder(model: str) -> str:
    """Where to load `model` from: a shipped model's name (that is not also a folder here) gives its folder in the
    package; a folder or a Hub id is given back as it is."""
    shipped = SHIPPED_FOLDER / model
    return str(shipped) if model in SHIPPED_MODELS and not Path(model).is_dir() else model
