"""Shared timing for the benchmarks: alternate the contenders (A B A B ...) so that machine noise hits them alike."""

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

# The reference corpora the field's published small-GPT results use, beside the checkout (../shared/data/) where the
# project keeps them, and where anyone else gets them.
REFERENCE_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
REFERENCE_SOURCES = {
    "names.txt": "makemore's names.txt (github.com/karpathy/makemore, names.txt)",
    "tinyshakespeare.txt": "char-rnn's Tiny Shakespeare (github.com/karpathy/char-rnn, data/tinyshakespeare/input.txt)",
}


def reference_corpus(name: str, required: bool = True) -> Path | None:
    """The path of a reference corpus in ../shared/data/; when it is not there, a one-line exit naming where to get
    it (or None, when the benchmark can do without it)."""
    path = REFERENCE_DATA / name
    if path.exists():
        return path
    if required:
        sys.exit(f"{path} is missing: save {REFERENCE_SOURCES[name]} there.")
    return None


def machine_summary() -> str:
    """One line naming what the figures were measured on."""
    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, python {platform.python_version()}"
    )


def alternate(contenders: dict[str, Callable[[], object]], rounds: int, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds per call of each contender, measured in interleaved rounds after `warmup` untimed rounds."""
    seconds = {name: [] for name in contenders}
    for round_index in range(warmup + rounds):
        for name, run in contenders.items():
            start = time.perf_counter()
            run()
            elapsed = time.perf_counter() - start
            if round_index >= warmup:
                seconds[name].append(elapsed)
    return seconds


def summarise(samples: list[float], scale: float = 1.0) -> tuple[float, float, float]:
    """(min, median, max) of the samples, each multiplied by `scale` (e.g. 1000 for ms, or tokens / s via 1/x)."""
    values = [s * scale for s in samples]
    return min(values), statistics.median(values), max(values)


def print_table(header: list[str], rows: list[list[object]]) -> None:
    """A Markdown table, so that the output can be pasted into the README as is."""
    cells = [header] + [[f"{c:.3g}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print("\n".join(lines))
