"""The views' JavaScript and CSS, kept as real files beside the Python that uses them."""

from pathlib import Path

HERE = Path(__file__).resolve().parent


def asset(name: str) -> str:
    """The text of one of the views' .js or .css files."""
    return (HERE / name).read_text(encoding="utf-8")
