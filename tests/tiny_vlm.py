"""Tiny random models for tests; they live in rl/tiny.py, which the CPU training experiment uses too."""

from rl.tiny import CHAT_TEMPLATE, SPECIAL_TOKENS, build_tiny_causal_lm, build_tiny_qwen2_5_vl, build_tiny_qwen3_vl, \
    train_tokenizer

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_causal_lm", "build_tiny_qwen2_5_vl", "build_tiny_qwen3_vl",
           "train_tokenizer"]
