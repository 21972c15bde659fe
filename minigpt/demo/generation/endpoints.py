"""Generation's endpoints: names (a batch of N from the names model, one request of the model's continuous batch) and
text (streamed as it is written), with the notes about their input. Endpoints: /names, /text (streamed); the Names and
Text tabs (generation/ui.py) call them. No Gradio here."""

import asyncio
import contextlib

from minigpt.demo.core.inputs import clamped, number, parse_sampling
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.texts import from_boundary, keep_context, notes_markdown
from minigpt.errors import VisitorError

MAX_NAMES = 100  # names per request


MAX_NEW_TOKENS = 500  # text tokens per request


MAX_NAME_TOKENS = 32  # tokens per name, when a model with a long context is used for names


class Generation:
    """The section's endpoints, on the demo's state (generation/ui.py puts them on the page)."""

    def __init__(self, state: DemoState):
        self.state = state

    async def names(
        self,
        prefix: str = "",
        count: float = 10,
        temperature: float = 1.0,
        top_k: float = 0,
        top_p: float = 1.0,
        seed: float = -1,
        model: str | None = None,
    ):
        """N names from the names model, each starting with `prefix`. Returns the names (one a line), notes about the
        input, and (for the attention maps) each name with the text the maps read (its boundary tokens)."""
        lm = await asyncio.to_thread(
            self.state.picker.get, model or self.state.names_default
        )  # loading a model must not stall the other streams
        notes = []
        most = min(MAX_NAMES, lm.batcher.max_rows)  # a names request is one batch of `count` rows
        count = clamped("Number of names", number("Number of names", count, 10, int), 1, most, notes)
        sampling = parse_sampling(temperature, top_k, top_p, seed, lm.vocab_size, notes)
        prefix = (prefix or "").strip()
        prompt = from_boundary(lm, prefix, "prefix")
        room = min(lm.block_size - len(prompt), MAX_NAME_TOKENS)
        if room < 1:
            raise VisitorError(
                f"The prefix is too long: the {lm.name} model's context is {lm.block_size} tokens, the "
                f"start token included, so use at most {lm.block_size - 2} characters."
            )
        if sampling.greedy and count > 1:
            notes.append("Greedy decoding gives the same name every time.")
        samples = await lm.batcher.agenerate(prompt, room, sampling, rows=count)  # waits holding no thread
        decoded = [lm.tokenizer.decode(prompt[1:] + s, skip_special_tokens=True) for s in samples]
        if empty := decoded.count(""):
            notes.append(f"{empty} of the names are empty (blank lines): the model ended them at once.")
        mapped = [lm.tokenizer.decode(prompt + sample, skip_special_tokens=False) for sample in samples]
        return "\n".join(decoded), notes_markdown(notes), list(zip(decoded, mapped))

    async def text(
        self,
        prompt: str = "",
        max_new_tokens: float = 200,
        temperature: float = 1.0,
        top_k: float = 0,
        top_p: float = 1.0,
        seed: float = -1,
        model: str | None = None,
    ):
        """Continues `prompt` token by token (a generator: each yield is the text so far and the notes). The tokens come
        from the model's continuous batch; a client that goes closes this generator, which takes its row out at once."""
        lm = await asyncio.to_thread(self.state.picker.get, model or self.state.text_default)
        notes = []
        max_new = clamped(
            "Max new tokens", number("Max new tokens", max_new_tokens, 200, int), 1, MAX_NEW_TOKENS, notes
        )
        sampling = parse_sampling(temperature, top_k, top_p, seed, lm.vocab_size, notes)
        if not prompt:
            notes.append(f"Empty prompt: the model starts from its boundary token {lm.boundary!r}.")
        ids = keep_context(lm, from_boundary(lm, prompt or "", "prompt"), "prompt", notes)
        shown = lm.tokenizer.decode(ids, skip_special_tokens=True)  # what the model sees (the kept part of the prompt)
        yield shown, notes_markdown(notes)
        new: list[int] = []
        async with contextlib.aclosing(lm.batcher.astream(ids, max_new, sampling, **self.state.stream)) as ready:
            async for steps in ready:  # the tokens decoded since the last update
                new += [tokens[0] for tokens in steps]
                # A multi-byte character split across tokens decodes to U+FFFD until its last byte arrives.
                yield shown + lm.tokenizer.decode(new, skip_special_tokens=True).rstrip("\ufffd"), notes_markdown(notes)
        ended = " (the model wrote its end-of-text token)" if new and new[-1] == lm.eos_id else ""
        notes.append(f"{len(new)} new tokens{ended}.")
        yield shown + lm.tokenizer.decode(new, skip_special_tokens=True), notes_markdown(notes)
