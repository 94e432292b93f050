"""rl/bench_precision.py: SFT of a tiny LM in fp32 and under bf16 autocast, in a process of its own (accelerate
keeps one mixed-precision state per process)."""

import re
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_the_bench_trains_in_both_precisions_and_prints_the_ratio():
    args = ["--hidden", "32", "--layers", "1", "--examples", "16", "--batch", "4", "--epochs", "2", "--rounds", "1"]
    run = subprocess.run(
        [sys.executable, "-m", "rl.bench_precision", *args], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout
    assert out.startswith("CPU: ") and "bf16 flags:" in out
    fp32 = re.search(r"\| fp32 \| ([\d.]+) \| 1\.00x \| ([\d.]+) \|", out)
    bf16 = re.search(r"\| bf16 autocast \| ([\d.]+) \| ([\d.]+)x \| ([\d.]+) \|", out)
    assert fp32 and bf16, out
    assert float(fp32.group(1)) > 0 and float(bf16.group(1)) > 0
    # the same data and initial weights: bf16 rounding moves the loss a little (6.187142 against 6.187122 here),
    # not a lot, and not to nothing, which would mean autocast never ran
    assert float(bf16.group(3)) == pytest.approx(float(fp32.group(2)), rel=0.05)
    assert float(bf16.group(3)) != float(fp32.group(2))
