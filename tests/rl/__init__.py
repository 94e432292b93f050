"""Tests of rl/."""
