"""Tests of eval/."""
