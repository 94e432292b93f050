"""GGPO's masks on real vimrag-protocol episodes in the gym, through `rollout_one` (the trainer's path): scripted tool
calls, the gym's graded gold evidence (the page of each hop), and the masks the figure of GGPO defines
(`assets/vimrag_train.png` in the VRAG repository, VimRAG's method figure: in a success the nodes off the path from
the root to the answer are pruned; in a failure the "valuable retrieval" nodes, whose results held relevant
evidence, are spared the penalty)."""

import pytest

from agent.backends.base import Policy, Tokens
from rl.gym import build_index, make_env, write_corpus, write_questions
from rl.gym_agents import agent_config, tool_call
from rl.rollout import rollout_one


class Script(Policy):
    """Replies the given tool calls in turn, each with made-up tokens (the masks never read them)."""

    is_vlm = False
    name = "script"

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)

    def stream(self, messages, view=None):
        import torch

        text = self.replies.pop(0)
        yield text
        yield Tokens([1, 2, 3], [-0.5] * 3, {"input_ids": torch.tensor([[1, 2]])})


@pytest.fixture(scope="module")
def gym(tmp_path_factory):
    from eval.datasets import load_dataset
    from retrieval.retriever import Retriever

    root = tmp_path_factory.mktemp("gym")
    env = make_env(7, "train", hops=(1,), questions=1)
    write_corpus([env], root / "corpus")
    build_index(root / "corpus", root / "index")
    item = load_dataset(f"jsonl:{write_questions([env], root / 'q.jsonl')}", corpus=root / "corpus").items[0]
    return env, item, Retriever(root / "index")


def search(node: str, query: str, parent: str = "root") -> str:
    return tool_call("add_search_node", id=node, query=query, parent_ids=[parent])


def memorize(text: str = "") -> str:
    return tool_call("summarize_and_memorize", summarize=text, memorize=[])


def answer(text: str, parent: str) -> str:
    return tool_call("add_answer_node", answer=text, parent_ids=[parent])


def stranger(env, item) -> str:
    """Someone whose name search shows neither the asked person's page nor one naming them."""
    asked = item.question
    return next(p.name for p in env.people if p.name not in asked and p.partner not in asked)


def run(gym, replies, max_steps=10):
    env, item, retriever = gym
    cfg = agent_config(max_steps, protocol="vimrag", docs=[env.doc], top_k=1)
    return rollout_one(Script(replies), retriever, item, cfg)


def rows(traj):
    return [(s.node_id, s.gold_hit, s.mask) for s in traj.segments]


def test_a_success_prunes_its_dead_end_and_trains_the_answers_path(gym):
    env, item, _ = gym
    name, code = next(p.name for p in env.people if p.name in item.question), item.answers[0]
    traj = run(
        gym, [search("s1", stranger(env, item)), memorize(), search("s2", name), memorize(code), answer(code, "s2")]
    )
    assert traj.reward == 1.0 and traj.trace.status == "answered"
    assert rows(traj) == [
        ("s1", False, 1.0),  # the dead end: its search and its memorize, off the path to the answer
        ("s1", None, 1.0),
        ("s2", True, 0.0),  # the answer's path trains
        ("s2", None, 0.0),
        ("answer", None, 0.0),
    ]


def test_a_failure_spares_only_the_search_that_showed_a_gold_page(gym):
    env, item, _ = gym
    name = next(p.name for p in env.people if p.name in item.question)
    traj = run(
        gym, [search("s1", name), memorize(), search("s2", stranger(env, item), "s1"), memorize(), answer("0", "s2")]
    )
    assert traj.reward == 0.0
    assert rows(traj) == [
        ("s1", True, 1.0),  # a valuable retrieval: it showed the gold page, so the failure does not punish it
        ("s1", None, 1.0),
        ("s2", False, 0.0),  # it showed another page: penalised
        ("s2", None, 0.0),
        ("answer", None, 0.0),
    ]


def test_a_failure_that_runs_out_of_steps_penalises_its_searches_that_showed_no_gold_page(gym):
    """Before graded evidence every search of the environment's file counted as valuable, so this episode was masked
    on every step and trained nothing."""
    env, item, _ = gym
    other = stranger(env, item)
    traj = run(gym, [search("s1", other), memorize(), search("s2", other + " room"), memorize()], max_steps=4)
    assert traj.trace.status == "limit" and traj.reward == 0.0
    assert rows(traj) == [("s1", False, 0.0), ("s1", None, 0.0), ("s2", False, 0.0), ("s2", None, 0.0)]
