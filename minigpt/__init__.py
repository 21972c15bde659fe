"""MiniGPT: a small, readable GPT as a `transformers` model, the instruments that show how its attention heads compute
(`minigpt.heads`), its training (`minigpt.training`, `minigpt.data`, `minigpt.tokenization`) and the demo
(`minigpt.demo`, the only part that imports Gradio).

The model itself is `modeling_minigpt` / `configuration_minigpt`, two top-level modules: what a Hub repo ships for
`trust_remote_code`. Submodules load when first used: `import minigpt` alone imports nothing heavy.
"""

import importlib

__version__ = "0.1.0"

SUBMODULES = ("heads", "data", "tokenization", "plots", "training", "lens", "errors", "demo")


def __getattr__(name: str):
    if name in SUBMODULES:
        return importlib.import_module(f"minigpt.{name}")
    raise AttributeError(f"module 'minigpt' has no attribute {name!r}")
