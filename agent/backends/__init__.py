"""Policy backends behind one interface: OpenAI-compatible endpoint, local transformers, embedded, scripted."""

from agent.backends.base import BACKENDS, Policy, PolicyConfig, PolicyError, load_policy

__all__ = ["BACKENDS", "Policy", "PolicyConfig", "PolicyError", "load_policy"]
