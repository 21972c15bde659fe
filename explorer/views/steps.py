"""Attention, step by step, as HTML: each step of `attention_steps.steps_json`'s answer (the `step` endpoint's JSON)
drawn as the numbers it holds, rounded to 3 decimals and exact on hover; the looks in steps.css. Nothing here computes
a model's numbers or knows of Gradio."""

import html

from explorer.attention_steps import NEG_INF, NUMBERS
from explorer.views.assets import asset

STEPS_CSS = asset("steps.css")

MAX_MATRIX_ROWS = 32  # rows of x_j, k_j, v_j drawn: beyond, the query's own and the keys it weighs most

MAX_MATRIX_COLUMNS = 64  # numbers per row of a matrix drawn: beyond, the first 48 and the last 16


def number_html(value, extra: str = "") -> str:
    """A number rounded to 3 decimals, exact on hover (its title is the float as JSON has it)."""
    if value is None:
        return f'<span class="n{extra}" title="none">·</span>'
    if value == NEG_INF:
        return f'<span class="n masked{extra}" title="-inf">−∞</span>'
    shown = str(value) if isinstance(value, int) else f"{value:.3f}" if abs(value) < 1e4 else f"{value:.3g}"
    return f'<span class="n{extra}" title="{value!r}">{shown}</span>'


def vector_html(key: str, label: str, symbols: str, values: list, highlight: range = range(0)) -> str:
    """Every number of a vector (the query's own rows are never summarised), wrapped, scrolling when long."""
    cells = "".join(number_html(v, " this-head" if n in highlight else "") for n, v in enumerate(values))
    return f'<div class="label">{html.escape(label)} {symbols}</div><div class="cells" data-key="{key}">{cells}</div>'


def token_cell(j: int, tokens: list[str]) -> str:
    return f'<td class="tok">{j} {html.escape(tokens[j][:12])}</td>'


def keys_table(tokens: list[str], query: int, columns: list[tuple[str | None, str, list]]) -> str:
    """One row per key position j (all of them: a long text scrolls), one column per (data key, header, values); the
    query's row stands out. A column's cells carry its data key (step.number, as in the JSON), for a page test."""
    length = max(len(values) for _, _, values in columns)
    head = "<tr><th>j</th>" + "".join(f"<th>{html.escape(header)}</th>" for _, header, _ in columns) + "</tr>"
    rows = []
    for j in range(length):
        cells = []
        for key, header, values in columns:
            value = values[j] if j < len(values) else None
            cell = number_html(value, " dropped" if header == "kept" and value == 0 else "")
            cells.append(f'<td data-key="{key}">{cell}</td>' if key else f"<td>{cell}</td>")
        self_row = ' class="self"' if j == query else ""
        rows.append(f"<tr{self_row}>{token_cell(j, tokens)}{''.join(cells)}</tr>")
    return f'<div class="scroll"><table>{head}{"".join(rows)}</table></div>'


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
        largest = sorted(range(len(rows) - 1), key=lambda j: -weights[j])[: MAX_MATRIX_ROWS - 1]
        shown = sorted(largest + [query])
        note = f"{MAX_MATRIX_ROWS} of {len(rows)} rows: the query's and the keys it weighs most. "
    width = len(rows[0])
    columns = list(range(width))
    if width > MAX_MATRIX_COLUMNS:
        columns = list(range(48)) + [None] + list(range(width - 16, width))
        note += f"The first 48 and last 16 of {width} numbers a row. "
    body = []
    for j in shown:
        cells = "".join("<td>…</td>" if c is None else f"<td>{number_html(rows[j][c])}</td>" for c in columns)
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


def steps_html(numbers: dict) -> str:
    """The step view, drawn from `steps_json`'s result: the page shows exactly the numbers the API returns."""
    s, tokens, i = numbers["steps"], numbers["tokens"], numbers["query"]
    sizes, h = numbers["sizes"], numbers["head"]
    D, C = sizes["D"], sizes["C"]
    this_head = range(h * D, (h + 1) * D)
    weights = s["softmax"]["weights"]
    mode = (
        f"training mode: dropout p={s['dropout']['p']}, seed {numbers['seed']}"
        if numbers["training"]
        else "evaluation mode (no dropout)"
    )
    parts = [
        f'<div class="head" data-query="{i}" data-layer="{numbers["layer"]}" data-head="{h}">'
        f'<span class="big">Layer {numbers["layer"]}, head {h}, query token {i} '
        f'"{html.escape(tokens[i])}"</span> ({mode}). Rounded to 3 decimals: hover a number for its exact value.'
        + "".join(f"<p>{html.escape(note)}</p>" for note in numbers["notes"])
        + "</div>"
    ]

    def section(number: int, name: str, body: str, wide: bool = False) -> None:
        step = s[name]
        parts.append(
            f'<section class="{"wide" if wide else ""}" data-step="{name}"><h4>{number}. {html.escape(step["title"])}'
            f"</h4><p>{html.escape(step['explanation'])}</p>{shapes_html(step['shapes'], sizes)}{body}</section>"
        )

    def vector(name: str, key: str, highlight: range = range(0)) -> str:
        symbols, label = NUMBERS[name][key]
        return vector_html(f"{name}.{key}", label, symbols, s[name][key], highlight)

    def matrix(name: str, key: str) -> str:
        symbols, label = NUMBERS[name][key]
        return matrix_html(f"{name}.{key}", label, symbols, s[name][key], tokens, i, weights)

    def column(name: str, key: str, header: str) -> tuple[str, str, list]:
        return f"{name}.{key}", header, s[name][key]

    section(
        1, "inputs", vector("inputs", "x_i") + matrix("inputs", "x_j") + vector("inputs", "residual_i"), wide=C > 64
    )
    table = keys_table(
        tokens, i, [column("no_weights", "scores", "x_i . x_j"), column("no_weights", "weights", "softmax")]
    )
    section(2, "no_weights", table + vector("no_weights", "output"))
    qkv = s["qkv"]
    slices = ", ".join(f"{name}: rows {a}..{b - 1}" for name, (a, b) in qkv["rows"].items())
    bias = " (and the same entries of its bias)" if qkv["bias"] else ""
    where = f"<p>Made by {qkv['weight']} {tuple(qkv['weight_shape'])}: {slices}{bias}.</p>"
    section(3, "qkv", where + vector("qkv", "q_i") + matrix("qkv", "k_j") + matrix("qkv", "v_j"))
    scaling = f"<p>D = {s['scores']['D']}, 1/sqrt(D) = {scalar_html('scores.scale', s['scores']['scale'])}</p>"
    table = keys_table(tokens, i, [column("scores", "scores", "q_i . k_j"), column("scores", "scaled", "x 1/sqrt(D)")])
    section(4, "scores", scaling + table)
    table = keys_table(tokens, i, [column("softmax", "masked", "masked"), column("softmax", "weights", "w_ij")])
    section(5, "softmax", table + f"<p>The weights sum to {scalar_html('softmax.sum', s['softmax']['sum'])}.</p>")
    drop = s["dropout"]
    after = column("dropout", "weights", "after dropout")
    if drop["applied"]:
        told = (
            f"<p>Training mode: p = {drop['p']}, seed {drop['seed']}: kept weights are multiplied by "
            f"1/(1-p) = {number_html(drop['scale'])}.</p>"
        )
        if drop["p"] == 0:
            told += "<p>This model was trained without attention dropout (p = 0): training mode changes nothing.</p>"
        columns = [(None, "w_ij", weights), column("dropout", "keep", "kept"), after]
    else:
        told = "<p>Evaluation mode: dropout is the identity. Switch on training mode to see it.</p>"
        columns = [after]
    section(6, "dropout", told + keys_table(tokens, i, columns))
    outputs = [
        vector("output", "z_i"),
        vector("output", "heads_z_i", this_head),
        vector("output", "out_i"),
        vector("output", "next_i"),
    ]
    section(7, "output", "".join(outputs), wide=True)
    difference = scalar_html("multi_head.max_abs_difference", s["multi_head"]["max_abs_difference"])
    both = vector("multi_head", "separate_i", this_head) + vector("multi_head", "fused_i", this_head)
    section(
        8, "multi_head", f"{both}<p>Largest absolute difference, over every token and head: {difference}</p>", wide=True
    )
    return f'<div class="steps">{"".join(parts)}</div>'
