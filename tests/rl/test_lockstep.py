"""Lockstep rollouts (rl/rollout.py `run_lockstep`): episodes on threads whose model calls are sampled together,
one batched generate per round."""

import threading

import pytest
import torch

from agent.backends.base import Tokens


@pytest.fixture(scope="module")
def tiny_text(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.tiny import build_tiny_causal_lm

    path = build_tiny_causal_lm(tmp_path_factory.mktemp("lm") / "m", hidden=32, layers=2)
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def test_a_batch_of_prompts_is_decoded_as_each_prompt_alone(tiny_text):
    """Left padding changes nothing a reply depends on: greedy replies, their log-probs and entropies are those of
    the prompts sampled one by one."""
    from rl.policy import TextPolicy

    model, tok = tiny_text
    pol = TextPolicy(model, tok, max_new_tokens=8, greedy=True)
    prompts = ["which code?", "Find the page about the northern line, and tell me its access code please.", "Hi"]
    inputs = [pol.encode([{"role": "user", "content": p}]) for p in prompts]
    assert len({x["input_ids"].shape[1] for x in inputs}) == 3  # three lengths: two rows are padded
    alone = [pol.sample(x) for x in inputs]
    together = pol.sample_many(inputs)
    for (g1, lp1, e1), (g2, lp2, e2) in zip(alone, together):
        assert g1.tolist() == g2.tolist()
        assert torch.allclose(lp1, lp2, atol=1e-5) and torch.allclose(e1, e2, atol=1e-5)


def test_sampled_batches_draw_each_row_from_its_own_prompt(tiny_text):
    """Sampling (not greedy): each row's log-probs are those the model gives its reply after its own prompt."""
    from rl.policy import TextPolicy, sequence_logprobs

    model, tok = tiny_text
    pol = TextPolicy(model, tok, max_new_tokens=6, temperature=0.7)
    inputs = [pol.encode([{"role": "user", "content": p}]) for p in ("a", "b c d e f")]
    torch.manual_seed(0)
    for x, (gen, logp, _) in zip(inputs, pol.sample_many(inputs)):
        assert 1 <= gen.numel() <= 6 and not set(gen[:-1].tolist()) & set(pol.stop_ids)
        with torch.no_grad():
            assert torch.allclose(logp, sequence_logprobs(model, x, gen, 0.7), atol=1e-5)


class CountingSampler:
    """A fake sampler: each prompt is its episode's name and step; records the batches it is asked to sample."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.names: list[str] = []  # what each prompt said; its input id is its place here
        self.lock = threading.Lock()

    def encode(self, messages):
        self.names.append(messages[-1]["content"])
        return {"input_ids": torch.tensor([[len(self.names) - 1]])}

    def name(self, inputs) -> str:
        return self.names[int(inputs["input_ids"][0, 0])]

    def evaluating(self):
        return self.lock  # any context manager

    def sample_many(self, inputs):
        self.batches.append([self.name(x) for x in inputs])
        return [(torch.tensor([1]), torch.tensor([0.0]), torch.tensor([0.0])) for _ in inputs]

    def reply(self, inputs, sampled):
        yield self.name(inputs)
        yield Tokens(sampled[0].tolist(), sampled[1].tolist(), inputs, sampled[2].tolist())


def episode(name: str, calls: int, fail_at: int | None = None):
    def run(policy):
        said = []
        for k in range(calls):
            if k == fail_at:
                raise RuntimeError(f"{name} broke")
            said.append(next(iter(policy.stream([{"role": "user", "content": f"{name}{k}"}]))))
        return said

    return run


def test_each_round_batches_every_episode_still_going_in_a_fixed_order():
    from rl.rollout import run_lockstep

    s = CountingSampler()
    got = run_lockstep(s, [episode("a", 1), episode("b", 3), episode("c", 2)])
    assert got == [["a0"], ["b0", "b1", "b2"], ["c0", "c1"]]
    assert s.batches == [["a0", "b0", "c0"], ["b1", "c1"], ["b2"]]
    s = CountingSampler()  # at most two prompts a batch: a round of three is sampled as two batches
    assert run_lockstep(s, [episode("a", 1), episode("b", 2), episode("c", 2)], batch=2) == [
        ["a0"],
        ["b0", "b1"],
        ["c0", "c1"],
    ]
    assert s.batches == [["a0", "b0"], ["c0"], ["b1", "c1"]]


def test_an_episode_that_fails_does_not_stall_the_others():
    from rl.rollout import run_lockstep

    s = CountingSampler()
    with pytest.raises(RuntimeError, match="b broke"):
        run_lockstep(s, [episode("a", 3), episode("b", 3, fail_at=1), episode("c", 2)])
    assert s.batches == [["a0", "b0", "c0"], ["a1", "c1"], ["a2"]]


@pytest.mark.slow
def test_lockstep_rollouts_through_the_agent_loop_match_the_sequential_ones(tiny_text, tmp_path):
    """Greedy, so both ways must give the same episodes: the same replies at every step of every trajectory."""
    from eval.datasets import EvalItem
    from retrieval.retriever import Retriever
    from rl.gym import build_index, make_env, write_corpus
    from rl.gym_agents import agent_config
    from rl.policy import TextPolicy
    from rl.rollout import rollout_group, rollout_lockstep

    envs = [make_env(s, "train") for s in range(2)]
    index = build_index(write_corpus(envs, tmp_path / "corpus"), tmp_path / "index")
    retriever = Retriever(index)
    model, tok = tiny_text
    pol = TextPolicy(model, tok, max_new_tokens=10, greedy=True)
    jobs = [
        (EvalItem(id=q.id, question=q.question, answers=[q.answer]), agent_config(3, False, docs=[e.doc]))
        for e in envs
        for q in e.questions[:1]
    ]
    seq = [rollout_group(pol, retriever, item, acfg, 2) for item, acfg in jobs]
    par = rollout_lockstep(pol, retriever, jobs, 2)
    outputs = lambda groups: [[[s.text for s in t.segments] for t in g] for g in groups]  # noqa: E731
    assert outputs(par) == outputs(seq)
    assert sum(len(t.segments) for g in par for t in g) >= 4  # several steps, so several rounds
    for g1, g2 in zip(seq, par):
        for t1, t2 in zip(g1, g2):
            for s1, s2 in zip(t1.segments, t2.segments):
                assert torch.equal(s1.inputs["input_ids"], s2.inputs["input_ids"])
                assert torch.allclose(s1.old_logp, s2.old_logp, atol=1e-5)


@pytest.mark.slow
def test_a_lockstep_update_trains_and_lockstep_is_refused_where_it_cannot_apply(tmp_path, task, parity_reward):
    from rl.tiny import build_tiny_causal_lm
    from rl.trainer import Trainer
    from tests.rl.tiny_config import tiny_config

    path = build_tiny_causal_lm(tmp_path / "lm", hidden=32, layers=2)
    tr = Trainer(tiny_config(path, task, tmp_path / "run", lockstep=True, questions_per_update=2))
    before = torch.cat([p.detach().flatten().clone() for p in tr.model.parameters()])
    log = tr.step()
    after = torch.cat([p.detach().flatten() for p in tr.model.parameters()])
    assert torch.isfinite(torch.tensor(log["loss"])) and log["segments"] == 8  # 2 questions x 2 trajectories x 2
    assert not torch.equal(before, after)
    for bad in ({"branching": "arpo"}, {"rollout_mode": "async"}):
        with pytest.raises(ValueError, match="lockstep batches a local policy's synchronous rollouts"):
            tiny_config(path, task, tmp_path / "bad", lockstep=True, **bad)
