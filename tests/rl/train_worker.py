"""Several `vimrag train` runs in one `accelerate launch`, for the launch tests (tests/rl/test_trainer.py):

    accelerate launch --multi_gpu --num_processes 2 tests/rl/train_worker.py RUNS.json

RUNS.json is a list of runs, each {"argv": [...], "parity": bool}: the CLI's arguments, and whether the run uses
the two stand-ins of the MEL test:
- the reward alternates 1 and 0 within each question's group (a random model never answers, so without it no
  group would hold a success and a failure, and MEL would have nothing to reflect on);
- the reflector is scripted: it names the step where the pair parts, and a lesson.
Everything else is the real CLI, trainer and update. One launch for all runs saves each run's start (the
launcher, two interpreters importing torch, transformers and the retriever): accelerate's `end_training`
destroys the process group, so the worker keeps it up for the next run and lets the last run destroy it.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    from collections import Counter

    from accelerate import Accelerator

    import rl.mel
    import rl.rollout
    from app.cli import main as cli

    runs = json.loads(Path(sys.argv[1]).read_text())
    score, make_reflector, end_training = rl.rollout.score, rl.mel.make_reflector, Accelerator.end_training
    seen: Counter = Counter()

    def alternate(trace, item, reward="vimrag", judge=None) -> float:
        seen[item.id] += 1
        return float(seen[item.id] % 2 == 1)

    def scripted(*_args, **_kw):
        return lambda prompt: '{"step": 1, "lesson": "Search for the table before reading a number off it."}'

    def finish_trackers(acc) -> None:  # end_training but the process group's end
        for tracker in acc.trackers:
            tracker.finish()

    for i, run in enumerate(runs):
        parity = run.get("parity", False)
        rl.rollout.score = alternate if parity else score
        rl.mel.make_reflector = scripted if parity else make_reflector
        Accelerator.end_training = end_training if i == len(runs) - 1 else finish_trackers
        rc = cli(run["argv"])
        if rc != 0:
            return rc
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
