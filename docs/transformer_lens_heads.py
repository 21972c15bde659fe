"""The demo's head roles and head ablation, redone in TransformerLens on a MiniGPT (a script to read top to bottom,
or to paste cell by cell into a notebook). It prints the same numbers as the demo's `/head_roles` and `/ablate`.

    pip install -r requirements-interp.txt
    python docs/transformer_lens_heads.py                                  # the specimen, its previous-token head
    python docs/transformer_lens_heads.py minigpt/models/names "emma" 0.0,1.2
    python transformer_lens_heads.py names "emma" 0.0,1.2                  # anywhere, with minigpt installed

The model: a MiniGPT folder (or Hub id), or the name of a shipped model (names, shakespeare, induction, specimen),
read from the minigpt package wherever it is: this clone's, or the one `pip install .` installed.
"""

import sys
from pathlib import Path

import torch
from transformers import AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the minigpt package, beside the model's code

from transformer_lens.model_bridge import TransformerBridge  # noqa: E402

import minigpt  # noqa: E402
from minigpt import lens  # noqa: E402

folder = minigpt.model_folder(sys.argv[1] if len(sys.argv) > 1 else "specimen")  # a shipped name: the package's
text = sys.argv[2] if len(sys.argv) > 2 else "To be, or not to be, that is the question."
heads = [tuple(map(int, h.split("."))) for h in (sys.argv[3] if len(sys.argv) > 3 else "0.2,1.1").split(",")]

# 1. The model, through the adapter: every activation gets a TransformerLens hook name.
lens.register()
bridge = TransformerBridge.boot_transformers(folder, trust_remote_code=True, device="cpu")
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)

# 2. The text as the demo reads it: the start token, then the text's tokens.
start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
tokens = torch.tensor([[start, *tokenizer.encode(text, add_special_tokens=False)]])
logits, cache = bridge.run_with_cache(tokens)
n_layers, n_heads = bridge.cfg.n_layers, bridge.cfg.n_heads

# 3. Head roles: the mean weight each head puts, over the queries i >= 1, on key i - 1 (previous token), on key 0
#    (the first token) and on key i (itself): the demo's `/head_roles` scores.
print(f"{folder}, {tokens.shape[1]} tokens: {text!r}")
print("head   previous  first     self")
for layer in range(n_layers):
    pattern = cache[f"blocks.{layer}.attn.hook_pattern"][0]  # (heads, query, key)
    queries = torch.arange(1, tokens.shape[1])
    previous = pattern[:, queries, queries - 1].mean(-1)
    first = pattern[:, queries, 0].mean(-1)
    itself = pattern[:, queries, queries].mean(-1)
    for head in range(n_heads):
        print(f"{layer}.{head}    {previous[head]:.4f}    {first[head]:.4f}    {itself[head]:.4f}")


# 4. Ablation: a head's output (its slice of hook_z, the merged heads before the output projection) set to zero, as
#    the demo's `/ablate` does with mode "zero"; the mean loss of the next tokens before and after.
def mean_loss(logits: torch.Tensor) -> float:
    return torch.nn.functional.cross_entropy(logits[0, :-1], tokens[0, 1:]).item()


print(f"mean loss: {mean_loss(logits):.4f}")
for layer, head in heads:

    def zero_head(z, hook, head=head):
        z[:, :, head] = 0.0  # z: (batch, position, head, d_head)
        return z

    ablated = bridge.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{layer}.attn.hook_z", zero_head)])
    print(f"head {layer}.{head} zeroed: mean loss {mean_loss(ablated):.4f}")
