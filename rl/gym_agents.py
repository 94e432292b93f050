"""The agents that work the gym (rl/gym.py): the agent settings of each protocol, and the scripted experts whose
traces the SFT warm start imitates.

- `vrag` (VRAG's chain of tag actions): `Expert` searches each name of the chain, searches again while the page
  shown is not that person's own, hops, crops fine print, and answers.
- `vimrag` (VimRAG's DAG memory, agent/protocols/vimrag.py): `VimragExpert` opens a search node per name, with the
  node of the previous hop as its parent, closes it with summarize_and_memorize (the person's code and partner, or
  that the results hold no page of theirs), and answers with the last hop's node as parent. A search whose results
  miss the person's page is a dead end: the expert searches again, in other words, from the same parent, so a
  successful episode keeps nodes off the answer's path (rl/ggpo.py's success mask has something to prune).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from agent.backends.base import Policy
from rl.gym import GYM_OCR, Env, Question, fine_box_seen

SYSTEM = "Search with <search>name</search>, then answer with <answer>code</answer>."  # short: a tiny model reads it


SYSTEM_PICTURES = (
    "Search with <search>name</search>, crop fine print with <bbox>[x1, y1, x2, y2]</bbox>, then answer with "
    "<answer>code</answer>."
)


# VimRAG's tools named in one line: the protocol's own system prompt lists their JSON Schemas, too long for a tiny model
SYSTEM_VIMRAG = (
    "One tool call per turn: add_search_node (id, query, parent_ids), then summarize_and_memorize (summarize, "
    "memorize), and at the end add_answer_node (answer, parent_ids)."
)
# Results per search. Measured ad hoc on 60 training environments with one dead-end page each, a person's own page
# came first for about half of the name queries (other pages name them too), among the first two for 87%, and
# among the first three for 96%: two leaves misses to recover from without making every search one.
VIMRAG_TOP_K = 2
QUERY_FORMS = ("{name}", "{name} access code", "access code of {name}")  # the expert's first query, then retries
PROTOCOLS = ("vrag", "vimrag")


def agent_config(max_steps: int = 6, pictures: bool = False, protocol: str = "vrag", **kw):
    """The agent every gym episode runs through. `vrag`: VRAG's chain of tag actions, one page per search; with
    `pictures`, the text GYM_OCR reads in each picture as shown is given beside it (`read_pictures`). `vimrag`: the
    DAG protocol, VIMRAG_TOP_K text results per search (text environments only)."""
    from agent.settings import AgentConfig

    if protocol not in PROTOCOLS:
        raise ValueError(f"the gym runs the {' or '.join(PROTOCOLS)} protocol, not {protocol!r}")
    if protocol == "vimrag":
        if pictures:
            raise ValueError("the vimrag gym has text environments only; run picture environments with vrag")
        base = {"protocol": "vimrag", "max_steps": max_steps, "top_k": VIMRAG_TOP_K}
        return AgentConfig(**{**base, "prompts": {"system": SYSTEM_VIMRAG}, **kw})
    extra = {"read_pictures": GYM_OCR, "prompts": {"system": SYSTEM_PICTURES}} if pictures else {}
    return AgentConfig(
        **{"protocol": "vrag", "max_steps": max_steps, "top_k": 3, "prompts": {"system": SYSTEM}, **extra, **kw}
    )


def tool_call(name: str, **arguments) -> str:
    """One VimRAG tool call as the protocol parses it (agent/protocols/vimrag.py).

    >>> tool_call("add_answer_node", answer="4", parent_ids=["s1"])
    '<tool_call>{"name": "add_answer_node", "arguments": {"answer": "4", "parent_ids": ["s1"]}}</tool_call>'
    """
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def found_summary(person) -> str:
    """What the expert memorizes from a person's own page: the two facts a question can need."""
    return f"{person.name}: access code {person.code}, partner {person.partner}"


class VimragExpert(Policy):
    """The scripted expert of one question on the vimrag protocol. For each name of the chain it opens a search node
    (its parent: the node where the previous hop's page was found, or root), and closes it with summarize_and_memorize:
    `found_summary` when the person's own page is among the results, else "no page of NAME". After a miss it searches
    again from the same parent with the next of QUERY_FORMS, so the missed node is a dead end off the answer's path.
    It answers with the last hop's node as parent. It knows the answers and never guesses."""

    is_vlm = False
    name = "gym-vimrag-expert"

    def __init__(self, env: Env, question: Question) -> None:
        self.people = {p.name: p for p in env.people}
        self.chain, self.pos = list(question.chain), 0
        self.parent, self.nodes, self.tries = "root", 0, 0
        self.open: str | None = None  # the name the open search node looks for
        self.done = False  # the last hop's page was found

    def stream(self, messages: list[dict], view=None):
        if self.open is not None:  # the results are in: memorize what they show
            shown = " ".join(str(m.get("content", "")) for m in messages[-2:] if m["role"] == "user")
            who = self.people[self.open]
            node, self.open = f"s{self.nodes}", None
            if who.code in " ".join(shown.split()):
                self.parent, self.tries = node, 0
                self.pos += 1
                self.done = self.pos == len(self.chain)
                yield tool_call("summarize_and_memorize", summarize=found_summary(who), memorize=[])
            else:
                self.tries += 1
                yield tool_call("summarize_and_memorize", summarize=f"no page of {who.name}", memorize=[])
            return
        if self.done:
            yield tool_call("add_answer_node", answer=self.people[self.chain[-1]].code, parent_ids=[self.parent])
            return
        if self.tries >= len(QUERY_FORMS):  # every form missed: give up (the trace is not kept)
            yield tool_call("add_answer_node", answer="Not answerable", parent_ids=[self.parent])
            return
        name = self.chain[self.pos]
        self.nodes += 1
        self.open = name
        query = QUERY_FORMS[self.tries].format(name=name)
        yield tool_call("add_search_node", id=f"s{self.nodes}", query=query, parent_ids=[self.parent])


class Expert(Policy):
    """The scripted expert of one question: it searches each name of the chain, searches again while the page
    shown is not that person's own (a look-alike, a dead end, or the page of someone who names them as partner),
    reads the partner off each page, and answers the code from the last one; when that code is in fine print, it
    crops the page's foot first and reads it there. It knows the answers; it never guesses, so its traces are
    what SFT imitates: search, check, hop, crop, copy."""

    is_vlm = False
    name = "gym-expert"

    def __init__(self, env: Env, question: Question) -> None:
        self.people = {p.name: p for p in env.people}
        self.chain, self.pos, self.asked = list(question.chain), 0, False
        codes = {p.code: p.name for p in env.people}
        # a person's own page in fine-print form: its text, as OCR gives it (words joined by single spaces)
        self.fine_pages = {codes[f.split()[-1]]: " ".join(text.split()) for text, f in zip(env.pages, env.fine) if f}

    def stream(self, messages: list[dict], view=None):
        seen = messages[-1]["content"] if messages and messages[-1]["role"] == "user" and self.asked else ""
        seen = seen if isinstance(seen, str) else " ".join(p.get("text", "") for p in seen)
        seen = " ".join(seen.split())
        who = self.people[self.chain[self.pos]]
        fine_page = self.fine_pages.get(who.name)
        if self.asked and (who.code in seen or (fine_page and fine_page in seen)):  # on the person's own page
            if self.pos < len(self.chain) - 1:
                self.pos += 1
                who = self.people[self.chain[self.pos]]
            elif who.code in seen:
                yield f"<answer>{who.code}</answer>"
                return
            else:  # the code is in the fine print at the foot
                yield f"<bbox>{fine_box_seen()}</bbox>"
                return
        self.asked = True
        yield f"<search>{who.name}</search>"


def expert_traces(
    env_questions: list[tuple[Env, Question]],
    retriever,
    out: Path,
    max_steps: int = 6,
    pictures: bool | None = None,
    protocol: str = "vrag",
) -> int:
    """Run the expert on each (environment, question) through the real agent loop, scoped to the environment's
    document; save the traces that answered right under `out`. Returns how many were saved. `pictures`: the
    agent of a pool with picture environments (`agent_config`) for every question; None: each environment's own.
    A trace already in `out` for the same question, environment and agent settings (the digest in its `.key` file
    beside it) is kept, not run again, so a rerun into the same folder costs nothing. The digest does not cover the
    expert's own code: after changing it, delete the folder. `protocol`: vrag (`Expert`) or vimrag (`VimragExpert`)."""
    from agent.loop import Agent

    out.mkdir(parents=True, exist_ok=True)
    saved = 0
    for env, q in env_questions:
        shown = env.pictures if pictures is None else pictures
        key = hashlib.sha256(
            json.dumps(
                [q.question, q.answer, env.doc, env.pages, env.fine, shown, max_steps]
                + ([protocol] if protocol != "vrag" else [])  # a vrag trace keeps the key it had
            ).encode()
        ).hexdigest()
        path, stamp = out / f"{q.id}.json", out / f"{q.id}.key"
        if path.is_file() and stamp.is_file() and stamp.read_text() == key:
            saved += 1
            continue
        cfg = agent_config(max_steps, shown, protocol, docs=[env.doc])
        expert = VimragExpert(env, q) if protocol == "vimrag" else Expert(env, q)
        trace = Agent(retriever, expert, cfg).ask(q.question)
        if (trace.answer or "").strip() == q.answer:
            path.write_text(json.dumps(trace.to_dict()))
            stamp.write_text(key)
            saved += 1
        else:  # a stale trace of another environment under this id
            path.unlink(missing_ok=True)
            stamp.unlink(missing_ok=True)
    return saved
