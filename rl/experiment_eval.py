"""The held-out measure of the RL comparison (rl/experiment.py): one episode per question, and where the episodes
went. Beside accuracy: the first action of each episode, by question frame (the diagnosis of a warm start that
does not search first), and on picture environments the crops: how many, and how many land on the fine print.

A crop is credited only through the answer (the reward never sees it); its position is checked against where the
fine print is printed (rl/gym.py fine_print_box) for these metrics alone.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import partial

FIRST_ACTIONS = ("search_name", "search_other", "crop", "answer", "other")
ON_FINE = 0.5  # a crop lands on the fine print when it covers at least this share of the fine print's box


def search_query(output: str) -> str | None:
    """The query of a reply that searches, in either protocol's syntax; None for any other reply.

    >>> search_query("<search>Tufo Misu</search>"), search_query('<tool_call>{"name": "add_search_node", '
    ...     '"arguments": {"id": "s1", "query": "Tufo Misu", "parent_ids": ["root"]}}</tool_call>')
    ('Tufo Misu', 'Tufo Misu')
    >>> search_query("<answer>4</answer>") is None
    True
    """
    m = re.search(r"<search>(.*?)</search>", output, re.S)
    if m:
        return m.group(1).strip()
    m = re.search(r"<tool_call>(.*?)</tool_call>", output, re.S)
    try:
        call = json.loads(m.group(1)) if m else None
    except ValueError:
        return None
    if isinstance(call, dict) and call.get("name") == "add_search_node" and isinstance(call.get("arguments"), dict):
        return str(call["arguments"].get("query", "")).strip()
    return None


def episode_facts(question, outputs: list[str], seen: list[str]) -> dict[str, bool]:
    """Where a gym episode went: did it search, was its first search the question's name letter for letter, and
    was it shown (in `seen`, the observations) the page text holding the answer.

    >>> from rl.gym import Question
    >>> q = Question("q", "Tell me the access code of Tufo Misu.", "3466", 1, ["Tufo Misu"], [])
    >>> episode_facts(q, ["<search>Tufo Mise</search>", "<search>Tufo Misu</search>", "<answer>3466</answer>"],
    ...               ["Tufo Mise. Room 701.", "Tufo Misu: access code 3466, partner Bono Gaga."])
    {'searched': True, 'name_copied': False, 'answer_shown': True}
    >>> episode_facts(q, ["<answer>3466</answer>"], [])
    {'searched': False, 'name_copied': False, 'answer_shown': False}
    """
    first = next((q for q in map(search_query, outputs) if q is not None), None)
    return {
        "searched": first is not None,
        "name_copied": first == question.chain[0],
        "answer_shown": any(question.answer in text for text in seen),
    }


def first_action(question, output: str) -> str:
    """What an episode's first reply does: search the question's name letter for letter (`search_name`), search
    anything else, crop, answer, or none of these (`other`: no action the protocol can run).

    >>> from rl.gym import Question
    >>> q = Question("q", "Which access code does Tufo Misu use?", "3466", 1, ["Tufo Misu"], [])
    >>> [first_action(q, o) for o in ("<search>Tufo Misu</search>", "<bbox>[0, 1, 2, 3]</bbox>", "<answer>1</answer>")]
    ['search_name', 'crop', 'answer']
    """
    query = search_query(output)
    if query is not None:
        return "search_name" if query == question.chain[0] else "search_other"
    if "<bbox>" in output:
        return "crop"
    if "<answer>" in output or '"add_answer_node"' in output:
        return "answer"
    return "other"


def question_frame(question) -> str:
    """The question's wording with its name taken out: `{a}` where the chain's first name stood."""
    return question.question.replace(question.chain[0], "{a}")


def crop_facts(env, trace) -> tuple[int, int, int]:
    """(crop replies, crops made, crops that land on the fine print) of one episode. A crop reply before any page is
    shown is an invalid action (agent/protocols/vrag.py) and makes no crop; a crop lands when its box, in the page's
    pixels, covers ON_FINE of the fine print's box on a page that has one."""
    from agent.events import Cropped
    from rl.gym import fine_print_box

    asked = sum("<bbox>" in s.output for s in trace.steps)
    made = trace.events_of(Cropped)
    landed = 0
    for c in made:
        page = (trace.evidence.get(c.source_info_id, {}).get("unit") or {}).get("page")
        fine = env.fine[page - 1] if env.fine and page and 0 < page <= len(env.fine) else ""
        if fine and len(c.bbox_raw) == 4:
            fx1, fy1, fx2, fy2 = fine_print_box(fine)
            x1, y1, x2, y2 = c.bbox_raw
            inter = max(0, min(x2, fx2) - max(x1, fx1)) * max(0, min(y2, fy2) - max(y1, fy1))
            landed += inter >= ON_FINE * (fx2 - fx1) * (fy2 - fy1)
    return asked, len(made), landed


def evaluate(model, tok, retriever, envs, args, seed: int = 0) -> dict[str, float]:
    """One episode per held-out question (greedy, or sampled at `eval_temperature`): accuracy, dead-end searches,
    generated tokens and steps, and where the episodes fail: the share that search at all, that search the
    question's name letter for letter first (copying a name), that were shown the page with the answer, and the
    accuracy of those (copying the code; None when no page with the answer was shown). Then the first actions
    (`first_action`: shares, and counts by question frame) and the crops: crop replies per episode, the share of
    episodes with one, and of the crops made, the share that land on the fine print (`crop_facts`; None when no crop
    was made)."""
    import torch

    from agent.loop import Agent
    from rl.ggpo import dead_end_searches
    from rl.gym_agents import agent_config
    from rl.policy import TextPolicy

    torch.manual_seed(seed)
    greedy = args.eval_temperature == 0
    temperature = 1.0 if greedy else args.eval_temperature
    pol = TextPolicy(model, tok, temperature=temperature, max_new_tokens=args.max_new_tokens, greedy=greedy)
    right, dead, tokens, steps, n, dead_won = 0, 0, 0, 0, 0, 0
    searched, name_copied, shown, shown_right = 0, 0, 0, 0
    first, by_frame, crops = Counter(), {}, Counter()
    asked = [(env, q) for env in envs for q in env.questions]

    def episode(env, q, policy):
        cfg = agent_config(args.max_steps, bool(args.fine_print), args.protocol, docs=[env.doc])
        return Agent(retriever, policy, cfg).ask(q.question)

    if args.lockstep:  # every episode at once, model calls batched round by round
        from rl.rollout import run_lockstep

        traces = run_lockstep(pol, [partial(episode, env, q) for env, q in asked])
    else:
        traces = [episode(env, q, pol) for env, q in asked]
    for (env, q), trace in zip(asked, traces):
        ok = (trace.answer or "").strip() == q.answer
        right += ok
        dead += dead_end_searches(trace.graph)
        dead_won += dead_end_searches(trace.graph) if ok else 0
        tokens += sum(len(tok(s.output, add_special_tokens=False)["input_ids"]) for s in trace.steps)
        steps += len(trace.steps)
        n += 1
        # what each step was shown: every user turn after the question (vrag: the page; vimrag: the tool response,
        # then the summary prompt)
        seen = [str(m.get("content", "")) for s in trace.steps for m in s.messages[2:] if m["role"] == "user"]
        facts = episode_facts(q, [s.output for s in trace.steps], seen)
        searched += facts["searched"]
        name_copied += facts["name_copied"]
        shown += facts["answer_shown"]
        shown_right += facts["answer_shown"] and ok
        kind = first_action(q, trace.steps[0].output) if trace.steps else "other"
        first[kind] += 1
        by_frame.setdefault(question_frame(q), Counter())[kind] += 1
        tried, made, landed = crop_facts(env, trace)
        crops.update(tried=tried, episodes=tried > 0, made=made, landed=landed)
    n = max(1, n)
    return {
        "accuracy": right / n,
        "dead_ends": dead / n,
        "dead_ends_per_success": dead_won / right if right else None,
        "tokens": tokens / n,
        "steps": steps / n,
        "searched": searched / n,
        "name_copied": name_copied / n,
        "answer_shown": shown / n,
        "right_when_shown": shown_right / shown if shown else None,
        "first_action": {k: first[k] / n for k in FIRST_ACTIONS},
        "first_by_frame": {f: dict(c) for f, c in sorted(by_frame.items())},
        "crops": crops["tried"] / n,
        "crop_episodes": crops["episodes"] / n,
        "crop_precision": crops["landed"] / crops["made"] if crops["made"] else None,
    }


def first_moves(name: str, r: dict) -> str:
    """One held-out set's first actions and crops, as the log shows them after SFT.

    >>> r = {"first_action": {"search_name": 0.5, "search_other": 0, "crop": 0.25, "answer": 0.25, "other": 0},
    ...      "first_by_frame": {"Which access code does {a} use?": {"search_name": 2, "crop": 1, "answer": 1}},
    ...      "crops": 0.5, "crop_episodes": 0.25, "crop_precision": 1.0}
    >>> print(first_moves("1-hop", r))
    1-hop first actions: search_name 50%, crop 25%, answer 25%; crops 0.50/episode in 25%, 100% on the fine print
      'Which access code does {a} use?': search_name 2, crop 1, answer 1
    """
    shares = ", ".join(f"{k} {v:.0%}" for k, v in r["first_action"].items() if v)
    prec = r["crop_precision"]
    line = f"{name} first actions: {shares}; crops {r['crops']:.2f}/episode in {r['crop_episodes']:.0%}" + (
        f", {prec:.0%} on the fine print" if prec is not None else ""
    )
    frames = [
        f"  {f!r}: " + ", ".join(f"{k} {c[k]}" for k in FIRST_ACTIONS if c.get(k))
        for f, c in r["first_by_frame"].items()
    ]
    return "\n".join([line, *frames[:12]])
