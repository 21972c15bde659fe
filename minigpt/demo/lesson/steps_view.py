"""The block, step by step, as HTML: each step of the `step` endpoint's JSON (`steps_json`'s answer, worded by words.py)
drawn as the numbers it holds: cells coloured by value (red positive, blue negative, at full strength for the largest of
their vector), rounded to 3 decimals and exact on hover; the weights also as bars. The looks in steps_view.css. Nothing
here computes a model's numbers or knows of Gradio. `section_html` draws one step (what a lesson step shows),
`steps_html` all of them."""

import html

from minigpt.demo.core.view import asset, diverging_css
from minigpt.demo.lesson.words import NUMBERS, STEPS
from minigpt.heads.steps import NEG_INF

STEPS_CSS = asset("lesson/steps_view.css")

MAX_MATRIX_ROWS = 32  # rows of x_j, k_j, v_j drawn: beyond, the query's own and the keys it weighs most

MAX_MATRIX_COLUMNS = 64  # numbers per row of a matrix drawn: beyond, the first 48 and the last 16

MAX_BARS = 16  # weights drawn as bars: beyond, the largest first

FADED = 1.4  # the largest value of a vector is drawn at 1 / FADED of full colour: the number on it stays readable


def largest(values) -> float:
    """The largest absolute number among `values` (nested lists, "-inf" and None skipped): a vector's colour scale."""
    if isinstance(values, list):
        return max((largest(v) for v in values), default=0.0)
    return abs(values) if isinstance(values, int | float) else 0.0


def number_html(value, extra: str = "", scale: float = 0.0) -> str:
    """A number rounded to 3 decimals, exact on hover (its title is the float as JSON has it), its cell coloured by
    value against `scale` (0: not coloured)."""
    if value is None:
        return f'<span class="n{extra}" title="none">·</span>'
    if value == NEG_INF:
        return f'<span class="n masked{extra}" title="-inf">−∞</span>'
    shown = str(value) if isinstance(value, int) else f"{value:.3f}" if abs(value) < 1e4 else f"{value:.3g}"
    colour = f' style="{diverging_css(value, scale * FADED)}"' if scale > 0 else ""
    return f'<span class="n{extra}"{colour} title="{value!r}">{shown}</span>'


def vector_html(key: str, label: str, symbols: str, values: list | None, highlight: range = range(0)) -> str:
    """Every number of a vector (the query's own rows are never summarised), wrapped, scrolling when long."""
    if values is None:
        return f'<div class="label">{html.escape(label)} {symbols}: none in this model</div>'
    scale = largest(values)
    cells = "".join(number_html(v, " this-head" if n in highlight else "", scale) for n, v in enumerate(values))
    cells = f'<div class="cells" data-key="{key}" style="--count:{len(values)}">{cells}</div>'  # --count: view.css
    return f'<div class="label">{html.escape(label)} {symbols}</div>{cells}'


def token_cell(j: int, tokens: list[str]) -> str:
    return f'<td class="tok">{j} {html.escape(tokens[j][:12])}</td>'


def bar_span(value: float) -> str:
    """A bar as long as |value| (160 px for 1, at most 1.5 times that), red when negative: a weight, a probability or
    a share as a picture."""
    sign = " negative" if value < 0 else ""
    return f'<span class="bar{sign}" style="width:{max(1, round(min(abs(value), 1.5) * 160))}px"></span>'


def bar_cell(value: float) -> str:
    return f"<td>{bar_span(value)}</td>"


def keys_table(
    tokens: list[str], query: int, columns: list[tuple[str | None, str, list]], bars: list | None = None
) -> str:
    """One row per key position j (all of them: a long text scrolls), one column per (data key, header, values); the
    query's row stands out. A column's cells carry its data key (step.number, as in the JSON), for a page test.
    `bars`: one more column drawing these values as bars."""
    length = max(len(values) for _, _, values in columns)
    headers = [header for _, header, _ in columns] + ([""] if bars is not None else [])
    head = "<tr><th>j</th>" + "".join(f"<th>{html.escape(header)}</th>" for header in headers) + "</tr>"
    scales = [largest(values) for _, _, values in columns]
    rows = []
    for j in range(length):
        cells = []
        for (key, header, values), scale in zip(columns, scales):
            if j >= len(values):  # a column of the keys j <= i only: nothing after the query
                cells.append("<td></td>")
                continue
            cell = number_html(values[j], " dropped" if header == "kept" and values[j] == 0 else "", scale)
            cells.append(f'<td data-key="{key}">{cell}</td>' if key else f"<td>{cell}</td>")
        if bars is not None:
            cells.append(bar_cell(bars[j]) if j < len(bars) else "<td></td>")
        self_row = ' class="self"' if j == query else ""
        rows.append(f"<tr{self_row}>{token_cell(j, tokens)}{''.join(cells)}</tr>")
    return f'<div class="scroll"><table>{head}{"".join(rows)}</table></div>'


def weight_bars(tokens: list[str], weights: list, query: int) -> str:
    """The query's weights as bars: in text order on a short text, the MAX_BARS largest first on a long one."""
    seen = [(j, w) for j, w in enumerate(weights[: query + 1])]
    order = "in text order"
    if len(seen) > MAX_BARS:
        seen = sorted(seen, key=lambda jw: -jw[1])[:MAX_BARS]
        order = f"the {MAX_BARS} largest of {query + 1}, largest first"
    rows = "".join(
        f'<div class="bar-row"><span class="tok">{j} {html.escape(tokens[j][:12])}</span>{bar_span(w)} {w:.3f}</div>'
        for j, w in seen
    )
    return f'<div class="label">The weights as bars ({order})</div><div class="bars">{rows}</div>'


def folded(summary: str, body: str) -> str:
    """Numbers a learner opens when they want them (the block step's inner parts): closed at first."""
    return f'<details class="folded"><summary>{html.escape(summary)}</summary>{body}</details>'


def scalar_html(key: str, value) -> str:
    return f'<span data-key="{key}">{number_html(value)}</span>'


def matrix_html(
    key: str, label: str, symbols: str, rows: list[list[float]], tokens: list[str], query: int, weights: list
) -> str:
    """A (i+1, width) matrix, one row per key j. A long text draws MAX_MATRIX_ROWS rows (the query's and those of
    the keys with the largest weights), a wide one the first and last numbers of each row; the API has them all."""
    shown = list(range(len(rows)))
    note = ""
    if len(rows) > MAX_MATRIX_ROWS:
        heaviest = sorted(range(len(rows) - 1), key=lambda j: -weights[j])[: MAX_MATRIX_ROWS - 1]
        shown = sorted(heaviest + [query])
        note = f"{MAX_MATRIX_ROWS} of {len(rows)} rows: the query's and the keys it weighs most. "
    width, scale = len(rows[0]), largest(rows)
    columns = list(range(width))
    if width > MAX_MATRIX_COLUMNS:
        columns = list(range(48)) + [None] + list(range(width - 16, width))
        note += f"The first 48 and last 16 of {width} numbers a row. "
    body = []
    for j in shown:
        cells = "".join(
            "<td>…</td>" if c is None else f"<td>{number_html(rows[j][c], '', scale)}</td>" for c in columns
        )
        self_row = ' class="self"' if j == query else ""
        body.append(f'<tr{self_row} data-j="{j}">{token_cell(j, tokens)}{cells}</tr>')
    note = f'<p class="shapes">{note}Every number is in the API.</p>' if note else ""
    return (
        f'<div class="label">{html.escape(label)} {symbols}</div>{note}'
        f'<div class="scroll" data-key="{key}"><table>{"".join(body)}</table></div>'
    )


def shapes_html(shapes: list[dict], sizes: dict) -> str:
    parts = []
    for s in shapes:
        code = f" <code>{html.escape(s['code'])}</code>" if s["code"] else ""
        parts.append(f"{html.escape(s['what'])}{code} {s['symbols']} = {tuple(s['shape'])}")
    legend = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return f'<p class="shapes">Shapes ({legend}): {"; ".join(parts)}.</p>'


WHY_KEYS = 5  # the softmax step asks why of the query's heaviest keys


class StepDrawing:
    """Draws the steps of one `steps_json` answer: a method per step, named like it, returning the step's body."""

    def __init__(self, numbers: dict):
        self.numbers, self.s, self.tokens, self.i = numbers, numbers["steps"], numbers["tokens"], numbers["query"]
        D, h = numbers["sizes"]["D"], numbers["head"]
        self.this_head = range(h * D, (h + 1) * D)
        self.weights = self.s["softmax"]["weights"]

    def vector(self, name: str, key: str, highlight: range = range(0)) -> str:
        symbols, label = NUMBERS[name][key]
        return vector_html(f"{name}.{key}", label, symbols, self.s[name][key], highlight)

    def matrix(self, name: str, key: str) -> str:
        symbols, label = NUMBERS[name][key]
        return matrix_html(f"{name}.{key}", label, symbols, self.s[name][key], self.tokens, self.i, self.weights)

    def column(self, name: str, key: str, header: str) -> tuple[str, str, list]:
        return f"{name}.{key}", header, self.s[name][key]

    def embeddings(self) -> str:
        step, i = self.s["embeddings"], self.i
        ids = "".join(
            f'<span class="tid{" self" if j == i else ""}">{html.escape(t)} <b>{n}</b></span>'
            for j, (t, n) in enumerate(zip(self.tokens, step["ids"]))
        )
        told = f'<div class="label">The tokens and their ids (token {i} has id {step["token_id"]})</div>'
        parts = (self.vector("embeddings", key) for key in ("token_i", "position_i", "sum_i"))
        return f'{told}<div class="ids">{ids}</div>{"".join(parts)}'

    def inputs(self) -> str:
        return self.vector("inputs", "x_i") + self.matrix("inputs", "x_j") + self.vector("inputs", "residual_i")

    def no_weights(self) -> str:
        columns = [self.column("no_weights", "scores", "x_i . x_j"), self.column("no_weights", "weights", "softmax")]
        return keys_table(self.tokens, self.i, columns) + self.vector("no_weights", "output")

    def qkv(self) -> str:
        qkv = self.s["qkv"]
        slices = ", ".join(f"{name}: rows {a}..{b - 1}" for name, (a, b) in qkv["rows"].items())
        bias = " (and the same entries of its bias)" if qkv["bias"] else ""
        where = f"<p>Made by {qkv['weight']} {tuple(qkv['weight_shape'])}: {slices}{bias}.</p>"
        return where + self.vector("qkv", "q_i") + self.matrix("qkv", "k_j") + self.matrix("qkv", "v_j")

    def scores(self) -> str:
        scaling = (
            f"<p>D = {self.s['scores']['D']}, 1/sqrt(D) = {scalar_html('scores.scale', self.s['scores']['scale'])}</p>"
        )
        columns = [self.column("scores", "scores", "q_i . k_j"), self.column("scores", "scaled", "x 1/sqrt(D)")]
        return scaling + keys_table(self.tokens, self.i, columns)

    def softmax(self) -> str:
        step = self.s["softmax"]
        columns = [
            self.column("softmax", "masked", "masked s_j"),
            self.column("softmax", "exps", "exp(s_j - max)"),
            self.column("softmax", "weights", "w_ij"),
        ]
        sums = (
            f"<p>The exponentials sum to {scalar_html('softmax.exp_sum', step['exp_sum'])}; each divided by that sum "
            f"gives its weight. The weights sum to {scalar_html('softmax.sum', step['sum'])}.</p>"
        )
        bars = weight_bars(self.tokens, self.weights, self.i)
        return keys_table(self.tokens, self.i, columns) + sums + bars + self.why_keys()

    def why_keys(self) -> str:
        """Buttons asking why the head weighs each of the query's heaviest keys so (maps/head.js answers under the
        enlarged maps: the score split into query part x key part, /attention_why)."""
        heaviest = sorted(range(self.i + 1), key=lambda j: -self.weights[j])[:WHY_KEYS]
        layer, head = self.numbers["layer"], self.numbers["head"]
        buttons = "".join(
            f'<button type="button" data-why-key="{j}" data-query="{self.i}" data-layer="{layer}" data-head="{head}">'
            f"{j} {html.escape(self.tokens[j][:12])} ({self.weights[j]:.2f})</button>"
            for j in heaviest
        )
        return (
            '<div class="why-keys"><span class="label">Why this weight? The score of a key, split into what each part '
            f"of the stream puts into the query and the key (under the enlarged maps):</span> {buttons}"
            '<span class="why-status" aria-live="polite"></span></div>'
        )

    def dropout(self) -> str:
        drop = self.s["dropout"]
        after = self.column("dropout", "weights", "after dropout")
        if not drop["applied"]:
            told = "<p>Evaluation mode: dropout is the identity. Switch on training mode to see it.</p>"
            if drop["model_p"] == 0:
                told = (
                    "<p>Evaluation mode: dropout is the identity. This model was trained without attention dropout "
                    "(p = 0), so training mode changes nothing either: open a model trained with it (the shipped "
                    "names model, p = 0.1) to see dropout at work.</p>"
                )
            return told + keys_table(self.tokens, self.i, [after])
        told = (
            f"<p>Training mode: p = {drop['p']}, seed {drop['seed']}: kept weights are multiplied by "
            f"1/(1-p) = {number_html(drop['scale'])}.</p>"
        )
        if drop["p"] == 0:
            told += "<p>This model was trained without attention dropout (p = 0): training mode changes nothing.</p>"
        else:
            told += (
                f"<p>After dropout this row sums to {scalar_html('dropout.sum', drop['sum'])}, no longer exactly 1: "
                "only its expected sum is 1.</p>"
            )
        columns = [(None, "w_ij", self.weights), self.column("dropout", "keep", "kept"), after]
        return told + keys_table(self.tokens, self.i, columns)

    def output(self) -> str:
        told = (
            '<div class="label">Where z_i comes from: each key\'s weighted value w_ij v_j, measured along z_i '
            "(the shares add up to 1; a negative one pulls the other way)</div>"
        )
        shares = keys_table(
            self.tokens,
            self.i,
            [(None, "w_ij", self.s["dropout"]["weights"][: self.i + 1]), self.column("output", "shares", "share")],
            bars=self.s["output"]["shares"],
        )
        vectors = (self.vector("output", k, self.this_head if k == "heads_z_i" else range(0)) for k in OUTPUT_VECTORS)
        return self.vector("output", "z_i") + told + shares + "".join(vectors)

    def multi_head(self) -> str:
        difference = scalar_html("multi_head.max_abs_difference", self.s["multi_head"]["max_abs_difference"])
        both = self.vector("multi_head", "separate_i", self.this_head) + self.vector(
            "multi_head", "fused_i", self.this_head
        )
        return f"{both}<p>Largest absolute difference, over every token and head: {difference}</p>"

    def layer_norm(self, norm: str, what: str) -> str:
        step = self.s["block"][norm]
        moments = (
            f"<p>{what}: mean {scalar_html(f'block.{norm}.mean', step['mean'])}, variance "
            f"{scalar_html(f'block.{norm}.variance', step['variance'])}, eps {step['eps']:g}.</p>"
        )
        parts = moments + "".join(self.vector("block", f"{norm}_{part}") for part in ("hat", "scale", "shift"))
        return folded("How: its mean and variance, normalised, scaled, shifted", parts) + self.vector(
            "block", f"{norm}_out"
        )

    def block(self) -> str:
        step = self.s["block"]
        neurons = ", ".join(f"#{n} ({a:.3f})" for n, a in step["top_neurons"])
        moved = "attention" if step["attention_update"] > step["mlp_update"] else "the MLP"
        return (
            f"<h5>Layer norm before attention (attn_norm)</h5>{self.layer_norm('attn_norm', 'The stream entering')}"
            f"<h5>Residual add after attention</h5>{self.vector('block', 'middle_i')}"
            f"<h5>Layer norm before the MLP (mlp_norm)</h5>{self.layer_norm('mlp_norm', 'That stream')}"
            f"<h5>The MLP</h5>{folded('Before GELU', self.vector('block', 'pre_activation_i'))}"
            f"{self.vector('block', 'activation_i')}"
            f"<p>The most active neurons (largest |GELU|): {neurons}.</p>{self.vector('block', 'mlp_out_i')}"
            f"<h5>Residual add after the MLP</h5>{self.vector('block', 'after_i')}"
            f"<p>Length of each update: attention {scalar_html('block.attention_update', step['attention_update'])}, "
            f"MLP {scalar_html('block.mlp_update', step['mlp_update'])}: {moved} moves the stream more here.</p>"
        )

    def probabilities(self) -> str:
        step = self.s["probabilities"]
        rows = "".join(
            f'<tr><td class="tok">{html.escape(t)}</td>'
            f'<td data-key="probabilities.top_logits">{number_html(logit)}</td>'
            f'<td data-key="probabilities.top_probabilities">{number_html(p)}</td>'
            f"{bar_cell(p)}</tr>"
            for t, logit, p in zip(step["top_tokens"], step["top_logits"], step["top_probabilities"])
        )
        table = f"<table><tr><th>next token</th><th>logit</th><th>probability</th><th></th></tr>{rows}</table>"
        follows = (
            f"<p>The token that follows, {html.escape(step['next_token'])}, got probability "
            f"{scalar_html('probabilities.next_probability', step['next_probability'])}.</p>"
            if step["next_token"] is not None
            else "<p>This is the last token: what follows is for the model to choose.</p>"
        )
        told = f"<p>The {len(step['top_tokens'])} most likely of {step['vocabulary']} tokens:</p>"
        return self.vector("probabilities", "final_i") + told + f'<div class="scroll">{table}</div>' + follows


OUTPUT_VECTORS = ("heads_z_i", "out_i", "next_i")  # drawn after z_i and its keys' shares

WIDE = {"embeddings", "inputs", "output", "multi_head", "block"}  # steps drawn across the whole view


def section_html(numbers: dict, name: str, number: int | str, depth: str = "formulas", explained: bool = True) -> str:
    """Step `name` of a `steps_json` answer as one section, headed by its `number`; `depth` "plain" leaves out the
    shapes, `explained` False its one-sentence explanation (a lesson step says it in its own words)."""
    step, sizes = numbers["steps"][name], numbers["sizes"]
    wide = name in WIDE and (name != "inputs" or sizes["C"] > 64)
    explanation = f"<p>{html.escape(step['explanation'])}</p>" if explained else ""
    shapes = shapes_html(step["shapes"], sizes) if depth != "plain" else ""
    body = getattr(StepDrawing(numbers), name)()
    return (
        f'<section class="{"wide" if wide else ""}" data-step="{name}"><h4>{number}. {html.escape(step["title"])}'
        f"</h4>{explanation}{shapes}{body}</section>"
    )


def heading_html(numbers: dict, coloured: bool = True) -> str:
    """Which layer, head and query the steps are of, in which mode, how the numbers are drawn (`coloured`: the step
    sections' vectors), and the notes about the text."""
    tokens, i, h = numbers["tokens"], numbers["query"], numbers["head"]
    mode = (
        f"training mode: dropout p={numbers['steps']['dropout']['p']}, seed {numbers['seed']}"
        if numbers["training"]
        else "evaluation mode, no dropout"
    )
    drawn = (
        " Coloured by value (red positive, blue negative), rounded to 3 decimals: hover, tap or click a number for "
        "its exact value."
        if coloured
        else ""
    )
    return (
        f'<div class="head" data-query="{i}" data-layer="{numbers["layer"]}" data-head="{h}">'
        f'<span class="big">Layer {numbers["layer"]}, head {h}, query token {i} '
        f'"{html.escape(tokens[i])}"</span> ({mode}).{drawn}'
        + "".join(f"<p>{html.escape(note)}</p>" for note in numbers["notes"])
        + "</div>"
    )


def steps_html(numbers: dict, depth: str = "formulas", numbered=None) -> str:
    """Every step of the view, drawn from `steps_json`'s result: the page shows exactly the numbers the API returns.
    `numbered`: each step's number (the lesson's), by name; default: 1, 2, 3, ..."""
    numbered = numbered or {name: n for n, name in enumerate(STEPS, start=1)}
    sections = "".join(section_html(numbers, name, numbered[name], depth) for name in STEPS)
    return f'<div class="steps">{heading_html(numbers)}{sections}</div>'
