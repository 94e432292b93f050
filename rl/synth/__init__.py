"""Training data from your own corpus (`vimrag synth`): verified questions, their difficulty, teacher trajectories
and compiled long-context QA.

`questions` samples an index and writes checked questions (`offline` rules or an `endpoint` writer, `checks`
verifying); `difficulty` measures a reference agent's pass rate per item; `trajectories` keeps a teacher's right
trajectories as `vimrag sft` input, and compiles them into ACC examples. `items` is the record they share.
"""
