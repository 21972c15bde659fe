"""The maps as image files, for a slide or a paper (the export under the maps, /attention_export): one map as a PNG at
full resolution (one pixel per weight, enlarged to at least `MAP_PIXELS` for short texts), bare or ready for a slide
(token labels, title, colour bar); the whole grid as one PNG (its tiles as on the page), or SVG with token labels for
texts of at most `GRID_SVG_UP_TO` tokens (beyond, an SVG would only wrap the same pixels). The numbers and palette
come from attention_maps.py, the SVG tiles from maps/view.py. Shapes: L layers, H heads, T tokens."""

import io

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from minigpt.demo.core.attention_maps import PALETTE, colour_indices, data_uri, grid_images, head_matrix, png_bytes
from minigpt.demo.maps.export import GRID_SVG_UP_TO
from minigpt.demo.maps.view import head_caption, heatmap_svg

MAP_PIXELS = 512  # a map's PNG is at least this wide: each weight a square of whole pixels


def map_png(matrix: torch.Tensor) -> bytes:
    """One (T, T) map as a PNG, one square of pixels per weight, at least MAP_PIXELS wide."""
    scale = max(1, -(-MAP_PIXELS // matrix.shape[-1]))
    indices = colour_indices(matrix.numpy())
    return png_bytes(indices.repeat(scale, axis=0).repeat(scale, axis=1))


BAR_WIDTH, BAR_TICKS = 16, (1.0, 0.5, 0.25, 0.1, 0.0)  # the colour bar beside a slide's map, and its labelled weights


def slide_layout(length: int, tokens: list[str]) -> dict:
    """Where a slide's parts go (pixels): the map's square (left, top, side, scale), the tokens labelled (every
    `stride`-th, so that none overlap) and their font, the colour bar's left edge, the whole image's size."""
    font = ImageFont.load_default(min(14, max(9, MAP_PIXELS // length)))
    scale = max(1, -(-MAP_PIXELS // length))
    side = length * scale
    stride = max(1, -(-(font.size + 2) // scale))
    longest = max((font.getlength(token[:12]) for token in tokens[::stride]), default=0)
    left, top = int(longest) + 12, 34 + int(longest) + 8  # room for the title, then for the rotated key labels
    bar = left + side + 20
    size = (bar + BAR_WIDTH + 48, top + side + 26)
    return dict(left=left, top=top, side=side, scale=scale, stride=stride, bar=bar, size=size, font=font)


def map_slide_png(matrix: torch.Tensor, tokens: list[str], title: str) -> bytes:
    """One (T, T) map ready for a slide: the map at full resolution (map_png's pixels), the query tokens down its left
    side and the key tokens along its top, a title, and a colour bar of the weights (the colour follows their square
    root, as on the page)."""
    at = slide_layout(len(tokens), tokens)
    font = at["font"]
    canvas = Image.new("RGB", at["size"], "white")
    draw = ImageDraw.Draw(canvas)
    draw.text((at["left"], 8), title, fill="black", font=ImageFont.load_default(16))
    indices = colour_indices(matrix.numpy()).repeat(at["scale"], axis=0).repeat(at["scale"], axis=1)
    canvas.paste(Image.fromarray(PALETTE[indices]), (at["left"], at["top"]))
    for i in range(0, len(tokens), at["stride"]):
        label, middle = tokens[i][:12], at["scale"] * i + at["scale"] // 2
        draw.text((at["left"] - 4, at["top"] + middle), label, fill="black", font=font, anchor="rm")
        width = int(font.getlength(label)) + 2
        upright = Image.new("L", (width, font.size + 4), 0)
        ImageDraw.Draw(upright).text((0, (font.size + 4) // 2), label, fill=255, font=font, anchor="lm")
        turned = upright.rotate(90, expand=True)  # reads bottom to top, ending at the map's top edge
        canvas.paste("black", (at["left"] + middle - turned.width // 2, at["top"] - 4 - turned.height), turned)
    weights = np.linspace(1.0, 0.0, at["side"], dtype=np.float32)[:, None]  # top: 1, bottom: 0
    column = PALETTE[colour_indices(weights, masked=np.zeros(weights.shape, dtype=bool))]
    canvas.paste(Image.fromarray(column.repeat(BAR_WIDTH, axis=1)), (at["bar"], at["top"]))
    for weight in BAR_TICKS:
        y = at["top"] + round((1 - weight) * (at["side"] - 1))
        draw.text((at["bar"] + BAR_WIDTH + 4, y), f"{weight:g}", fill="black", font=font, anchor="lm")
    draw.text((at["bar"], at["top"] + at["side"] + 2), "weight", fill="black", font=font)
    buffer = io.BytesIO()
    canvas.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def _grid_layout(n_layer: int, n_head: int, tile: int, gap: int = 8, left: int = 64, top: int = 22):
    """Where the grid's titles and tiles go: (width, height, [(x, y, text)], [(layer, column, x, y)])."""
    titles = [(left + c * (tile + gap), 4, f"head {c}" if c < n_head else "average") for c in range(n_head + 1)]
    titles += [(4, top + r * (tile + gap) + tile // 2, f"layer {r}") for r in range(n_layer)]
    tiles = [(r, c, left + c * (tile + gap), top + r * (tile + gap)) for r in range(n_layer) for c in range(n_head + 1)]
    return left + (n_head + 1) * (tile + gap), top + n_layer * (tile + gap), titles, tiles


def grid_png(attentions: torch.Tensor) -> bytes:
    """Every head and each layer's average as one PNG: the page's tiles (max-pooled), each at least 96 pixels wide."""
    images = grid_images(attentions)  # (L, H + 1, t, t)
    scale = max(1, -(-96 // images.shape[-1]))
    tile = images.shape[-1] * scale
    width, height, titles, tiles = _grid_layout(images.shape[0], images.shape[1] - 1, tile)
    canvas = Image.new("RGB", (width, height), "white")
    draw, font = ImageDraw.Draw(canvas), ImageFont.load_default(12)
    for x, y, text in titles:
        draw.text((x, y), text, fill="black", font=font)
    for layer, column, x, y in tiles:
        indices = images[layer, column].repeat(scale, axis=0).repeat(scale, axis=1)
        canvas.paste(Image.fromarray(PALETTE[indices]), (x, y))
    buffer = io.BytesIO()
    canvas.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def grid_svg(attentions: torch.Tensor, tokens: list[str]) -> str:
    """Every head and each layer's average as one SVG document, token labels on every tile (short texts only)."""
    if len(tokens) > GRID_SVG_UP_TO:
        raise ValueError(
            f"The grid as SVG is for texts of at most {GRID_SVG_UP_TO} tokens, not {len(tokens)}: export it as PNG."
        )
    images = grid_images(attentions)  # (L, H + 1, t, t): t = T here, no pooling
    tile = 210  # px: a 150-pixel map and its labels
    width, height, titles, tiles = _grid_layout(images.shape[0], images.shape[1] - 1, tile)
    parts = [f'<text x="{x}" y="{y + 10}" font-size="12">{text}</text>' for x, y, text in titles]
    for layer, column, x, y in tiles:
        head = str(column) if column < images.shape[1] - 1 else "mean"
        image = data_uri(png_bytes(images[layer, column]))
        parts.append(heatmap_svg(image, tokens, tokens, 150, head_caption(layer, head), f'x="{x}" y="{y}"'))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">{"".join(parts)}</svg>'
    )


def drawn_export(what: str, attentions: torch.Tensor, tokens: list[str], model: str, layer: int, head) -> bytes | str:
    """The image file `what` of a text's (L, H, T, T) weights: "map.png" (head `head` of `layer`, or "mean", as a
    slide titled with the model), "grid.png" (PNG bytes) or "grid.svg" (the SVG document)."""
    if what == "map.png":
        return map_slide_png(head_matrix(attentions, layer, head), tokens, f"{model}: {head_caption(layer, head)}")
    if what == "grid.png":
        return grid_png(attentions)
    return grid_svg(attentions, tokens)
