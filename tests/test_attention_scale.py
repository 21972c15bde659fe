"""Attention maps that scale (issue 11): pooled tiles that keep a sharp focus, exact hover values read from the server,
zoomed windows, exports in bertviz's layout equal to `output_attentions`, and a 1,024-token request on a long-context
model converted with `from_gpt2`, through the running app."""

import base64
import io

import numpy as np
import pytest
import torch

from helpers import (
    HANG_S,
    LONG_CONTEXT,
    LOWERCASE,
    THREE_LAYERS,
    app_error,
    call,
    char_tokenizer,
    gradio_client,
    page_function,
    printable_tokenizer,
    save_fixture_model,
    server_log,
    tiny_model,
)
from minigpt.demo.core.attention_maps import (
    LEVELS,
    PALETTE,
    Window,
    colour_indices,
    future_blocks,
    grid_images,
    max_pooled,
)
from minigpt.demo.maps.export import load_weights, save_weights
from minigpt.demo.maps.export_view import grid_png, grid_svg, map_png
from minigpt.demo.maps.view import figure_body
from modeling_minigpt import MiniGPTForCausalLM

LONG = LONG_CONTEXT  # tokens: the long-context fixture's context (conftest's long_model), the longest text tried


def own_attentions(folder, ids: list[int]) -> list[torch.Tensor]:
    """The model's own output_attentions for `ids`: L x (1, H, T, T), loaded for eager attention, on one thread as
    the server computes (so that even the last bits of the float32 sums agree)."""
    from transformers import AutoConfig

    if AutoConfig.from_pretrained(folder).model_type == "gpt2":
        model = MiniGPTForCausalLM.from_gpt2(folder)
    else:
        model = MiniGPTForCausalLM.from_pretrained(folder, attn_implementation="eager")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            return list(model.eval()(torch.tensor([ids]), output_attentions=True).attentions)
    finally:
        torch.set_num_threads(threads)


# ---- in process: the numbers behind the drawings --------------------------------------------------------------------


def test_max_pooling_is_the_largest_weight_of_each_block():
    torch.manual_seed(0)
    weights = torch.rand(2, 3, 37, 41)
    for factor in (1, 2, 5, 8):
        pooled = max_pooled(weights, factor)
        rows, cols = -(-37 // factor), -(-41 // factor)
        assert pooled.shape == (2, 3, rows, cols)
        for i in range(rows):
            for j in range(cols):
                block = weights[..., i * factor : (i + 1) * factor, j * factor : (j + 1) * factor]
                assert torch.equal(pooled[..., i, j], block.amax((-2, -1)))


def test_a_pooled_tile_keeps_a_one_hot_rows_maximum():
    """Every query attends to one key only (a weight of 1 among zeros): however far the grid shrinks the map, the
    tile's pixel over that (query, key) has the colour of weight 1, never a diluted mean."""
    T, generator = 1000, torch.Generator().manual_seed(0)
    keys = torch.cat([torch.randint(0, q + 1, (1,), generator=generator) for q in range(T)])  # (T,): key <= query
    attentions = torch.zeros(1, 2, T, T)
    attentions[0, 0, torch.arange(T), keys] = 1.0  # head 0: one-hot rows
    attentions[0, 1] = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]  # head 1: uniform
    tiles = grid_images(attentions)  # (1, 3, t, t)
    factor = -(-T // tiles.shape[-1])
    assert tiles.shape[-1] <= 160 and factor > 1
    assert (tiles[0, 0][(torch.arange(T) // factor).numpy(), (keys // factor).numpy()] == LEVELS).all()
    # the average over the two heads: 0.5 + 0.5 / (q + 1) at the focus, also kept by the max
    expected = colour_indices(0.5 + 0.5 / (torch.arange(T) + 1.0), np.zeros(T, dtype=bool))  # (T,)
    assert (tiles[0, 2][(torch.arange(T) // factor).numpy(), (keys // factor).numpy()] >= expected).all()


def test_future_blocks_are_those_the_mask_hides_wholly():
    mask = torch.triu(torch.ones(50, 50, dtype=torch.bool), 1)
    for rows, cols, factor in [(range(50), range(50), 1), (range(50), range(50), 7), (range(10, 40), range(5, 35), 4)]:
        part = mask[rows.start : rows.stop, cols.start : cols.stop]
        expected = [
            [bool(part[i : i + factor, j : j + factor].all()) for j in range(0, len(cols), factor)]
            for i in range(0, len(rows), factor)
        ]
        assert future_blocks(rows, cols, factor).tolist() == expected


def test_a_zoomed_window_draws_every_weight_in_its_own_cell():
    torch.manual_seed(0)
    T = 600
    matrix = torch.softmax(torch.randn(T, T).masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), -1e9), -1)
    tokens = [f"t{i}" for i in range(T)]
    window = Window.fit(T, row=500, col=-20, size=200)  # past the map's edges: moved inside
    assert window == Window(row=400, col=0, size=200)
    svg = figure_body(matrix, tokens, "layer 0, head 0", window)
    assert 'data-row="400" data-col="0" data-size="200"' in svg and "every weight its own cell" in svg
    pixels = decode_png(svg.split('href="', 1)[1].split('"', 1)[0])
    assert pixels.shape == (200, 200)
    assert np.array_equal(pixels, colour_indices(matrix[400:600, 0:200], np.zeros((200, 200), dtype=bool)))
    assert ">t400<" in svg and ">t0<" in svg  # the labels are the window's tokens
    whole = figure_body(matrix, tokens, "layer 0, head 0", Window.fit(T))
    assert decode_png(whole.split('href="', 1)[1].split('"', 1)[0]).shape == (200, 200)  # 600 tokens in <= 256 px
    assert "each cell the largest of 3 x 3 weights" in whole


def decode_png(uri_or_bytes) -> np.ndarray:
    """A palette PNG's indices (H, W)."""
    from PIL import Image

    data = base64.b64decode(uri_or_bytes.split(",", 1)[1]) if isinstance(uri_or_bytes, str) else uri_or_bytes
    image = Image.open(io.BytesIO(data))
    assert image.mode == "P" and np.array_equal(np.asarray(image.getpalette(), np.uint8).reshape(-1, 3), PALETTE)
    return np.asarray(image)


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_exported_weights_are_output_attentions_exactly_in_bertviz_layout(tmp_path, suffix):
    from minigpt.heads.recorded_pass import run_forward_pass

    IDS = [0, 5, 9, 3, 3, 7, 1, 0, 12]
    model = tiny_model("sdpa", shape=THREE_LAYERS)
    recorded = run_forward_pass(model, IDS)
    tokens = [f"<{i}>" for i in IDS]
    layers, loaded_tokens, input_ids = load_weights(
        save_weights(tmp_path / f"w{suffix}", recorded.attentions, tokens, list(IDS))
    )
    with torch.no_grad():
        expected = model(torch.tensor([IDS]), output_attentions=True).attentions  # L x (1, H, T, T)
    assert len(layers) == len(expected) == 3 and loaded_tokens == tokens and input_ids == list(IDS)
    for mine, theirs in zip(layers, expected):
        assert mine.dtype == np.float32 and mine.shape == (1, 2, len(IDS), len(IDS))  # bertviz: (batch 1, heads, T, T)
        assert torch.equal(torch.from_numpy(mine), theirs)


def test_exported_images(tmp_path):
    T = 12
    attentions = torch.softmax(
        torch.randn(2, 3, T, T).masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), -1e9), -1
    )
    one = decode_png(map_png(attentions[1, 2]))
    scale = one.shape[0] // T
    assert one.shape == (scale * T, scale * T) and scale * T >= 512
    assert np.array_equal(one[::scale, ::scale], colour_indices(attentions[1, 2]))
    from PIL import Image

    grid = Image.open(io.BytesIO(grid_png(attentions)))
    assert grid.mode == "RGB" and grid.width > 4 * 96 and grid.height > 2 * 96
    svg = grid_svg(attentions, [f"w{i}" for i in range(T)])
    assert svg.startswith("<svg xmlns=") and svg.count("<image") == 2 * (3 + 1) and ">w11<" in svg
    with pytest.raises(ValueError, match="at most 64 tokens"):
        grid_svg(torch.zeros(1, 1, 65, 65), ["x"] * 65)


def test_a_map_for_a_slide_has_the_maps_pixels_token_labels_a_title_and_a_colour_bar():
    from PIL import Image

    from minigpt.demo.maps.export_view import BAR_WIDTH, map_slide_png, slide_layout

    T = 12
    matrix = torch.softmax(torch.randn(T, T).masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), -1e9), -1)
    short, long = [f"w{i}" for i in range(T)], [f"a-longer-token-{i}" for i in range(T)]
    slide = np.asarray(Image.open(io.BytesIO(map_slide_png(matrix, short, "names: layer 1, head 2"))))
    at = slide_layout(T, short)
    top, left, side = at["top"], at["left"], at["side"]
    assert slide.shape[:2] == at["size"][::-1]
    raw = PALETTE[colour_indices(matrix)].repeat(at["scale"], axis=0).repeat(at["scale"], axis=1)
    assert np.array_equal(slide[top : top + side, left : left + side], raw)  # the bare map's pixels, untouched
    assert (slide[:top, left:] < 128).any() and (slide[top:, :left] < 128).any()  # text above and beside the map
    bar = slide[top : top + side, at["bar"] : at["bar"] + BAR_WIDTH]
    ends = colour_indices(np.array([[1.0], [0.0]]), masked=np.zeros((2, 1), dtype=bool))[:, 0]
    assert np.array_equal(bar[0, 0], PALETTE[ends[0]]) and np.array_equal(bar[-1, 0], PALETTE[ends[1]])  # 1 to 0
    labelled = Image.open(io.BytesIO(map_slide_png(matrix, long, "names: layer 1, head 2")))
    assert labelled.width > slide.shape[1] and labelled.height > slide.shape[0]  # room grows with the labels


def test_the_app_serves_each_model_its_own_maps_and_reuses_them_for_the_same_text(tmp_path):
    """Two models with the same tokenizer and different weights: the same text gets each model's own maps, drawn
    from one pass per (model, text)."""
    from minigpt.demo.core.attention_maps import token_labels
    from minigpt.demo.core.state import DemoState
    from minigpt.demo.core.texts import from_boundary
    from minigpt.demo.maps.ui import AttentionSection
    from minigpt.demo.maps.view import grid_html
    from minigpt.heads.recorded_pass import run_forward_pass

    first = save_fixture_model(tmp_path / "a", char_tokenizer(LOWERCASE, "."), seed=0, name="names")
    second = save_fixture_model(tmp_path / "b", char_tokenizer(LOWERCASE, "."), seed=1, name="names")
    state = DemoState.configure([str(first), str(second)], training=False)
    section = AttentionSection(state)
    computed = state.passes.computed
    maps = {name: section.attention("emma", name) for name in ("a", "b")}
    assert maps["a"][1] != maps["b"][1]  # the grids differ
    assert section.attention("emma", "a")[1:3] == maps["a"][1:3] and state.passes.computed == computed + 2
    for name in ("a", "b"):
        lm = state.picker.get(name)
        ids = from_boundary(lm, "emma", "text")
        tokens = token_labels(lm.tokenizer, ids)
        assert grid_html(run_forward_pass(lm.model, ids).attentions, tokens) in maps[name][1]  # marked with its text
        row = section.maps.attention_values("emma", name, layer=1, head="2", query=3)
        assert row["weights"] == own_attentions(tmp_path / name, ids)[1][0, 2, 3, :4].tolist()


# ---- through the running app ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def long_server(server, long_model):
    """The shared server (conftest.py), which serves tiny-gpt2 (long_model): LONG tokens of context."""
    return *server, long_model


def test_a_1024_token_text_on_a_from_gpt2_model(long_server, tmp_path):
    """The whole context of a long-context model converted with from_gpt2: small maps, exact values on demand."""
    import httpx

    url, process, folder = long_server
    client = gradio_client(url)
    text = ("It was the best of times, it was the worst of times. " * 30)[: LONG - 1]
    notes, grid, large, *_ = call(client, "/attention", text=text, model="tiny-gpt2")
    assert f"{LONG} tokens" in notes
    assert grid.count("<svg") == 2 * (2 + 1) and len(grid) + len(large) < 5_000_000
    assert "each cell the largest of 4 x 4 weights" in large  # 1,024 tokens in a 256-pixel window
    ids = [0] + printable_tokenizer().encode(text, add_special_tokens=False)
    expected = own_attentions(folder, ids)  # L x (1, H, T, T)

    # Hover values, through the API (a row, a cell) and as the page reads them: the model's own weights, exactly.
    row = call(client, "/attention_values", text=text, model="tiny-gpt2", layer=1, head="1", query=LONG - 1)
    assert row["weights"] == expected[1][0, 1, LONG - 1].tolist() and len(row["tokens"]) == LONG
    cell = call(client, "/attention_values", text=text, model="tiny-gpt2", layer=0, head="0", query=700, key=3)
    assert cell["weights"] == [expected[0][0, 0, 700, 3].item()]
    http = httpx.Client(timeout=HANG_S)
    asked = {"model": "tiny-gpt2", "text": text, "layer": 0, "head": "mean", "query": 999}
    page_row = page_function(http, url, "attention_row", asked)
    assert page_row["weights"] == expected[0][0, :, 999, :1000].mean(0).tolist()

    # Zoom: a window of 256 tokens at full resolution.
    body = page_function(http, url, "attention_window", {**asked, "row": 300, "col": 200, "size": 256})
    assert 'data-row="300" data-col="200" data-size="256"' in body and "every weight its own cell" in body

    # The weights of the whole text, through the API: every layer as bertviz takes it.
    path = call(client, "/attention_export", text=text, model="tiny-gpt2", what="npz")
    assert "minigpt-exports-" not in path  # the client's own download, not a path on the server
    layers, tokens, input_ids = load_weights(path)
    assert input_ids == ids and len(tokens) == LONG
    assert all(torch.equal(torch.from_numpy(a), b) for a, b in zip(layers, expected, strict=True))
    assert "Traceback" not in server_log(process)


def test_bad_hover_and_export_requests_say_what_to_change(long_server):

    url, process, _ = long_server
    client = gradio_client(url)
    assert "layer must be 0 to 3" in app_error(client, "/attention_values", text="emma", layer=4)
    assert "head must be 0 to 3 or 'mean'" in app_error(client, "/attention_values", text="emma", head="x")
    assert "query must be between 0 and 4" in app_error(client, "/attention_values", text="emma", query=5)
    assert "query must be between 0 and 4" in app_error(client, "/attention_values", text="emma", query=-1)  # as before
    assert "what must be one of" in app_error(client, "/attention_export", text="emma", what="pdf")
    message = app_error(client, "/attention_export", text="x" * 80, model="tiny-gpt2", what="grid.svg")
    assert "export it as PNG" in message
    assert "Traceback" not in server_log(process)
