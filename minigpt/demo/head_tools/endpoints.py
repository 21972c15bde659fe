"""The "What does this head do?" section's numbers, as plain JSON, on a text and model: next-token probabilities and the
logit lens, head ablation (with the text generated again), head importance, head roles, two texts compared, and the
probability each generated token was sampled with. Endpoints: /next_tokens, /logit_lens, /ablate, /importance,
/head_roles, /compare; head_tools/ui.py puts them on the page, head_tools/view.py draws their answers. Every number
comes from `minigpt.heads` (`predictions`, `ablation`, `role_scores`, `comparison`); nothing here knows of Gradio."""

import torch

from minigpt.demo.core.attention_maps import token_labels
from minigpt.demo.core.inputs import clamped, number, parse_heads, parse_sampling, token_position
from minigpt.demo.core.per_model import PerModel
from minigpt.demo.core.prompt_sets import resample_values
from minigpt.demo.core.serving import Sampling, generate_in_this_thread
from minigpt.demo.core.state import DemoState
from minigpt.demo.core.texts import TextView, check_every_map, from_boundary, keep_context
from minigpt.demo.core.work_budgets import importance_tokens
from minigpt.errors import VisitorError
from minigpt.heads import ablation, comparison, predictions, role_scores

MAX_INSIGHT_TOKENS = 200  # new tokens per generation redone with an ablation


def labelled(view: TextView, ids: list[int], probabilities: list[float]) -> list[dict]:
    labels = token_labels(view.lm.tokenizer, ids)
    return [{"token": t, "id": i, "probability": p} for t, i, p in zip(labels, ids, probabilities)]


def six_decimals(difference: torch.Tensor) -> list:
    """Compare's differences as its answer gives them, and the page draws them: 6 decimals (a smaller answer)."""
    return difference.double().round(decimals=6).tolist()


def probed_induction(lm) -> dict:
    """The Head roles' induction probe on the model's ordinary tokens (not its boundary, end or padding tokens)."""
    excluded = {lm.boundary_id, lm.eos_id, *lm.never_ids} - {None}
    return role_scores.probed_induction(lm.model, lm.boundary_id, excluded, lm.vocab_size)


class Insights:
    """The section's endpoints, on the demo's state (head_tools/ui.py puts them on the page and draws their answers)."""

    def __init__(self, state: DemoState):
        self.state = state
        self.probed = PerModel(probed_induction)  # the roles' induction probe: one model's, whatever the text

    def insight_view(self, text: str, model: str | None, min_tokens: int = 2) -> TextView:
        view = self.state.text_view(model or self.state.names_default, text or "")
        if len(view.ids) < min_tokens:
            raise VisitorError(
                "The text is empty: type at least one character (the start token alone predicts nothing)."
            )
        return view

    def position_of(self, view: TextView, position) -> int:
        return token_position(position, len(view.ids), "Position")

    def next_tokens(
        self,
        text: str = "emma",
        model: str | None = None,
        position: int = -1,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
    ) -> dict:
        """The top-10 next tokens at `position` (tokens shown, from 0; -1: the last) with their probabilities, the
        probability the model gave the token that actually follows, and (`sampled`) the probabilities the sampler
        draws those tokens with under `temperature` (0: greedy), `top_k` and `top_p`, as generation applies them."""
        view = self.insight_view(text, model, min_tokens=1)
        position = self.position_of(view, position)
        notes = list(view.notes)
        sampling = parse_sampling(temperature, top_k, top_p, 0, view.lm.vocab_size, notes)
        found = predictions.next_token_probabilities(view.lm.model, view.recorded, position, k=10)
        logits = found["logits"][None]  # (1, V)
        if sampling.greedy:  # the most likely token, every time
            drawn = torch.zeros_like(logits).scatter_(1, logits.argmax(-1, keepdim=True), 1.0)[0]
        else:
            drawn = predictions.warped_probabilities(logits, sampling.warpers(), view.lm.never_ids)[0]
        answer = {
            **view.about,
            "position": position,
            "notes": notes,
            "top": labelled(view, found["top_ids"], found["top_probabilities"]),
            "sampled": {
                "temperature": sampling.temperature,
                "top_k": sampling.top_k,
                "top_p": sampling.top_p,
                "probabilities": [float(drawn[i]) for i in found["top_ids"]],
            },
            "next": None,
        }
        if "next_id" in found:
            answer["next"] = labelled(view, [found["next_id"]], [found["next_probability"]])[0]
        return answer

    def logit_lens(self, text: str = "emma", model: str | None = None, position: int = -1) -> dict:
        """At `position`, the top-3 tokens the residual stream predicts after the embeddings and after each layer."""
        view = self.insight_view(text, model, min_tokens=1)
        position = self.position_of(view, position)
        lens = predictions.logit_lens(view.lm.model, view.recorded, position, k=3)
        names = ["embeddings"] + [f"layer {layer}" for layer in range(len(lens) - 1)]
        layers = [{"after": name, "top": labelled(view, ids, p)} for name, (ids, p) in zip(names, lens)]
        return {**view.about, "position": position, "layers": layers, "notes": view.notes}

    def ablate(
        self,
        text: str = "emma",
        model: str | None = None,
        heads: str = "",
        mode: str = "zero",
        position: int = -1,
        prompt: str = "",
        new_tokens: int = 0,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> dict:
        """The text with `heads` ("1.2, 0.3") ablated (`mode` zero; mean, each head's output averaged over the text's
        positions; resample, its output on a variant of the text, the same repeats, other tokens): per-token losses
        before and after (entry t: the loss of token t + 1), their means, the top-5 next tokens at `position` before and
        after, and with `new_tokens` > 0, `prompt` continued with the same seed plain and ablated."""
        view = self.insight_view(text, model)
        config = view.lm.model.config
        chosen = parse_heads(heads, config.n_layer, config.n_head)
        position = self.position_of(view, position)
        before = view.recorded
        values = resample_values(view.lm, list(view.ids)) if ablation.check_mode(mode) == "resample" else None
        after = ablation.ablated_pass(view.lm.model, before, chosen, mode, values)
        top = [predictions.top_tokens(p.logits(view.lm.model, position), 5) for p in (before, after)]
        loss_before, loss_after = before.token_losses(view.lm.model), after.token_losses(view.lm.model)
        answer = {
            **view.about,
            "heads": [list(h) for h in chosen],
            "mode": mode,
            "position": position,
            "loss_before": loss_before.tolist(),
            "loss_after": loss_after.tolist(),
            "total_before": float(loss_before.mean()),
            "total_after": float(loss_after.mean()),
            "top5_before": labelled(view, *top[0]),
            "top5_after": labelled(view, *top[1]),
            "notes": view.notes,
        }
        generation = self.ablated_generation(view, chosen, mode, prompt, new_tokens, temperature, top_k, top_p, seed)
        return {**answer, **generation}

    def ablated_generation(self, view, heads, mode, prompt, new_tokens, temperature, top_k, top_p, seed) -> dict:
        """{"generation": ...} with `new_tokens` > 0 (see generate_ablated), else {}; its notes go into view.notes."""
        new = clamped("New tokens", number("New tokens", new_tokens, 0, int), 0, MAX_INSIGHT_TOKENS, view.notes)
        if not new:
            return {}
        sampling = parse_sampling(temperature, top_k, top_p, seed, view.lm.vocab_size, view.notes)
        return {"generation": self.generate_ablated(view, heads, mode, prompt, new, sampling)}

    def generate_ablated(
        self, view: TextView, heads: list[tuple[int, int]], mode: str, prompt: str, new: int, sampling: Sampling
    ) -> dict:
        """`prompt` continued by the text loop twice with the same seed: plain, then with the heads ablated (mean
        ablation puts in the means over the analysed text, resample the means over a variant of it)."""
        lm = view.lm
        ids = keep_context(lm, from_boundary(lm, prompt or "", "prompt"), "prompt", [])
        means = ablation.head_means(view.recorded) if mode == "mean" else None
        if mode == "resample":  # the variant's outputs averaged over its positions: the prompt has other positions
            means = resample_values(lm, list(view.ids))[0].mean(dim=1)
        mask = ablation.head_mask(heads, lm.model.config.n_layer, lm.model.config.n_head)
        generate = lambda: generate_in_this_thread(lm.model, lm.eos_id, lm.never_ids, ids, new, sampling)[0]  # noqa: E731
        plain = generate()
        with ablation.heads_ablated(lm.model, mask, means):  # the hook acts on this thread's forward passes only
            ablated = generate()
        decode = lambda new_ids: lm.tokenizer.decode(ids + new_ids, skip_special_tokens=True)  # noqa: E731
        return {"seed": sampling.seed, "plain": decode(plain), "ablated": decode(ablated)}

    def importance(self, text: str = "emma", model: str | None = None, mode: str = "zero") -> dict:
        """Per head (layer x head list), the rise of the mean loss over the text when that head alone is ablated."""
        view = self.insight_view(text, model)
        values = resample_values(view.lm, list(view.ids)) if ablation.check_mode(mode) == "resample" else None
        measured = importance_tokens(view.lm.model.config, len(view.ids))
        scores, loss = ablation.head_importance(view.lm.model, view.recorded, mode, values, tokens=measured)
        if measured < len(view.ids):
            view.notes.append(
                f"Importance runs the model once per head: it is measured over the first {measured} tokens of "
                f"{len(view.ids)} (start token included), which bounds this server's work."
            )
        return {"importance": scores.tolist(), "loss": loss, "mode": mode, **view.about, "notes": view.notes}

    def head_roles(self, text: str = "emma", model: str | None = None) -> dict:
        """Per head (layer x head lists), the previous-token, first-token and self scores on the text, the induction
        score on random tokens repeated twice (sized to the context), the top-3 heads of each, each role's chance level
        (the score of attention spread evenly), the heads at least halfway from chance to 1 (that threshold per role),
        the probe's losses, each head's best offset back ("offsets") and its measured job ("jobs": the role it is
        furthest above chance on, `role_scores.measured_jobs`)."""
        view = self.insight_view(text, model)
        lm = view.lm
        probed = self.probed.get(lm)
        scores = role_scores.measured_roles(lm.model, view.recorded, lm.boundary_id, set(), lm.vocab_size, probed)
        jobs = role_scores.measured_jobs(scores)  # before the text's induction chance moves out of "chance"
        roles = {role: scores[role] for role in ("previous_token", "first_token", "self", "induction")}
        top = {
            role: [{"layer": layer, "head": head, "score": score} for layer, head, score in role_scores.top_heads(s)]
            for role, s in roles.items()
        }
        on_text = {}
        if "induction_on_text" in scores:  # the text repeats a token: its own induction scores, beside the probe's
            on_text = {
                "induction_on_text": scores["induction_on_text"].tolist(),
                "induction_on_text_chance": scores["chance"].pop("induction_on_text"),
                "repeated_queries": scores["repeated_queries"],
            }
        chance = scores["chance"]
        above = [
            {"role": role, "layer": layer, "head": head, "score": score}
            for role, s in roles.items()
            for layer, row in enumerate(s.tolist())
            for head, score in enumerate(row)
            if role_scores.above_chance(score, chance[role])
        ]
        probe = {
            "count": role_scores.ROLE_PROBES,
            "length": scores["probe_length"],
            "first_half_loss": scores["first_half_loss"],
            "repeated_half_loss": scores["repeated_half_loss"],
        }
        return {
            **{role: s.tolist() for role, s in roles.items()},
            **on_text,
            "top_heads": top,
            "chance": chance,
            "threshold": {role: role_scores.clear_threshold(c) for role, c in chance.items()},
            "above_chance": above,
            "probe": probe,
            "offsets": {
                "offset": scores["offsets"]["offset"].tolist(),
                "score": scores["offsets"]["offset_score"].tolist(),
                "chance": scores["offsets"]["offset_chance"].tolist(),
            },
            "jobs": jobs,
            **view.about,
            "notes": view.notes,
        }

    def compare(self, text: str = "emma", other_text: str = "anna", model: str | None = None) -> dict:
        """The per-head difference of the two texts' attention maps (first minus second) over their common positions,
        and the per-token loss of each. An empty second text: the first with its last token changed to the model's most
        likely other token there."""
        first, second = self.texts_to_compare(text, other_text, model)
        length = min(len(first.ids), len(second.ids))
        check_every_map(first, length, "Compare's answer", "the page's Compare (it draws one head at any length)")
        return self.compared(first, second)

    def texts_to_compare(self, text: str, other_text: str, model: str | None) -> tuple[TextView, TextView]:
        """The two texts as the model reads them; an empty second text: the first with its last token changed."""
        first = self.insight_view(text, model)
        second = self.insight_view(other_text, model) if (other_text or "").strip() else self.one_token_changed(first)
        return first, second

    def compared(self, first: TextView, second: TextView, every_map: bool = True) -> dict:
        """Compare's answer for two texts read by one model; without `every_map`, no difference maps (the page draws
        one head's)."""
        difference, per_head = comparison.compare_attention(first.recorded, second.recorded)
        notes = first.notes + second.notes
        length = difference.shape[-1]
        if len(first.ids) != len(second.ids):
            notes.append(
                f"The texts have {len(first.ids)} and {len(second.ids)} tokens (start token included): their "
                f"maps are compared over the first {length}. A token's attention depends only on the tokens up "
                "to it, so these are the shorter text's whole maps."
            )
        lm = first.lm.model
        return {
            **first.about,
            "other_text": second.text,
            "other_ids": list(second.ids),
            "other_tokens": second.tokens,
            "compared_tokens": length,
            "difference": six_decimals(difference) if every_map else None,
            "difference_per_head": per_head.tolist(),
            "loss": first.recorded.token_losses(lm).tolist(),
            "other_loss": second.recorded.token_losses(lm).tolist(),
            "notes": notes,
        }

    def one_token_changed(self, view: TextView) -> TextView:
        """`view`'s text with its last token changed to the model's most likely other token there (a same-length second
        text for Compare), with a note saying which."""
        lm = view.lm
        ids = comparison.one_token_changed(lm.model, view.recorded, {lm.boundary_id, lm.eos_id, *lm.never_ids} - {None})
        tokens = token_labels(lm.tokenizer, ids)
        note = (
            f"Second text: the first with its last token {view.tokens[-1]!r} changed to {tokens[-1]!r}, the model's "
            "most likely other token there."
        )
        return TextView(lm, ids, tokens, [note], lm.tokenizer.decode(ids[1:], skip_special_tokens=False), view.passes)

    def regenerated(self, text, model, heads: str, mode, prompt, new_tokens, temperature, top_k, top_p, seed) -> dict:
        """The Ablate button's second half on the page: `prompt` continued plain and with `heads` ("1.2, 0.3")
        ablated ({"generation": ...}; {} with no new tokens). The ablated pass of the text is not computed again."""
        view = self.insight_view(text, model)
        config = view.lm.model.config
        chosen = parse_heads(heads, config.n_layer, config.n_head)
        return self.ablated_generation(view, chosen, mode, prompt, new_tokens, temperature, top_k, top_p, seed)

    def compared_head(self, text: str, other_text: str, model: str | None, layer=0, head="0") -> tuple[dict, dict]:
        """Compare's answer without the difference maps, and the maps of one head (the page's selection; the average:
        head 0) on both texts with their difference: the page's Compare, drawn at any length."""
        first, second = self.texts_to_compare(text, other_text, model)
        chosen_layer = int(layer or 0)
        chosen_head = 0 if head in (None, "", "mean") else int(head)
        first_map, second_map = (v.recorded.attentions[chosen_layer, chosen_head] for v in (first, second))
        answer = self.compared(first, second, every_map=False)
        length = answer["compared_tokens"]
        maps = {
            "layer": chosen_layer,
            "head": chosen_head,
            "first": first_map.tolist(),
            "second": second_map.tolist(),
            "difference": six_decimals(first_map[:length, :length] - second_map[:length, :length]),
        }
        return answer, maps

    def sampled_probabilities(self, generated: str, model: str, prompt: str, temperature, top_k, top_p, seed) -> dict:
        """After a generation: the probability each new token was drawn with, from one forward pass over the generated
        text (its last `block_size` tokens) with the sampler's warpers applied to the logits. {key, label, pieces (each
        token's text), probabilities (None for the start token and the prompt's tokens)}."""
        view = self.insight_view(generated, model, min_tokens=1)
        lm, notes = view.lm, []
        sampling = parse_sampling(temperature, top_k, top_p, seed, lm.vocab_size, notes)
        prompt_length = len(from_boundary(lm, prompt or "", "prompt")) - (
            len(from_boundary(lm, generated, "text")) - len(view.ids)
        )
        logits = view.recorded.logits(lm.model)  # (T, V)
        warp = None if sampling.greedy else sampling.warpers()
        drawn = predictions.sampled_probabilities(logits, view.ids, warp, lm.never_ids).tolist()
        pieces = [lm.tokenizer.decode([i], skip_special_tokens=True) for i in view.ids]
        shown = [None] + [p if t >= max(prompt_length, 1) else None for t, p in enumerate(drawn, start=1)]
        return {"key": view.key, "label": view.label, "pieces": pieces, "probabilities": shown}

    def head_names(self, model: str) -> list[str]:
        """Every head of the model as "layer.head", in order (the heads the page offers to ablate)."""
        config = self.state.picker.get(model).model.config
        return [f"{layer}.{head}" for layer in range(config.n_layer) for head in range(config.n_head)]
