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
