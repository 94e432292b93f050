"""The smallest training run the trainer tests make: two trajectories per question, one question per update,
two agent steps; tests override what they are about."""


def tiny_config(model, task: dict, out, **kw):
    """A validated TrainConfig for `model` on `task` (tests/rl/conftest.py), writing to `out`."""
    from agent.settings import AgentConfig
    from rl.trainer import TrainConfig

    base = dict(
        model=str(model),
        **task,
        group_size=2,
        questions_per_update=1,
        updates=1,
        lr=1e-2,
        max_new_tokens=12,
        agent=AgentConfig(max_steps=2),
        save_every=1,
        output_dir=str(out),
        log_with=[],
        seed=3,
    )
    cfg = TrainConfig(**{**base, **kw})
    cfg.validate()
    return cfg


def launch_train(model, mixed_index, tmp_path, runs: dict[str, tuple[list[str], bool]]):
    """`vimrag train` on rl/configs/tiny_cpu.yaml, once per entry of `runs` (name: (overrides, parity)), all in one
    `accelerate launch` with two CPU processes (joined by gloo, whatever the machine has) through
    tests/rl/train_worker.py (`parity`: with the MEL test's stand-ins), each writing to tmp_path/NAME on one copy
    of `mixed_index`. Returns (the finished launch, {name: run folder})."""
    import json
    import os
    import shutil
    import subprocess
    from pathlib import Path

    from retrieval.sharded import launch_command

    repo = Path(__file__).resolve().parents[2]
    idx = tmp_path / "idx"
    shutil.copytree(mixed_index, idx)
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    config = str(repo / "rl/configs/tiny_cpu.yaml")
    outs, plan = {}, []
    for name, (overrides, parity) in runs.items():
        outs[name] = tmp_path / name
        argv = ["train", "--config", config, f"model={model}", f"output_dir={outs[name]}", f"index={idx}"]
        # 8 new tokens a turn (the config's 16 took 11 CPU-s more): a random model's turns are malformed at any length
        plan.append({"argv": [*argv, "questions_per_update=2", "max_new_tokens=8", *overrides, "-q"], "parity": parity})
    (tmp_path / "runs.json").write_text(json.dumps(plan))
    program = [str(repo / "tests/rl/train_worker.py"), str(tmp_path / "runs.json")]
    run = subprocess.run(launch_command(2, program), env=env, capture_output=True, text=True, timeout=600, cwd=repo)
    return run, outs
