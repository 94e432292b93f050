"""GGPO training: trainable policies and the Segment one model call becomes (policy.py), rollouts that read
segments off the agent's event stream (rollout.py, and served.py for a vLLM server), rewards (rewards.py),
masks, advantages and losses (ggpo.py), the accelerate trainer and its config (trainer.py, config.py), SFT on
saved traces (sft.py), and the tiny-model experiment and benchmark (experiment.py, tiny.py, bench_step.py)."""
