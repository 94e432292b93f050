"""rl/gym.py: environments from a seed, held-out ones that share nothing with training but the task, one unit per
page, and an expert that solves them through the real agent loop and retrieval."""

import json
import re

import pytest

from rl.gym import (
    CHUNK_CHARS,
    HELD_LAYOUTS,
    HELD_QUESTIONS,
    HELD_WORDS,
    TRAIN_LAYOUTS,
    TRAIN_QUESTIONS,
    build_index,
    expert_traces,
    make_env,
    write_corpus,
    write_questions,
)


def test_an_environment_is_a_function_of_its_seed_and_its_answers_are_printed_once():
    a, b = make_env(7, hops=(1, 2, 3)), make_env(7, hops=(1, 2, 3))
    assert a.pages == b.pages and [q.question for q in a.questions] == [q.question for q in b.questions]
    assert make_env(8).pages != a.pages
    for q in a.questions:
        assert sum(q.answer in p for p in a.pages) == 1  # one page holds the code: no other route to it
        assert len(q.chain) == q.hops
        for name, nxt in zip(q.chain, q.chain[1:]):  # each hop's page names the next person
            own = next(p for p in a.pages if name in p and a.people[[x.name for x in a.people].index(name)].code in p)
            assert nxt in own


def test_held_out_environments_share_no_name_layout_or_wording_with_training():
    assert not set(TRAIN_LAYOUTS) & set(HELD_LAYOUTS)
    frames = lambda qs: {f for fs in qs.values() for f in fs}  # noqa: E731
    assert not frames(TRAIN_QUESTIONS) & frames(HELD_QUESTIONS)

    def words(split):  # the words of every name on any page of 50 environments, look-alikes and dead ends included
        pages = [p for s in range(50) for p in make_env(s, split).pages]
        return {
            w.lower() for p in pages for pair in re.findall(r"\b([A-Z][a-z]{3}) ([A-Z][a-z]{3})\b", p) for w in pair
        }

    train, held = words("train"), words("test")
    assert held and held <= HELD_WORDS and not train & HELD_WORDS  # no held-out given or family name in training
    held_q = {q.question for s in range(5) for q in make_env(s, "test").questions}
    assert all(q.startswith(("Which", "Please")) for q in held_q)


def test_difficulty_is_controlled():
    env = make_env(1, hops=(3,), look_alikes=3, traps=2, questions=4)
    assert {q.hops for q in env.questions} == {3}
    assert len(env.pages) == 5 + 3 + 2
    with pytest.raises(ValueError, match="hops"):
        make_env(1, hops=(4,))
    with pytest.raises(ValueError, match="at least 4 people"):
        make_env(1, hops=(3,), people=3)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("gym")
    envs = [make_env(s, "train", hops=(1, 2)) for s in range(6)] + [make_env(s, "test", hops=(1, 2)) for s in range(3)]
    corpus = write_corpus(envs, root / "corpus")
    return envs, corpus, build_index(corpus, root / "index"), root


def test_every_page_is_its_own_unit(pool):
    from retrieval.retriever import Retriever

    envs, corpus, index, _ = pool
    assert all(len(p) <= CHUNK_CHARS for e in envs for p in e.pages)
    r = Retriever(index)
    for e in envs[:2] + envs[-1:]:
        for p in e.pages:  # searching a page's own text finds exactly that page, alone in its unit
            assert r.search(p, k=1, filters={"docs": [e.doc]})[0].unit.text.strip() == p


def test_the_expert_solves_its_questions_through_the_agent_and_the_dataset_loads(pool):
    from eval.datasets import load_dataset
    from retrieval.retriever import Retriever

    envs, corpus, index, root = pool
    pairs = [(e, q) for e in envs for q in e.questions]
    saved = expert_traces(pairs, Retriever(index), root / "traces")
    assert saved >= 0.9 * len(pairs)
    trace = json.loads(next((root / "traces").glob("*.json")).read_text())
    searches = [s["output"] for s in trace["steps"] if s["output"].startswith("<search>")]
    assert searches and re.fullmatch(r"<answer>\d{4}</answer>", trace["steps"][-1]["output"])
    ds = load_dataset(f"jsonl:{write_questions(envs, root / 'q.jsonl')}", corpus=corpus)
    assert ds.per_doc and len(ds.items) == len(pairs) and ds.items[0].doc.startswith("env_")
