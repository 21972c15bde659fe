"""What a circuit is found for: a prompt set (clean prompts, and corrupted ones of the same length that break the
behaviour) and the metric that measures the behaviour on a run's logits, averaged over the prompts.

- "induction": random tokens written twice (`prompts.repeated_tokens`); the corrupted prompt keeps the second half
  after another random first half, so that copying cannot work. Metric: the mean log-probability of the second
  copy's tokens from its second on (the first follows the first copy's last token: no copying predicts it), the part
  `tests/test_prompts.py` measures the loss on.
- "pairs": clean and corrupted texts given. Metric: the mean over prompts of the logit difference at the last
  position, logit(the clean prompt's top-1 answer) - logit(the corrupted prompt's), the answers fixed by the model's
  own runs; a pair whose answers are the same is left out (nothing to restore).

Metrics (`metric`), each measured where the task measures (induction: the repeated half from its second token;
pairs: the last position) and averaged over those positions, then over prompts:
- "log-probability": of the clean prompt's next token (induction's default);
- "logit difference": logit(the clean prompt's answer) - logit(the corrupted prompt's) (pairs' default); on the
  induction task the corrupted prompt's answer is the token its own first half would have copied there;
- "kl divergence": minus KL(clean run || this run) over the next-token distribution (ACDC's), so that, like the
  others, higher is closer to the model (the model itself scores 0). It needs the clean run's log-probabilities
  (`Task.reference`), which `exact_runs.setting_of` records.

Ids: a (T,) list or tensor for one prompt, a list of lists or an (N, T) tensor for a set.
"""

from dataclasses import dataclass, field

import torch
from torch.nn import functional as F

from minigpt.heads.errors import InstrumentError, checked_count, checked_ids, shortened
from minigpt.heads.prompts import repeated_tokens
from minigpt.heads.runs import last_logits

TASKS = ("induction", "pairs")
METRICS = ("log-probability", "logit difference", "kl divergence")
DEFAULT_METRICS = {"induction": "log-probability", "pairs": "logit difference"}
WHERE = {"induction": "of the repeated half", "pairs": "at the last position"}


class NoDifference(InstrumentError):
    """No pair's answer changes between its clean and corrupted text."""


@dataclass
class Task:
    """A prompt set and its metric."""

    name: str  # "induction" or "pairs"
    clean: torch.Tensor  # (N, T) long
    corrupted: torch.Tensor  # (N, T) long
    answers: torch.Tensor | None  # (N, 2) the clean and corrupted answers of each pair ("pairs"), else None
    left_out: int = 0  # pairs left out: the same answer after both texts
    metric_name: str = ""  # one of METRICS; empty: the task's default
    reference: torch.Tensor | None = field(default=None, repr=False)  # (N, P, V) the clean run's log-probabilities

    def __post_init__(self):
        self.metric_name = self.metric_name or DEFAULT_METRICS[self.name]

    @property
    def metric(self) -> str:
        """The metric in words: "log-probability of the repeated half" (induction's default), "logit difference at
        the last position"..."""
        if (self.name, self.metric_name) == ("pairs", "logit difference"):
            return "logit difference"  # the pairs task's own, as it always read
        return (
            f"{'KL divergence to the clean run' if self.metric_name == 'kl divergence' else self.metric_name} "
            + (WHERE[self.name])
        )

    def measured(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, P, V) the logits at the measured positions and (N, P, 2) the clean and corrupted answers there."""
        if self.name == "pairs":
            return logits[:, -1:], self.answers.to(logits.device)[:, None]
        half = (self.clean.shape[1] - 1) // 2
        clean = self.clean[:, half + 2 :]  # the second copy's tokens, its first left out
        copied = self.corrupted[:, 2 : half + 1]  # what the corrupted prompt's first half has in their place
        return logits[:, half + 1 : -1], torch.stack([clean, copied], -1).to(logits.device)

    def measure_each(self, logits: torch.Tensor) -> torch.Tensor:
        """(N,) the metric of each prompt (differentiable) from a run's logits on the prompts: (N, T, V)."""
        logits, answers = self.measured(logits.float())
        if self.metric_name == "logit difference":
            return (logits.gather(-1, answers[..., :1]) - logits.gather(-1, answers[..., 1:]))[..., 0].mean(-1)
        log_probs = F.log_softmax(logits, dim=-1)
        if self.metric_name == "log-probability":
            return log_probs.gather(-1, answers[..., :1])[..., 0].mean(-1)
        if self.reference is None:
            raise InstrumentError("The KL divergence needs the clean run's log-probabilities: measure in a setting.")
        reference = self.reference.to(log_probs.device)
        return -(reference.exp() * (reference - log_probs)).sum(-1).mean(-1)

    def measure(self, logits: torch.Tensor) -> torch.Tensor:
        """The metric (a 0-dim tensor, differentiable) of a run's logits on the prompts: (N, T, V)."""
        return self.measure_each(logits).mean()

    def referenced(self, clean_logits: torch.Tensor) -> None:
        """Keep the clean run's log-probabilities at the measured positions (what the KL divergence reads)."""
        if self.metric_name == "kl divergence":
            self.reference = F.log_softmax(self.measured(clean_logits.float())[0], dim=-1).detach()


def as_prompts(ids, vocab_size: int, name: str) -> torch.Tensor:
    """(N, T) long of one prompt (a list or (T,) tensor) or a set (a list of lists, an (N, T) tensor), each id one of
    the vocabulary's `vocab_size` (`name`: the argument, for the message)."""
    ids = checked_ids(ids, vocab_size, name)
    ids = ids[None] if ids.dim() == 1 else ids
    if ids.dim() != 2 or 0 in ids.shape:
        raise InstrumentError(f"{name} must be one prompt or a set of prompts, not a tensor of {tuple(ids.shape)}.")
    return ids


def allowed_tokens(config) -> list[int]:
    """The tokens a random prompt may hold: every token but the special ones (start, end, padding)."""
    special = {config.bos_token_id, config.eos_token_id, config.pad_token_id}
    return [token for token in range(config.vocab_size) if token not in special]


def repeated_or_refused(clean: torch.Tensor) -> int:
    """Half the length of prompts that are a start token and a half written twice; anything else is refused."""
    half = (clean.shape[1] - 1) // 2
    if clean.shape[1] < 5 or clean.shape[1] % 2 == 0 or not torch.equal(clean[:, 1 : half + 1], clean[:, half + 1 :]):
        raise InstrumentError(
            "The induction task's prompts are a start token and random tokens written twice (heads.repeated_tokens), "
            "at least two tokens a copy."
        )
    return half


def induction_task(model, clean_ids=None, corrupted_ids=None, count: int = 20, half: int = 20, seed: int = 0) -> Task:
    """The induction task: `count` prompts of `half` random tokens written twice after the start token (or the
    prompts given), each corrupted by another random first half (seeded) unless corrupted prompts are given."""
    config = model.config
    allowed, start = allowed_tokens(config), config.bos_token_id if config.bos_token_id is not None else 0
    if clean_ids is None:
        count = checked_count(count, "prompts", "the induction task's prompts")
        half = checked_count(half, "half", "the random tokens of each prompt, written twice", least=2)
        clean = repeated_tokens(allowed, start, count, half, seed)
    else:
        clean = as_prompts(clean_ids, config.vocab_size, "clean_ids")
    half = repeated_or_refused(clean)
    if corrupted_ids is None:
        other = repeated_tokens(allowed, start, len(clean), half, seed + 1)[:, 1 : half + 1]
        corrupted = torch.cat([clean[:, :1], other, clean[:, half + 1 :]], dim=1)
    else:
        corrupted = as_prompts(corrupted_ids, config.vocab_size, "corrupted_ids")
    if corrupted.shape != clean.shape:
        raise InstrumentError("Each clean prompt needs a corrupted prompt of the same length.")
    return Task("induction", clean, corrupted, None)


def pairs_task(model, clean_ids, corrupted_ids) -> Task:
    """Clean and corrupted texts, pair by pair; each pair's answers are the model's top-1 next tokens after each
    (one forward pass of both), a pair with the same answer left out."""
    vocab_size = model.config.vocab_size
    clean = as_prompts(clean_ids, vocab_size, "clean_ids")
    corrupted = as_prompts(corrupted_ids, vocab_size, "corrupted_ids")
    if clean.shape != corrupted.shape:
        raise InstrumentError(
            f"The clean texts are {tuple(clean.shape)} and the corrupted ones {tuple(corrupted.shape)}: each clean "
            "text needs a corrupted one of the same number of tokens."
        )
    logits, _ = last_logits(model, torch.cat([clean, corrupted]))
    answers = torch.stack(logits.argmax(-1).chunk(2), dim=1)  # (N, 2)
    differ = answers[:, 0] != answers[:, 1]
    if not differ.any():
        raise NoDifference(
            "After every pair the model's top next token is the same for the clean and the corrupted text: there is "
            "no difference for a circuit to carry. Change the corrupted texts so that the answer changes."
        )
    return Task("pairs", clean[differ], corrupted[differ], answers[differ], int((~differ).sum()))


def checked_metric(metric: str | None) -> None:
    if metric is not None and metric not in METRICS:
        raise InstrumentError(
            f"metric is 'log-probability', 'logit difference' or 'kl divergence' (or None: the task's own), not "
            f"{shortened(metric)}."
        )


def task_of(
    model, clean_ids, corrupted_ids, task: str | None, count: int, half: int, seed: int, metric: str | None = None
) -> Task:
    """The task a call names: "pairs" when corrupted texts are given, else "induction", unless `task` says; measured
    by `metric` (None: the task's own)."""
    checked_metric(metric)
    task = task if task is not None else ("pairs" if corrupted_ids is not None else "induction")
    if task not in TASKS:
        raise InstrumentError(f"The task is 'induction' or 'pairs', not {task!r}.")
    if task == "induction":
        found = induction_task(model, clean_ids, corrupted_ids, count, half, seed)
    elif clean_ids is None or corrupted_ids is None:
        raise InstrumentError("The pairs task takes clean texts and corrupted texts of the same lengths.")
    else:
        found = pairs_task(model, clean_ids, corrupted_ids)
    found.metric_name = metric or found.metric_name
    return found


__all__ = ["METRICS", "TASKS", "Task", "induction_task", "pairs_task", "task_of"]
