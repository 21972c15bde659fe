"""The models the demo offers: each a MiniGPT folder or Hub id (GPT-2 checkpoints converted), loaded once with sdpa,
with its tokenizer, its boundary token and its continuous batch. No Gradio here."""

import re
import threading
from dataclasses import dataclass
from pathlib import Path

from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

import minigpt
from minigpt.demo.core.serving import ContinuousBatcher
from minigpt.errors import VisitorError, shortened
from minigpt.heads.role_log import load_snapshot, snapshots_of
from minigpt.tokenization import missing_local_path
from modeling_minigpt import MiniGPTForCausalLM  # importing it registers MiniGPT with the Auto classes

# The shipped models: names and Shakespeare to generate from, and two specimens whose heads show the textbook circuit (a
# previous-token head in layer 0, an induction head in layer 1): the induction lab's model of letters, and Shakespeare's
# characters trained with repeated spans.
SHIPPED = {name: minigpt.SHIPPED_FOLDER / name for name in minigpt.SHIPPED_MODELS}  # package data


class ModelUnavailable(RuntimeError):
    """A model of the picker that cannot be loaded (a broken folder, no network for a Hub id): the host's problem,
    so its traceback goes to the log on every endpoint that asks for it."""


@dataclass
class LanguageModel:
    name: str  # as shown in the picker and accepted by the API
    model: MiniGPTForCausalLM
    tokenizer: object
    boundary_id: int  # the token every text starts from (bos, else eos) and names end with (eos)
    eos_id: int | None
    never_ids: list[int]  # tokens never to generate: the pad (only there to fill batches)
    batcher: ContinuousBatcher | None = None  # decodes this model's names and text requests as one batch

    @property
    def block_size(self) -> int:
        return self.model.config.block_size

    @property
    def vocab_size(self) -> int:
        return self.model.config.vocab_size

    @property
    def boundary(self) -> str:
        return self.tokenizer.convert_ids_to_tokens(self.boundary_id)


# A snapshot's step as the picker writes it: digits 0-9, no leading zero, no sign, at most 12 (no run trains longer).
# One spelling per snapshot, so that every cache (models, batching threads, passes, Head Finder folders) has one key.
CANONICAL_STEP = re.compile(r"0|[1-9][0-9]{0,11}")


def split_snapshot_name(name) -> tuple[str | None, int | None]:
    """ "names@120" -> ("names", 120); "names" -> ("names", None); anything else -> (None, None). Only the canonical
    spelling of a step is one ("names@0120" is not: ModelPicker.get refuses it, naming the real steps)."""
    if not isinstance(name, str):
        return None, None
    base, at, step = name.rpartition("@")
    if at and CANONICAL_STEP.fullmatch(step):
        return base, int(step)
    return name, None


def snapshot_choices(picker: "ModelPicker", name: str) -> list[tuple[str, str]]:
    """The steps a view of model `name` can show: each snapshot ("name@N"), then the final model."""
    base, _ = split_snapshot_name(name)
    if base not in picker.sources:
        return []
    steps = snapshots_of(Path(picker.sources[base]))
    return [(f"step {step}", f"{base}@{step}") for step in steps] + [("final", base)] if steps else []


def load_language_model(
    name: str, source: str, batching: dict, step: int | None = None, device: str = "cpu"
) -> LanguageModel:
    """A MiniGPT folder or Hub id (GPT-2 checkpoints are converted), loaded once with sdpa: the attention maps take the
    eager path per call (`output_attentions=True`), so nothing is loaded twice. `step`: the folder's snapshot at that
    training step instead of its final weights; `device`: where it lives and computes (app.py's --device). A folder's
    own code is never run: MiniGPT is this package's (modeling_minigpt), and a config whose `auto_map` names code of
    its own is refused (transformers would ask on the server's terminal, "[y/N]", and wait for an answer)."""
    if missing_local_path(source):  # else the Hub's "Repo id must be in the form ..." would be the message
        raise FileNotFoundError(f"the folder {source} does not exist")
    config = AutoConfig.from_pretrained(source, trust_remote_code=False)
    if config.model_type == "gpt2":
        model = MiniGPTForCausalLM.from_gpt2(source)
    else:
        model, loading = AutoModelForCausalLM.from_pretrained(
            source, attn_implementation="sdpa", output_loading_info=True, trust_remote_code=False
        )
        if missing := sorted(loading["missing_keys"]):  # transformers would fill them with random numbers
            raise ValueError(
                f"its weights do not cover its config: {len(missing)} tensors are missing (e.g. {missing[0]}). "
                "Check that config.json and model.safetensors belong together."
            )
    if step is not None:
        model = load_snapshot(model, Path(source), step)
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
    boundary = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if boundary is None:
        raise ValueError(f"The tokenizer of {name} has neither a bos nor an eos token to start a text from.")
    pad = tokenizer.pad_token_id
    never = [pad] if pad is not None and pad not in (boundary, tokenizer.eos_token_id) else []
    lm = LanguageModel(name, model.to(device).eval(), tokenizer, boundary, tokenizer.eos_token_id, never)
    lm.batcher = ContinuousBatcher(lm.model, lm.eos_id, lm.never_ids, **batching)
    return lm


class ModelPicker:
    """The models the demo offers, by name; each loads on first use (once, even under concurrent requests)."""

    def __init__(self, sources: dict[str, str], batching: dict, device: str = "cpu"):
        self.sources, self.batching = sources, batching  # batching: ContinuousBatcher's limits, for each model
        self.device = device  # where every model it loads lives and computes
        self.loaded: dict[str, LanguageModel] = {}
        self.lock = threading.Lock()  # held for a moment: the dicts' changes
        self.loading: dict[str, threading.Lock] = {}  # one per model name, held while it loads

    @property
    def names(self) -> list[str]:
        return list(self.sources)

    def checked_name(self, name) -> tuple[str, int | None]:
        """(model, snapshot step or None) of a name this picker offers, read without loading anything; else a
        message naming what it offers."""
        if not isinstance(name, str):  # a script's list or number: the same message as an unknown name
            raise VisitorError(f"Unknown model {shortened(name)}: choose one of {', '.join(self.sources)}.")
        base, step = (name, None) if name in self.sources else split_snapshot_name(name)
        if base not in self.sources:
            stem, at, _ = name.rpartition("@")
            if at and stem in self.sources:  # a step that is not written as the picker writes it: 04, +4, 4.0, ...
                raise VisitorError(f"{shortened(name)} names no snapshot: {self.snapshots_said(stem)}.")
            raise VisitorError(f"Unknown model {shortened(name)}: choose one of {', '.join(self.sources)}.")
        if step is not None and step not in snapshots_of(Path(self.sources[base])):
            raise VisitorError(f"The model {base!r} has no snapshot at step {step}: {self.snapshots_said(base)}.")
        return base, step

    def offers(self, name) -> bool:
        """Whether `name` is a model (or a model's snapshot) of this picker, without loading it."""
        try:
            self.checked_name(name)
        except VisitorError:
            return False
        return True

    def get(self, name: str | None) -> LanguageModel:
        """The model named `name`; "name@N": that model's weights at training step N (one of its snapshots)."""
        base, step = self.checked_name(name)
        if (lm := self.loaded.get(name)) is not None:  # loaded: served without waiting for any other model's load
            return lm
        with self.lock:
            loading = self.loading.setdefault(name, threading.Lock())
        with loading:  # one load per name, even under concurrent requests; other models' requests go on meanwhile
            if name not in self.loaded:
                try:
                    lm = load_language_model(name, self.sources[base], self.batching, step, self.device)
                except Exception as error:  # a broken folder or no network for a Hub id: say so, keep serving
                    message = without_paths(str(error), self.sources[base], base)
                    raise ModelUnavailable(f"Could not load the model {name!r}: {message}") from error
                with self.lock:
                    self.loaded[name] = lm
            return self.loaded[name]

    def snapshots_said(self, base: str) -> str:
        """Where model `base`'s snapshots are, as a visitor writes them: "its snapshots are names@40, names@120"."""
        steps = snapshots_of(Path(self.sources[base]))
        return f"its snapshots are {', '.join(f'{base}@{step}' for step in steps)}" if steps else "it has no snapshots"

    def register(self, name: str, source: str) -> bool:
        """Offers one more model (a finished training run's folder) under `name`, unless that name is taken."""
        with self.lock:
            if name in self.sources:
                return False
            self.sources[name] = str(source)
            return True


def without_paths(message: str, source: str, name: str) -> str:
    """The first line of a load error for a visitor: the model's folder named by its picker name, and no other
    absolute path of the server (a file in it keeps its own name)."""
    line = message.strip().splitlines()[0] if message.strip() else "unknown error"
    line = line.replace(source, name)
    return re.sub(r"(?<![\w.])(?:/[^/\s'\"]+)+/", "", line)  # /a/b/c.json -> c.json


def same_path(source: str | None) -> str | None:
    """A local folder as its absolute path (so that minigpt/models/names, ./minigpt/models/names and ~/... are one
    entry, named by the folder's name), a Hub id as is."""
    folder = Path(source).expanduser() if source else None
    return str(folder.resolve()) if folder and folder.is_dir() else source


def model_sources(extra: list[str], names_model: str | None, text_model: str | None) -> tuple[dict[str, str], str, str]:
    """Picker entries {name: folder or Hub id} and the default model of each mode."""
    sources = {name: str(path) for name, path in SHIPPED.items() if (path / "config.json").exists()}
    names_model, text_model, extra = same_path(names_model), same_path(text_model), [same_path(s) for s in extra]
    for source in [names_model, text_model, *extra]:
        if source and source not in sources.values():
            name = Path(source).name if Path(source).is_dir() else source
            while name in sources:
                name += "+"
            sources[name] = source
    if not sources:
        raise SystemExit(
            "No models: minigpt/models/names and minigpt/models/shakespeare are missing. Train them (see the README) "
            "or pass a model folder or Hub id with --model."
        )
    by_source = {source: name for name, source in sources.items()}
    first = next(iter(sources))
    names_default = by_source.get(names_model) or ("names" if "names" in sources else first)
    text_default = by_source.get(text_model) or ("shakespeare" if "shakespeare" in sources else first)
    return sources, names_default, text_default
