"""Evaluation: datasets, runners, metrics, reports, and the performance benchmarks (bench_*.py)."""
