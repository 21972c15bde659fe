"""Exports of a text's attention: the raw weights, for a notebook or a paper (the maps as images: maps/export_view.py).

Weights, in bertviz's layout: one (1, H, T, T) float32 array per layer, exactly the model's `output_attentions`
(bertviz's `head_view(attention, tokens)` takes them as a list of tensors, layer 0 first):
- `.safetensors`: tensors `layer_0` .. `layer_{L-1}` and `input_ids` (1, T) int64; the tokens (JSON) in its metadata.
- `.npz`: the same arrays, plus `tokens`, an array of strings (loads with `allow_pickle=False`).
`load_weights` reads either back.

Numbers in, files out: nothing here knows of Gradio. Shapes: L layers, H heads, T tokens.
"""

import json
from pathlib import Path

import numpy as np
import torch

GRID_SVG_UP_TO = 64  # tokens: the grid as SVG (vector labels) for texts up to this long
FORMAT = "bertviz: one (1, heads, T, T) float32 array per layer, layer_0 first"


def bertviz_layers(attentions: torch.Tensor) -> dict[str, np.ndarray]:
    """(L, H, T, T) -> {"layer_0": (1, H, T, T), ...}: views of the same memory, no copy."""
    return {f"layer_{i}": attentions[i : i + 1].numpy() for i in range(attentions.shape[0])}


def save_weights(path: Path, attentions: torch.Tensor, tokens: list[str], input_ids: list[int]) -> Path:
    """The weights of one text as .safetensors or .npz (by the suffix of `path`)."""
    arrays = {**bertviz_layers(attentions), "input_ids": np.asarray([input_ids], dtype=np.int64)}
    if path.suffix == ".safetensors":
        from safetensors.numpy import save_file

        save_file(arrays, str(path), metadata={"tokens": json.dumps(tokens), "format": FORMAT})
    elif path.suffix == ".npz":
        np.savez(path, **arrays, tokens=np.asarray(tokens, dtype=str))
    else:
        raise ValueError(f"Weights are saved as .safetensors or .npz, not {path.suffix!r}.")
    return path


def load_weights(path: Path) -> tuple[list[np.ndarray], list[str], list[int]]:
    """(layers, tokens, input_ids) from save_weights' file: layers[i] is layer i's (1, H, T, T) array; for bertviz,
    `head_view([torch.from_numpy(a) for a in layers], tokens)`."""
    if Path(path).suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as f:
            arrays = {key: f.get_tensor(key) for key in f.keys()}
            tokens = json.loads(f.metadata()["tokens"])
    else:
        with np.load(path, allow_pickle=False) as f:
            arrays = dict(f)
        tokens = arrays.pop("tokens").tolist()
    input_ids = arrays.pop("input_ids")[0].tolist()
    layers = [arrays[f"layer_{i}"] for i in range(len(arrays))]  # by number: layer_10 sorts before layer_2
    return layers, tokens, input_ids


__all__ = ["FORMAT", "GRID_SVG_UP_TO", "bertviz_layers", "save_weights", "load_weights"]
