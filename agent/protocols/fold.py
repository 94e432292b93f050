"""DeepAgent's memory folding (RUC-NLPIR/DeepAgent, `src/run_deep_agent.py`), as a baseline.

The model reasons in one stream, calling tools in `<tool_call>...</tool_call>` and reading their results in
`<tool_call_result>...</tool_call_result>`. When it writes `<fold_thought>`, its history is compressed into three
memories (episodic, working and tool memory, each a JSON object written by its own model call), and the episode
goes on from the first prompt with the memories inserted before its last line: everything else is dropped. A reply
with no call and no fold is the answer, in `\\boxed{}`. Exact to the published code (RDA = src/run_deep_agent.py,
PDA = src/prompts/prompts_deepagent.py; tests/agent/golden/fold.txt cites the lines):

1. The prompt is one user turn: the instruction, the question and the tool list, ending with the line
   `Now, begin your reasoning for question "..." with the available tools.` (PDA lines 84-137; the instruction
   sentences are ours, `--prompt-file` gives theirs).
2. A reply ends at its first `</tool_call>` or `<fold_thought>` (the stop strings of RDA lines 419 and 604); its
   `</think>\\n` is dropped (RDA lines 426-428). A call repeated with the same arguments is not run again: its
   result says so (RDA lines 495-499). A failed call's result is `Error calling tool: ...` (RDA lines 546-557).
3. A fold: three model calls write the episode, working and tool memory (RDA lines 292-384): each gets the
   question and the whole output so far cut at blank lines into `Step i: ...`; the tool memory also gets the tool
   calls with their results as JSON, an error as `{"error": ...}`. The prompts' JSON fields are PDA lines 414-537,
   the instruction sentences ours. Each memory is the reply's ```json block, else the reply (RDA lines 69-80).
   The next context is the first prompt with `Memory of previous folded thoughts:` and the three memories
   inserted before `Now, begin your reasoning for` (RDA lines 580-581): only the latest fold's memories, the
   whole output since the start read by each fold.
4. Limits (RDA lines 99-100, 400, 443, 559-568, 615-643): 3 folds (a fourth request is refused with a system
   message), 50 actions, 40,000 words of context (counted with `str.split`, reset to the prompt's words after a
   fold); past either limit the next turn must answer.
5. Sampling (RDA lines 91-95): temperature 0.7, top-p 0.8, thinking on (RDA line 409).

Where we differ, knowingly:
- DeepAgent continues one assistant turn with each result (completion mode, RDA lines 594-606); pictures cannot
  ride in an assistant turn of an OpenAI-compatible request, so each result is a user turn after the reply, and
  DeepAgent's `Hmm, I've already` prefills after a system message are not sent.
- The memories are written by the model that reasons (DeepAgent may use a separate aux model), one after the
  other, each one step of the episode: their cost shows in the eval. They are text, as DeepAgent's are: a picture
  enters the memories only as its label line and what the model wrote about it (the VimRAG paper's visual
  setting; DeepAgent is text-only). The published code means to give the tool list to the memory prompts but
  empties it first (RDA lines 319-323); we give none either.
- The issue's budget: besides the model's own `<fold_thought>`, the history folds once the context passes
  `fold_budget` tokens (text and pictures; 0 turns it off, which is DeepAgent's behaviour).
- No top-k 20 or repetition penalty 1.05 in the request (the OpenAI-compatible body here has neither), and at
  most 8,192 new tokens a call, not 81,920. Results over 5,000 characters are not summarised by an aux call
  (RDA lines 515-525): ours are bounded excerpts and pictures.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.actions import Action, parse
from agent.events import Event, SearchResults
from agent.protocols import schema as S
from agent.protocols.base import Protocol, chain, cropped, fresh_id, remember, result_rows
from agent.protocols.memagent import after_think, boxed
from agent.protocols.react import TOOLS as REACT_TOOLS
from agent.rejections import Rejection
from agent.state import EpisodeState
from agent.toolbox import count_context

FOLD = "<fold_thought>"  # PDA line 17
RESULT = ("<tool_call_result>", "</tool_call_result>")  # PDA lines 12-13
MAX_FOLDS, MAX_ACTIONS, MAX_WORDS = 3, 50, 40000  # RDA lines 99-100 and 400
ANCHOR = "Now, begin your reasoning for"  # RDA line 581: the memories go before it
PARTS = ("episode", "working", "tool")
_STOP = re.compile(r"</tool_call>|<fold_thought>")
_JSON_BLOCK = re.compile(r"```json\s*(.*?)\s*```", re.S)

TOOLS = {
    "search": REACT_TOOLS["search"],  # the same search and crop as react
    "crop": REACT_TOOLS["crop"],
    # not tools the model calls: a fold is the marker, the answer is \boxed{}; they serve validation and the UI
    "fold": S.tool(
        "memorize",
        "<fold_thought>: fold the history into episode, working and tool memory.",
        {"memory": S.text("a memory part's JSON", nonempty=False)},
        [],
    ),
    "answer": S.tool("answer", "\\boxed{answer}: the final answer.", {"answer": S.text("the answer")}, ["answer"]),
}
CALLED = ("search", "crop")

PROMPT = """You answer questions about a collection of documents, images and videos, calling tools as you reason.

- To call a tool, write <tool_call>
{"name": "tool_name", "arguments": {...}}
</tool_call>. Its result comes back as <tool_call_result>...</tool_call_result>.
- When your reasoning grows long, your calls keep failing or you need a new direction, write <fold_thought>. Your
history is then summarised into memory (what happened, where you stand, what the tools taught you), and you
start a fresh round of reasoning from that memory.
- When you know the answer, write it as \\boxed{answer} and stop; if the collection does not hold it, write
\\boxed{Not answerable}.

Question:
{question}

Available tools:
{tools}

Now, begin your reasoning for question "{question}" with the available tools.
"""
# the memory prompts: the published JSON fields (PDA lines 414-537), our instruction sentences; placeholders are
# replaced in one pass (`_fill`), so the JSON braces are literal
EPISODE = """You compress an agent's reasoning into episode memory: its milestones, finished subgoals and decisions.

Task:
{question}

Full reasoning history:
{history}

Keep only the events that matter for the task's goal. Write this JSON object:
```json
{
  "task_description": "what the reasoning has been doing and what it aims at",
  "key_events": [
    {"step": "step number", "description": "the action or decision, and why", "outcome": "what came of it"}
  ],
  "current_progress": "what is done and what is left"
}
```
Write only the JSON episode memory for the task: {question}
"""
WORKING = """You keep an agent's working memory: a snapshot of where it stands now.

Task:
{question}

Full reasoning history:
{history}

Keep only the current goal, what stands in the way and what to do next; leave out what is finished. Write this
JSON object:
```json
{
  "immediate_goal": "what the agent is working toward now",
  "current_challenges": "what stands in the way",
  "next_actions": [{"type": "tool_call/planning/decision", "description": "the next concrete step"}]
}
```
Write only the JSON working memory for the task: {question}
"""
TOOL = """You record what an agent learned about its tools.

Task:
{question}

Full reasoning history:
{history}

Tool calls, oldest first:
{calls}

Note which calls worked and which failed, with what arguments, and what the results look like. Write this JSON
object:
```json
{
  "tools_used": [
    {"tool_name": "string", "success_rate": "float", "effective_parameters": ["param"], "common_errors": ["error"],
      "response_pattern": "what its results look like", "experience": "what worked and what did not"}
  ],
  "derived_rules": ["when X happens, prefer tool Y"]
}
```
Write only the JSON tool memory for the task: {question}
"""
REPEATED = "You have already called this tool with the same arguments."  # RDA line 496
FOLD_LIMIT = (  # RDA lines 561-564, our wording
    "<system_message>You have folded your thoughts {n} times, the most allowed; keep reasoning from what you "
    "have.</system_message>"
)
LAST_TURN = (  # RDA lines 620-625, our wording
    "<system_message>You have reached the limit of actions for this question: no more tool calls or folds. Give "
    "your final answer from what you have gathered, in \\boxed{}.</system_message>"
)
_PLACEHOLDER = re.compile(r"\{(question|tools|history|calls|n)\}")


def cut_reply(reply: str) -> str:
    """The reply as the stop strings leave it, stop string included, `</think>\\n` dropped (RDA lines 419, 426).

    >>> cut_reply("<think>plan</think>\\nI search.<tool_call>\\n{}\\n</tool_call> more")
    '<think>planI search.<tool_call>\\n{}\\n</tool_call>'
    """
    m = _STOP.search(reply or "")
    return (reply[: m.end()] if m else reply or "").replace("</think>\n", "")


def memory_json(reply: str) -> str:
    """A memory: the reply's first ```json block, else the whole reply, stripped (RDA lines 69-80).

    >>> memory_json('Here:\\n```json\\n{"a": 1}\\n```'), memory_json(' {"b": 2} ')
    ('{"a": 1}', '{"b": 2}')
    """
    m = _JSON_BLOCK.search(reply or "")
    return (m.group(1) if m else reply or "").strip()


def steps(output: str) -> str:
    """The output so far as `Step i: ...` paragraphs (RDA lines 305-307).

    >>> steps("a\\n\\nb")
    'Step 1: a\\n\\nStep 2: b'
    """
    return "\n\n".join(f"Step {i}: {s}" for i, s in enumerate(output.split("\n\n"), 1))


def call_body(reply: str) -> str:
    """The last `<tool_call>` body, newlines removed: the key that spots a repeated call (RDA lines 437-439)."""
    found = re.findall(r"<tool_call>(.*?)</tool_call>", reply, re.S)
    return found[-1].replace("\n", "").strip() if found else ""


def _words(text: str) -> int:
    return len(text.split())


class FoldProtocol(Protocol):
    name = "fold"
    order = 6
    summary = "DeepAgent's memory folding: the history folds into episode, working and tool memory (baseline)"
    syntax = "calls"
    tools = TOOLS
    PROMPTS = {
        "user": PROMPT,
        "episode": EPISODE,
        "working": WORKING,
        "tool": TOOL,
        "fold_limit": FOLD_LIMIT,
        "last_turn": LAST_TURN,
    }
    PLACEHOLDERS = {
        "user": ("question", "tools"),
        "episode": ("question", "history"),
        "working": ("question", "history"),
        "tool": ("question", "history", "calls"),
        "fold_limit": ("n",),
    }
    main_prompt = "user"
    # 50 actions, 3 folds of 3 memory calls each, the forced answer, and room for replies with no action
    max_steps = MAX_ACTIONS + 3 * MAX_FOLDS + 1
    folds = True

    @classmethod
    def generation_defaults(cls, thinking: bool | None = None) -> dict[str, Any]:
        """DeepAgent's sampling (RDA lines 91-95), thinking on (line 409), at most 8,192 new tokens (ours)."""
        return {"max_new_tokens": 8192, "temperature": 0.7, "top_p": 0.8, "thinking": thinking is not False}

    @classmethod
    def format_call(cls, name: str, args: dict, think: str = "") -> str:
        lead = f"<think>{think}</think>\n" if think else ""
        if name == "fold":
            return args["memory"] if "memory" in args else lead + FOLD
        if name == "answer":
            return lead + f"\\boxed{{{args['answer']}}}"
        return super().format_call(name, args, think)

    def tool_specs(self) -> list[dict]:
        return [s for s in super().tool_specs() if s["function"]["name"] in CALLED]

    # -- context -------------------------------------------------------------------------------------------
    def _notes(self, st: EpisodeState) -> dict[str, Any]:
        if "output" not in st.notes:
            st.notes.update(
                output="", calls=[], interactions=[], actions=0, folds=0, memory="", folding=[], final=False
            )
            st.notes["words"] = _words(self._prompt(st))
        return st.notes

    def _prompt(self, st: EpisodeState, memory: str = "") -> str:
        """The first prompt, with the latest fold's memories before its last line (RDA lines 580-581)."""
        tools = (
            "the tools given with this request"
            if self.native_tools
            else "\n".join(json.dumps(s, ensure_ascii=False) for s in self.tool_specs())
        )
        text = _fill(self.prompt(st, "user"), question=st.question, tools=tools)
        if not memory:
            return text
        if ANCHOR in text:
            return text.replace(ANCHOR, f"{memory}\n\n{ANCHOR}", 1)
        return f"{text}\n\n{memory}"  # a user prompt without the anchor line: DeepAgent would drop the memories

    def context(self, st: EpisodeState) -> list[dict[str, Any]]:
        notes = self._notes(st)
        if notes["folding"]:
            return [{"role": "user", "content": self._memory_prompt(st, notes["folding"][0])}]
        messages = [{"role": "user", "content": self._prompt(st, notes["memory"])}, *st.history]
        budget = st.config.fold_budget
        if budget and st.history and not notes["final"] and notes["folds"] < MAX_FOLDS:
            _, vtok, ttok = count_context(messages, self.toolbox.patch)
            if vtok + ttok > budget:  # the budget: fold without being asked
                notes["folding"] = list(PARTS)
                return [{"role": "user", "content": self._memory_prompt(st, PARTS[0])}]
        return messages

    def _memory_prompt(self, st: EpisodeState, part: str) -> str:
        notes = st.notes
        calls = json.dumps(notes["interactions"], indent=2)  # RDA lines 309-317 and 361
        return _fill(self.prompt(st, part), question=st.question, history=steps(notes["output"]), calls=calls)

    # -- a reply -------------------------------------------------------------------------------------------
    def parse(self, text: str, st: EpisodeState) -> Action | Rejection:
        notes = self._notes(st)
        if notes["folding"]:
            return Action("fold", {"part": notes["folding"][0], "memory": memory_json(text)}, text)
        if notes["final"]:
            return Action("answer", {"answer": boxed(after_think(text))}, text)
        reply = cut_reply(text)
        if reply.rstrip().endswith(FOLD):
            return Action("fold", {}, reply)
        if reply.rstrip().endswith("</tool_call>"):
            action = parse(reply, self, self.parse_context(st))
            if isinstance(action, Action) and action.name not in CALLED:
                return Rejection(reason="not_a_tool", observation=f"{action.name} is not a tool here", raw=reply)
            action.raw = reply
            return action
        return Action("answer", {"answer": boxed(after_think(text))}, reply)

    def reject(self, st: EpisodeState, message: str, raw: str) -> list[Event]:
        """A call that could not run: its result is the error (RDA lines 546-557); an empty answer ends."""
        events = super().reject(st, message, raw)
        notes = self._notes(st)
        if notes["final"] or notes["folding"] or not _STOP.search(raw or ""):
            st.done = True  # the forced answer, a memory or a plain reply came out empty: nothing more to ask
            return events
        reply = cut_reply(raw)
        if notes.get("recorded") != st.step and self._act(st, reply):  # else recorded inside `run`
            return events
        error = f"Error calling tool: {message}"
        self._result(st, [{"type": "text", "text": error}])
        notes["interactions"].append({"tool_call": call_body(reply), "tool_response": {"error": error}})
        return events

    def _act(self, st: EpisodeState, reply: str) -> bool:
        """Record a call or fold and count it; past 50 actions or 40,000 words it does not run, and the next turn
        must answer (RDA line 443, then lines 615-643). True when the limit stopped it."""
        notes = st.notes
        self._record(st, reply)
        notes["actions"] += 1
        if notes["actions"] < MAX_ACTIONS and notes["words"] < MAX_WORDS:
            return False
        notes["final"] = True
        self._system(st, self.prompt(st, "last_turn"))
        return True

    def _record(self, st: EpisodeState, reply: str) -> None:
        notes = st.notes
        notes["output"] += reply
        notes["words"] += _words(reply)
        notes["recorded"] = st.step
        st.history.append({"role": "assistant", "content": reply})

    def _result(self, st: EpisodeState, parts: list[dict[str, Any]], call: str = "") -> None:
        """A tool's result as a user turn, and as text in the output the memories are written from."""
        notes = st.notes
        parts = [{"type": "text", "text": RESULT[0]}, *parts, {"type": "text", "text": RESULT[1]}]
        text = "\n".join(p["text"] for p in parts[1:-1] if p["type"] == "text")
        shown = f"\n\n{RESULT[0]}{text}{RESULT[1]}\n\n"
        notes["output"] += shown
        notes["words"] += _words(shown)
        if call:
            notes["interactions"].append({"tool_call": call, "tool_response": text})
        st.history.append({"role": "user", "content": parts})

    def _system(self, st: EpisodeState, message: str) -> None:
        st.notes["output"] += f"\n\n{message}\n\n"
        st.history.append({"role": "user", "content": message})

    def run(self, kind: str, action: Action, st: EpisodeState) -> list[Event]:
        notes = self._notes(st)
        if kind == "answer":
            if not action.args["answer"]:
                return self.reject(st, "the reply held no answer", action.raw)
            return self.finish_chain(st, action.args["answer"])
        if kind == "memorize" and "memory" in action.args:
            return self._write_memory(st, action.args["memory"])
        if self._act(st, action.raw):
            return []
        if kind == "memorize":
            if notes["folds"] >= MAX_FOLDS:
                self._system(st, _fill(self.prompt(st, "fold_limit"), n=str(MAX_FOLDS)))
            else:
                notes["folding"] = list(PARTS)
            return []
        call = call_body(action.raw)
        if call in notes["calls"]:
            self._result(st, [{"type": "text", "text": REPEATED}])
            return []
        notes["calls"].append(call)
        if kind == "search":
            q = action.args["query"]
            node_id = fresh_id(st.graph, "search")
            ids = [e.info_id for e in self.toolbox.search(st, node_id, q, k=st.config.top_k)]
            node = chain(st, "search", q, node_id)
            remember(st, node.id, ids)
            self._result(st, self.toolbox.show(st, ids, header=f"Results for {q!r}:"), call)
            return [SearchResults(st.step, node_id=node.id, query=q, results=result_rows(st, ids))]
        a = action.args
        node_id = fresh_id(st.graph, "crop")
        ev, box = self.toolbox.crop(st, a["image"], a["bbox"], node_id)
        chain(st, "crop", f"crop {a['image']}", node_id)
        remember(st, node_id, [ev.info_id])
        self._result(st, self.toolbox.show(st, [ev.info_id]), call)
        return [cropped(st, node_id, ev, a["image"], a["bbox"], box)]

    def _write_memory(self, st: EpisodeState, memory: str) -> list[Event]:
        """One memory written; after the third, the episode goes on from the prompt and the memories alone."""
        notes = st.notes
        part = notes["folding"].pop(0)
        notes.setdefault("parts", {})[part] = memory
        if notes["folding"]:
            return []
        mem = notes["parts"]
        notes["memory"] = (
            "Memory of previous folded thoughts:\n\n"  # RDA line 580
            f"Episode Memory:\n{mem['episode']}\n\nWorking Memory:\n{mem['working']}\n\nTool Memory:\n{mem['tool']}"
        )
        notes["folds"] += 1
        notes["words"] = _words(self._prompt(st, notes["memory"]))  # RDA line 589
        st.history = []
        node = chain(st, "memory", f"fold {notes['folds']}")
        node.summary = mem["working"][:300]
        return []


def _fill(template: str, **values: str) -> str:
    """`template` with the placeholders named in `values` replaced in one pass: a value is never read again, and
    every other brace (JSON in a prompt, a question's own braces) stays as written.

    >>> _fill('{"a": {question}} {calls}', question="{calls}")
    '{"a": {calls}} {calls}'
    """
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)
