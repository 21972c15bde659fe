"""The circuits section's endpoints, as plain JSON on the demo's state: direct logit attribution (/logit_attribution),
activation and path patching against a corrupted text (/patching; "change one token" when none is given), composition
scores (/composition), one head's OV and positional QK circuits with its map after an earlier head is ablated
(/head_circuit), the circuit walk (/circuit_walk), the circuit found (/find_circuit) and the visitor's own circuit
measured beside it (/test_circuit). Their numbers: measures.py, head_circuit.py, circuit_walk.py, find_circuit.py,
own_circuit.py; circuits/ui.py puts them on the page. No Gradio here."""

from minigpt.demo.circuits import measures
from minigpt.demo.circuits.circuit_walk import circuit_walk, needed_heads
from minigpt.demo.circuits.find_circuit import (
    FoundCache,
    checked_options,
    induction_answer,
    text_answer,
    text_count,
    text_held_out,
)
from minigpt.demo.circuits.head_circuit import head_circuit
from minigpt.demo.circuits.own_circuit import checked_circuit, held_out_of, own_answer
from minigpt.demo.core.models import split_snapshot_name
from minigpt.demo.core.per_model import PerModel
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.texts import TextView
from minigpt.demo.head_finder.corpus import default_corpus
from minigpt.errors import VisitorError, shortened


class Circuits:
    """The section's endpoints, on the demo's state (circuits/ui.py puts them on the page)."""

    def __init__(self, state: DemoState):
        self.state = state
        self.compositions = measures.CompositionCache()
        self.needed = PerModel(needed_heads)  # the induction task's heads: one model's, whatever the text
        self.found = FoundCache()  # circuits found, per model, task and options

    def view(self, text: str, model: str | None, what: str = "text") -> TextView:
        view = self.state.text_view(model or self.state.names_default, text or "")
        if len(view.ids) < 2:
            raise VisitorError(
                f"The {what} is empty: type at least one character (the start token alone predicts nothing)."
            )
        return view

    def logit_attribution(
        self,
        text: str = "emma",
        model: str | None = None,
        position: int = -1,
        token: str = "",
        other_token: str = "",
        prompts: int = 1,
    ) -> dict:
        """Each component's direct contribution (embeddings, every head, attention biases, MLPs) to the logit of
        `token` (a token's text; empty: the model's top-1 there) after `position` (from 0; -1: the last), or to
        logit(token) - logit(other_token); the heads as a layer x head grid, the largest named. `prompts` > 1: the
        mean and spread over the text and its variants (the same repeats, other tokens)."""
        return measures.attribution(self.view(text, model), position, token, other_token, prompts)

    def patching(
        self,
        text: str = "emma",
        corrupted_text: str = "",
        model: str | None = None,
        sender: str = "",
        receiver: str = "",
        receiver_input: str = "k",
        key_position: int = -1,
        part: str = "output",
        intermediate: str = "",
        prompts: int = 1,
        exact_cell: str = "",
    ) -> dict:
        """Patching `text` (clean) into `corrupted_text` (the same token count, another top-1 answer; empty: one token
        changed for you), effect = (LD_patched - LD_corrupted) / (LD_clean - LD_corrupted): each head's `part`
        (output, q, k, v or pattern; layer x head), each head at each position, and the residual stream (layer x
        position). With `receiver` (layer.head), path patching too: every sender (embed, each earlier head and MLP,
        the whole stream) into each of its q, k and v, with its attention from the last query on `key_position` (-1:
        the token after the first copy of the text's repeated end); with `sender` ('0.2', 'mlp 0', 'embed') and
        `intermediate` ('mlp 0'), the two-step path sender -> intermediate -> its `receiver_input`. `prompts` > 1: the
        mean and spread over the text and its variants. Where exact patching would run the model more than the server
        allows a view (GPT-2's size), the grids are attribution patching's estimates (`estimate`: true, `estimated`:
        which); `exact_cell` ('1.1', '1.1 5': at position 5, 'resid 1 5') adds that cell's exact value."""
        options = dict(
            sender=sender, receiver=receiver, receiver_input=receiver_input, key_position=key_position, part=part,
            intermediate=intermediate, prompts=prompts, exact_cell=exact_cell,
        )  # fmt: skip
        return self.patched(text, corrupted_text, model, options)

    def patched(self, text, corrupted_text, model, options: dict, progress=None):
        if str(options.get("receiver_input") or "k").strip().lower() not in ("q", "k", "v"):
            raise VisitorError(f"receiver_input must be 'q', 'k' or 'v', got {shortened(options['receiver_input'])}.")
        clean = self.view(text, model)
        measures.check_options(clean, options)
        corrupted, note = self.corrupted_view(clean, corrupted_text)
        measures.check_same_length(clean, corrupted)
        answer = measures.patching(clean, corrupted, options, self.state.cores, progress)
        answer["notes"] += [note] if note else []
        return answer

    def circuit_walk(self, text: str = "Romeo and Juliet, Romeo and Jul", model: str | None = None) -> dict:
        """The measurements that find how heads work together on `text`, in order, each with the sentence its numbers
        support: who writes the answer (attribution), what carries it (patching, one token changed), through which
        input of that head, what to copy and where to look (path patching), how earlier parts reach it (two-step
        paths), and which heads the model needs to copy (mean ablation on random tokens written twice)."""
        view = self.view(text, model)
        measures.check_patch_length(view)
        return circuit_walk(view, self.one_changed_view, self.state.cores, self.needed.get)

    def one_changed_view(self, clean: TextView, before: int = 0) -> TextView:
        ids, _ = measures.one_token_changed(clean, before)
        return self.view(clean.lm.tokenizer.decode(ids[1:], skip_special_tokens=False), clean.lm.name, "corrupted text")

    def corrupted_view(self, clean: TextView, corrupted_text: str) -> tuple[TextView, str | None]:
        """The corrupted text as the model reads it; empty: the clean text with one token changed (and a note)."""
        if (corrupted_text or "").strip():
            return self.view(corrupted_text, clean.lm.name, "corrupted text"), None
        ids, note = measures.one_token_changed(clean)
        text = clean.lm.tokenizer.decode(ids[1:], skip_special_tokens=False)
        return self.view(text, clean.lm.name, "corrupted text"), f"Corrupted text: “{text}”. {note}"

    def corpus_windows(self, lm) -> list[list[int]]:
        """The model's own text (the Head Finder's default corpus, built once a model): the natural text the found
        circuit is checked on."""
        base, _ = split_snapshot_name(lm.name)
        source = self.state.picker.sources[base]
        return self.state.head_metrics.default_corpus(lm.name, lambda: default_corpus(lm, source)).windows

    def composition(self, model: str | None = None) -> dict:
        """Q, K and V composition scores of every earlier head into every later one (layer x head x layer x head,
        layer norm weights folded), the random baseline of this width, and the edges above it, strongest first."""
        return measures.composition(self.state.picker.get(model or self.state.names_default), self.compositions)

    def head_circuit(
        self,
        text: str = "emma",
        model: str | None = None,
        layer: int = 0,
        head: int = 0,
        ablate: str = "",
        source: str = "auto",
        ablation: str = "zero",
    ) -> dict:
        """One head's circuits: its OV circuit over tokens (whole for a small vocabulary, else the text's rows' top
        targets) read through what earlier layers write (`source` auto: above layer 0; 'effective'; 'bare': the bare
        embedding), with its copying scores against random circuits; how often its queries pick the key after their
        own token; its positional QK circuit; and with `ablate` (earlier heads, '0.2') its map on the text before and
        after they are ablated (`ablation`: zero, mean or resample), with its weight on induction targets."""
        return head_circuit(self.view(text, model), layer, head, ablate, source, ablation)

    def find_circuit(
        self,
        text: str = "Romeo and Juliet, Romeo and Jul",
        model: str | None = None,
        task: str = "induction",
        corrupted_text: str = "",
        prompts: int = 0,
        ablation: str = "mean",
        method: str = "eap-ig",
        target: float = 0.9,
        metric: str = "",
        normalise: str = "ablated",
    ) -> dict:
        """The circuit found, not told: every edge of the model's graph (embed, each head's q, k, v and output, each
        MLP, the logits) scored on a prompt set by `method` (eap-ig or eap), the fewest top edges kept whose exact run
        keeps `target` of the behaviour, every other edge ablated (`ablation`: mean over the prompts, or the corrupted
        prompt's output). `task` induction: random tokens written twice (the text is not read); text: `text` against
        `corrupted_text` (empty: one token changed for you), with variants of the pair. `prompts` 0: as many as fit.
        Answers the edges, faithfulness, kept and total edges and heads, the faithfulness at a set of k (top k edges
        kept) for a slider, the faithfulness on held-out prompt sets, and the minimal circuit pruned from the found one
        with what each part adds. `metric`: log-probability, logit difference or kl divergence (empty: the task's
        own); `normalise`: 'ablated' (against every edge ablated) or 'corrupted' (against the corrupted run)."""
        task, options = checked_options(task, prompts, ablation, method, target, metric, normalise)
        return self.found_circuit(task, options, text, model, corrupted_text)[1]

    def test_circuit(
        self,
        text: str = "Romeo and Juliet, Romeo and Jul",
        model: str | None = None,
        task: str = "induction",
        corrupted_text: str = "",
        circuit: str = "",
        prompts: int = 0,
        ablation: str = "mean",
        method: str = "eap-ig",
        target: float = 0.9,
        metric: str = "",
        normalise: str = "ablated",
    ) -> dict:
        """Your own circuit measured as the found one is: `circuit` as heads ('0.2, 1.1': every edge among them, the
        embeddings, every MLP and the logits) or edges and paths ('0.2 -> mlp 0 -> 1.1 k, 1.1 -> logits'), run exactly
        on the prompts the circuit of `find_circuit` (the same task and options) was found on and on its held-out sets,
        with what each part adds (the faithfulness lost without it) and the found and minimal circuits beside it."""
        task, options = checked_options(task, prompts, ablation, method, target, metric, normalise)
        circuit = "" if circuit is None else str(circuit)
        check = lambda lm: checked_circuit(circuit, lm.model)  # noqa: E731 (read before any pass runs)
        lm, found, held_out = self.found_circuit(task, options, text, model, corrupted_text, check)
        return own_answer(lm, circuit, found, held_out(), options, self.state.cores)

    def found_circuit(self, task: str, options: dict, text, model, corrupted_text, check=lambda lm: None):
        """find_circuit's answer for the task and options (kept: computed once), with its model and the held-out sets
        it was measured on (a callable: measured when asked). `check(lm)` runs first, before any pass."""
        if task == "induction":
            lm = self.state.picker.get(model or self.state.names_default)
            check(lm)
            windows = lambda: self.corpus_windows(lm)  # noqa: E731
            found = induction_answer(lm, options, self.found, self.state.cores, windows)
            return lm, found, lambda: held_out_of(lm, found, windows, None)
        view = self.view(text, model)
        check(view.lm)
        corrupted, note = self.corrupted_view(view, corrupted_text)
        found = text_answer(view, corrupted, note, options, self.found, self.state.cores)
        count = text_count(view.lm, len(view.ids), options["prompts"], options["ablation"])
        texts = [view.ids, corrupted.ids]
        return view.lm, found, lambda: held_out_of(view.lm, found, None, lambda: text_held_out(view.lm, texts, count))
