"""The views' JavaScript and CSS, kept as real files beside the Python that uses them, in each section's folder."""

from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent  # minigpt/demo: a file is named by its section's folder and its name


def asset(name: str) -> str:
    """The text of one of the views' .js or .css files, named from minigpt/demo ("maps/head.js")."""
    return (DEMO / name).read_text(encoding="utf-8")
