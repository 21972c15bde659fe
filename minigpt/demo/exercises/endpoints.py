"""Exercises a teacher can assign, as plain JSON: the `exercises` endpoint asks questions built from the model's own
measurements on a text (questions.py: pick a head, predict a number, pick an input or a token), each with an id
derived from the model, the text and the question's parameters, so that a link can name it; the `grade` endpoint
grades an answer against the measured value, with the sentence that explains it and a link to the view that shows it;
a circuit the learner builds is graded by measuring it as the `test_circuit` endpoint does (circuits/own_circuit.py).
Each text's questions of a kind are measured once and kept, so a class grading the same set waits for one measurement.
The built-in sets, and lesson step 13's question (from the circuit walk's answer). No Gradio here."""

import hashlib
import json
import re
from pathlib import Path
from urllib.parse import urlencode

from minigpt.demo.circuits.endpoints import Circuits
from minigpt.demo.core.inputs import number, parse_heads
from minigpt.demo.core.kept_answers import KeptAnswers
from minigpt.demo.core.models import split_snapshot_name
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.texts import TextView
from minigpt.demo.exercises import words
from minigpt.demo.exercises.questions import (
    ASKED,
    KINDS,
    TEXT_FREE,
    Measurements,
    Question,
    Unasked,
    corrupted_view,
    input_question,
)
from minigpt.errors import VISITORS_MISTAKES, VisitorError, shortened
from minigpt.heads.stated_circuit import MAX_TEXT, stated_heads

KIND_NAMES = ("head", "number", "choice", "circuit")
NAMED_ONLY = {"circuit"}  # asked only when `kinds` names it: its first ask on a model runs the circuit search
ID_FORM = re.compile(r"([a-z_]{1,40})-([0-9a-f]{10})")  # writer-3f2a9c0b1d: the question's type, then its digest
MAX_ANSWER_CHARS = MAX_TEXT  # a circuit written out (a head, a choice or a number as text is a few characters)
MAX_IDS_CHARS = 2000  # a link's or a call's list of ids: about a hundred questions
MAX_KINDS_CHARS = 500
KEPT = 256  # (text, question type) measurements kept
ROMEO, ZORBAK = "Romeo and Juliet, Romeo and Jul", "Then Zorbak spoke. Then Zor"

# The built-in sets: a model, its texts, the kinds asked. A link ?set=NAME opens one for a class.
SETS = {
    "induction-circuit": {
        "title": "The induction circuit on the specimen",
        "model": "specimen",
        "texts": [ROMEO, ZORBAK, "the cat sat. the ca"],
        "kinds": ["head", "number", "choice", "circuit"],
    },
    "names-heads": {
        "title": "What heads do on names",
        "model": "names",
        "texts": ["emma", "olivia", "annabella"],
        "kinds": ["head", "number"],
    },
    "head-forms": {
        "title": "Watching a head form on the induction lab",
        "model": "induction",
        "texts": ["qwertyuiopqwerty"],
        "kinds": ["head", "number"],
    },
}


def question_id(model: str, ids: list[int], question: Question) -> str:
    """Stable across servers and restarts: the type, then a digest of the model, the text's ids and the question's
    parameters."""
    spelled = json.dumps([model, list(ids), question.type, question.params], sort_keys=True)
    return f"{question.type}-{hashlib.sha256(spelled.encode()).hexdigest()[:10]}"


def asked_json(model: str, ids: list[int], question: Question) -> dict:
    """What a learner sees before answering: the id, the kind, the words, and what to answer with."""
    return {
        "id": question_id(model, ids, question),
        "kind": KINDS[question.type],
        "type": question.type,
        "prompt": question.prompt,
        "answer_with": question.answer_with,
        "parameters": question.params,
    }


def checked_types(kinds) -> list[str]:
    """The question types a visitor's `kinds` names ("head, number", or types: "writer, ov_top"); empty: every type
    but those asked only by name (NAMED_ONLY: the circuit to build)."""
    if not isinstance(kinds, str) and kinds is not None:
        raise VisitorError(f"kinds must be text (kinds or question types separated by commas), got {shortened(kinds)}.")
    if len(kinds or "") > MAX_KINDS_CHARS:
        raise VisitorError(f"kinds is {len(kinds):,} characters long: at most {MAX_KINDS_CHARS}.")
    asked = named(kinds)
    unknown = [k for k in asked if k not in KIND_NAMES and k not in KINDS]
    if unknown:
        raise VisitorError(
            f"Unknown kind {shortened(unknown[0])}: give kinds ({', '.join(KIND_NAMES)}) or question types "
            f"({', '.join(KINDS)}), separated by commas; empty: every kind but circuit."
        )
    if not asked:
        return [t for t in KINDS if t not in NAMED_ONLY]
    return [t for t in KINDS if t in asked or KINDS[t] in asked]


def checked_ids(ids, name: str = "ids") -> list[str]:
    """Question ids as a visitor writes them (separated by commas or spaces), each of the form type-digest."""
    if not isinstance(ids, str) and ids is not None:
        raise VisitorError(f"{name} must be text (question ids separated by commas), got {shortened(ids)}.")
    if len(ids or "") > MAX_IDS_CHARS:
        raise VisitorError(f"{name} is {len(ids):,} characters long: at most {MAX_IDS_CHARS:,}.")
    found = [i for i in re.split(r"[,\s;]+", (ids or "").strip()) if i]
    for one in found:
        match = ID_FORM.fullmatch(one)
        if not match or match[1] not in KINDS:
            raise VisitorError(
                f"Cannot read the question id {shortened(one)}: ids look like 'writer-3f2a9c0b1d' (a question type, a "
                "dash, 10 hex digits), as /exercises gives them."
            )
    return list(dict.fromkeys(found))


def head_answer(value, question: Question) -> str:
    heads = question.answer_with
    if not isinstance(value, str):
        raise VisitorError(f"answer must be a head written as text, layer.head ('1.1'), got {shortened(value)}.")
    found = parse_heads(value, heads["n_layer"], heads["n_head"])
    if len(found) != 1:
        raise VisitorError(f"answer must be one head, layer.head ('1.1'), got {shortened(value)}.")
    return "{}.{}".format(*found[0])


def number_answer(value, question: Question) -> float:
    asked = question.answer_with
    found = number("answer", value, None)
    if found is not None and isinstance(asked["min"], int) and float(found).is_integer():
        found = int(found)  # a training step
    if found is None:
        raise VisitorError(
            f"answer is empty: type a number ({asked['unit']}) between {asked['min']} and {asked['max']}."
        )
    if not asked["min"] <= found <= asked["max"]:
        raise VisitorError(
            f"answer must be between {asked['min']:g} and {asked['max']:g} ({asked['unit']}), got {found:g}."
        )
    return found


def choice_answer(value, question: Question) -> str:
    choices = question.answer_with["choices"]
    if not isinstance(value, str):
        raise VisitorError(f"answer must be one of the choices as text, got {shortened(value)}.")
    if any(value == c["value"] for c in choices):
        return value
    spelled = value.strip().lower()  # "K", "key", "key (where it looks)"
    matching = {c["value"] for c in choices if spelled in (c["value"].lower(), c["label"].lower())}
    matching |= {c["value"] for c in choices if len(spelled) > 1 and c["label"].lower().startswith(spelled + " ")}
    if len(matching) != 1:
        listed = ", ".join(repr(c["value"]) for c in choices)
        raise VisitorError(f"answer must be one of {listed}, got {shortened(value)}.")
    return matching.pop()


def answered(value) -> None:
    """An answer's JSON type and size, checked before anything is measured: a head or a choice as text, a number."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, str | int | float)):
        raise VisitorError(
            f"answer must be a head, a number or a choice (as text or a number), got {shortened(value)}."
        )
    if isinstance(value, str) and len(value) > MAX_ANSWER_CHARS:
        raise VisitorError(
            f"answer is {len(value):,} characters long: at most {MAX_ANSWER_CHARS:,} (a circuit written out; a head, a "
            "number or a choice is a few)."
        )


def circuit_answer(value, question: Question) -> str:
    """A circuit as text; read (and its heads counted) against the model when it is graded."""
    if not isinstance(value, str):
        raise VisitorError(
            f"answer must be a circuit written as text ('0.2 1.1', '0.2 -> 1.1 k'), got {shortened(value)}."
        )
    return value.strip()


READ = {"head": head_answer, "number": number_answer, "choice": choice_answer, "circuit": circuit_answer}


def read_answer(value, question: Question):
    """The visitor's answer, checked: a head of the grid, a number in the question's range, one of its choices."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise VisitorError("answer is empty: " + {"head": "pick a head (layer.head, e.g. '1.1').",
            "number": "type a number.", "choice": "pick one of the choices.",
            "circuit": "write a circuit (heads '0.2 1.1' or edges '0.2 -> 1.1 k')."}[KINDS[question.type]])  # fmt: skip
    return READ[KINDS[question.type]](value, question)


def graded(question: Question, answer) -> bool:
    if KINDS[question.type] == "number":
        return abs(answer - question.truth) <= question.answer_with["tolerance"]
    return answer in question.accepted


def link_to(model: str, text: str, keys: dict) -> str:
    """The page's link (?model=&text=&layer=&head=&step=) that opens the view showing a measurement."""
    return "?" + urlencode({"model": model, "text": text, **keys})


def class_link(model: str, texts: list[str], kinds: str, set_name: str = "", ids: list[str] = ()) -> str:
    """The link that opens a set of questions for a class: a built-in set by name (and its first text on the maps),
    or the model, its texts and the kinds (and the question ids, where only some are asked)."""
    keys = {"set": set_name} if set_name in SETS else {}
    keys |= {"model": model, "text": texts[0]} | ({} if set_name in SETS else {"texts": "\n".join(texts)})
    keys["kinds"] = ",".join(named(kinds))
    if ids:
        keys["ids"] = ",".join(ids)
    return "?" + urlencode(keys)


def named(kinds) -> list[str]:
    """The kinds and types a filter names, in its order (checked_types reads them)."""
    return [k for k in re.split(r"[,\s;]+", (kinds or "").strip().lower()) if k]


def kinds_of(kinds) -> list[str]:
    """The kinds (head, number, choice, circuit) a filter of kinds or types asks."""
    types = checked_types(kinds)
    return [k for k in KIND_NAMES if any(KINDS[t] == k for t in types)]


def asked_once(parts: list[dict]) -> list[dict]:
    """A set's texts' answers, each question that does not depend on the text (TEXT_FREE: when a head formed) kept
    on the first text of its model only: a set asks it once."""
    seen, kept = set(), []
    for part in parts:
        questions = []
        for question in part.get("questions", []):
            key = (part["model"], question["type"], json.dumps(question["parameters"], sort_keys=True))
            if question["type"] not in TEXT_FREE or key not in seen:
                questions.append(question)
            seen.add(key)
        kept.append({**part, "questions": questions} if "questions" in part else part)
    return kept


def walk_question(walk: dict) -> dict | None:
    """Lesson step 13's question from the circuit walk's answer: through which input of the head that carries the
    answer the whole clean stream restores it most, on the walk's first corruption (None where the walk had none)."""
    for step in walk.get("steps", []):
        if step["name"] == "input" and step.get("path"):
            receiver = "{}.{}".format(*step["path"]["receiver"])
            question = input_question(receiver, step["corrupted_text"], step["what"], step["path"])
            return {**asked_json(walk["model"], walk["ids"], question), "model": walk["model"]}
    return None


def measured(ask, measurements: Measurements) -> list[Question] | Unasked:
    """A question type's questions on the text, or why the text cannot support it: an answer kept as well."""
    try:
        return ask(measurements)
    except Unasked as why:  # kept without its traceback: its frames would keep the measurements alive
        return why.with_traceback(None)


class Exercises:
    """The endpoints, on the demo's state (exercises/ui.py puts them on the page)."""

    def __init__(self, state: DemoState, circuits: Circuits | None = None):
        self.state = state
        self.circuits = circuits if circuits is not None else Circuits(state)  # the page's: one circuit search a model
        # each (model, text, question type)'s questions, measured once (concurrent asks wait for the first) and kept
        self.kept = KeptAnswers(KEPT)

    def view(self, text, model) -> TextView:
        if not isinstance(text, str):
            raise VisitorError(f"text must be text, got {shortened(text)}.")
        view = self.state.text_view(model or self.state.names_default, text or "")
        if len(view.ids) < 2:
            raise VisitorError(
                "The text is empty: type at least one character (the start token alone predicts nothing)."
            )
        return view

    def log_folder(self, name: str) -> Path | None:
        """The model's folder, where its roles log is (a Hub id has none here)."""
        base, _ = split_snapshot_name(name)
        folder = Path(self.state.picker.sources.get(base, ""))
        return folder if base in self.state.picker.sources and folder.is_dir() else None

    def asked(self, view: TextView, types: list[str]) -> dict[str, list[Question] | Unasked]:
        """Each type's questions on the text (or why it cannot be asked), measured once per text and type."""
        corrupt = lambda v, before: corrupted_view(self.state, v, before)  # noqa: E731
        found = lambda: self.found_circuit(view.lm.name)  # noqa: E731
        measurements = Measurements(view, corrupt, self.log_folder(view.lm.name), found)
        key = (view.lm.name, id(view.lm.model), tuple(view.ids))
        return {t: self.kept.get((*key, t), lambda t=t: measured(ASKED[t], measurements)) for t in types}

    def found_circuit(self, model: str) -> dict:
        """The circuit search's answer on the induction task, its options the page's defaults (kept: the Circuits
        section's own), or why it cannot run on this model here."""
        try:
            return self.circuits.find_circuit(model=model, task="induction")
        except VISITORS_MISTAKES as error:
            raise Unasked(f"The circuit search cannot run on this model here: {error}") from None

    def circuit_graded(self, lm, question: Question, circuit: str) -> tuple[bool, str, dict, dict]:
        """A circuit the learner built, its heads counted against the question's most (a refusal says what to
        change), then measured as `/test_circuit` measures it, on the question's prompts: (correct, explanation,
        evidence, measured)."""
        named, most = stated_heads(circuit, lm.model), question.params["heads"]
        if len(named) > most:
            raise VisitorError(words.too_many_heads(named, most))
        yours = self.circuits.test_circuit(model=lm.name, task="induction", circuit=circuit)
        faithfulness, keeps = yours["found_on"]["faithfulness"], question.params["keeps"]
        minimal = question.evidence["minimal"]
        right = faithfulness >= keeps
        explanation = words.circuit_explained(named, yours, keeps, question.explanation, right)
        values = [("yours", faithfulness), ("minimal", minimal["faithfulness"]), ("asked", keeps)]
        measured = {"heads": named, "faithfulness": faithfulness, "minimal": minimal["faithfulness"], "keeps": keeps}
        evidence = {
            "values": [{"choice": name, "value": value} for name, value in values],
            "minimal": minimal, "found_on": yours["found_on"], "held_out": yours["held_out"], "parts": yours["parts"],
        }  # fmt: skip
        return right, explanation, evidence, measured

    def exercises(self, text: str = ROMEO, model: str | None = "specimen", kinds: str = "", ids: str = "") -> dict:
        """Questions on `text` built from `model`'s own measurements on it: `kinds` (head, number, choice, or
        question types: previous_token, writer, importance, ablated_probability, ablated_attention, formation_step,
        carrying_input, ov_top; circuit (asked only by name: build a circuit of at most N heads that keeps at least X
        of the induction task, N and X the model's own minimal circuit's); empty: all but circuit), only the questions
        `ids` names (empty: every one). Each question: its `id`, `kind`, `prompt` and `answer_with` (the heads to pick
        from; the number's unit, range and tolerance and why; the choices; a circuit's `max_heads` and `keeps`).
        `skipped`: the types this text cannot support, and why."""
        types, wanted = checked_types(kinds), checked_ids(ids)
        view = self.view(text, model)
        if wanted:
            types = [t for t in types if t in {ID_FORM.fullmatch(i)[1] for i in wanted}]
        questions, skipped = [], []
        for kind, found in self.asked(view, types).items():
            if isinstance(found, Unasked):
                skipped.append({"type": kind, "kind": KINDS[kind], "why": str(found)})
                continue
            questions += [asked_json(view.lm.name, view.ids, q) for q in found]
        if wanted:
            questions = [q for q in questions if q["id"] in wanted]
        return {
            **view.about,
            "text": view.text,
            "questions": questions,
            "skipped": skipped,
            "unmatched": [i for i in wanted if i not in {q["id"] for q in questions}],
            "link": class_link(view.lm.name, [view.text], kinds, ids=wanted),
            "notes": view.notes,
        }

    def grade(
        self, text: str = ROMEO, model: str | None = "specimen", question: str = "", answer: str | float = ""
    ) -> dict:
        """`answer` to the question `question` (an id /exercises gave for this text and model) graded against the
        measured value: `correct`, `truth` (`accepted`: every right answer where the measurement ties), `explanation`
        (one sentence from the measurement), `link` (the page's query opening the view that shows it) and `evidence`
        (the numbers the reveal draws). A head or choice as text ('1.1', 'k'); a number within the question's
        tolerance; a circuit as text ('0.2 1.1', '0.2 -> 1.1 k'), of at most the question's heads, right when it
        keeps at least the question's faithfulness, measured as `test_circuit` measures it (`measured`: its
        faithfulness beside the minimal circuit's)."""
        view = self.view(text, model)
        answered(answer)
        asked = checked_ids(question, "question")
        if len(asked) != 1:
            raise VisitorError("question must be one question id, as /exercises gives it ('writer-3f2a9c0b1d').")
        kind = ID_FORM.fullmatch(asked[0])[1]
        if KINDS.get(kind) == "circuit" and isinstance(answer, str) and answer.strip():
            stated_heads(answer, view.lm.model)  # a circuit that cannot be read: its message before the search's time
        found = self.asked(view, [kind])[kind]
        if isinstance(found, Unasked):
            raise VisitorError(f"The question {asked[0]} cannot be asked on this text and model: {found}")
        chosen = next((q for q in found if question_id(view.lm.name, view.ids, q) == asked[0]), None)
        if chosen is None:
            raise VisitorError(
                f"{asked[0]} is not a question of this text on the {view.lm.name} model (an id names its model, text "
                "and parameters): ask /exercises for this text's questions, or give the text and model it came with."
            )
        given = read_answer(answer, chosen)
        correct, explanation, evidence, measured = graded(chosen, given), chosen.explanation, chosen.evidence, None
        if KINDS[chosen.type] == "circuit":
            correct, explanation, evidence, measured = self.circuit_graded(view.lm, chosen, given)
        return {
            **view.about,
            "text": view.text,
            "question": asked_json(view.lm.name, view.ids, chosen),
            "answer": given,
            "correct": correct,
            "truth": chosen.truth,
            "accepted": chosen.accepted,
            "explanation": explanation,
            "link": link_to(view.lm.name, view.text, chosen.link),
            "evidence": evidence,
            **({"measured": measured} if measured else {}),
            "notes": view.notes,
        }
