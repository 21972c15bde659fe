"""The Head Finder's numbers: every head's metrics over a corpus, kept on disk per model (dropped when its weights
change), and one head's dashboard (its metrics against chance, its distance histogram, the corpus windows where it
does its role most, with the model's weights on each). No Gradio here: plain JSON out.
"""

import hashlib
import json
import logging
import shutil
import threading
import weakref
from collections import OrderedDict
from pathlib import Path

import torch

from minigpt.data import write_atomically
from minigpt.demo.core.attention_maps import token_labels
from minigpt.demo.core.cores import CoreShare, pass_work
from minigpt.demo.core.models import LanguageModel
from minigpt.demo.core.pass_cache import ForwardPassCache
from minigpt.demo.core.work_budgets import ablation_windows
from minigpt.demo.head_finder.corpus import Corpus
from minigpt.heads.metrics import METRICS, ROLES, measure
from minigpt.heads.role_scores import ROLE_PROBES, above_chance, induction_probe, induction_scores

logger = logging.getLogger(__name__)

KEPT_PER_MODEL = 16  # corpora whose numbers a model's folder keeps (the latest): visitors' texts cannot fill a disk
CACHE_VERSION = 3  # bump when the metrics change meaning: older files are then recomputed
SNIPPET_BEFORE = 24  # tokens shown before an example's query (and a few around its most-weighted key, if earlier)


def weights_fingerprint(model) -> str:
    """A fingerprint of every parameter's and buffer's name and bytes: changes whenever a weight does."""
    digest = hashlib.sha1()
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


class MetricsStore:
    """Head metrics per (model, corpus) on disk, in one folder per model (its KEPT_PER_MODEL latest corpora): a folder
    whose files were measured with other weights is emptied on the next look. One measure runs at a time; concurrent
    requests for the same metrics compute them once."""

    def __init__(self, folder: Path, cores: CoreShare | None = None):
        self.folder = Path(folder)
        self.cores = cores or CoreShare(cores=1)  # the server's: a lone measure gets every core
        self.fingerprints: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its weights' fingerprint
        self.corpora: OrderedDict[str, Corpus] = OrderedDict()  # model name -> its default corpus, the latest few
        self.lock = threading.Lock()
        # One measure at a time on the server (each takes the CPU for seconds, a big model's for a minute or two);
        # others wait their turn, and a second request for the same numbers reads the first one's file.
        self.measuring = threading.Lock()
        self.computed = 0  # measures run, for tests

    def fingerprint(self, model) -> str:
        with self.lock:
            if model not in self.fingerprints:
                self.fingerprints[model] = weights_fingerprint(model)
            return self.fingerprints[model]

    def default_corpus(self, name: str, build) -> Corpus:
        """The model's default corpus, built once (`build()`) while it stays among the latest eight asked for."""
        with self.lock:
            if name in self.corpora:
                self.corpora.move_to_end(name)
                return self.corpora[name]
        corpus = build()
        with self.lock:
            self.corpora[name] = corpus
            while len(self.corpora) > 8:
                self.corpora.popitem(last=False)
        return corpus

    def model_folder(self, lm: LanguageModel, source: str) -> Path:
        return self.folder / hashlib.sha1(f"{lm.name}|{source}".encode()).hexdigest()[:16]

    def measured(self, lm: LanguageModel, source: str, corpus: Corpus, progress=lambda fraction: None) -> dict:
        """The metrics of `lm` over `corpus`: read from disk when measured before with these weights, else measured
        (and saved atomically). The answer says which (`cached`)."""
        weights = self.fingerprint(lm.model)
        folder = self.model_folder(lm, source)
        path = folder / f"{corpus.key}-v{CACHE_VERSION}.json"
        saved = self.read(path)
        if saved is not None and saved["weights"] == weights:
            return {**saved, "cached": True}
        with self.measuring:
            saved = self.read(path)  # measured by the request this one waited for?
            if saved is not None and saved["weights"] == weights:
                return {**saved, "cached": True}
            if saved is not None or self.stale(folder, weights):
                shutil.rmtree(folder, ignore_errors=True)  # measured with other weights: none of it holds
            with self.cores.threads_for(pass_work(lm.model.config, corpus.tokens)):
                ablated = ablation_windows(lm.model, corpus.windows)  # the server's bound on the ablation's work
                result = {"weights": weights, **measure(lm.model, corpus.windows, progress, ablated)}
            self.computed += 1
            write_atomically(path, json.dumps(result))
            write_atomically(folder / "weights", weights)
            self.prune(folder)
        return {**result, "cached": False}

    @staticmethod
    def prune(folder: Path) -> None:
        """Keeps the KEPT_PER_MODEL latest corpora's numbers of a model."""
        measured = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in measured[KEPT_PER_MODEL:]:
            old.unlink(missing_ok=True)

    @staticmethod
    def stale(folder: Path, weights: str) -> bool:
        marker = folder / "weights"
        return marker.is_file() and marker.read_text().strip() != weights

    @staticmethod
    def read(path: Path) -> dict | None:
        try:
            return json.loads(path.read_text()) if path.is_file() else None
        except (OSError, ValueError):  # half a file from a killed process cannot be (writes are atomic), but a disk
            logger.warning("Unreadable head metrics %s: measuring again", path, exc_info=True)
            return None


def normalised(value: float, chance: float) -> float:
    """How far from chance towards a perfect 1 a role's score is: 0 at chance, 1 when the head does only that."""
    return (value - chance) / (1 - chance) if chance < 1 else 0.0


def head_rows(result: dict) -> list[dict]:
    """One row per head: its layer, head, every metric and its strongest role (None when no role is at least halfway
    from chance to 1)."""
    metrics, chance = result["metrics"], result["chance"]
    rows = []
    for layer, heads in enumerate(metrics["self"]):
        for head in range(len(heads)):
            values = {name: metrics[name][layer][head] for name in METRICS}
            role = strongest_role(values, chance)
            rows.append({"layer": layer, "head": head, **values, "role": role if above(values, chance, role) else None})
    return rows


def strongest_role(values: dict, chance: dict) -> str:
    """The role this head does most, measured from chance (a NaN induction score, no repeated token: never)."""
    scored = [(normalised(values[r], chance[r]), r) for r in ROLES if values[r] == values[r]]
    return max(scored)[1]


def above(values: dict, chance: dict, role: str) -> bool:
    return above_chance(values[role], chance[role])


def clear_roles(values: dict, chance: dict) -> list[str]:
    """Every role the head does clearly (a head can hold two: a sink that copies when something repeats)."""
    return [r for r in ROLES if values[r] == values[r] and above(values, chance, r)]


PROBE_TOKENS = 257  # the induction probe's length at most: the start token and two copies of 128 random tokens


def probe_inductions(lm: LanguageModel) -> dict:
    """Every head's induction score on the Head roles view's probe (random tokens written twice, as lesson step 11 and
    training's roles log measure it): (L, H) as lists, and the probe's chance level."""
    special = set(lm.tokenizer.all_special_ids)
    vocabulary = [i for i in range(len(lm.tokenizer)) if i not in special]
    probes = induction_probe(vocabulary, lm.boundary_id, min(lm.block_size, PROBE_TOKENS), ROLE_PROBES)
    scores = induction_scores(lm.model, probes)
    return {"induction": scores["induction"].tolist(), "chance": scores["induction_chance"]}


def probe_induction(lm: LanguageModel, layer: int, head: int) -> dict:
    """One head's induction score on the probe, beside the corpus's: a corpus of prose has few repeats to copy."""
    found = probe_inductions(lm)
    return {"induction": found["induction"][layer][head], "chance": found["chance"]}


def snippet(lm: LanguageModel, passes: ForwardPassCache, window: list[int], query: int, layer: int, head: int) -> dict:
    """One example: the window's tokens up to `query` (its last SNIPPET_BEFORE, and a few around the most-weighted
    key when it lies earlier), each with the head's weight from `query`, read from the model's recorded pass over the
    window up to the query (a query's weights depend on the tokens up to it only)."""
    ids = window[: query + 1]
    weights = passes.get(lm.model, ids).attentions[layer, head, query].tolist()
    tokens = token_labels(lm.tokenizer, ids)
    top = max(range(len(weights)), key=weights.__getitem__)
    shown = set(range(max(0, query - SNIPPET_BEFORE), query + 1)) | set(range(max(0, top - 3), min(query, top + 4)))
    if weights[0] > 0.2:
        shown.add(0)  # the sink, when it holds a good part of the weight
    segments, previous = [], None
    for position in sorted(shown):
        if previous is None or position != previous + 1:
            segments.append([])
        segments[-1].append({"position": position, "token": tokens[position], "weight": weights[position]})
        previous = position
    return {"query": query, "top_key": top, "segments": segments}


def dashboard(result: dict, corpus: Corpus, lm: LanguageModel, passes: ForwardPassCache, layer: int, head: int) -> dict:
    """One head: its metrics beside their chance levels and their rank among the heads, its distance histogram, its
    strongest role and the corpus windows where it does that most."""
    rows = head_rows(result)
    mine = next(row for row in rows if row["layer"] == layer and row["head"] == head)
    rank = {
        name: 1 + sum(row[name] > mine[name] for row in rows if row[name] == row[name])
        if mine[name] == mine[name]
        else None
        for name in METRICS
    }
    role = strongest_role(mine, result["chance"])
    values, windows, queries = (
        torch.tensor(part, device="cpu")[layer, head].tolist() for part in result["examples"][role]
    )
    examples = [
        {**snippet(lm, passes, corpus.windows[w], q, layer, head), "window": w, "strength": v}
        for v, w, q in zip(values, windows, queries)
        if v > float("-inf")
    ]
    return {
        "layer": layer,
        "head": head,
        "metrics": {name: mine[name] for name in METRICS},
        "chance": result["chance"],
        "rank": rank,
        "heads": len(rows),
        "role": role,
        "role_is_clear": mine["role"] is not None,
        "roles": clear_roles(mine, result["chance"]),
        "probe": probe_induction(lm, layer, head),
        "distance_edges": result["distance_edges"],
        "distance_histogram": result["distance_histogram"][layer][head],
        "distance_chance": result["distance_chance"],
        "examples": examples,
    }
