"""Trace a MiniGPT with nnsight: read a head's attention pattern, zero a head (a script to read top to bottom, or to
paste cell by cell into a notebook). It prints the same numbers as the demo's `/attention_values` and `/ablate`.

    pip install -r requirements-interp.txt
    python docs/nnsight_heads.py                                     # the specimen's previous-token head, 0.2
    python docs/nnsight_heads.py minigpt/models/names "emma" 1.2
    python nnsight_heads.py names "emma" 1.2                         # anywhere, with minigpt installed

The model: a MiniGPT folder (or Hub id), or the name of a shipped model (names, shakespeare, induction, specimen),
read from the minigpt package wherever it is: this clone's, or the one `pip install .` installed.
"""

import sys
from pathlib import Path

import torch
from nnsight import NNsight
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the minigpt package, beside the model's code

import minigpt  # noqa: E402

folder = minigpt.model_folder(sys.argv[1] if len(sys.argv) > 1 else "specimen")  # a shipped name: the package's
text = sys.argv[2] if len(sys.argv) > 2 else "To be, or not to be, that is the question."
layer, head = map(int, (sys.argv[3] if len(sys.argv) > 3 else "0.2").split("."))

model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
tokens = torch.tensor([[start, *tokenizer.encode(text, add_special_tokens=False)]])  # as the demo reads a text
traced = NNsight(model)
head_dim = model.config.n_embd // model.config.n_head

# 1. A head's pattern: the attention module returns (output, weights); output_attentions=True makes it compute them.
with traced.trace(tokens, output_attentions=True):
    weights = traced.model.layers[layer].attn.output[1].save()  # (batch, heads, query, key)
    logits = traced.output.logits.save()
last = tokens.shape[1] - 1
row = weights[0, head, last]
print(f"{folder}, {tokens.shape[1]} tokens: {text!r}")
print(f"head {layer}.{head}, the last token's weights (query {last}):")
print(" ".join(f"{w:.4f}" for w in row.tolist()))
top = int(row.argmax())
print(f"it looks most at position {top} ({tokenizer.decode([int(tokens[0, top])])!r}), weight {row[top]:.4f}")


# 2. Zero the head: its D numbers of the merged heads, out_proj's input, set to 0 (the demo's `/ablate`, mode zero).
def mean_loss(logits: torch.Tensor) -> float:
    return torch.nn.functional.cross_entropy(logits[0, :-1], tokens[0, 1:]).item()


with traced.trace(tokens):
    traced.model.layers[layer].attn.out_proj.input[:, :, head * head_dim : (head + 1) * head_dim] = 0.0
    ablated = traced.output.logits.save()
print(f"mean loss {mean_loss(logits):.4f}; head {layer}.{head} zeroed: {mean_loss(ablated):.4f}")
