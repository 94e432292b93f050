"""rl/pretrain.py: copy pre-training rows whose targets can only be predicted by copying from earlier in the row,
and a training run that saves the model where it found it."""

import json
import random
from types import SimpleNamespace

import pytest
import torch

from rl.pretrain import copy_pretrain, recall_accuracy, recall_batch

VOCAB, DIGITS = list(range(20, 120)), list(range(10))


def test_every_target_token_is_a_copy_of_what_followed_the_same_context_earlier():
    ids, tgt = recall_batch(random.Random(3), VOCAB, DIGITS, 64)
    repeats = recalls = 0
    for row, mask in zip(ids.tolist(), tgt.tolist()):
        on = [t for t, m in enumerate(mask) if m]
        assert on == list(range(on[0], on[-1] + 1)), "the targets are one run at the end of the row"
        end = on[-1] + 1
        assert all(x == VOCAB[0] for x in row[end:]), "padding after the targets"
        half = end // 2
        if end % 2 == 0 and row[:half] == row[half:end]:  # a repeated sequence: the copy's first token is free
            assert on[0] == half + 1
            repeats += 1
            continue
        # key-value recall: the tokens just before the value (its key) appeared earlier, followed by the value
        value = row[on[0] : end]
        key_end = on[0]
        found = any(
            row[s : s + len(value)] == value and row[max(0, s - 1)] == row[key_end - 1] for s in range(1, key_end)
        )
        assert found, "a recalled value follows an earlier occurrence of its key"
        recalls += 1
    assert repeats > 10 and recalls > 10  # both kinds, about half each


def test_four_digit_values_are_drawn_from_the_digit_tokens():
    ids, tgt = recall_batch(random.Random(5), VOCAB, DIGITS, 200)
    digit_runs = 0
    for row in ids.tolist():
        for s in range(len(row) - 3):
            if all(x in DIGITS for x in row[s : s + 4]):
                digit_runs += 1
                break
    assert digit_runs > 50


def test_copy_pretrain_trains_saves_in_place_and_refuses_zero_steps(tmp_path):
    from transformers import AutoModelForCausalLM

    from rl.tiny import build_tiny_causal_lm

    path = build_tiny_causal_lm(tmp_path / "lm", seed=0, vocab_size=300, hidden=32, layers=2)
    before = AutoModelForCausalLM.from_pretrained(path).model.embed_tokens.weight.detach().clone()
    stats = copy_pretrain(path, 3, batch=4, progress=False)
    after = AutoModelForCausalLM.from_pretrained(path).model.embed_tokens.weight.detach()
    assert not after.equal(before), "the trained weights are saved back to the folder"
    assert json.loads((path / "copy_pretrain.json").read_text()) == stats
    assert stats["steps"] == 3 and 0.0 <= stats["recall_after"] <= 1.0 and stats["loss"] > 0
    with pytest.raises(ValueError, match="at least 1 step"):
        copy_pretrain(path, 0)


class _Fixed(torch.nn.Module):
    """A stand-in LM whose logits at position t put all mass on `pick(ids)[:, t]`."""

    def __init__(self, vocab: int, pick):
        super().__init__()
        self.vocab, self.pick = vocab, pick

    def forward(self, input_ids):
        return SimpleNamespace(logits=torch.nn.functional.one_hot(self.pick(input_ids), self.vocab).float() * 50)


def test_recall_accuracy_scores_next_token_predictions_at_the_right_offset(tmp_path):
    """A model that always predicts the true next token scores 1.0, one that repeats the current token 0.0: an
    off-by-one in the shift between logits and targets would swap them."""
    from transformers import AutoTokenizer

    from rl.tiny import build_tiny_causal_lm

    tok = AutoTokenizer.from_pretrained(build_tiny_causal_lm(tmp_path / "lm", vocab_size=300, hidden=32, layers=2))
    oracle = _Fixed(len(tok), lambda ids: torch.cat([ids[:, 1:], ids[:, :1]], 1))  # position t -> token t+1
    echo = _Fixed(len(tok), lambda ids: ids)  # position t -> token t
    assert recall_accuracy(oracle, tok, rows=64) == 1.0
    assert recall_accuracy(echo, tok, rows=64) == 0.0


def test_copy_pretrain_rounds_stop_at_the_recall_bar_and_the_first_round_is_the_single_run(tmp_path, monkeypatch):
    """A round that ends below the bar is followed by another; the first round trains exactly as one round does."""
    import rl.pretrain
    from rl.tiny import build_tiny_causal_lm

    def weights(path):
        from transformers import AutoModelForCausalLM

        return torch.cat([p.detach().flatten() for p in AutoModelForCausalLM.from_pretrained(path).parameters()])

    one, many, bar = (build_tiny_causal_lm(tmp_path / n, seed=0, vocab_size=300, hidden=32, layers=2) for n in "abc")
    single = copy_pretrain(one, 3, batch=4, progress=False)
    assert single["rounds"] == 1 and single["recall_by_round"] == [single["recall_after"]]
    probes = iter([0.0, 0.1, 0.2, 0.9, 1.0])  # before, then after each round: the third round clears 0.5
    monkeypatch.setattr(rl.pretrain, "recall_accuracy", lambda model, tok: next(probes))
    st = copy_pretrain(many, 3, batch=4, progress=False, until=0.5, rounds=5)
    assert st["rounds"] == 3 and st["recall_by_round"] == [0.1, 0.2, 0.9] and st["recall_after"] == 0.9
    probes = iter([0.0, 0.9])  # clears the bar in round one
    assert copy_pretrain(bar, 3, batch=4, progress=False, until=0.5, rounds=5)["recall_by_round"] == [0.9]
    assert torch.equal(weights(one), weights(bar)), "round one is the single-round run, update for update"
    assert not torch.equal(weights(one), weights(many))
    with pytest.raises(ValueError, match="rounds >= 1"):
        copy_pretrain(one, 3, rounds=0)
