"""The gym on VimRAG's DAG protocol: the scripted expert writes search nodes with parents, memorize steps and an
answer with parents through the real agent; a miss becomes a dead end off the answer's path; gold evidence is the
page of each hop."""

import json

import pytest

from rl.ggpo import answer_ancestors, dead_end_searches
from rl.gym import build_index, gold_evidence, make_env, write_corpus, write_questions
from rl.gym_agents import agent_config, expert_traces


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    from retrieval.retriever import Retriever

    root = tmp_path_factory.mktemp("vimrag_gym")
    envs = [make_env(s, "train", hops=(1, 2), traps=3) for s in range(12)]
    write_corpus(envs, root / "corpus")
    build_index(root / "corpus", root / "index")
    return envs, Retriever(root / "index"), root


def test_the_expert_writes_a_dag_whose_dead_ends_hang_off_the_answers_path(pool):
    envs, retriever, root = pool
    pairs = [(e, q) for e in envs for q in e.questions]
    saved = expert_traces(pairs, retriever, root / "traces", max_steps=10, protocol="vimrag")
    assert saved >= 0.8 * len(pairs)  # the expert gives up only when every query form misses
    graphs = [json.loads(f.read_text())["graph"] for f in (root / "traces").glob("*.json")]
    with_dead_end = [g for g in graphs if dead_end_searches(g)]
    assert with_dead_end, "no expert trace holds a dead end: the environments do not make exploring pay"
    for g in graphs:
        kinds = {n["id"]: n["kind"] for n in g["nodes"]}
        answer = next(n for n in g["nodes"] if n["kind"] == "answer")
        assert kinds[answer["parents"][0]] == "search"  # the answer names the last hop's node
        on_path = answer_ancestors(g)
        for n in g["nodes"]:
            if n["kind"] == "search" and n["id"] not in on_path:  # a dead end: a sibling of a search on the path
                assert n["summary"].startswith("no page of") and n["parents"][0] in on_path


def test_gold_evidence_is_the_page_of_each_hop_and_matches_only_it(pool):
    from eval.datasets import load_dataset

    envs, retriever, root = pool
    ds = load_dataset(f"jsonl:{write_questions(envs, root / 'q.jsonl')}", corpus=root / "corpus")
    item = next(it for it in ds.items if len(it.evidence) == 2)  # a 2-hop question: two gold pages
    env = next(e for e in envs if e.doc == item.doc)
    q = next(q for q in env.questions if q.id == item.id)
    assert [g.chunk for g in item.evidence] == [g["chunk"] for g in gold_evidence(env, q)]
    from retrieval.units import Filters

    units = [h.unit.to_dict() for h in retriever.search(q.chain[0], k=len(env.pages), filters=Filters([env.doc]))]
    gold_texts = {" ".join(t.split()) for t in q.evidence}
    matched = [any(g.matches(u) for g in item.evidence) for u in units]
    assert len(units) == len(env.pages) and sum(matched) == 2  # every page of the document; the two hops' match
    for u, m in zip(units, matched):
        assert m == (" ".join(u["text"].split()) in gold_texts)


def test_the_vimrag_gym_refuses_pictures():
    with pytest.raises(ValueError, match="text environments only"):
        agent_config(10, pictures=True, protocol="vimrag")
    with pytest.raises(ValueError, match="vrag or vimrag"):
        agent_config(10, protocol="react")


def test_the_experiment_refuses_fine_print_on_vimrag_before_it_builds_anything(tmp_path):
    from rl.experiment import ExperimentConfig, run

    with pytest.raises(SystemExit, match="--protocol vrag only"):
        run(ExperimentConfig(out=str(tmp_path / "run"), fine_print=0.2))
    assert not (tmp_path / "run").exists()
    assert (ExperimentConfig().max_steps, ExperimentConfig(protocol="vrag").max_steps) == (8, 6)
