"""`vimrag train` with two test stand-ins, for the MEL launch test (tests/rl/test_mel.py):

    accelerate launch --cpu --num_processes 2 tests/rl/mel_worker.py train --config ... mel=true

- the reward alternates 1 and 0 within each question's group (a random model never answers, so without it no
  group would hold a success and a failure, and MEL would have nothing to reflect on);
- the reflector is scripted: it names the step where the pair parts, and a lesson.
Everything else is the real CLI, trainer and update.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    from collections import Counter

    import rl.mel
    import rl.rollout
    from app.cli import main as cli

    seen: Counter = Counter()

    def alternate(trace, item, reward="vimrag", judge=None) -> float:
        seen[item.id] += 1
        return float(seen[item.id] % 2 == 1)

    def scripted(*_args, **_kw):
        return lambda prompt: '{"step": 1, "lesson": "Search for the table before reading a number off it."}'

    rl.rollout.score = alternate
    rl.mel.make_reflector = scripted
    return cli(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
