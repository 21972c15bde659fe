"""A training run as a visitor asks for it, checked before anything runs: the data and tokenizer, the sizes, steps,
memory and work within this server's limits (stated on the Train tab), a free name, the visitor's text; the result is
a RunSpec, which the queue (training_runs.py) runs and the run's process (training_process.py) turns into train.py's
flags. Knows nothing of Gradio, and does not import the Trainer.

    spec, text = check_request(data="names", text="", tokenizer=None, ..., name="my-names", taken={"names"})
"""

import json
import os
import re
import secrets
from collections.abc import Collection
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from configuration_minigpt import PRESETS, MiniGPTConfig
from minigpt import tokenization
from minigpt.demo.core.limits import MAX_TEXT_BYTES
from minigpt.errors import VisitorError, shortened
from minigpt.presets import TRAINING_PRESETS
from modeling_minigpt import MiniGPTForCausalLM

# Limits, checked before anything runs (and stated on the page).

MAX_PARAMETERS = 10_000_000

MAX_STEPS = 20_000

# Work a second of a run on a 2-core CPU (one thread at nice 10, as training_process runs it), the estimate before a
# run has been timed on this server: the lab's defaults 5.3e9 (8,000 steps in 161 s), the names defaults 4.8e9
# (6,000 steps in 326 s), through the RunQueue on this project's 2-core machine.
TYPICAL_PACE = 5.0e9
MAX_WORK = 4.5e12  # parameters x training tokens (steps x batch x context): about 15 minutes at TYPICAL_PACE

MAX_RUN_SECONDS = 15 * 60  # a run that is still going then stops with a checkpoint (Resume queues it again)

SIZE_RANGES = dict(n_layer=(1, 12), n_head=(1, 16), n_embd=(8, 768), block_size=(4, 512), vocab_size=(260, 8192))

NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")

MIN_NAMES = 10  # train.py holds a tenth out to validate

HELD_OUT = 10  # the last 1/HELD_OUT of a text is the validation text

SAMPLES = 5  # generated at every evaluation

# What one run may ask of the server's memory (training_bytes, estimated before it starts): the audit's 12 x 16-head
# names run at context 512 needed over 7 GB and a 249,000-character vocabulary one tensor of 8.2 GB.
MAX_TRAINING_BYTES = 2 << 30

MAX_CHAR_VOCABULARY = 8192  # distinct characters of a char-tokenized text

# Built-in names, built-in Shakespeare, the induction lab's names written twice, the visitor's names or text.
DATA = ("names", "shakespeare", "induction", "text")

TOKENIZERS = ("names", "char", "bpe")

# The tokenizers each data can train with (the Train tab offers only these).
TOKENIZERS_FOR = {"names": ("names",), "induction": ("names",), "shakespeare": ("char", "bpe"), "text": TOKENIZERS}
DEFAULT_TOKENIZER = {"names": "names", "shakespeare": "bpe", "induction": "names", "text": "char"}


class RunError(VisitorError):
    """A visitor's mistake (bad input, a taken name, a run that is not theirs): the message says what to change."""


@dataclass
class RunSpec:
    name: str
    data: str  # names | shakespeare | induction | text
    tokenizer: str  # names | char | bpe
    n_layer: int
    n_head: int
    n_embd: int
    block_size: int
    max_steps: int
    learning_rate: float
    seed: int
    vocab_size: int  # bpe only
    parameters: int = 0  # filled in by check_request

    @property
    def preset(self) -> str:
        if self.data == "induction":
            return "induction"
        return "names" if self.tokenizer == "names" else "shakespeare"

    @property
    def batch_size(self) -> int:
        return TRAINING_PRESETS[self.preset]["per_device_train_batch_size"]

    @property
    def work(self) -> int:
        """Parameters x training tokens (steps x batch x context): what a run's time grows with."""
        return self.parameters * self.max_steps * self.batch_size * self.block_size

    def save(self, folder: Path) -> None:
        (folder / "spec.json").write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, folder: Path) -> "RunSpec":
        return cls(**json.loads((folder / "spec.json").read_text()))


def defaults(data_kind: str) -> dict:
    """The sizes and schedule the tab starts from: the names preset for names, the induction preset for the lab; for
    text, the shipped Shakespeare model's sizes (the shakespeare preset's 3.5M parameters x 3,000 steps is over
    MAX_WORK)."""
    if DEFAULT_TOKENIZER.get(data_kind, "names") == "names":
        preset = "induction" if data_kind == "induction" else "names"
        sizes = {k: PRESETS[preset][k] for k in ("n_layer", "n_head", "n_embd", "block_size")}
        schedule = {k: TRAINING_PRESETS[preset][k] for k in ("max_steps", "learning_rate")}
        return dict(tokenizer="names", **sizes, **schedule, seed=42, vocab_size=2048)
    return dict(
        tokenizer=DEFAULT_TOKENIZER[data_kind],
        n_layer=4,
        n_head=4,
        n_embd=128,
        block_size=128,
        max_steps=2000,
        learning_rate=2e-3,
        seed=42,
        vocab_size=2048,
    )


def check_name(name: str, taken: Collection[str]) -> str:
    """A new run's name: a-z, digits and '-', free; empty picks one."""
    name = (name or "").strip()
    if not name:
        return f"model-{secrets.token_hex(3)}"
    if not NAME.fullmatch(name):
        raise RunError(
            f"The model name {shortened(name)} is not allowed: use 1-32 lower-case letters a-z, digits and '-', "
            "starting with a letter (e.g. my-names)."
        )
    if name in taken:
        raise RunError(f"The name {name!r} is taken: choose another (or Resume it, if it is your stopped run).")
    return name


def read_upload(path: str) -> str:
    """The text of an uploaded file, its size checked on the disk before a byte is read."""
    size = os.path.getsize(path)
    if size > MAX_TEXT_BYTES:
        raise RunError(f"The file is {size / 1e6:.1f} MB: the limit is {MAX_TEXT_BYTES / 1e6:g} MB. Use a part of it.")
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise RunError("The file is not UTF-8 text: upload a plain .txt file.") from None


def check_training_text(text: str, tokenizer: str, block_size: int) -> str:
    """The visitor's training text, checked: not empty, small enough, a-z names, long enough for one window, few
    enough distinct characters for the char tokenizer. Line ends become newlines (a Windows file's CR LF too)."""
    if len(text.encode("utf-8")) > MAX_TEXT_BYTES:
        raise RunError(f"The text is {len(text.encode('utf-8')):,} bytes: the limit is {MAX_TEXT_BYTES:,}. Use a part.")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise RunError("The text is empty: type or paste names (one a line) or a text, or upload a .txt file.")
    if tokenizer == "names":
        names = [line.strip() for line in text.splitlines() if line.strip()]
        unknown = tokenization.unknown_characters(tokenization.names_tokenizer(), "".join(set("".join(names))))
        if unknown:
            raise RunError(
                f"Names may hold only the letters a-z, one name a line; these characters are not: "
                f"{', '.join(map(repr, unknown[:20]))}{' ...' * (len(unknown) > 20)}. Remove them, or choose the "
                "char tokenizer."
            )
        if len(names) < MIN_NAMES:
            raise RunError(
                f"{len(names)} names are too few: give at least {MIN_NAMES} (a tenth is held out to validate)."
            )
        return "\n".join(names) + "\n"
    need = block_size * HELD_OUT  # the held-out last tenth must hold a whole window (BPE: tokens <= characters)
    if len(text) < need:
        raise RunError(
            f"The text is {len(text):,} characters, shorter than needed for one window of {block_size} "
            f"tokens in its last tenth (held out to validate): give at least {need:,} characters or lower "
            "the context (block size)."
        )
    if tokenizer == "char" and len(set(text)) > MAX_CHAR_VOCABULARY:
        raise RunError(
            f"The text holds {len(set(text)):,} distinct characters: the char tokenizer takes at most "
            f"{MAX_CHAR_VOCABULARY:,} (each is a row of the model's embedding and a column of its logits). Choose the "
            "bpe tokenizer, or a text in fewer scripts."
        )
    return text


def written(number: float) -> str:
    """A number as a visitor reads it: 2,147,483,647 rather than 2.14748e+09; 0.0001 and 1e-06 as they are."""
    return f"{number:,}" if float(number).is_integer() and abs(number) < 1e15 else f"{number:g}"


def in_range(label: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise RunError(f"{label} must be between {written(low)} and {written(high)}, got {written(value)}.")


def count_parameters(config: MiniGPTConfig) -> int:
    """Parameters of the model `config` makes, built on the meta device (no memory, no initialisation cost)."""
    with torch.device("meta"):
        return MiniGPTForCausalLM(config).num_parameters()


def training_bytes(spec: RunSpec, vocabulary: int) -> int:
    """A run's peak memory, estimated (4 bytes a number). Training keeps, for the backward pass, every layer's
    attention weights and their gradient (batch x heads x context^2 each) and the logits with their softmax and
    gradient (batch x context x vocabulary); evaluation holds one layer's weights at a time for a bigger batch; the
    weights come four times (themselves, gradients, Adam's two moments)."""
    context, rows = spec.block_size, TRAINING_PRESETS[spec.preset]["per_device_eval_batch_size"]
    training = spec.batch_size * (2 * spec.n_layer * spec.n_head * context**2 + 3 * context * vocabulary)
    evaluation = rows * (spec.n_head * context**2 + context * vocabulary)
    return 4 * (max(training, evaluation) + 4 * spec.parameters)


def vocabulary_estimate(tokenizer: str, text: str, vocab_size: int) -> int:
    if tokenizer == "names":
        return len(tokenization.names_tokenizer())
    if tokenizer == "char":
        return len(set(text)) + 2 if text else 256  # the built-in Shakespeare has fewer characters than that
    return vocab_size


def check_request(
    data: str,
    text: str,
    tokenizer: str | None,
    n_layer: int,
    n_head: int,
    n_embd: int,
    block_size: int,
    max_steps: int,
    learning_rate: float,
    seed: int,
    vocab_size: int,
    name: str,
    taken: Collection[str],
) -> tuple[RunSpec, str]:
    """The run a visitor asks for, every limit checked, and its training text ("" for built-in data); raises
    RunError with what to change."""
    if data not in DATA:
        raise RunError(f"data must be one of {', '.join(DATA)}, got {shortened(data)}.")
    tokenizer = tokenizer or DEFAULT_TOKENIZER[data]
    if tokenizer not in TOKENIZERS:
        raise RunError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, got {shortened(tokenizer)}.")
    if tokenizer not in TOKENIZERS_FOR[data]:
        if data == "shakespeare":
            raise RunError("Shakespeare is not a list of a-z names: choose the char or bpe tokenizer.")
        raise RunError(f"The built-in {data} data trains with the names tokenizer (letters a-z): choose names.")
    sizes = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size, vocab_size=vocab_size)
    for key, (low, high) in SIZE_RANGES.items():
        in_range(key, sizes[key], low, high)
    in_range("max_steps", max_steps, 1, MAX_STEPS)
    in_range("learning_rate", learning_rate, 1e-6, 0.1)
    in_range("seed", seed, 0, 2**31 - 1)
    text = check_training_text(text or "", tokenizer, block_size) if data == "text" else ""
    spec = RunSpec(
        check_name(name, taken),
        data,
        tokenizer,
        n_layer,
        n_head,
        n_embd,
        block_size,
        max_steps,
        learning_rate,
        seed,
        vocab_size,
    )
    try:
        config = MiniGPTConfig.from_preset(
            spec.preset,
            n_layer=n_layer,
            n_head=n_head,
            n_embd=n_embd,
            block_size=block_size,
            vocab_size=vocabulary_estimate(tokenizer, text, vocab_size),
        )
    except ValueError as error:  # sizes that do not fit together: the config names the field and the fix
        raise RunError(str(error)) from None
    spec.parameters = count_parameters(config)
    if spec.parameters > MAX_PARAMETERS:
        raise RunError(
            f"{spec.parameters:,} parameters is over the limit of {MAX_PARAMETERS:,}: fewer layers or a smaller width."
        )
    memory = training_bytes(spec, config.vocab_size)
    if memory > MAX_TRAINING_BYTES:
        raise RunError(
            f"This run would need about {memory / 2**30:.1f} GiB of memory (attention: batch x heads x context^2 in "
            f"each of {n_layer} layers; logits: batch x context x a vocabulary of {config.vocab_size:,}), over this "
            f"server's {MAX_TRAINING_BYTES / 2**30:g} GiB a run: use a shorter context, fewer heads or layers, or a "
            "smaller vocabulary."
        )
    work = spec.work
    if work > MAX_WORK:
        fitting = int(MAX_WORK / (spec.parameters * spec.batch_size * block_size))
        raise RunError(
            f"This run is too big for this server: {spec.parameters:,} parameters x {max_steps:,} steps x "
            f"{spec.batch_size * block_size:,} tokens a step = {work:.1e}, over the limit of "
            f"{MAX_WORK:.1e}: use at most {fitting:,} steps at these sizes or a smaller model."
        )
    return spec, text
