"""Served rollouts (rl/served.py) against a stand-in vLLM server: adapter hot-loading per update, token ids
and log-probs read back, inputs and log-probs rebuilt locally, and the errors a user can run into."""

import json

import pytest

from agent.backends.base import PolicyError
from rl.tiny import build_tiny_causal_lm
from tests.rl.fake_vllm import FakeVLLM
from tests.rl.tiny_config import tiny_config

pytest.importorskip("peft", reason="served rollouts need LoRA: install the train extra (scripts/setup.sh train)")


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    return build_tiny_causal_lm(tmp_path_factory.mktemp("lm") / "m")


def served_config(model, task, out, url, **kw):
    """Two updates of a LoRA policy sampled by the server at `url`."""
    served = dict(updates=2, lr=5e-2, max_new_tokens=10, save_every=0, seed=1, temperature=1.0)
    lora = {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    return tiny_config(model, task, out, **{**served, "lora": lora, "rollout": "served", "rollout_url": url, **kw})


@pytest.mark.slow
def test_served_rollouts_follow_the_trainers_adapter_update_by_update(tiny_lm, task, tmp_path, parity_reward):
    from rl.trainer import Trainer

    with FakeVLLM(tiny_lm) as server:
        tr = Trainer(served_config(tiny_lm, task, tmp_path / "run", server.url))
        logs = tr.train(progress=False)
    assert [lg["update"] for lg in logs] == [1, 2] and all(lg["segments"] == 4 for lg in logs)
    # the server sampled with the trainer's weights of that moment, so its log-probs are the trainer's
    assert all(lg["served_logp_gap"] < 1e-4 for lg in logs), [lg["served_logp_gap"] for lg in logs]
    loads = [(p, b["lora_name"]) for p, b in server.calls if "lora_adapter" in p]
    assert loads == [
        ("/v1/load_lora_adapter", "vimrag-policy-0"),
        ("/v1/load_lora_adapter", "vimrag-policy-1"),
        ("/v1/unload_lora_adapter", "vimrag-policy-0"),
    ]
    models = [b["model"] for p, b in server.calls if p == "/v1/chat/completions"]
    assert models == ["vimrag-policy-0"] * 4 + ["vimrag-policy-1"] * 4  # 2 trajectories x 2 steps per update
    sent = next(b for p, b in server.calls if p == "/v1/chat/completions")
    assert sent["logprobs"] and sent["return_tokens_as_token_ids"] and sent["top_p"] == 1.0
    assert "seed" not in sent  # one seed would make a group's trajectories identical
    # only the newest adapter is kept on disk
    assert [p.name for p in (tmp_path / "run" / "served_adapters").iterdir()] == ["update-000001"]
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["served_logp_gap"] for r in rows] == [lg["served_logp_gap"] for lg in logs]


@pytest.mark.slow
def test_concurrent_served_rollouts_keep_groups_and_segments_apart(tiny_lm, task, questions, tmp_path, parity_reward):
    from rl.trainer import Trainer

    with FakeVLLM(tiny_lm) as server:
        tr = Trainer(
            served_config(
                tiny_lm, task, tmp_path / "run", server.url, rollout_workers=4, questions_per_update=2, updates=1
            )
        )
        log = tr.step()
        # 2 questions x 2 trajectories x 2 steps, each segment recomputed against the prompt it was sampled for
        assert log["segments"] == 8 and log["served_logp_gap"] < 1e-4

        def first_line(content):  # an all-text turn travels as one string, as the VimRAG demo sends it
            return (content if isinstance(content, str) else content[0]["text"]).splitlines()[0]

        asked = [first_line(b["messages"][1]["content"]) for p, b in server.calls if p == "/v1/chat/completions"]
        assert sorted(set(asked)) == sorted(f"Question: {q['question']}" for q in questions)
        assert all(asked.count(q) == 4 for q in set(asked))  # each question by its own group of 2 x 2 steps
        # each trajectory holds exactly its own steps' segments, whichever thread ran it
        from rl.rollout import rollout_concurrent
        from rl.served import ServedPolicy
        from rl.trainer import make_policy

        local = make_policy(tr.acc.unwrap_model(tr.model), tr.proc, tr.is_vl, tr.cfg)
        jobs = [(item, tr.agent_config(item)) for item in tr.ds.items]
        groups = rollout_concurrent(
            [ServedPolicy(local, tr.client, "vimrag-policy-0") for _ in range(3)], tr.get_retriever(), jobs, 2
        )
    for (item, _), trajs in zip(jobs, groups):
        assert len(trajs) == 2 and all(t.item_id == item.id for t in trajs)
        for t in trajs:
            assert [s.step for s in t.segments] == [r.step for r in t.trace.steps]
            assert all(item.question in tr.proc.decode(s.inputs["input_ids"][0]) for s in t.segments)


@pytest.mark.slow
def test_a_stale_server_shows_up_as_a_log_prob_gap(tiny_lm, task, tmp_path, parity_reward, caplog, monkeypatch):
    """If the server ignores the adapter (here: it always serves update 0's), the gap says so."""
    import rl.trainer
    from rl.trainer import Trainer

    monkeypatch.setattr(rl.trainer, "GAP_WARN", 1e-4)  # a tiny model's one update moves log-probs only a little

    with FakeVLLM(tiny_lm) as server:
        keep = server.load_adapter
        first: dict = {}

        def stale(name, path):
            if not first:
                first["model"] = None
                status, text = keep(name, path)
                first["model"] = server.models[name]
                return status, text
            server.models[name] = first["model"]  # "loaded", but the old weights answer
            return 200, "Success"

        server.load_adapter = stale
        logs = Trainer(served_config(tiny_lm, task, tmp_path / "run", server.url)).train(progress=False)
    assert logs[0]["served_logp_gap"] < 1e-4 < logs[1]["served_logp_gap"]
    warned = [r.getMessage() for r in caplog.records if "log-probs differ" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("update 2:")  # the run says so, not just the metrics


def test_served_rollouts_need_lora_and_a_url(tiny_lm, task, tmp_path):
    with pytest.raises(ValueError, match="needs `lora`"):
        served_config(tiny_lm, task, tmp_path, "http://127.0.0.1:9/v1", lora=None)
    with pytest.raises(ValueError, match="rollout_url"):
        served_config(tiny_lm, task, tmp_path, "")
    with pytest.raises(ValueError, match="local or served"):
        served_config(tiny_lm, task, tmp_path, "http://x/v1", rollout="vllm")


def test_an_unreachable_server_is_a_clear_error(tiny_lm, task, tmp_path):
    import socket

    from rl.trainer import Trainer

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tr = Trainer(served_config(tiny_lm, task, tmp_path / "run", f"http://127.0.0.1:{port}/v1"))
    tr.client.config.retries = 0
    with pytest.raises(PolicyError, match=f"127.0.0.1:{port}"):
        tr.step()


def test_a_server_without_token_ids_is_refused_by_name():
    from rl.served import parse_choice

    with pytest.raises(PolicyError, match="return_tokens_as_token_ids"):
        parse_choice({"logprobs": {"content": [{"token": "Hello", "logprob": -1.0}]}, "finish_reason": "stop"})
    with pytest.raises(PolicyError, match="logprobs"):
        parse_choice({"message": {"content": "Hello"}, "logprobs": None, "finish_reason": "stop"})


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        {"method": "gppo", "step_mask": True},
        {"method": "aepo", "branching": "aepo", "tool_advantage": 0.5},
        {"method": "adora", "branching": "arpo", "horizons": [1, 2], "horizon_every": 1},
    ],
    ids=["gppo+mask", "aepo+branching+toolpo", "adora+arpo+scalinginter"],
)
def test_the_new_methods_train_on_served_rollouts(tiny_lm, task, tmp_path, parity_reward, overrides):
    """Every method and option runs with rollout=served: entropies come from the local forward that rebuilds
    the log-probs, and a branched group runs on one thread with its forks replayed against the server."""
    from rl.trainer import Trainer

    with FakeVLLM(tiny_lm) as server:
        tr = Trainer(served_config(tiny_lm, task, tmp_path / "run", server.url, **overrides))
        logs = tr.train(progress=False)
    assert [lg["update"] for lg in logs] == [1, 2]
    assert all(lg["served_logp_gap"] < 1e-4 for lg in logs)
    assert all(lg["segments"] >= 2 for lg in logs)
    if "horizons" in overrides:
        assert [lg["horizon"] for lg in logs] == [1, 2] and logs[0]["steps"] == 1.0


@pytest.mark.slow
def test_async_served_rollouts_sample_each_snapshots_own_adapter(tiny_lm, task, tmp_path, parity_reward):
    """rollout_mode=async with rollout=served: each thread samples from the adapter of its snapshot's version (the
    log-prob gap stays 0 although the trainer has moved on), and an adapter is unloaded only once no thread uses it."""
    from rl.trainer import Trainer

    with FakeVLLM(tiny_lm) as server:
        cfg = served_config(
            tiny_lm,
            task,
            tmp_path / "run",
            server.url,
            updates=4,
            rollout_mode="async",
            max_staleness=1,
            rollout_workers=2,
        )
        logs = Trainer(cfg).train(progress=False)
    assert [lg["update"] for lg in logs] == [1, 2, 3, 4]
    assert all(lg["served_logp_gap"] < 1e-4 for lg in logs), [lg["served_logp_gap"] for lg in logs]
    assert all(lg["staleness_0"] + lg["staleness_1"] == 1 for lg in logs)
    events = [(p.rsplit("/", 1)[-1], b.get("lora_name") or b.get("model")) for p, b in server.calls]
    loads = [n for p, n in events if p == "load_lora_adapter"]
    assert loads[:4] == [f"vimrag-policy-{v}" for v in range(4)]
    unloaded: set[str] = set()
    for path, name in events:  # never a completion from an adapter already unloaded
        if path == "unload_lora_adapter":
            unloaded.add(name)
        elif path == "completions":
            assert name not in unloaded, name
