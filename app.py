"""MiniGPT demo (a Hugging Face Space): generate names or text, and look at every attention head at work.

    python app.py                                   # the shipped models, on http://127.0.0.1:7860
    python app.py --model path/to/folder --model user/minigpt-on-the-hub   # more models in the picker
    python app.py --host 0.0.0.0 --port 7860        # what a Space does (or set GRADIO_SERVER_NAME)

Named API endpoints (gradio_client): /names, /text (streamed), /attention, /attention_values (exact weights
of one query row or cell), /attention_export (the weights as .safetensors / .npz, the maps as PNG / SVG) and
/step; JSON answers from /next_tokens, /ablate, /importance, /head_roles, /logit_lens and /compare. See the
README.
"""

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import html
import inspect
import io
import math
import os
import random
import re
import shutil
import tempfile
import threading
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: no network calls at start
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import gradio as gr  # noqa: E402
import pandas  # noqa: E402
import torch  # noqa: E402
from gradio.data_classes import FileData  # noqa: E402  (a file returned by an API-only endpoint, gr.api)
from PIL import Image  # noqa: E402
from transformers import (  # noqa: E402
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
)

import plots  # noqa: E402
from explorer import (
    head_insights,  # noqa: E402
    training_runs,  # noqa: E402
)
from explorer.attention_export import GRID_SVG_UP_TO, grid_png, grid_svg, map_png, save_weights  # noqa: E402
from explorer.attention_maps import Window, head_matrix, query_weights, token_labels, trace_steps, trace_table  # noqa: E402
from explorer.attention_steps import attention_steps, steps_json  # noqa: E402
from explorer.errors import VisitorError, shortened  # noqa: E402
from explorer.forward_pass import ForwardPassCache  # noqa: E402
from explorer.serving import MIN_DECODE_ROWS, ContinuousBatcher, Sampling, generate_in_this_thread  # noqa: E402
from explorer.views.insights import (  # noqa: E402
    CURRENT_JS,
    INSIGHT_CSS,
    PICK_TOKEN_JS,
    ablation_html,
    belongs_to,
    compare_html,
    current_html,
    error_html,
    generation_html,
    importance_html,
    lost_html,
    next_tokens_html,
    roles_html,
    sampled_html,
)
from explorer.views.maps import HEAD_JS, figure_body, grid_html, head_caption, head_html  # noqa: E402
from explorer.views.maps import MAPS_CSS as GRID_CSS
from explorer.views.maps import PICK_TILE_JS as PICK_JS
from explorer.views.steps import STEPS_CSS, steps_html  # noqa: E402
from modeling_minigpt import MiniGPTForCausalLM  # noqa: E402  (importing it registers MiniGPT with the Auto classes)
from tokenization import known_characters, missing_local_path, unknown_characters  # noqa: E402

REPO = Path(__file__).resolve().parent
SHIPPED = {"names": REPO / "models" / "names", "shakespeare": REPO / "models" / "shakespeare"}
MAX_NAMES = 100  # names per request
MAX_NEW_TOKENS = 500  # text tokens per request
MAX_NAME_TOKENS = 32  # tokens per name, when a model with a long context is used for names
# Per model: rows decoding at once (a name is a row), requests waiting, the smallest decoding batch (see serving.py).
BATCHING = dict(max_rows=128, max_waiting=64, min_decode_rows=MIN_DECODE_ROWS)
# A streamed text is updated at most every `every` seconds, and all texts together at most `per_second` times a second
# (the first token and the end go out at once): 25 updates a second read as smooth, and each update costs the server
# more than a decoding step of the shipped model (see serving.ContinuousBatcher.astream).
STREAM = dict(every=0.04, per_second=250.0)
# Generation samples from per-request generators; the step view's seeded dropout draws from torch's global generator
# (F.dropout takes none): seeded and drawn under this lock, so concurrent step views do not mix their draws.
GLOBAL_RNG = threading.Lock()
MAX_TEXT_CHARS = 20_000  # characters of a prompt, prefix or text, checked before tokenizing: ~5x GPT-2's 1024 tokens
MAX_TEMPERATURE = 100.0  # above, sampling is uniform noise; below MIN_TEMPERATURE, greedy in all but name (use 0)
MIN_TEMPERATURE = 1e-3
# Gradio's upload route is open to anyone: it refuses bigger files outright. The Train tab's text file is the only
# upload; room above its own limit so that a file a little too big gets the tab's message, which names the limit.
MAX_UPLOAD = 4 * training_runs.MAX_TEXT_BYTES


@contextlib.contextmanager
def as_message():
    """The error rule (explorer/errors.py): a VisitorError inside becomes a message for the visitor, with no traceback
    in the log; any other exception goes on to Gradio, which shows its message and logs its traceback."""
    try:
        yield
    except VisitorError as error:
        raise gr.Error(str(error), print_exception=False) from None


def answers_visitors(endpoint):
    """`endpoint` (a function, coroutine function, generator or async generator) under `as_message`. Every event and
    API endpoint of the page gets it (`build_demo`), so the rule holds alike on all of them."""
    if getattr(endpoint, "answers_visitors", False):
        return endpoint
    if inspect.isasyncgenfunction(endpoint):

        async def answer(*args, **kwargs):
            inner = endpoint(*args, **kwargs)
            async with contextlib.aclosing(inner):  # a client that goes closes the inner stream at once
                with as_message():
                    async for item in inner:
                        yield item

    elif inspect.isgeneratorfunction(endpoint):

        def answer(*args, **kwargs):
            with as_message():
                yield from endpoint(*args, **kwargs)  # closing this closes the inner generator too

    elif inspect.iscoroutinefunction(endpoint):

        async def answer(*args, **kwargs):
            with as_message():
                return await endpoint(*args, **kwargs)

    else:

        def answer(*args, **kwargs):
            with as_message():
                return endpoint(*args, **kwargs)

    functools.update_wrapper(answer, endpoint)
    answer.answers_visitors = True
    return answer


class ModelUnavailable(RuntimeError):
    """A model of the picker that cannot be loaded (a broken folder, no network for a Hub id): the host's problem,
    so its traceback goes to the log on every endpoint that asks for it."""


# ---- models --------------------------------------------------------------------------------------------------------


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


def load_language_model(name: str, source: str) -> LanguageModel:
    """A MiniGPT folder or Hub id (GPT-2 checkpoints are converted), loaded once with sdpa: the attention maps take the
    eager path per call (`output_attentions=True`), so nothing is loaded twice."""
    if missing_local_path(source):  # else the Hub's "Repo id must be in the form ..." would be the message
        raise FileNotFoundError(f"the folder {source} does not exist")
    config = AutoConfig.from_pretrained(source)
    if config.model_type == "gpt2":
        model = MiniGPTForCausalLM.from_gpt2(source)
    else:
        model = AutoModelForCausalLM.from_pretrained(source, attn_implementation="sdpa")
    tokenizer = AutoTokenizer.from_pretrained(source)
    boundary = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if boundary is None:
        raise ValueError(f"The tokenizer of {source} has neither a bos nor an eos token to start a text from.")
    pad = tokenizer.pad_token_id
    never = [pad] if pad is not None and pad not in (boundary, tokenizer.eos_token_id) else []
    lm = LanguageModel(name, model.eval(), tokenizer, boundary, tokenizer.eos_token_id, never)
    lm.batcher = ContinuousBatcher(lm.model, lm.eos_id, lm.never_ids, **BATCHING)
    return lm


class ModelPicker:
    """The models the demo offers, by name; each loads on first use (once, even under concurrent requests)."""

    def __init__(self, sources: dict[str, str]):
        self.sources = sources
        self.loaded: dict[str, LanguageModel] = {}
        self.lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return list(self.sources)

    def get(self, name: str | None) -> LanguageModel:
        if not isinstance(name, str) or name not in self.sources:
            raise VisitorError(f"Unknown model {shortened(name)}: choose one of {', '.join(self.sources)}.")
        with self.lock:
            if name not in self.loaded:
                try:
                    self.loaded[name] = load_language_model(name, self.sources[name])
                except Exception as error:  # a broken folder or no network for a Hub id: say so, keep serving
                    message = without_paths(str(error), self.sources[name], name)
                    raise ModelUnavailable(f"Could not load the model {name!r}: {message}") from error
            return self.loaded[name]

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
    """A local folder as its absolute path (so that models/names and ./models/names are one entry), a Hub id as is."""
    return str(Path(source).resolve()) if source and Path(source).is_dir() else source


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
        raise SystemExit("No models: models/names and models/shakespeare are missing. Train them (see the README) "
                         "or pass a model folder or Hub id with --model.")  # fmt: skip
    by_source = {source: name for name, source in sources.items()}
    first = next(iter(sources))
    names_default = by_source.get(names_model) or ("names" if "names" in sources else first)
    text_default = by_source.get(text_model) or ("shakespeare" if "shakespeare" in sources else first)
    return sources, names_default, text_default


# ---- checking what users type --------------------------------------------------------------------------------------


def number(name: str, value, default, kind=float):
    """`value` as an int or float; None (left out by an API client) means the default. Whole numbers stay ints (a
    seed of 2**63 - 1 is kept exact, not rounded through a float); 1.5 is not a whole number."""
    if value is None or value == "":
        return default
    if isinstance(value, str) and not value.isascii():  # int() and float() read "٣" and "０" as 3 and 0
        raise VisitorError(f"{name} must be written with the digits 0-9, got {shortened(value)}.")
    if isinstance(value, bool):  # JSON's true and false are not numbers here
        raise VisitorError(f"{name} must be a number, got {value!r}.")
    if kind is int and isinstance(value, int | str):
        with contextlib.suppress(ValueError):
            return int(value)  # an int, or a string of one: exact
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise VisitorError(f"{name} must be a number, got {value!r}.") from None
    except OverflowError:
        raise VisitorError(f"{name} must be a finite number, got {value!r}.") from None
    if not math.isfinite(result):
        raise VisitorError(f"{name} must be a finite number, got {value!r}.")
    if kind is int and not result.is_integer():
        raise VisitorError(f"{name} must be a whole number, got {value!r}.")
    return int(result) if kind is int else result


def clamped(name: str, value: int, low: int, high: int, notes: list[str]) -> int:
    """`value` brought into [low, high], with a note saying so."""
    if low <= value <= high:
        return value
    kept = min(max(value, low), high)
    notes.append(f"{name} {value} is outside {low}..{high}: used {kept}.")
    return kept


def parse_sampling(temperature, top_k, top_p, seed, vocab_size: int, notes: list[str]) -> Sampling:
    temperature = number("Temperature", temperature, 1.0)
    if temperature < 0:
        raise VisitorError(f"Temperature must be 0 or more, got {temperature}: 0 always picks the most likely token, "
                        "1 samples from the model's probabilities, higher is more random.")  # fmt: skip
    if temperature != 0 and not MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE:
        raise VisitorError(f"Temperature must be 0 (greedy) or between {MIN_TEMPERATURE:g} and {MAX_TEMPERATURE:g}, "
                           f"got {temperature:g}: below, sampling is greedy in all but name; above, it is uniform "
                           "noise (and the arithmetic overflows).")  # fmt: skip
    if temperature == 0:
        notes.append("Temperature 0: greedy decoding, the most likely token every time (top-k, top-p and seed unused).")
    top_k = number("top-k", top_k, 0, int)
    if top_k < 0:
        raise VisitorError(f"top-k must be 0 (off) or a positive number of tokens, got {top_k}.")
    if top_k >= vocab_size:
        notes.append(f"top-k {top_k} is not below the model's {vocab_size} tokens, so it keeps them all (off).")
        top_k = 0
    top_p = number("top-p", top_p, 1.0)
    if not 0 < top_p <= 1:
        raise VisitorError(f"top-p must be above 0 and at most 1, got {top_p}: it keeps the most likely tokens whose "
                        "probabilities add up to top-p; 1 turns it off.")  # fmt: skip
    seed = number("Seed", seed, -1, int)
    if seed < 0:
        seed = random.randrange(2**31)
        notes.append(f"Random seed {seed}: set the seed to {seed} to get this output again.")
    elif seed >= 2**63:
        raise VisitorError(f"Seed must be below 2**63, got {seed}.")
    return Sampling(temperature, top_k, top_p, seed)


def describe(character: str) -> str:
    return f"{character!r} ({unicodedata.name(character, f'U+{ord(character):04X}')})"


def check_text(text: str, what: str) -> None:
    """A visitor's text, checked before anything reads it closely: at most MAX_TEXT_CHARS characters (tokenizing a
    few megabytes takes seconds and gigabytes, for a model that keeps only its last block_size tokens), and no lone
    surrogate (half of a UTF-16 pair: no tokenizer can encode it)."""
    if len(text) > MAX_TEXT_CHARS:
        raise VisitorError(f"The {what} is {len(text):,} characters long: at most {MAX_TEXT_CHARS:,} are accepted (the "
                        "model sees only its last context's worth of tokens anyway). Shorten it.")  # fmt: skip
    if halves := sorted({c for c in text if "\ud800" <= c <= "\udfff"}):
        raise VisitorError(f"The {what} holds {', '.join(map(describe, halves))}: half of a character (a lone UTF-16 "
                        "surrogate), which cannot be encoded. Remove it.")  # fmt: skip


def encode(lm: LanguageModel, text: str, what: str) -> list[int]:
    """The ids of `text` (no special tokens added), or a message naming every character the model does not know."""
    check_text(text, what)
    unknown = unknown_characters(lm.tokenizer, text, allow_special_tokens=True)  # a prompt may hold '.' etc.
    if unknown:
        known = known_characters(lm.tokenizer)
        hint = f" It knows only: {known!r}." if len(known) <= 100 else ""
        raise VisitorError(f"The {lm.name} model does not know these characters of the {what}: "
                        f"{', '.join(map(describe, unknown))}. Remove or replace them.{hint}")  # fmt: skip
    return lm.tokenizer.encode(text, add_special_tokens=False, verbose=False)  # longer than the context: keep_context


def from_boundary(lm: LanguageModel, text: str, what: str) -> list[int]:
    """[boundary] + the ids of `text`: every text starts from the boundary token, as in training (an empty text too).
    A text that already starts with the boundary (as in '.emma.') is not given a second one."""
    ids = encode(lm, text, what)
    return ids if ids[:1] == [lm.boundary_id] else [lm.boundary_id] + ids


def keep_context(lm: LanguageModel, ids: list[int], what: str, notes: list[str]) -> list[int]:
    if len(ids) <= lm.block_size:
        return ids
    notes.append(f"The {what} is {len(ids)} tokens, more than the model's context of {lm.block_size} tokens: "
                 f"kept the last {lm.block_size}.")  # fmt: skip
    return ids[-lm.block_size :]


def notes_markdown(notes: list[str]) -> str:
    return "\n".join(f"- {note}" for note in notes)


# ---- generation ----------------------------------------------------------------------------------------------------


async def names(prefix: str = "", count: float = 10, temperature: float = 1.0, top_k: float = 0, top_p: float = 1.0,
                seed: float = -1, model: str | None = None):  # fmt: skip
    """N names from the names model, each starting with `prefix`. Returns the names (one a line), notes about the
    input, and (for the attention maps) the first name with its boundary tokens."""
    lm = await asyncio.to_thread(PICKER.get, model or NAMES_DEFAULT)  # loading a model must not stall the other streams
    notes = []
    most = min(MAX_NAMES, lm.batcher.max_rows)  # a names request is one batch of `count` rows
    count = clamped("Number of names", number("Number of names", count, 10, int), 1, most, notes)
    sampling = parse_sampling(temperature, top_k, top_p, seed, lm.vocab_size, notes)
    prefix = (prefix or "").strip()
    prompt = from_boundary(lm, prefix, "prefix")
    room = min(lm.block_size - len(prompt), MAX_NAME_TOKENS)
    if room < 1:
        raise VisitorError(f"The prefix is too long: the {lm.name} model's context is {lm.block_size} tokens, the "
                           f"start token included, so use at most {lm.block_size - 2} characters.")  # fmt: skip
    if sampling.greedy and count > 1:
        notes.append("Greedy decoding gives the same name every time.")
    samples = await lm.batcher.agenerate(prompt, room, sampling, rows=count)  # waits holding no thread
    decoded = [lm.tokenizer.decode(prompt[1:] + s, skip_special_tokens=True) for s in samples]
    if empty := decoded.count(""):
        notes.append(f"{empty} of the names are empty (blank lines): the model ended them at once.")
    first = lm.tokenizer.decode(prompt + samples[0], skip_special_tokens=False)
    return "\n".join(decoded), notes_markdown(notes), first


async def text(prompt: str = "", max_new_tokens: float = 200, temperature: float = 1.0, top_k: float = 0,
               top_p: float = 1.0, seed: float = -1, model: str | None = None):  # fmt: skip
    """Continues `prompt` token by token (a generator: each yield is the text so far and the notes). The tokens come
    from the model's continuous batch; a client that goes closes this generator, which takes its row out at once."""
    lm = await asyncio.to_thread(PICKER.get, model or TEXT_DEFAULT)
    notes = []
    max_new = clamped("Max new tokens", number("Max new tokens", max_new_tokens, 200, int), 1, MAX_NEW_TOKENS, notes)
    sampling = parse_sampling(temperature, top_k, top_p, seed, lm.vocab_size, notes)
    if not prompt:
        notes.append(f"Empty prompt: the model starts from its boundary token {lm.boundary!r}.")
    ids = keep_context(lm, from_boundary(lm, prompt or "", "prompt"), "prompt", notes)
    shown = lm.tokenizer.decode(ids, skip_special_tokens=True)  # what the model sees (the kept part of the prompt)
    yield shown, notes_markdown(notes)
    new: list[int] = []
    async with contextlib.aclosing(lm.batcher.astream(ids, max_new, sampling, **STREAM)) as ready:
        async for steps in ready:  # the tokens decoded since the last update
            new += [tokens[0] for tokens in steps]
            # A multi-byte character split across tokens decodes to U+FFFD until its last byte arrives.
            yield shown + lm.tokenizer.decode(new, skip_special_tokens=True).rstrip("\ufffd"), notes_markdown(notes)
    ended = " (the model wrote its end-of-text token)" if new and new[-1] == lm.eos_id else ""
    notes.append(f"{len(new)} new tokens{ended}.")
    yield shown + lm.tokenizer.decode(new, skip_special_tokens=True), notes_markdown(notes)


# ---- training (the Train tab) --------------------------------------------------------------------------------------

RUNS: training_runs.RunQueue  # one training at a time per server; set by `configure`
POLL_SECONDS = 1.0  # a watcher reads its run's progress this often
PLOT_SECONDS = 3.0  # and redraws the loss plot at most this often (a matplotlib figure costs tens of ms)
SIZE_FIELDS = {"n_layer": "Layers", "n_head": "Heads", "n_embd": "Width (n_embd)", "block_size": "Context (tokens)",
               "max_steps": "Steps", "seed": "Seed", "vocab_size": "BPE vocabulary size"}  # fmt: skip
TOKENIZER_LABEL = "Tokenizer (none chosen: names for names, bpe for Shakespeare, char for your text)"
DATA_CHOICES = [("Built-in names", "names"), ("Built-in Shakespeare", "shakespeare"), ("Your names or text", "text")]


def start_training_runs() -> None:
    """The run queue, telling the picker of each model it finishes; finished runs of earlier server lives join it."""
    global RUNS
    RUNS = training_runs.RunQueue(training_runs.runs_dir(), on_finished=PICKER.register)
    for name, folder in RUNS.finished():
        PICKER.register(name, str(folder))


def session(request: gr.Request | None) -> str | None:
    return request.session_hash if request else None


def train(data: str = "names", text: str = "", tokenizer: str | None = None, n_layer: float | None = None,
          n_head: float | None = None, n_embd: float | None = None, block_size: float | None = None,
          max_steps: float | None = None, learning_rate: float | None = None, seed: float | None = None,
          name: str = "", vocab_size: float | None = None, upload: str | None = None,
          request: gr.Request = None):  # fmt: skip
    """Trains a model with train.py (queued behind any other run) and streams its progress: the name, the progress
    bar, the loss plot, the latest samples and the numbers. Left out, the tokenizer follows the data (names, bpe for
    Shakespeare, char for a text) and the sizes are the tab's first ones (the names preset)."""
    default = training_runs.defaults(data or "names")
    given = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size, max_steps=max_steps,
                 seed=seed, vocab_size=vocab_size)  # fmt: skip
    sizes = {key: number(SIZE_FIELDS[key], value, default[key], int) for key, value in given.items()}
    rate = number("Learning rate", learning_rate, default["learning_rate"])
    if upload:
        text = training_runs.read_upload(upload)
    spec, text = training_runs.check_request(data or "names", text, tokenizer, **sizes, learning_rate=rate,
                                             name=name, taken=PICKER.names)  # fmt: skip
    run = RUNS.submit(spec, text, owner=session(request))
    yield from watch(run)


def resume(name: str = "", request: gr.Request = None):
    """Continues a stopped run from its last checkpoint (or shows a queued or running one), streaming as `train`."""
    run = RUNS.resume((name or "").strip(), owner=session(request))
    yield from watch(run)


def cancel(name: str = "", request: gr.Request = None) -> str:
    """Stops your run at its next step, keeping a checkpoint (or takes it out of the queue)."""
    return RUNS.cancel((name or "").strip(), owner=session(request))


def download(name: str = "") -> str:
    """A finished model's folder as a zip (model, tokenizer, model card, loss curve; no checkpoints)."""
    folder = dict(RUNS.finished()).get((name or "").strip())
    if folder is None:
        raise VisitorError(f"No finished model named {name!r}: train one first.")
    return str(training_runs.zip_model(folder))


def watch(run: training_runs.Run):
    """Yields the run's progress every POLL_SECONDS until it is finished, stopped or failed."""
    drawn, drawn_at = None, 0.0
    while True:
        progress = RUNS.progress(run)
        points = (len(progress.train), len(progress.validation))
        plot = gr.skip()
        if points != drawn and (progress.done or time.monotonic() - drawn_at > PLOT_SECONDS):
            plot, drawn, drawn_at = loss_plot(run.name, progress), points, time.monotonic()
        numbers = {"name": run.name, **dataclasses.asdict(progress)}
        apart = "\n\n" if any("\n" in sample for sample in progress.samples) else "\n"  # texts, or one name a line
        yield run.name, progress_html(progress), plot, apart.join(progress.samples), numbers
        if progress.state == "failed":
            raise VisitorError(progress.message)
        if progress.done:
            return
        time.sleep(POLL_SECONDS)


def loss_plot(name: str, progress: training_runs.Progress) -> Image.Image | None:
    """Training and validation loss against step, drawn by the same code as the model folder's loss_curve.png."""
    if not progress.train and not progress.validation:
        return None
    history = [{"step": s, "loss": v} for s, v in progress.train]
    history += [{"step": s, "eval_loss": v} for s, v in progress.validation]
    image = io.BytesIO()
    plots.plot_losses(history, image, title=f"{name}: loss")
    return Image.open(image)


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def progress_html(progress: training_runs.Progress) -> str:
    """A progress bar, the step, the time left and the latest losses."""
    fraction = progress.step / progress.max_steps if progress.max_steps else 0.0
    facts = [progress.state]
    if progress.max_steps:
        facts.append(f"step {progress.step} / {progress.max_steps}")
    if progress.seconds_left is not None:
        facts.append(f"about {duration(progress.seconds_left)} left")
    if progress.train:
        facts.append(f"training loss {progress.train[-1][1]:.3f}")
    if progress.validation:
        facts.append(f"validation loss {progress.validation[-1][1]:.3f}")
    return (
        f'<div class="train-progress" data-state="{progress.state}" data-step="{progress.step}">'
        f'<div style="background:#e5e7eb;border-radius:4px;height:12px"><div style="background:#6366f1;height:12px;'
        f'border-radius:4px;width:{100 * fraction:.1f}%"></div></div>'
        f"<p>{' · '.join(facts)}</p><p>{html.escape(progress.message)}</p></div>"
    )


def note_after_progress(bar: str):
    """Cancel's note ("Cancelling ...: it stops at its next step") holds until the run has stopped; then the progress
    bar says how it ended, and the note goes."""
    ended = re.search(r'data-state="(stopped|finished|failed)"', bar or "")
    return "" if ended else gr.skip()


def training_defaults(data: str):
    """The tokenizer and sizes the tab proposes for the chosen data."""
    default = training_runs.defaults(data)
    return [default[key] for key in ("tokenizer", *SIZE_FIELDS, "learning_rate")]


TRAIN_INTRO = f"""Train a small GPT here, watch its loss fall, then look inside it: when it finishes, it joins the
model picker of every view and can be downloaded as a zip of its folder (ready to push to the Hub). Training runs
train.py (the Trainer, its data pipeline and checkpoints), one run at a time on this server: yours waits in a queue
if another is going. Cancel stops it within a step and keeps a checkpoint; Resume (same name) continues from it.

**Limits:** your text or file at most {training_runs.MAX_TEXT_BYTES / 1e6:g} MB; names are a-z only, one a line, at
least {training_runs.MIN_NAMES}; a text at least {training_runs.HELD_OUT} contexts long (its last tenth is held out to
validate); at most {training_runs.MAX_PARAMETERS / 1e6:g}M parameters and {training_runs.MAX_STEPS:,} steps, and
parameters x steps x tokens a step at most {training_runs.MAX_WORK:.0e} (about 10 minutes on 2 CPU cores); a run
stops, with a checkpoint, after {training_runs.MAX_RUN_SECONDS // 60} minutes. Model names: a-z, digits and '-'.
"""


def train_tab() -> list:
    """The Train tab, wired; returns the events whose end may bring a new model (for `pickers_follow_training`)."""
    default = training_runs.defaults("names")
    with gr.Tab("Train", elem_id="train-tab"):
        gr.Markdown(TRAIN_INTRO)
        with gr.Row():
            data = unchecked(gr.Radio(DATA_CHOICES, value="names", label="Data"))
            tokenizer = unchecked(gr.Radio(list(training_runs.TOKENIZERS), value=None, label=TOKENIZER_LABEL))
        with gr.Row():
            text = gr.Textbox("", label="Your names (one a line) or text", lines=4, scale=3)
            upload = gr.File(label="... or a .txt file", file_types=[".txt"], type="filepath", scale=1)
        with gr.Row():
            numbers = {key: unchecked(gr.Number(default[key], precision=0, label=label))
                       for key, label in SIZE_FIELDS.items()}  # fmt: skip
            learning_rate = unchecked(gr.Number(default["learning_rate"], label="Learning rate"))
        with gr.Row():
            name = gr.Textbox("", label="Model name (empty: one is picked)", elem_id="train-name", scale=2)
            start = gr.Button("Start training", variant="primary", scale=1)
            stop = gr.Button("Cancel", variant="stop", scale=1)
            go_on = gr.Button("Resume", scale=1)
        bar = gr.HTML(elem_id="train-progress")
        notes = gr.Markdown(elem_id="train-notes")
        with gr.Row():
            plot = gr.Image(label="Loss", type="pil", interactive=False, elem_id="train-plot", scale=3)
            samples = gr.Textbox(label="Samples at the latest evaluation", lines=10, elem_id="train-samples", scale=2)
        with gr.Accordion("The progress as numbers (what the API streams)", open=False):
            as_json = gr.JSON(label="Progress")
        with gr.Row():
            zip_button = gr.Button("Download the model (zip)")
            zipped = gr.File(label="Model folder (zip)", interactive=False, height=80)

    n = numbers
    inputs = [data, text, tokenizer, n["n_layer"], n["n_head"], n["n_embd"], n["block_size"], n["max_steps"],
              learning_rate, n["seed"], name, n["vocab_size"], upload]  # fmt: skip
    outputs = [name, bar, plot, samples, as_json]
    streaming = dict(concurrency_limit=None, show_progress="hidden")  # watchers only read files; the queue is RUNS
    started = start.click(train, inputs, outputs, api_name="train", **streaming)
    resumed = go_on.click(resume, [name], outputs, api_name="resume", **streaming)
    stop.click(cancel, [name], notes, api_name="cancel", concurrency_limit=None)
    for button in (start, go_on):  # a new start or a resume: the note of an earlier Cancel no longer holds
        button.click(lambda: "", None, notes, api_visibility="private")
    bar.change(note_after_progress, bar, notes, api_visibility="private")
    zip_button.click(download, [name], zipped, api_name="download")
    data.input(training_defaults, data, [tokenizer, *numbers.values(), learning_rate], api_visibility="private")
    return [started, resumed]


def pickers_follow_training(demo: gr.Blocks, training_events: list) -> None:
    """Every model picker on the page (each dropdown offering the picker's models, whichever view it belongs to)
    gains a model as soon as a run of this page finishes, and a page opened later lists every finished model. The
    pickers take any name (PICKER.get says which exist): a dropdown would refuse a model added after the page was
    built to an API client, whose page never ran the refresh."""
    offered = set(PICKER.names)
    pickers = [b for b in demo.blocks.values() if isinstance(b, gr.Dropdown) and {v for _, v in b.choices} == offered]
    for picker in pickers:
        unchecked(picker)
    refresh = lambda: [gr.update(choices=PICKER.names)] * len(pickers)
    for event in training_events:
        event.then(refresh, None, pickers, api_visibility="private")
    demo.load(refresh, None, pickers, api_visibility="private")


# ---- attention -----------------------------------------------------------------------------------------------------


# One forward pass per (model, text) serves every view of it; 1 GiB holds one GPT-2-sized pass of 1,024 tokens.
PASSES = ForwardPassCache(max_bytes=int(os.environ.get("MINIGPT_PASS_CACHE_BYTES", 1 << 30)))


@dataclass
class TextView:
    """A text as one model sees it: its tokens, their readable labels, notes about the input, and the recorded pass."""

    lm: LanguageModel
    ids: list[int]
    tokens: list[str]
    notes: list[str]
    text: str

    @property
    def recorded(self):
        return PASSES.get(self.lm.model, self.ids)

    @property
    def key(self) -> str:
        """What identifies this view's numbers: the model and the token ids (see view_key)."""
        return view_key(self.lm.name, self.ids)

    @property
    def label(self) -> str:
        """The text and model in words, for a learner: '"emma" on names'."""
        text = self.text if len(self.text) <= 40 else self.text[:39] + "…"
        return f"“{text}” on {self.lm.name}" if text else f"the empty text on {self.lm.name}"

    @property
    def shown(self) -> dict:
        """The page's record of the text it shows (the `shown` state): every view of the page is drawn from it."""
        return {"model": self.lm.name, "text": self.text, "key": self.key, "label": self.label}

    @property
    def about(self) -> dict:
        """What every JSON answer carries: the model and token ids it was computed for, and the tokens as shown."""
        return {"model": self.lm.name, "ids": list(self.ids), "tokens": self.tokens}


def view_key(model: str, ids: list[int]) -> str:
    """A short fingerprint of (model, token ids): two views show the same numbers exactly when their keys match."""
    return hashlib.sha1(f"{model}|{','.join(map(str, ids))}".encode()).hexdigest()[:16]


def text_view(model: str, text: str) -> TextView:
    lm = PICKER.get(model)
    notes = []
    ids = keep_context(lm, from_boundary(lm, text, "text"), "text", notes)
    return TextView(lm, ids, token_labels(lm.tokenizer, ids), notes, text)


def layer_and_head_choices(n_layer: int, n_head: int):
    layers = gr.Dropdown(choices=[(f"layer {i}", i) for i in range(n_layer)], value=0)
    heads = gr.Dropdown(choices=[(f"head {h}", str(h)) for h in range(n_head)] + [("average", "mean")], value="0")
    return layers, heads


def attention(text: str = "emma", model: str | None = None):
    """Attention maps of `text` for every layer and head, the chosen head large, and the shape trace."""
    model = model or NAMES_DEFAULT
    view = text_view(model, text or "")
    weights = view.recorded.attentions  # (L, H, T, T)
    config = view.lm.model.config
    sizes = dict(B=1, T=len(view.tokens), C=config.n_embd, H=config.n_head, D=config.n_embd // config.n_head)
    headers, rows = trace_table(trace_steps(view.lm.model.model.layers[0].attn, view.recorded, 0), sizes)
    notes = view.notes + [f"{len(view.tokens)} tokens: {' '.join(view.tokens)}"]
    shown = view.shown
    return (
        notes_markdown(notes),
        belongs_to(view.key, view.label, grid_html(weights, view.tokens)),
        belongs_to(view.key, view.label, head_html(weights, view.tokens, 0, "0", shown)),
        pandas.DataFrame(rows, columns=headers),
        *layer_and_head_choices(config.n_layer, config.n_head),
        shown,
    )


def show_head(shown: dict | None, layer: int, head: str):
    if not shown:
        return gr.skip()
    view = text_view(shown["model"], shown["text"])
    return belongs_to(view.key, view.label, head_html(view.recorded.attentions, view.tokens, int(layer), str(head),
                                                      view.shown))  # fmt: skip


def pick_head(shown: dict | None, event: gr.EventData):
    """A click on a tile of the grid: that head, large."""
    layer, head = int(event._data["layer"]), str(event._data["head"])
    return layer, head, show_head(shown, layer, head)


def checked_head(view: TextView, layer, head) -> tuple[int, str]:
    """`layer` and `head` as a request names them (head: a number or "mean"), checked against the model."""
    n_layer, n_head = view.lm.model.config.n_layer, view.lm.model.config.n_head
    layer = number("layer", layer, 0, int)
    head = "0" if head is None or head == "" else str(head)
    if not 0 <= layer < n_layer:
        raise VisitorError(f"layer must be 0 to {n_layer - 1}, got {layer}.")
    if head != "mean" and not (re.fullmatch(r"[0-9]+", head) and int(head) < n_head):
        raise VisitorError(f"head must be 0 to {n_head - 1} or 'mean' (their average), got {head!r}.")  # fmt: skip
    return layer, head


def checked_token(view: TextView, name: str, value) -> int:
    position = number(name, value, 0, int)
    if not 0 <= position < len(view.ids):
        raise VisitorError(f"{name} must be a token position, 0 to {len(view.ids) - 1}, got {position}.")  # fmt: skip
    return position


# Server functions (HEAD_JS's calls) bypass the queue and its concurrency limit: a pass they find missing from the
# cache (evicted since the maps were drawn, or asked for by a client of its own) is computed at most two at a time.
UNQUEUED_PASSES = threading.BoundedSemaphore(2)


def asked_view(asked) -> tuple[TextView, int, str]:
    """The text view, layer and head of a request from the enlarged maps' JavaScript (HEAD_JS): a dict."""
    if not isinstance(asked, dict):
        raise VisitorError("Expected {model, text, layer, head, ...}.")
    view = text_view(str(asked.get("model") or NAMES_DEFAULT), str(asked.get("text") or ""))
    layer, head = checked_head(view, asked.get("layer"), asked.get("head"))
    if PASSES.cached(view.lm.model, view.ids) is None:
        with UNQUEUED_PASSES:
            view.recorded  # noqa: B018  (computed now, then served from the cache)
    return view, layer, head


def attention_window(asked: dict) -> str:
    """For HEAD_JS (zoom and pan): one enlarged map showing the window {row, col, size} asked for, fitted to the map."""
    view, layer, head = asked_view(asked)
    size = number("size", asked.get("size"), len(view.ids), int)
    window = Window.fit(len(view.ids), number("row", asked.get("row"), 0, int), number("col", asked.get("col"), 0, int),
                        size)  # fmt: skip
    matrix = head_matrix(view.recorded.attentions, layer, head)
    return figure_body(matrix, view.tokens, head_caption(layer, head), window)


def attention_row(asked: dict) -> dict:
    """For HEAD_JS (hover): the exact weights of one query over the keys it sees."""
    view, layer, head = asked_view(asked)
    query = checked_token(view, "query", asked.get("query"))
    weights = query_weights(view.recorded.attentions, layer, head, query)
    return {"query": query, "weights": weights, "view": view.key}  # the page uses it only while that view is shown


def attention_values(text: str = "emma", model: str | None = None, layer: int = 0, head: str = "0", query: int = 0,
                     key: int | None = None) -> dict:  # fmt: skip
    """The exact attention weights (float32) of one query token over the keys it sees (0 .. query), or of one
    (query, key) cell. head: a number, or "mean" for the average over the layer's heads."""
    view = text_view(model or NAMES_DEFAULT, text or "")
    layer, head = checked_head(view, layer, head)
    query = checked_token(view, "query", query)
    weights = query_weights(view.recorded.attentions, layer, head, query)
    if key is None or key == "":
        return {"query": query, "key": None, "tokens": view.tokens[: query + 1], "weights": weights}
    key = checked_token(view, "key", key)
    weight = weights[key] if key <= query else 0.0  # a future key: masked, weight 0
    return {"query": query, "key": key, "tokens": [view.tokens[query], view.tokens[key]], "weights": [weight]}


EXPORTS = {  # what the export offers: {value (the API's `what`): label}
    "safetensors": "all weights (.safetensors, bertviz layout)",
    "npz": "all weights (.npz, bertviz layout)",
    "map.png": "the chosen map (.png, full resolution)",
    "grid.png": "every map (.png)",
    "grid.svg": f"every map (.svg, texts up to {GRID_SVG_UP_TO} tokens)",
}
EXPORT_DIR = Path(tempfile.mkdtemp(prefix="minigpt-exports-"))
EXPORT_KEPT_S = 600  # an export's file is copied into Gradio's cache as the request ends: ours can go soon after


def export_folder() -> Path:
    """A fresh folder for one export; the folders of exports older than EXPORT_KEPT_S go."""
    for old in EXPORT_DIR.iterdir():
        if time.time() - old.stat().st_mtime > EXPORT_KEPT_S:
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(dir=EXPORT_DIR))


def attention_export(text: str = "emma", model: str | None = None, what: str = "safetensors", layer: int = 0,
                     head: str = "0") -> FileData:  # fmt: skip
    """A file of the text's attention. what: "safetensors" or "npz" (every layer's (1, heads, T, T) weights, the
    tokens and ids, as bertviz takes them), "map.png" (one head, or "mean", at full resolution), "grid.png" or
    "grid.svg" (every map)."""
    return FileData(path=str(export_file(model or NAMES_DEFAULT, text or "", what, layer, head)))


def export_file(model: str, text: str, what: str, layer, head) -> Path:
    if what not in EXPORTS:
        raise VisitorError(f"what must be one of {', '.join(EXPORTS)}, got {what!r}.")
    view = text_view(model, text)
    layer, head = checked_head(view, layer, head)
    attentions = view.recorded.attentions  # (L, H, T, T)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", model)
    path = export_folder() / f"attention-{name}-{len(view.ids)}-tokens"
    if what in ("safetensors", "npz"):
        return save_weights(path.with_suffix("." + what), attentions, view.tokens, view.ids)
    if what == "grid.svg" and len(view.ids) > GRID_SVG_UP_TO:
        raise VisitorError(f"The text is {len(view.ids)} tokens: the grid as SVG is for texts of at most "
                        f"{GRID_SVG_UP_TO}; export it as PNG.")  # fmt: skip
    if what == "map.png":
        path = path.with_name(f"{path.name}-layer-{layer}-{'average' if head == 'mean' else 'head-' + head}.png")
        path.write_bytes(map_png(head_matrix(attentions, layer, head)))
    elif what == "grid.png":
        path = path.with_suffix(".png")
        path.write_bytes(grid_png(attentions))
    else:
        path = path.with_suffix(".svg")
        path.write_text(grid_svg(attentions, view.tokens))
    return path


def export_shown(shown: dict | None, what: str, layer: int, head: str):
    """The page's export: of the text whose maps are shown."""
    if not shown:
        raise VisitorError("Show the attention of a text first.")
    return str(export_file(shown["model"], shown["text"], what, layer, head))


def current_line(shown: dict | None):
    """The line above the maps naming the text and model every view below belongs to."""
    if not shown:
        return gr.skip()  # a text that could not be shown: `not_shown` wrote the line
    view = text_view(shown["model"], shown["text"])
    return current_html(view.key, view.label, len(view.ids))


def not_shown(text: str, model: str):
    """After a text that could not be shown (the message says why): nothing is current, so every view on the page
    is marked as belonging to an earlier text."""
    label = f"“{shortened(text or '', 40)[1:-1]}” on {shortened(model or NAMES_DEFAULT, 40)[1:-1]}"
    # No shape trace or notes of the earlier text; the maps stay, greyed. Every output of the failed event is written
    # (the maps with gr.skip()), which also takes Gradio's error badge off each.
    return None, lost_html(label), None, "", gr.skip(), gr.skip()


def attention_of_sample(sample: str, model: str):
    """After generating: the maps of what was generated (the first name, or the text)."""
    return sample, model, *attention(sample, model)


# ---- what does this head do? ---------------------------------------------------------------------------------------
# head_insights.py computes; these endpoints answer in plain numbers (JSON), and the page draws those same answers.

MAX_INSIGHT_TOKENS = 200  # new tokens per generation redone with an ablation
ROLE_PROBES = 4  # random repeated sequences the induction score averages over


def insight_view(text: str, model: str | None, min_tokens: int = 2) -> TextView:
    view = text_view(model or NAMES_DEFAULT, text or "")
    if len(view.ids) < min_tokens:
        raise VisitorError("The text is empty: type at least one character (the start token alone predicts nothing).")
    return view


def position_of(view: TextView, position) -> int:
    return head_insights.check_position(number("Position", position, -1, int), len(view.ids))


def labelled(view: TextView, ids: list[int], probabilities: list[float]) -> list[dict]:
    labels = token_labels(view.lm.tokenizer, ids)
    return [{"token": t, "id": i, "probability": p} for t, i, p in zip(labels, ids, probabilities)]


def next_tokens(text: str = "emma", model: str | None = None, position: int = -1) -> dict:
    """The top-10 next tokens at `position` (tokens shown, from 0; -1: the last) with their probabilities, and the
    probability the model gave the token that actually follows."""
    view = insight_view(text, model, min_tokens=1)
    position = position_of(view, position)
    found = head_insights.next_token_probabilities(view.lm.model, view.recorded, position, k=10)
    answer = {**view.about, "position": position, "notes": view.notes,
              "top": labelled(view, found["top_ids"], found["top_probabilities"]), "next": None}  # fmt: skip
    if "next_id" in found:
        answer["next"] = labelled(view, [found["next_id"]], [found["next_probability"]])[0]
    return answer


def logit_lens(text: str = "emma", model: str | None = None, position: int = -1) -> dict:
    """At `position`, the top-3 tokens the residual stream predicts after the embeddings and after each layer."""
    view = insight_view(text, model, min_tokens=1)
    position = position_of(view, position)
    lens = head_insights.logit_lens(view.lm.model, view.recorded, position, k=3)
    names = ["embeddings"] + [f"layer {layer}" for layer in range(len(lens) - 1)]
    layers = [{"after": name, "top": labelled(view, ids, p)} for name, (ids, p) in zip(names, lens)]
    return {**view.about, "position": position, "layers": layers, "notes": view.notes}


def ablate(text: str = "emma", model: str | None = None, heads: str = "", mode: str = "zero", position: int = -1,
           prompt: str = "", new_tokens: int = 0, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
           seed: int = 0) -> dict:  # fmt: skip
    """The text with `heads` ("1.2, 0.3") ablated (`mode` zero or mean over the text's positions): per-token losses
    before and after (entry t: the loss of token t + 1), their means, the top-5 next tokens at `position` before and
    after, and with `new_tokens` > 0, `prompt` continued with the same seed plain and ablated."""
    view = insight_view(text, model)
    config = view.lm.model.config
    chosen = head_insights.parse_heads(heads, config.n_layer, config.n_head)
    position = position_of(view, position)
    before = view.recorded
    after = head_insights.ablated_pass(view.lm.model, before, chosen, mode)
    top = [head_insights.top_tokens(p.logits(view.lm.model, position), 5) for p in (before, after)]
    loss_before, loss_after = before.token_losses(view.lm.model), after.token_losses(view.lm.model)
    answer = {
        **view.about, "heads": [list(h) for h in chosen], "mode": mode, "position": position,
        "loss_before": loss_before.tolist(), "loss_after": loss_after.tolist(),
        "total_before": float(loss_before.mean()), "total_after": float(loss_after.mean()),
        "top5_before": labelled(view, *top[0]), "top5_after": labelled(view, *top[1]), "notes": view.notes,
    }  # fmt: skip
    new = clamped("New tokens", number("New tokens", new_tokens, 0, int), 0, MAX_INSIGHT_TOKENS, answer["notes"])
    if new:
        sampling = parse_sampling(temperature, top_k, top_p, seed, view.lm.vocab_size, answer["notes"])
        answer["generation"] = generate_ablated(view, chosen, mode, prompt, new, sampling)
    return answer


def generate_ablated(view: TextView, heads: list[tuple[int, int]], mode: str, prompt: str, new: int,
                     sampling: Sampling) -> dict:  # fmt: skip
    """`prompt` continued by the text loop twice with the same seed: plain, then with the heads ablated (mean
    ablation puts in the means over the analysed text)."""
    lm = view.lm
    ids = keep_context(lm, from_boundary(lm, prompt or "", "prompt"), "prompt", [])
    means = head_insights.head_means(view.recorded) if mode == "mean" else None
    mask = head_insights.head_mask(heads, lm.model.config.n_layer, lm.model.config.n_head)
    generate = lambda: generate_in_this_thread(lm.model, lm.eos_id, lm.never_ids, ids, new, sampling)[0]  # noqa: E731
    plain = generate()
    with head_insights.heads_ablated(lm.model, mask, means):  # the hook acts on this thread's forward passes only
        ablated = generate()
    decode = lambda new_ids: lm.tokenizer.decode(ids + new_ids, skip_special_tokens=True)  # noqa: E731
    return {"seed": sampling.seed, "plain": decode(plain), "ablated": decode(ablated)}


def importance(text: str = "emma", model: str | None = None, mode: str = "zero") -> dict:
    """Per head (layer x head list), the rise of the mean loss over the text when that head alone is ablated."""
    view = insight_view(text, model)
    scores, loss = head_insights.head_importance(view.lm.model, view.recorded, mode)
    return {"importance": scores.tolist(), "loss": loss, "mode": mode, **view.about, "notes": view.notes}


def head_roles(text: str = "emma", model: str | None = None) -> dict:
    """Per head (layer x head lists), the previous-token, first-token and self scores on the text, the induction score
    on random tokens repeated twice (sized to the context), the top-3 heads of each, and the probe's losses."""
    view = insight_view(text, model)
    lm = view.lm
    vocabulary = [i for i in range(lm.vocab_size) if i not in {lm.boundary_id, lm.eos_id, *lm.never_ids}]
    probes = head_insights.induction_probe(vocabulary, lm.boundary_id, lm.block_size, ROLE_PROBES)
    scores = head_insights.head_roles(lm.model, view.recorded, probes)
    roles = {role: scores[role] for role in ("previous_token", "first_token", "self", "induction")}
    top = {role: [{"layer": layer, "head": head, "score": score} for layer, head, score in
                  head_insights.top_heads(s)] for role, s in roles.items()}  # fmt: skip
    probe = {"count": ROLE_PROBES, "length": (probes.shape[1] - 1) // 2, "first_half_loss": scores["first_half_loss"],
             "repeated_half_loss": scores["repeated_half_loss"]}  # fmt: skip
    return {**{role: s.tolist() for role, s in roles.items()}, "top_heads": top, "probe": probe, **view.about,
            "notes": view.notes}  # fmt: skip


def compare(text: str = "emma", other_text: str = "anna", model: str | None = None) -> dict:
    """The per-head difference of the two texts' attention maps (first minus second) over their common positions,
    and the per-token loss of each. An empty second text: the first with its last token changed to the model's most
    likely other token there."""
    first = insight_view(text, model)
    second = insight_view(other_text, model) if (other_text or "").strip() else one_token_changed(first)
    difference, per_head = head_insights.compare_attention(first.recorded, second.recorded)
    notes = first.notes + second.notes
    length = difference.shape[-1]
    if len(first.ids) != len(second.ids):
        notes.append(f"The texts have {len(first.ids)} and {len(second.ids)} tokens (start token included): their "
                     f"maps are compared over the first {length}. A token's attention depends only on the tokens up "
                     "to it, so these are the shorter text's whole maps.")  # fmt: skip
    lm = first.lm.model
    return {
        **first.about, "other_text": second.text, "other_ids": list(second.ids), "other_tokens": second.tokens,
        "compared_tokens": length,
        "difference": difference.double().round(decimals=6).tolist(),  # short decimals: a smaller answer
        "difference_per_head": per_head.tolist(), "loss": first.recorded.token_losses(lm).tolist(),
        "other_loss": second.recorded.token_losses(lm).tolist(), "notes": notes,
    }  # fmt: skip


def one_token_changed(view: TextView) -> TextView:
    """`view`'s text with its last token changed to the model's most likely other token there (a same-length second
    text for Compare), with a note saying which."""
    lm = view.lm
    ids = head_insights.one_token_changed(lm.model, view.recorded, {lm.boundary_id, lm.eos_id, *lm.never_ids} - {None})
    tokens = token_labels(lm.tokenizer, ids)
    note = (f"Second text: the first with its last token {view.tokens[-1]!r} changed to {tokens[-1]!r}, the model's "
            "most likely other token there.")  # fmt: skip
    return TextView(lm, ids, tokens, [note], lm.tokenizer.decode(ids[1:], skip_special_tokens=False))


def sampled_colours(generated: str, model: str, prompt: str, temperature, top_k, top_p, seed) -> str:
    """After a generation: each new token coloured by the probability it was drawn with, from one forward pass over
    the generated text (its last `block_size` tokens) with the sampler's warpers applied to the logits."""
    view = insight_view(generated, model, min_tokens=1)
    lm, notes = view.lm, []
    sampling = parse_sampling(temperature, top_k, top_p, seed, lm.vocab_size, notes)
    prompt_length = len(from_boundary(lm, prompt or "", "prompt")) - (len(from_boundary(lm, generated, "text")) -
                                                                         len(view.ids))  # fmt: skip
    logits = view.recorded.logits(lm.model)  # (T, V)
    warp = None if sampling.greedy else sampling.warpers()
    drawn = head_insights.sampled_probabilities(logits, view.ids, warp, lm.never_ids).tolist()
    pieces = [lm.tokenizer.decode([i], skip_special_tokens=True) for i in view.ids]
    shown = [None] + [p if t >= max(prompt_length, 1) else None for t, p in enumerate(drawn, start=1)]
    note = ("Each generated token coloured by the probability it was sampled with (after temperature, top-k and "
            "top-p; greedy: the model's own); yellow: likely, purple: a surprise. Hover for the number.")  # fmt: skip
    return belongs_to(view.key, view.label, sampled_html(pieces, shown, note))


def drawn(shown: dict | None, draw) -> str:
    """One view of the text the maps show: `draw(text, model)`'s HTML, marked with the (model, token ids) it belongs
    to. A visitor's mistake is drawn in its place, so that no earlier result stays up beneath the message."""
    if not shown:
        return error_html("No text is shown: show the attention of a text first (the button above).")
    try:
        body = draw(shown["text"], shown["model"])
    except VisitorError as error:
        body = error_html(str(error))
    return belongs_to(shown["key"], shown["label"], body)


def show_next_tokens(shown, position):
    return drawn(shown, lambda t, m: next_tokens_html(next_tokens(t, m, position), logit_lens(t, m, position)))


def pick_position(shown, event: gr.EventData):
    position = int(event._data["position"])
    return position, show_next_tokens(shown, position)


def show_ablation(shown, ticked, mode, position):
    return drawn(shown, lambda t, m: ablation_html(ablate(t, m, ", ".join(ticked or []), mode, position)))


def show_generation(shown, ticked, mode, prompt, new_tokens, temperature, top_k, top_p, seed):
    def draw(text, model):
        answer = ablate(text, model, ", ".join(ticked or []), mode, -1, prompt, new_tokens, temperature, top_k, top_p,
                        seed)  # fmt: skip
        return generation_html(answer["generation"]) if "generation" in answer else ""

    return drawn(shown, draw)


def show_importance(shown, mode):
    return drawn(shown, lambda t, m: importance_html(importance(t, m, mode)))


def show_roles(shown):
    return drawn(shown, lambda t, m: roles_html(head_roles(t, m)))


def show_compare(shown, other_text):
    return drawn(shown, lambda t, m: compare_html(compare(t, other_text, m)))


def head_choices(shown: dict | None, ticked: list[str] | None):
    """The heads of the shown text's model to tick; those ticked stay ticked while the model has them."""
    if not shown:
        return gr.skip()
    config = PICKER.get(shown["model"]).model.config
    choices = [f"{layer}.{head}" for layer in range(config.n_layer) for head in range(config.n_head)]
    return gr.CheckboxGroup(choices=choices, value=[head for head in ticked or [] if head in choices])


def build_head_insights(shown, sampling, prompt, generated_text, text_model, after_text):
    """The "What does this head do?" section, on the text and model the maps show (`shown`)."""
    gr.Markdown("## What does this head do?\nOn the text and model above. Click a token to pick its position.")
    with gr.Row():
        position = unchecked(gr.Number(-1, precision=0, label="Position (from 0; -1 = last)", scale=1))
        next_button = gr.Button("Next-token probabilities and logit lens", scale=2)
    next_out = gr.HTML(js_on_load=PICK_TOKEN_JS, elem_id="next-tokens")
    gr.Markdown("### Ablate heads")
    with gr.Row():
        heads = gr.CheckboxGroup([], label="Heads to ablate (layer.head)", elem_id="ablate-heads", scale=3)
        mode = gr.Radio(["zero", "mean"], value="zero", label="Replace their output by", scale=1)
    with gr.Row():
        insight_prompt = gr.Textbox("", label="Prompt to generate again with the ablation", scale=3)
        new_tokens = unchecked(gr.Number(60, precision=0, label=f"New tokens (0-{MAX_INSIGHT_TOKENS})", scale=1))
    ablate_button = gr.Button("Ablate", variant="primary")
    ablation_out = gr.HTML(elem_id="ablation")
    generation_out = gr.HTML(elem_id="ablated-generation")
    with gr.Row():
        importance_button = gr.Button("Head importance map")
        roles_button = gr.Button("Head roles")
    importance_out = gr.HTML(elem_id="importance")
    roles_out = gr.HTML(elem_id="head-roles")
    gr.Markdown("### Compare two texts")
    other_text = gr.Textbox("", label="Second text (empty: the text above with its last token changed to the model's "
                            "most likely other token; any length: the maps are compared over the common positions)",
                            elem_id="compare-text")  # fmt: skip
    compare_button = gr.Button("Compare")
    compare_out = gr.HTML(elem_id="compare")
    sampled_out = gr.HTML(elem_id="sampled-probabilities")

    for endpoint in (next_tokens, logit_lens, ablate, importance, head_roles, compare):
        gr.api(endpoint, api_name=endpoint.__name__)
    private = dict(api_visibility="private")
    next_button.click(show_next_tokens, [shown, position], next_out, **private)
    next_out.pick(pick_position, [shown], [position, next_out], **private)
    ablate_button.click(show_ablation, [shown, heads, mode, position], ablation_out, **private).then(
        show_generation, [shown, heads, mode, insight_prompt, new_tokens, *sampling], generation_out, **private
    )
    importance_button.click(show_importance, [shown, mode], importance_out, **private)
    roles_button.click(show_roles, [shown], roles_out, **private)
    compare_button.click(show_compare, [shown, other_text], compare_out, **private)
    shown.change(head_choices, [shown, heads], heads, **private)
    sampled = after_text.success(sampled_colours, [generated_text, text_model, prompt, *sampling], sampled_out,
                                 **private)  # fmt: skip
    sampled.success(lambda p: p, prompt, insight_prompt, **private)


# ---- attention, step by step ---------------------------------------------------------------------------------------


def flag(name: str, value, default: bool) -> bool:
    """`value` as a bool: true or false, 1 or 0 (as JSON or strings); None (left out by an API client): the default."""
    if value is None or value == "":
        return default
    spelled = str(value).strip().lower()
    if spelled not in ("true", "false", "1", "0"):
        raise VisitorError(f"{name} must be true or false, got {value!r}.")
    return spelled in ("true", "1")


def kept_choice(value, count: int) -> int:
    """A layer or head chosen before, if the model now shown has it; else 0."""
    return int(value) if value is not None and 0 <= int(value) < count else 0


def step(text: str = "emma", model: str | None = None, layer: int = 0, head: int = 0, query: int | None = None,
         training: bool = False, seed: int = 0) -> dict:  # fmt: skip
    """Every number of one attention head at work on one token of `text`: the textbook steps from the sublayer's
    input to what the next sublayer receives (attention_steps.py). `query` is the token's position (0: the start
    token; default: the last token); `training` applies the model's attention dropout, drawn with `seed`."""
    model = model or NAMES_DEFAULT
    view = text_view(model, text or "")
    choice = dict(layer=number("Layer", layer, 0, int), head=number("Head", head, 0, int),
                  query=number("Query position", query, None, int), training=flag("Training", training, False),
                  seed=number("Seed", seed, 0, int))  # fmt: skip
    steps = attention_steps(view.lm.model, view.recorded, **choice, rng_lock=GLOBAL_RNG)
    return steps_json(steps, view.tokens, model=model, notes=view.notes)


def step_view(shown: dict | None, layer, head, query, training, seed):
    """The step view of the text the maps show: its layer, head and query choices (kept where they still fit) and
    the steps drawn from exactly what the `step` endpoint returns."""
    if not shown:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    config = PICKER.get(shown["model"]).model.config
    layer, head = kept_choice(layer, config.n_layer), kept_choice(head, config.n_head)
    numbers = step(shown["text"], shown["model"], layer, head, query, training, seed)
    tokens = numbers["tokens"]
    return (
        gr.Dropdown(choices=[(f"layer {n}", n) for n in range(config.n_layer)], value=layer),
        gr.Dropdown(choices=[(f"head {n}", n) for n in range(config.n_head)], value=head),
        gr.Dropdown(choices=[(f"{j}: {t}", j) for j, t in enumerate(tokens)], value=numbers["query"]),
        belongs_to(shown["key"], shown["label"], steps_html(numbers)),
    )


def step_view_of_new_text(shown: dict | None, layer, head, training, seed):
    """The maps show another text: its last token is the query."""
    return step_view(shown, layer, head, None, training, seed)


def step_view_at_row(shown: dict | None, layer, head, training, seed, event: gr.EventData):
    """A click on a row of the enlarged head (its `query` event: layer, head, query row): that token is the query, in
    the clicked map's layer and head (the step view's own head when the map is the layer's average)."""
    clicked = event._data
    head = head if clicked["head"] == "mean" else int(clicked["head"])
    return step_view(shown, int(clicked["layer"]), head, int(clicked["query"]), training, seed)


def step_by_step_section(shown: gr.State, large: gr.HTML) -> None:
    """The Step by step view, driven by the text and model of the maps (`shown`), and by clicks on the enlarged
    head's rows; and the `step` endpoint."""
    gr.Markdown(
        "## Attention, step by step\nHow one head turns one token's input into its output, with the model's "
        "real numbers: pick a layer, a head and the query token, or click a row of the enlarged head above."
    )
    with gr.Row():
        layer = gr.Dropdown([0], value=0, label="Layer", interactive=True)
        head = gr.Dropdown([0], value=0, label="Head", interactive=True)
        query = gr.Dropdown([0], value=0, label="Query token", interactive=True)
        training = gr.Checkbox(False, label="Training mode (the model's attention dropout)")
        seed = unchecked(gr.Number(value=0, precision=0, label="Dropout seed"))
    view = gr.HTML(css_template=STEPS_CSS, js_on_load=None, elem_id="step-view")
    controls = [layer, head, query, view]
    shown.change(step_view_of_new_text, [shown, layer, head, training, seed], controls, api_visibility="private")
    for control in (layer, head, query, training, seed):
        control.input(step_view, [shown, layer, head, query, training, seed], controls, api_visibility="private")
    large.query(step_view_at_row, [shown, layer, head, training, seed], controls, api_visibility="private")
    gr.api(step, api_name="step")


# ---- the page ------------------------------------------------------------------------------------------------------


def unchecked(component):
    """`component`'s value reaches the handler as sent: an API client may send any value, and the handler checks it
    with a message naming the parameter (Gradio's own range and choice checks would not name it, and would print a
    traceback in the server log). Set on the instance: a subclass would make Gradio write a .pyi file beside
    app.py."""
    component.preprocess = lambda payload: payload
    return component


INTRO = """# MiniGPT: watch attention at work
A small GPT written to be read, as a 🤗 `transformers` model. Generate **names** or **text**, then look at how every
attention head of every layer spreads its attention over the tokens: each small map is one head (rows: the token that
looks; columns: the tokens it looks at; grey: future tokens it cannot see). Click a map to see it large.
"""


def build_demo() -> gr.Blocks:
    # delete_cache: exports (up to 604 MB of weights for GPT-2 at 1,024 tokens) and uploads (at most MAX_UPLOAD) are
    # copied into Gradio's cache; every 10 minutes, the files older than 30 go, so that a Space does not fill its disk.
    with gr.Blocks(title="MiniGPT attention explorer", delete_cache=(600, 1800)) as demo:
        gr.Markdown(INTRO)
        with gr.Accordion("Sampling", open=True):
            with gr.Row():
                temperature = unchecked(gr.Slider(0, 2, value=1.0, step=0.05, label="Temperature (0 = greedy)"))
                top_k = unchecked(gr.Number(value=0, precision=0, label="Top-k (0 = off)"))
                top_p = unchecked(gr.Slider(0, 1, value=1.0, step=0.01, label="Top-p (1 = off)"))
                seed = unchecked(gr.Number(value=-1, precision=0, label="Seed (-1 = random; same seed, same output)"))
        with gr.Tabs():
            with gr.Tab("Names"):
                with gr.Row():
                    names_model = unchecked(gr.Dropdown(PICKER.names, value=NAMES_DEFAULT, label="Model"))
                    prefix = gr.Textbox("", label="Starts with (optional)", placeholder="e.g. em")
                    count = unchecked(gr.Number(value=10, precision=0, label=f"How many names (1-{MAX_NAMES})"))
                names_button = gr.Button("Generate names", variant="primary")
                names_out = gr.Textbox(label="Names", lines=6, elem_id="names-output")
                names_notes = gr.Markdown(label="Notes")
                first_name = gr.State("")
            with gr.Tab("Text"):
                with gr.Row():
                    text_model = unchecked(gr.Dropdown(PICKER.names, value=TEXT_DEFAULT, label="Model"))
                    max_new = unchecked(gr.Number(value=200, precision=0, label=f"Max new tokens (1-{MAX_NEW_TOKENS})"))
                prompt = gr.Textbox("", label="Prompt (may be empty)", lines=3, placeholder="ROMEO:")
                text_button = gr.Button("Generate text", variant="primary")
                text_out = gr.Textbox(label="Text", lines=10, elem_id="text-output")
                text_notes = gr.Markdown(label="Notes")
            training = train_tab()

        gr.Markdown("## Attention maps")
        with gr.Row():
            attn_text = gr.Textbox(label="Text to look at (filled in by each generation)", value="emma", scale=3)
            attn_model = unchecked(
                gr.Dropdown(PICKER.names, value=NAMES_DEFAULT, label="Model", scale=1, elem_id="attention-model")
            )
        attn_button = gr.Button("Show attention")
        current = gr.HTML(js_on_load=CURRENT_JS, elem_id="current-text")
        attn_notes = gr.Markdown(label="Notes")
        grid = gr.HTML(label="Every head", js_on_load=PICK_JS, elem_id="attention-grid")
        with gr.Row():
            layer = gr.Dropdown([0], value=0, label="Layer", interactive=True)
            head = gr.Dropdown(["0"], value="0", label="Head", interactive=True)
        large = gr.HTML(label="Chosen head", js_on_load=HEAD_JS, elem_id="attention-head",
                        server_functions=[answers_visitors(f) for f in (attention_window, attention_row)])  # fmt: skip
        with gr.Row(equal_height=True):
            export_what = gr.Dropdown([(label, value) for value, label in EXPORTS.items()], value="safetensors",
                                      label="Export the attention of this text", scale=2)  # fmt: skip
            export_button = gr.Button("Export", scale=1)
            export_file = gr.File(label="Download", elem_id="attention-export", interactive=False, scale=2)
        gr.Markdown("### Shape trace of the attention sublayer (layer 0)")
        trace = gr.Dataframe(label="Shape trace", interactive=False, wrap=True, elem_id="shape-trace")
        shown = gr.State(None)
        attn_outputs = [attn_notes, grid, large, trace, layer, head, shown]

        sampling = [temperature, top_k, top_p, seed]
        private = dict(api_visibility="private")
        names_shown = names_button.click(
            names, [prefix, count, *sampling, names_model], [names_out, names_notes, first_name], api_name="names",
            concurrency_limit=None,  # every request goes to the model's batch, which has its own limits
        ).success(attention_of_sample, [first_name, names_model], [attn_text, attn_model, *attn_outputs], **private)
        generated = text_button.click(
            text, [prompt, max_new, *sampling, text_model], [text_out, text_notes], api_name="text",
            concurrency_limit=None,
        )
        sample_outputs = [attn_text, attn_model, *attn_outputs]
        text_shown = generated.success(attention_of_sample, [text_out, text_model], sample_outputs, **private)
        # The text shown is the page's current text: a new one (a button, Enter, another model, a generation) redraws
        # the maps and the step view and greys every other view of the previous one (CURRENT_JS); a text that cannot
        # be shown leaves no view claiming to be current.
        shows = [
            (attn_button.click(attention, [attn_text, attn_model], attn_outputs, api_name="attention"),
             [attn_text, attn_model]),
            (attn_text.submit(attention, [attn_text, attn_model], attn_outputs, **private), [attn_text, attn_model]),
            (attn_model.input(attention, [attn_text, attn_model], attn_outputs, **private), [attn_text, attn_model]),
            (demo.load(attention, [attn_text, attn_model], attn_outputs, **private), [attn_text, attn_model]),
            (names_shown, [first_name, names_model]),
            (text_shown, [text_out, text_model]),
        ]  # fmt: skip
        for event, asked in shows:
            event.failure(not_shown, asked, [shown, current, trace, attn_notes, grid, large], **private)
        shown.change(current_line, shown, current, **private)
        grid.pick(pick_head, [shown], [layer, head, large], **private)
        for selector in (layer, head):
            selector.input(show_head, [shown, layer, head], large, **private)
        export_button.click(export_shown, [shown, export_what, layer, head], export_file, **private)
        gr.api(attention_export, api_name="attention_export")
        gr.api(attention_values, api_name="attention_values")
        build_head_insights(shown, sampling, prompt, text_out, text_model, generated)
        pickers_follow_training(demo, training)
        step_by_step_section(shown, large)
    for block_function in demo.fns.values():  # the error rule, alike on every event and endpoint
        if block_function.fn is not None:
            block_function.fn = answers_visitors(block_function.fn)
    return demo


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="MiniGPT demo: names, text and attention maps.")
    parser.add_argument("--model", action="append", default=[], metavar="FOLDER_OR_HUB_ID",
                        help="another model for the picker (repeatable)")  # fmt: skip
    parser.add_argument("--names-model", help="the names tab's model (default: models/names)")
    parser.add_argument("--text-model", help="the text tab's model (default: models/shakespeare)")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="address to listen on (default 127.0.0.1; a Space sets GRADIO_SERVER_NAME)")  # fmt: skip
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)))
    parser.add_argument("--concurrency", type=int, default=4,
                        help="attention requests served at once (names and text: see --max-batch)")  # fmt: skip
    parser.add_argument("--max-batch", type=int, default=BATCHING["max_rows"],
                        help="rows decoded as one batch per model: a text is a row, a name too")  # fmt: skip
    parser.add_argument("--max-waiting", type=int, default=BATCHING["max_waiting"],
                        help="requests waiting for room in a model's batch; beyond, a 'busy' message")  # fmt: skip
    parser.add_argument("--min-decode-rows", type=int, choices=[1, MIN_DECODE_ROWS],
                        default=BATCHING["min_decode_rows"],
                        help="4 (default; raised to what this CPU's matrix kernels need, measured per model at start): "
                             "a seed gives the same text, bit for bit, alone or in a crowd; 1: a lone "
                             "request decodes at batch 1, faster, and its text may then differ from its text in a "
                             "crowd in rare cases (a near tie between two tokens)")  # fmt: skip
    parser.add_argument("--stream-every", type=float, default=STREAM["every"], metavar="SECONDS",
                        help="a streamed text is updated at most this often (0: no limit)")  # fmt: skip
    parser.add_argument("--stream-rate", type=float, default=STREAM["per_second"], metavar="UPDATES",
                        help="streamed texts are updated at most this many times a second in all, shared by those in "
                             "flight (0: no limit; with --stream-every 0, every token is sent)")  # fmt: skip
    return parser.parse_args(argv)


THEME = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])

# The models on offer, set by `configure` from the command line (a Space runs `python app.py`: the shipped models).
PICKER: ModelPicker
NAMES_DEFAULT: str
TEXT_DEFAULT: str


def configure(extra: list[str] = (), names_model: str | None = None, text_model: str | None = None) -> None:
    global PICKER, NAMES_DEFAULT, TEXT_DEFAULT
    sources, NAMES_DEFAULT, TEXT_DEFAULT = model_sources(list(extra), names_model, text_model)
    PICKER = ModelPicker(sources)
    start_training_runs()


def main(argv=None) -> None:
    args = parse_args(argv)
    # One thread per request: the models are small, and a request runs on whichever worker thread the server picks;
    # each such thread would start its own team of intra-op threads, and idle teams spin on the cores (10x slower).
    torch.set_num_threads(1)
    for source in [*args.model, args.names_model, args.text_model]:
        if source and missing_local_path(source):
            raise SystemExit(f"app.py: error: the model folder {source} does not exist.")
    BATCHING.update(max_rows=args.max_batch, max_waiting=args.max_waiting, min_decode_rows=args.min_decode_rows)
    if not 0 <= args.stream_every <= 1 or args.stream_rate < 0:
        raise SystemExit("app.py: error: --stream-every takes 0 to 1 second, --stream-rate 0 or more updates.")
    STREAM.update(every=args.stream_every, per_second=args.stream_rate)
    configure(args.model, args.names_model, args.text_model)
    for default in {NAMES_DEFAULT, TEXT_DEFAULT}:  # load before serving: the first request is as fast as the rest
        try:
            PICKER.get(default)
        except ModelUnavailable as error:  # a broken default model: one line, not a traceback
            raise SystemExit(f"app.py: error: {error} ({PICKER.sources[default]})") from None
    demo = build_demo()
    demo.queue(default_concurrency_limit=args.concurrency)
    demo.launch(
        server_name=args.host,
        server_port=args.port,
        share=False,
        theme=THEME,
        css=GRID_CSS + INSIGHT_CSS,
        ssr_mode=False,
        show_error=True,
        max_file_size=MAX_UPLOAD,
    )  # an unexpected error's message (never its traceback) reaches the page and the API


if __name__ == "__main__":
    main()
