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


def launch_train(entry: list[str], model, mixed_index, tmp_path, *overrides: str):
    """`vimrag train` on rl/configs/tiny_cpu.yaml under `accelerate launch` with two CPU processes (joined by gloo,
    whatever the machine has), writing to tmp_path/run on a copy of `mixed_index`; `entry` is what runs
    (["-m", "app.cli"], or a worker script). Returns (the finished process, the run folder)."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    from retrieval.sharded import launch_command

    repo = Path(__file__).resolve().parents[2]
    idx, out = tmp_path / "idx", tmp_path / "run"
    shutil.copytree(mixed_index, idx)
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    config = str(repo / "rl/configs/tiny_cpu.yaml")
    program = [*entry, "train", "--config", config, f"model={model}", f"output_dir={out}", f"index={idx}"]
    program += ["questions_per_update=2", *overrides, "-q"]
    run = subprocess.run(launch_command(2, program), env=env, capture_output=True, text=True, timeout=600, cwd=repo)
    return run, out
