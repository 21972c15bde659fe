"""Roles beyond the previous token: each head's weight k tokens back and on earlier copies of its token (against the
attention the model returns, summed in the test), and each head's measured job, on the specimen's texts."""

import pytest
import torch

import modeling_minigpt  # noqa: F401 (registers MiniGPT with the Auto classes)
from minigpt.heads import head_roles, offset_scores, run_forward_pass
from minigpt.heads.errors import InstrumentError
from minigpt.heads.role_scores import measured_jobs

TEXTS = ["We few, we happy few, we band of", "the owl and the pussycat, the owl and the pus"]


def roles_of(model, ids):
    recorded = run_forward_pass(model, ids)
    probe = {"induction": torch.zeros(2, 4), "induction_chance": 0.1, "first_half_loss": 0.0, "repeated_half_loss": 0.0}
    return recorded, head_roles(model, recorded, None, probe)


@pytest.mark.parametrize("text", TEXTS)
def test_the_weight_k_tokens_back_is_the_models_own_diagonal_averaged(specimen, text):
    """offset k: the mean over queries i >= k of the weight on key i - k (output_attentions, float32 sums: 1e-6)."""
    model, read = specimen
    ids = read(text)
    with torch.no_grad():
        attentions = torch.stack(model(torch.tensor([ids]), output_attentions=True).attentions)[:, 0]  # (L, H, T, T)
    found = offset_scores(attentions)
    T = len(ids)
    for k in range(1, found["scores"].shape[-1] + 1):
        by_hand = torch.stack([attentions[..., i, i - k] for i in range(k, T)], dim=-1).mean(-1)
        torch.testing.assert_close(found["scores"][..., k - 1], by_hand, atol=1e-6, rtol=0)
        # chance: a head spreading its weight evenly gives key i - k the weight 1 / (i + 1)
        chance = sum(1 / (i + 1) for i in range(k, T)) / (T - k)
        assert abs(float(found["chance"][k - 1]) - chance) < 1e-6


def test_head_0_0_of_the_specimen_is_measured_looking_two_tokens_back(specimen):
    """The issue's finding, measured: 0.0 scores below chance as a previous-token head but puts ~0.94 two back."""
    model, read = specimen
    for text in TEXTS:
        recorded, roles = roles_of(model, read(text))
        jobs = measured_jobs(roles)
        assert jobs[0][0]["role"] == "offset" and jobs[0][0]["offset"] == 2 and jobs[0][0]["clear"], jobs[0][0]
        assert jobs[0][0]["score"] > 0.9 > float(roles["previous_token"][0, 0]) * 10
        assert jobs[0][2]["role"] == "offset" and jobs[0][2]["offset"] == 1  # 0.2: the previous-token head


def test_each_job_is_the_role_furthest_above_its_chance(specimen):
    model, read = specimen
    recorded, roles = roles_of(model, read(TEXTS[0]))
    jobs = measured_jobs(roles)
    for layer, row in enumerate(jobs):
        for head, job in enumerate(row):
            candidates = {
                role: (float(roles[role][layer, head]) - chance) / (1 - chance)
                for role, chance in (
                    *((r, roles["chance"][r]) for r in ("first_token", "self", "induction")),
                    ("same_token", roles["same_token_chance"]),
                )
            }
            best_offset = roles["offsets"]["offset"][layer, head] - 1
            score = roles["offsets"]["scores"][layer, head, best_offset]
            chance = roles["offsets"]["chance"][best_offset]
            candidates["offset"] = float((score - chance) / (1 - chance))
            assert job["role"] == max(candidates, key=candidates.get)
            assert abs(job["excess"] - max(candidates.values())) < 1e-6 and job["clear"] == (job["excess"] >= 0.5)


def test_a_text_too_short_to_look_back_is_refused():
    with pytest.raises(InstrumentError, match="too short to look back"):
        offset_scores(torch.ones(1, 1, 1, 1))
