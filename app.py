"""MiniGPT demo (a Hugging Face Space): generate names or text, and look at every attention head at work.

    python app.py                                   # the shipped models, on http://127.0.0.1:7860
    python app.py --model path/to/folder --model user/minigpt-on-the-hub   # more models in the picker
    python app.py --host 0.0.0.0 --port 7860        # what a Space does (or set GRADIO_SERVER_NAME)

Named API endpoints (gradio_client): /names, /text (streamed) and /attention. See the README for an example.
"""

import argparse
import functools
import math
import os
import random
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: no network calls at start
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import gradio as gr  # noqa: E402
import pandas  # noqa: E402
import torch  # noqa: E402
from transformers import (  # noqa: E402
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from attention_maps import (  # noqa: E402
    GRID_CSS,
    HOVER_JS,
    PICK_JS,
    grid_html,
    head_html,
    inspect_attention,
    token_labels,
    trace_table,  # noqa: E402
)
from modeling_minigpt import MiniGPTForCausalLM  # noqa: E402  (importing it registers MiniGPT with the Auto classes)
from tokenization import known_characters, unknown_characters  # noqa: E402

REPO = Path(__file__).resolve().parent
SHIPPED = {"names": REPO / "models" / "names", "shakespeare": REPO / "models" / "shakespeare"}
MAX_NAMES = 100  # names per request
MAX_NEW_TOKENS = 500  # text tokens per request
MAX_NAME_TOKENS = 32  # tokens per name, when a model with a long context is used for names


# ---- models --------------------------------------------------------------------------------------------------------


@dataclass
class LanguageModel:
    name: str  # as shown in the picker and accepted by the API
    model: MiniGPTForCausalLM
    tokenizer: object
    boundary_id: int  # the token every text starts from (bos, else eos) and names end with (eos)
    eos_id: int | None
    never_ids: list[int]  # tokens never to generate: the pad (only there to fill batches)

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
    return LanguageModel(name, model.eval(), tokenizer, boundary, tokenizer.eos_token_id, never)


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
        if name not in self.sources:
            raise gr.Error(f"Unknown model {name!r}: choose one of {', '.join(self.sources)}.")
        with self.lock:
            if name not in self.loaded:
                try:
                    self.loaded[name] = load_language_model(name, self.sources[name])
                except Exception as error:  # a broken folder or no network for a Hub id: say so, keep serving
                    raise gr.Error(f"Could not load the model {name!r} from {self.sources[name]}: {error}") from error
            return self.loaded[name]


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


@dataclass
class Sampling:
    temperature: float  # 0: greedy
    top_k: int  # 0: off
    top_p: float  # 1: off
    seed: int

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def warpers(self) -> LogitsProcessorList:
        """transformers' own logits warpers, in generate()'s order, for the text loop."""
        warpers = LogitsProcessorList([TemperatureLogitsWarper(self.temperature)])
        if self.top_k:
            warpers.append(TopKLogitsWarper(self.top_k))
        if self.top_p < 1.0:
            warpers.append(TopPLogitsWarper(self.top_p))
        return warpers


def number(name: str, value, default, kind=float):
    """`value` as an int or float; None (left out by an API client) means the default."""
    if value is None or value == "":
        return default
    try:
        result = kind(float(value)) if kind is int else kind(value)
    except (TypeError, ValueError, OverflowError):
        raise gr.Error(f"{name} must be a number, got {value!r}.") from None
    if isinstance(result, float) and not math.isfinite(result):
        raise gr.Error(f"{name} must be a finite number, got {value!r}.")
    return result


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
        raise gr.Error(f"Temperature must be 0 or more, got {temperature}: 0 always picks the most likely token, "
                       "1 samples from the model's probabilities, higher is more random.")  # fmt: skip
    if temperature == 0:
        notes.append("Temperature 0: greedy decoding, the most likely token every time (top-k, top-p and seed unused).")
    top_k = number("top-k", top_k, 0, int)
    if top_k < 0:
        raise gr.Error(f"top-k must be 0 (off) or a positive number of tokens, got {top_k}.")
    if top_k >= vocab_size:
        notes.append(f"top-k {top_k} is not below the model's {vocab_size} tokens, so it keeps them all (off).")
        top_k = 0
    top_p = number("top-p", top_p, 1.0)
    if not 0 < top_p <= 1:
        raise gr.Error(f"top-p must be above 0 and at most 1, got {top_p}: it keeps the most likely tokens whose "
                       "probabilities add up to top-p; 1 turns it off.")  # fmt: skip
    seed = number("Seed", seed, -1, int)
    if seed < 0:
        seed = random.randrange(2**31)
        notes.append(f"Random seed {seed}: set the seed to {seed} to get this output again.")
    elif seed >= 2**63:
        raise gr.Error(f"Seed must be below 2**63, got {seed}.")
    return Sampling(temperature, top_k, top_p, seed)


def describe(character: str) -> str:
    return f"{character!r} ({unicodedata.name(character, f'U+{ord(character):04X}')})"


def encode(lm: LanguageModel, text: str, what: str) -> list[int]:
    """The ids of `text` (no special tokens added), or a message naming every character the model does not know."""
    unknown = unknown_characters(lm.tokenizer, text, allow_special_tokens=True)  # a prompt may hold '.' etc.
    if unknown:
        known = known_characters(lm.tokenizer)
        hint = f" It knows only: {known!r}." if len(known) <= 100 else ""
        raise gr.Error(f"The {lm.name} model does not know these characters of the {what}: "
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

GLOBAL_RNG = threading.Lock()  # generate() samples from torch's global generator: seed and sample under one lock


def sample_names(lm: LanguageModel, prompt: list[int], count: int, sampling: Sampling, max_new: int) -> list[list[int]]:
    """`count` continuations of `prompt` with model.generate (a batch), each cut after the end token (kept)."""
    config = GenerationConfig(
        max_new_tokens=max_new,
        do_sample=not sampling.greedy,
        eos_token_id=lm.eos_id,
        pad_token_id=lm.eos_id,
        suppress_tokens=lm.never_ids or None,
    )
    if not sampling.greedy:
        config.update(temperature=sampling.temperature, top_k=sampling.top_k, top_p=sampling.top_p)
    input_ids = torch.tensor([prompt] * count)  # (count, P)
    with GLOBAL_RNG, torch.no_grad():
        torch.manual_seed(sampling.seed)
        output = lm.model.generate(input_ids, attention_mask=torch.ones_like(input_ids), generation_config=config)
    samples = []
    for row in output[:, len(prompt) :].tolist():  # (count, new)
        samples.append(row[: row.index(lm.eos_id) + 1] if lm.eos_id in row else row)
    return samples


def names(prefix: str = "", count: float = 10, temperature: float = 1.0, top_k: float = 0, top_p: float = 1.0,
          seed: float = -1, model: str | None = None):  # fmt: skip
    """N names from the names model, each starting with `prefix`. Returns the names (one a line), notes about the
    input, and (for the attention maps) the first name with its boundary tokens."""
    lm = PICKER.get(model or NAMES_DEFAULT)
    notes = []
    count = clamped("Number of names", number("Number of names", count, 10, int), 1, MAX_NAMES, notes)
    sampling = parse_sampling(temperature, top_k, top_p, seed, lm.vocab_size, notes)
    prefix = (prefix or "").strip()
    prompt = from_boundary(lm, prefix, "prefix")
    room = min(lm.block_size - len(prompt), MAX_NAME_TOKENS)
    if room < 1:
        raise gr.Error(f"The prefix is too long: the {lm.name} model's context is {lm.block_size} tokens, the start "
                       f"token included, so use at most {lm.block_size - 2} characters.")  # fmt: skip
    if sampling.greedy and count > 1:
        notes.append("Greedy decoding gives the same name every time.")
    samples = sample_names(lm, prompt, count, sampling, room)
    decoded = [lm.tokenizer.decode(prompt[1:] + s, skip_special_tokens=True) for s in samples]
    if empty := decoded.count(""):
        notes.append(f"{empty} of the names are empty (blank lines): the model ended them at once.")
    first = lm.tokenizer.decode(prompt + samples[0], skip_special_tokens=False)
    return "\n".join(decoded), notes_markdown(notes), first


def kept_when_full(block_size: int) -> int:
    return max(1, block_size * 3 // 4)


def sample_text(lm: LanguageModel, ids: list[int], max_new: int, sampling: Sampling) -> Iterator[int]:
    """Yields up to `max_new` tokens continuing `ids`, stopping after the end token.

    Our own loop rather than generate(), which stops at the model's context: here, when the context is full, the
    window jumps to its last 3/4 (positions are absolute, so the cache is recomputed for them once) and the KV cache
    serves the next block_size / 4 tokens. Sliding by one token each step, as nanoGPT samples, would recompute the whole
    window every token: 10x slower past the context, for a few more tokens of memory. Sampling uses transformers'
    warpers and a per-request generator, so one seed gives one output even when many requests run at once."""
    generator = torch.Generator().manual_seed(sampling.seed)
    warpers = None if sampling.greedy else sampling.warpers()
    window, cache = list(ids), None
    with torch.no_grad():
        for _ in range(max_new):
            fresh = torch.tensor([window if cache is None else window[-1:]])  # (1, T) or (1, 1)
            out = lm.model(input_ids=fresh, past_key_values=cache, use_cache=True, logits_to_keep=1)
            logits = out.logits[:, -1].float()  # (1, vocab)
            logits[:, lm.never_ids] = float("-inf")
            if sampling.greedy:
                token = int(logits.argmax())
            else:
                probs = warpers(None, logits).softmax(dim=-1)
                token = int(torch.multinomial(probs, 1, generator=generator))
            yield token
            if token == lm.eos_id:
                return
            window.append(token)
            cache = out.past_key_values
            if len(window) > lm.block_size:  # the context is full: keep its last 3/4, recompute their cache once
                window, cache = window[-kept_when_full(lm.block_size) :], None


def text(prompt: str = "", max_new_tokens: float = 200, temperature: float = 1.0, top_k: float = 0,
         top_p: float = 1.0, seed: float = -1, model: str | None = None):  # fmt: skip
    """Continues `prompt` token by token (a generator: each yield is the text so far and the notes)."""
    lm = PICKER.get(model or TEXT_DEFAULT)
    notes = []
    max_new = clamped("Max new tokens", number("Max new tokens", max_new_tokens, 200, int), 1, MAX_NEW_TOKENS, notes)
    sampling = parse_sampling(temperature, top_k, top_p, seed, lm.vocab_size, notes)
    if not prompt:
        notes.append(f"Empty prompt: the model starts from its boundary token {lm.boundary!r}.")
    ids = keep_context(lm, from_boundary(lm, prompt or "", "prompt"), "prompt", notes)
    shown = lm.tokenizer.decode(ids, skip_special_tokens=True)  # what the model sees (the kept part of the prompt)
    yield shown, notes_markdown(notes)
    new: list[int] = []
    for token in sample_text(lm, ids, max_new, sampling):
        new.append(token)
        # A multi-byte character split across tokens decodes to U+FFFD until its last byte arrives.
        yield shown + lm.tokenizer.decode(new, skip_special_tokens=True).rstrip("\ufffd"), notes_markdown(notes)
    ended = " (the model wrote its end-of-text token)" if new and new[-1] == lm.eos_id else ""
    notes.append(f"{len(new)} new tokens{ended}.")
    yield shown + lm.tokenizer.decode(new, skip_special_tokens=True), notes_markdown(notes)


# ---- attention -----------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)  # clicking through heads redraws from here, without running the model again
def attention_view(model: str, text: str):
    lm = PICKER.get(model)
    notes = []
    ids = keep_context(lm, from_boundary(lm, text, "text"), "text", notes)
    weights, trace = inspect_attention(lm.model, torch.tensor([ids]))
    return token_labels(lm.tokenizer, ids), weights, trace, notes


def layer_and_head_choices(n_layer: int, n_head: int):
    layers = gr.Dropdown(choices=[(f"layer {i}", i) for i in range(n_layer)], value=0)
    heads = gr.Dropdown(choices=[(f"head {h}", str(h)) for h in range(n_head)] + [("average", "mean")], value="0")
    return layers, heads


def attention(text: str = "emma", model: str | None = None):
    """Attention maps of `text` for every layer and head, the chosen head large, and the shape trace."""
    model = model or NAMES_DEFAULT
    tokens, weights, trace, notes = attention_view(model, text or "")
    config = PICKER.get(model).model.config
    sizes = dict(B=1, T=len(tokens), C=config.n_embd, H=config.n_head, D=config.n_embd // config.n_head)
    headers, rows = trace_table(trace, sizes)
    notes = notes + [f"{len(tokens)} tokens: {' '.join(tokens)}"]
    return (
        notes_markdown(notes),
        grid_html(weights, tokens),
        head_html(weights, tokens, 0, "0"),
        pandas.DataFrame(rows, columns=headers),
        *layer_and_head_choices(config.n_layer, config.n_head),
        {"model": model, "text": text or ""},
    )


def show_head(shown: dict | None, layer: int, head: str):
    if not shown:
        return gr.skip()
    tokens, weights, _, _ = attention_view(shown["model"], shown["text"])
    return head_html(weights, tokens, int(layer), str(head))


def pick_head(shown: dict | None, event: gr.EventData):
    """A click on a tile of the grid: that head, large."""
    layer, head = int(event._data["layer"]), str(event._data["head"])
    return layer, head, show_head(shown, layer, head)


def attention_of_sample(sample: str, model: str):
    """After generating: the maps of what was generated (the first name, or the text)."""
    return sample, model, *attention(sample, model)


# ---- the page ------------------------------------------------------------------------------------------------------


def unchecked(component):
    """`component`'s value reaches the handler as sent: an API client may send any value, and the handler checks it
    with a message naming the parameter (Gradio's own range check would not name it). Set on the instance: a
    subclass would make Gradio write a .pyi file beside app.py."""
    component.preprocess = lambda payload: payload
    return component


INTRO = """# MiniGPT: watch attention at work
A small GPT written to be read, as a 🤗 `transformers` model. Generate **names** or **text**, then look at how every
attention head of every layer spreads its attention over the tokens: each small map is one head (rows: the token that
looks; columns: the tokens it looks at; grey: future tokens it cannot see). Click a map to see it large.
"""


def build_demo() -> gr.Blocks:
    with gr.Blocks(title="MiniGPT attention explorer") as demo:
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
                    names_model = gr.Dropdown(PICKER.names, value=NAMES_DEFAULT, label="Model")
                    prefix = gr.Textbox("", label="Starts with (optional)", placeholder="e.g. em")
                    count = unchecked(gr.Number(value=10, precision=0, label=f"How many names (1-{MAX_NAMES})"))
                names_button = gr.Button("Generate names", variant="primary")
                names_out = gr.Textbox(label="Names", lines=6, elem_id="names-output")
                names_notes = gr.Markdown(label="Notes")
                first_name = gr.State("")
            with gr.Tab("Text"):
                with gr.Row():
                    text_model = gr.Dropdown(PICKER.names, value=TEXT_DEFAULT, label="Model")
                    max_new = unchecked(gr.Number(value=200, precision=0, label=f"Max new tokens (1-{MAX_NEW_TOKENS})"))
                prompt = gr.Textbox("", label="Prompt (may be empty)", lines=3, placeholder="ROMEO:")
                text_button = gr.Button("Generate text", variant="primary")
                text_out = gr.Textbox(label="Text", lines=10, elem_id="text-output")
                text_notes = gr.Markdown(label="Notes")

        gr.Markdown("## Attention maps")
        with gr.Row():
            attn_text = gr.Textbox(label="Text to look at (filled in by each generation)", value="emma", scale=3)
            attn_model = gr.Dropdown(PICKER.names, value=NAMES_DEFAULT, label="Model", scale=1)
        attn_button = gr.Button("Show attention")
        attn_notes = gr.Markdown(label="Notes")
        grid = gr.HTML(label="Every head", js_on_load=PICK_JS, elem_id="attention-grid")
        with gr.Row():
            layer = gr.Dropdown([0], value=0, label="Layer", interactive=True)
            head = gr.Dropdown(["0"], value="0", label="Head", interactive=True)
        large = gr.HTML(label="Chosen head", js_on_load=HOVER_JS, elem_id="attention-head")
        gr.Markdown("### Shape trace of the attention sublayer (layer 0)")
        trace = gr.Dataframe(label="Shape trace", interactive=False, wrap=True, elem_id="shape-trace")
        shown = gr.State(None)
        attn_outputs = [attn_notes, grid, large, trace, layer, head, shown]

        sampling = [temperature, top_k, top_p, seed]
        names_button.click(
            names, [prefix, count, *sampling, names_model], [names_out, names_notes, first_name], api_name="names"
        ).success(attention_of_sample, [first_name, names_model], [attn_text, attn_model, *attn_outputs],
                  api_visibility="private")  # fmt: skip
        text_button.click(
            text, [prompt, max_new, *sampling, text_model], [text_out, text_notes], api_name="text"
        ).success(attention_of_sample, [text_out, text_model], [attn_text, attn_model, *attn_outputs],
                  api_visibility="private")  # fmt: skip
        attn_button.click(attention, [attn_text, attn_model], attn_outputs, api_name="attention")
        grid.pick(pick_head, [shown], [layer, head, large], api_visibility="private")
        for selector in (layer, head):
            selector.input(show_head, [shown, layer, head], large, api_visibility="private")
        demo.load(attention, [attn_text, attn_model], attn_outputs, api_visibility="private")
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
    parser.add_argument("--concurrency", type=int, default=4, help="requests served at once")
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


def main(argv=None) -> None:
    args = parse_args(argv)
    # One thread per request: the models are small, and a request runs on whichever worker thread the server picks;
    # each such thread would start its own team of intra-op threads, and idle teams spin on the cores (10x slower).
    torch.set_num_threads(1)
    configure(args.model, args.names_model, args.text_model)
    for default in {NAMES_DEFAULT, TEXT_DEFAULT}:  # load before serving: the first request is as fast as the rest
        PICKER.get(default)
    demo = build_demo()
    demo.queue(default_concurrency_limit=args.concurrency)
    demo.launch(
        server_name=args.host,
        server_port=args.port,
        share=False,
        theme=THEME,
        css=GRID_CSS,
        ssr_mode=False,
        show_error=True,
    )  # an unexpected error's message (never its traceback) reaches the page and the API


if __name__ == "__main__":
    main()
