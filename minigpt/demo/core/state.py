"""The demo's one state: what the server holds for every visitor (the models on offer, the recorded passes, the
training queue, the limits of batching and streaming, the export folder), made once from the command line and handed
to each section of the page. No Gradio here."""

import contextlib
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from minigpt.data import CACHE
from minigpt.demo.core.cores import CoreShare
from minigpt.demo.core.limits import BATCHING, STREAM
from minigpt.demo.core.models import ModelPicker, model_sources
from minigpt.demo.core.pass_cache import ForwardPassCache
from minigpt.demo.core.texts import TextView, read_text
from minigpt.demo.head_finder.measures import MetricsStore
from minigpt.demo.training.training_runs import RunQueue, runs_dir

# Generation samples from per-request generators; the step view's seeded dropout draws from torch's global generator
# (F.dropout takes none): seeded and drawn under this lock, so concurrent step views do not mix their draws. One for
# the process, as the generator is.
GLOBAL_RNG = threading.Lock()
# An export's or a download's file is copied into Gradio's cache as the request ends: ours can go soon after.
EXPORT_KEPT_S = 600
# One forward pass per (model, text) serves every view of it; 1 GiB holds one GPT-2-sized pass of 1,024 tokens.
PASS_CACHE_BYTES = int(os.environ.get("MINIGPT_PASS_CACHE_BYTES", 1 << 30))


@dataclass
class DemoState:
    picker: ModelPicker  # the models on offer, by name; each loads on first use
    names_default: str  # the model of the Names tab, and of a request that names none
    text_default: str  # the model of the Text tab
    stream: dict = field(default_factory=lambda: dict(STREAM))
    passes: ForwardPassCache = field(default_factory=lambda: ForwardPassCache(max_bytes=PASS_CACHE_BYTES))
    runs: RunQueue | None = None  # the Train tab's queue: one training at a time per server
    # Server functions (the enlarged maps' hover and zoom) bypass the queue and its concurrency limit: a pass they
    # find missing from the cache is computed at most two at a time.
    unqueued_passes: threading.BoundedSemaphore = field(default_factory=lambda: threading.BoundedSemaphore(2))
    rng_lock: threading.Lock = GLOBAL_RNG  # see GLOBAL_RNG
    # Exports and downloads; the page puts it inside Gradio's cache, whence a file is served without a second copy.
    exports: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "minigpt-exports")
    head_metrics: MetricsStore = field(default_factory=lambda: MetricsStore(CACHE / "head_metrics"))
    cores: CoreShare = field(init=False)  # a lone visitor's heavy pass or measure runs on every core

    def __post_init__(self):
        self.cores = CoreShare(busy=self.decoding)
        self.passes.cores = self.head_metrics.cores = self.cores

    def export_folder(self) -> Path:
        """A fresh folder for one export or download; those older than EXPORT_KEPT_S go (the disk stays bounded)."""
        self.exports.mkdir(parents=True, exist_ok=True)
        for old in self.exports.iterdir():
            with contextlib.suppress(FileNotFoundError):  # another request may have removed it meanwhile
                if time.time() - old.stat().st_mtime > EXPORT_KEPT_S:
                    shutil.rmtree(old, ignore_errors=True)
        return Path(tempfile.mkdtemp(dir=self.exports))

    def decoding(self) -> bool:
        """Whether any model's batch is decoding (on a thread of its own, which a heavy pass should leave its core)."""
        return any(lm.batcher.active_requests() for lm in list(self.picker.loaded.values()) if lm.batcher)

    @classmethod
    def configure(
        cls,
        extra: list[str] = (),
        names_model: str | None = None,
        text_model: str | None = None,
        batching: dict | None = None,
        stream: dict | None = None,
        training: bool = True,
        device: str = "cpu",
    ) -> "DemoState":
        """The state for the models named on the command line (beside the shipped ones), with the training queue
        (whose finished runs, of this server's earlier lives too, join the picker) unless `training` is False; every
        model on `device` (app.py's --device, resolved)."""
        sources, names_default, text_default = model_sources(list(extra), names_model, text_model)
        state = cls(
            ModelPicker(sources, {**BATCHING, **(batching or {})}, device),
            names_default,
            text_default,
            stream={**STREAM, **(stream or {})},
        )
        if training:
            state.runs = RunQueue(runs_dir(), on_finished=state.picker.register)
            for name, folder in state.runs.finished():
                state.picker.register(name, str(folder))
        return state

    def text_view(self, model: str | None, text: str | None) -> TextView:
        """`text` as the model named `model` (left out: the names default) reads it, with its recorded pass."""
        return read_text(self.picker.get(model or self.names_default), text or "", self.passes)
