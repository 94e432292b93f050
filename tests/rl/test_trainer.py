"""The trainer end to end on CPU: rollouts through the agent loop with a tiny random model, updates,
checkpoint and exact resume, the CLI with the shipped config, and 2-process gradient equivalence."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from retrieval.server import free_port
from rl.tiny import build_tiny_causal_lm, build_tiny_qwen2_5_vl
from tests.rl.tiny_config import launch_train, tiny_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_vl(tmp_path_factory):
    return build_tiny_qwen2_5_vl(tmp_path_factory.mktemp("vl") / "m")


def params(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


@pytest.mark.slow
def test_rollout_and_one_update_change_the_weights_and_train_only_generated_tokens(
    tiny_vl, task, tmp_path, parity_reward
):
    from rl.trainer import Trainer

    tr = Trainer(tiny_config(tiny_vl, task, tmp_path / "run"))
    before = params(tr.acc.unwrap_model(tr.model))
    log = tr.step()
    after = params(tr.acc.unwrap_model(tr.model))
    assert torch.isfinite(torch.tensor(log["loss"])) and log["segments"] == 4  # 2 trajectories x 2 steps
    assert log["steps"] == 2.0 and 0.0 <= log["dead_end_searches"] <= 2.0  # per trajectory; nothing was answered
    assert not torch.equal(before, after)
    # trained tokens are the sampled ones only; observations (search results) live in the prompt
    assert log["tokens"] <= 4 * 12
    from rl.policy import VLPolicy
    from rl.rollout import rollout_group

    pol = VLPolicy(tr.acc.unwrap_model(tr.model), tr.proc, max_new_tokens=12)
    trajs = rollout_group(pol, tr.get_retriever(), tr.ds.items[0], tr.agent_config(tr.ds.items[0]), 2)
    seg = trajs[0].segments[1]
    prompt = tr.proc.tokenizer.decode(seg.inputs["input_ids"][0])
    # step 1's observation (the corrective message for its malformed reply) is step 2's context, not a target
    assert "Your last output was not executed" in prompt and tr.ds.items[0].question in prompt
    assert seg.gen_ids.numel() <= 12 and seg.old_logp.shape == seg.gen_ids.shape
    steps = trajs[0].trace.steps
    assert [s.step for s in trajs[0].segments] == [r.step for r in steps]  # one segment per model call
    assert [s.node_id for s in trajs[0].segments] == [r.node_id for r in steps]


@pytest.mark.slow
def test_checkpoint_and_resume_continue_exactly(tiny_vl, task, tmp_path, parity_reward):
    from rl.trainer import Trainer

    whole = Trainer(tiny_config(tiny_vl, task, tmp_path / "whole", updates=2))
    whole.train(progress=False)
    first = Trainer(tiny_config(tiny_vl, task, tmp_path / "split", updates=1))
    first.train(progress=False)
    assert (tmp_path / "split" / "checkpoint-000001").is_dir()
    resumed = Trainer(tiny_config(tiny_vl, task, tmp_path / "split", updates=2))
    assert resumed.update == 1 and resumed.pos == first.pos
    resumed.train(progress=False)
    a = params(whole.acc.unwrap_model(whole.model))
    b = params(resumed.acc.unwrap_model(resumed.model))
    assert torch.allclose(a, b, atol=1e-6), (a - b).abs().max()
    m1 = [json.loads(x) for x in (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()]
    m2 = [json.loads(x) for x in (tmp_path / "split" / "metrics.jsonl").read_text().splitlines()]
    assert [m["reward"] for m in m1] == [m["reward"] for m in m2]


@pytest.mark.slow
def test_vimrag_train_runs_the_shipped_config(tiny_vl, mixed_index, tmp_path, capsys):
    from app.cli import main

    idx = tmp_path / "idx"
    shutil.copytree(mixed_index, idx)
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--config",
            str(REPO / "rl/configs/tiny_cpu.yaml"),
            f"model={tiny_vl}",
            f"output_dir={out}",
            f"index={idx}",
            "-q",
        ]
    )
    assert code == 0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2] and all(r["segments"] > 0 for r in rows)
    assert (out / "checkpoint-000002").is_dir() and json.loads((out / "config.json").read_text())["method"] == "ggpo"
    assert list((out / "logs").rglob("events.out.tfevents.*"))  # TensorBoard got the metrics
    assert "resolved config" in capsys.readouterr().out


def test_bad_configs_are_refused_by_name(tmp_path):
    from rl.trainer import TrainConfig

    with pytest.raises(ValueError, match="unknown training settings \\['learning_rate'\\]"):
        TrainConfig.load(None, ["model=m", "dataset=d", "learning_rate=1"])
    with pytest.raises(ValueError, match="method='ppo' is not one of"):
        TrainConfig.load(None, ["model=m", "dataset=d", "method=ppo"])
    with pytest.raises(ValueError, match="group_size"):
        TrainConfig.load(None, ["model=m", "dataset=d", "group_size=1"])
    with pytest.raises(ValueError, match="lr=.fast. is not a number"):
        TrainConfig.load(None, ["model=m", "dataset=d", "lr=fast"])
    with pytest.raises(FileNotFoundError, match="rl/configs"):
        TrainConfig.load(tmp_path / "nope.yaml")
    cfg = TrainConfig.load(REPO / "rl/configs/qwen2_5_vl_7b_ggpo.yaml", ["lr=5e-7"])
    assert cfg.lr == 5e-7 and cfg.lora["r"] == 64 and cfg.kl_coef == 0.01


@pytest.mark.slow
def test_two_processes_give_the_gradients_of_one_process_on_the_doubled_batch(tmp_path):
    from tests.rl.dist_worker import gradients

    model = build_tiny_causal_lm(tmp_path / "lm")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    worker = str(REPO / "tests/rl/dist_worker.py")
    g1 = gradients(str(model))[1]  # one process, the whole batch: this one
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),  # a port nothing else holds, whatever else runs beside this test
    ]
    two = subprocess.run(
        torchrun + [worker, str(model), str(tmp_path / "g2.pt")], env=env, capture_output=True, text=True, timeout=300
    )
    assert two.returncode == 0, two.stderr[-2000:]
    g2 = torch.load(tmp_path / "g2.pt")
    assert g1.abs().sum() > 0
    assert torch.allclose(g1, g2, rtol=1e-4, atol=1e-6), (g1 - g2).abs().max()


# The launch tests share one `accelerate launch` (tests/rl/train_worker.py): the other methods' options, and the
# default method with MEL (2 epochs x 2 mini-batches per update) under the parity reward and a scripted reflector.
LAUNCHED = {
    "aepo+branching+mask": (["method=aepo", "branching=aepo", "step_mask=true"], False),
    "adora+toolpo+scalinginter": (["method=adora", "tool_advantage=1", "horizons=[1,2]"], False),
    "async": (["rollout_mode=async", "max_staleness=1", "rollout_workers=2"], False),
    "mel": (["mel=true", "ppo_epochs=2", "mini_batch_size=2"], True),
}


@pytest.fixture(scope="module")
def launched(tiny_vl, mixed_index, tmp_path_factory):
    run, outs = launch_train(tiny_vl, mixed_index, tmp_path_factory.mktemp("launched"), LAUNCHED)
    assert run.returncode == 0, run.stderr[-3000:]
    return outs


@pytest.mark.slow
@pytest.mark.parametrize("name", ["aepo+branching+mask", "adora+toolpo+scalinginter", "async"])
def test_vimrag_train_under_accelerate_launch_with_two_cpu_processes(launched, name):
    """The whole trainer (rollouts split across processes, padded micro-steps, checkpoints) under accelerate with the
    other methods' options (their metrics are reduced by name across processes)."""
    out = launched[name]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2] and all(r["processes"] == 2 for r in rows)
    # 2 questions x 2 rollouts x 2 steps (1 in the curriculum's first stage), gathered from both processes
    assert all(r["segments"] >= 4 * r.get("horizon", 2) for r in rows)
    assert (out / "checkpoint-000002").is_dir()
    assert all(r["optimizer_steps"] == 1 for r in rows)
    if name == "async":  # both processes' groups, each at most one update old
        assert all(r["staleness_0"] + r["staleness_1"] == 2 for r in rows)


@pytest.mark.slow
def test_vimrag_train_mel_under_accelerate_launch_with_two_cpu_processes(launched):
    """`vimrag train ... mel=true` under `accelerate launch` with 2 CPU processes (the CLI, with the parity reward so
    that groups hold a success and a failure, and a scripted reflector). Each process reflects on its own group,
    and its lesson joins the mini-batch loss. The default method takes 2 epochs x 2 mini-batches per update (4
    trajectories, one per process per mini-batch): both processes take the four steps in step, with the lessons
    riding in their mini-batches."""
    out = launched["mel"]
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows] == [1, 2] and (out / "checkpoint-000002").is_dir()
    assert all(r["optimizer_steps"] == 4 and r["clip_frac"] > 0 for r in rows)  # the parity reward moves the weights
    assert all(r["processes"] == 2 and r["mel_pairs"] == 2 and r["mel_lessons"] == 2 and r["mel_nll"] > 0 for r in rows)
    lessons = [json.loads(x) for f in ("lessons.jsonl", "lessons.rank1.jsonl") for x in (out / "mel" / f).open()]
    assert len(lessons) == 4 and {x["update"] for x in lessons} == {0, 1}


@pytest.mark.slow
def test_vimrag_train_searches_through_a_server(tiny_vl, mixed_index, tmp_path):
    """`vimrag train --search-url` rolls out against a search server (here one that is down: the run stops with
    the server named, which shows the searches go there and nowhere else), and records the URL in its config."""
    from app.cli import main
    from tests.search_server import free_port, search_server

    args = ["train", "--config", str(REPO / "rl/configs/tiny_cpu.yaml"), f"model={tiny_vl}", "updates=1"]
    dead = f"http://127.0.0.1:{free_port()}/search"
    assert main([*args, f"output_dir={tmp_path / 'dead'}", "--search-url", dead, "-q"]) == 2
    idx = tmp_path / "idx"
    shutil.copytree(mixed_index, idx)
    with search_server(idx) as url:
        assert (
            main([*args, f"output_dir={tmp_path / 'run'}", f"index={tmp_path / 'unused'}", "--search-url", url, "-q"])
            == 0
        )
    assert json.loads((tmp_path / "run" / "config.json").read_text())["search_url"] == url
    assert not (tmp_path / "unused").exists()  # nothing was indexed here


def test_metrics_are_summed_across_processes_by_name():
    from rl.trainer import reduce_sums

    class TwoProcesses:  # the other process sends the same vector, or one whose names differ (its tag)
        device = "cpu"

        def __init__(self, same_names: bool):
            self.same = same_names

        def gather(self, t):
            other = t.clone()
            if not self.same:
                other[0] += 1.0
            return torch.cat([t, other])

    assert reduce_sums(TwoProcesses(True), {"tokens": 12, "reward": 1.5}) == {"reward": 3.0, "tokens": 24.0}
    with pytest.raises(RuntimeError, match="processes reduced different metrics"):
        reduce_sums(TwoProcesses(False), {"tokens": 12, "reward": 1.5})
