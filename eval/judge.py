"""An optional LLM judge: asks any OpenAI-compatible chat endpoint whether an answer is correct.

Like VRAG-RL's judge, the model sees the question, the reference answer(s) and the prediction, and
answers only yes or no; the verdict becomes 1.0 or 0.0. The prompt is ours. Nothing here is needed
for the rule-based scores in eval/answer_metrics.py; the judge is an extra column, `scores["judge"]`.

    judge = Judge("http://localhost:8000/v1", "Qwen2.5-7B-Instruct")
    judge.check()                  # fails fast with the URL and the fix
    counts = judge_rows(rows, judge)  # {"judged": n, "skipped": m, "failed": k}

Left out on purpose: batching several items per request, and log-probability scoring.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

import httpx
import tenacity

SYSTEM_PROMPT = "You grade answers to questions about documents. You reply with a single word: yes or no."
USER_TEMPLATE = """Question: {question}
Reference answer: {gold}
Predicted answer: {pred}

Is the predicted answer correct given the question and the reference answer? It is correct when it
states the same fact as the reference, even if worded, formatted or rounded differently. If the
reference answer is "Not answerable", the prediction is correct only if it says the question cannot
be answered from the documents. Reply only yes or no."""

_YES = {"yes", "true", "correct"}
_NO = {"no", "false", "incorrect", "wrong"}
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")


class JudgeError(RuntimeError):
    """The judge endpoint could not be used: names the URL, the reason and the fix."""


def _transient(exc: BaseException) -> bool:
    """A failure another attempt may fix: no connection, a timeout, a 429 or a 5xx."""
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code == 429 or exc.response.status_code >= 500
    return isinstance(exc, httpx.TransportError)


def parse_verdict(reply: str | None) -> float | None:
    """1.0 for yes/true, 0.0 for no/false, None when the reply says neither (or both).

    >>> parse_verdict("Yes."), parse_verdict("**False**"), parse_verdict("<think>hmm, no?</think> yes")
    (1.0, 0.0, 1.0)
    >>> parse_verdict("Verdict: no"), parse_verdict("Correct."), parse_verdict("It is not correct")
    (0.0, 1.0, None)
    >>> parse_verdict("I cannot tell"), parse_verdict("maybe yes, maybe no"), parse_verdict("")
    (None, None, None)
    """
    words = _WORD.findall(_THINK.sub(" ", reply or "").lower())
    if not words:
        return None
    if words[0] in _YES:
        return 1.0
    if words[0] in _NO:
        return 0.0
    # Past the first word only the bare verdict words count: "not correct" must not read as yes.
    kinds = {1.0 for w in words if w in ("yes", "true")} | {0.0 for w in words if w in ("no", "false")}
    return kinds.pop() if len(kinds) == 1 else None


@dataclass
class Judge:
    """A yes/no judge over an OpenAI-compatible `/chat/completions` endpoint.

    `base_url` is the API root, e.g. "http://localhost:8000/v1" (vLLM, SGLang, Ollama's /v1, OpenAI).
    Transient failures (connection, timeout, 429, 5xx) are retried `retries` times with backoff.
    """

    base_url: str
    model: str
    api_key: str = ""
    timeout_s: float = 60.0
    retries: int = 2
    max_tokens: int = 16  # a verdict is one word; reasoning models need more
    backoff_s: float = 1.0
    role: str = "judge"  # what the endpoint is for, in errors ("generator", "verifier", ...)
    key_flag: str = "vimrag eval --judge-key"  # where its key is given, in errors
    _client: httpx.Client | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        if self.base_url.endswith("/chat/completions"):
            self.base_url = self.base_url[: -len("/chat/completions")]

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
                self._client = httpx.Client(timeout=self.timeout_s, headers=headers)
            return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fatal(self, response: httpx.Response) -> JudgeError:
        """The error for a status that retrying cannot fix."""
        body = response.text[:200].strip()
        if response.status_code in (401, 403):
            return JudgeError(
                f"{self.role} endpoint {self.url} refused the request (HTTP {response.status_code}): "
                f"the API key is {'wrong' if self.api_key else 'missing'}; pass the endpoint's key as "
                f"api_key ({self.key_flag}). Server said: {body}"
            )
        if response.status_code == 404:
            return JudgeError(
                f"{self.role} endpoint {self.url} answered 404: the base URL should be the API root ending "
                f"in /v1, and the model {self.model!r} must be one the server serves "
                f"(GET {self.base_url}/models lists them). Server said: {body}"
            )
        return JudgeError(f"{self.role} endpoint {self.url} rejected the request (HTTP {response.status_code}): {body}")

    def complete(self, messages: list[dict], retries: int | None = None) -> str:
        """The reply text of one chat completion; raises JudgeError when it cannot get one."""
        payload = {
            "model": self.model,
            "messages": messages,
            "temperature": 0.0,
            "max_tokens": self.max_tokens,
        }
        attempts = 1 + (self.retries if retries is None else retries)
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(attempts),
            wait=tenacity.wait_exponential(multiplier=self.backoff_s),
            retry=tenacity.retry_if_exception(_transient),
            reraise=True,
        )
        try:
            response = retrying(self._post, payload)
        except httpx.TimeoutException:
            reason = f"no reply within {self.timeout_s:g} s (raise timeout_s or check the server load)"
        except httpx.TransportError as exc:
            reason = f"cannot connect ({type(exc).__name__}: {exc}); start the server or fix the URL"
        except httpx.HTTPStatusError as exc:
            if not _transient(exc):
                raise self._fatal(exc.response) from None
            reason = f"HTTP {exc.response.status_code}: {exc.response.text[:200].strip()}"
        else:
            try:
                return response.json()["choices"][0]["message"]["content"] or ""
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise JudgeError(
                    f"{self.role} endpoint {self.url} did not return an OpenAI chat completion "
                    f"({type(exc).__name__}); is it an OpenAI-compatible /v1 API? "
                    f"Got: {response.text[:200]}"
                ) from exc
        raise JudgeError(f"{self.role} endpoint {self.url} failed after {attempts} attempt(s): {reason}")

    def _post(self, payload: dict) -> httpx.Response:
        response = self._http().post(self.url, json=payload)
        response.raise_for_status()  # an HTTPStatusError: retried when `_transient`, else fatal
        return response

    def check(self) -> None:
        """One tiny request, no retries: raises JudgeError naming the URL and the fix if it fails."""
        self.complete([{"role": "user", "content": "Reply with the word yes."}], retries=0)

    def score(self, question: str, gold_answers: Sequence[str] | str, pred: str) -> float | None:
        """1.0 if the judge says the prediction is correct, 0.0 if not, None if its reply is unclear."""
        golds = [gold_answers] if isinstance(gold_answers, str) else list(gold_answers)
        prompt = USER_TEMPLATE.format(question=question, gold=" OR ".join(golds), pred=pred)
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": prompt},
        ]
        return parse_verdict(self.complete(messages))


def judge_rows(rows: list[dict], judge: Judge, progress: bool = True, workers: int = 4, check: bool = True) -> dict:
    """Fill row["scores"]["judge"] for prediction rows, in a small thread pool.

    Skipped (no request sent): rows already judged, which keeps a re-run resumable, and rows with
    no prediction, which get 0.0. Failed: an unclear verdict or a request that failed after retries;
    their judge score stays None. With `check`, an unusable endpoint raises JudgeError before any row.
    """
    counts = {"judged": 0, "skipped": 0, "failed": 0}
    todo = []
    for row in rows:
        scores = row.setdefault("scores", {})
        if scores.get("judge") is not None:
            counts["skipped"] += 1
        elif not (row.get("pred") or "").strip():
            scores["judge"] = 0.0
            counts["skipped"] += 1
        else:
            todo.append(row)
    if not todo:
        return counts
    if check:
        judge.check()

    def one(row: dict) -> float | None:
        return judge.score(row.get("question", ""), row.get("gold") or [], row["pred"])

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc="judge", unit="q")
    right = 0.0
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {pool.submit(one, row): row for row in todo}
        for future in as_completed(futures):
            row = futures[future]
            try:
                verdict = future.result()
            except JudgeError:
                verdict = None
            row["scores"]["judge"] = verdict
            if verdict is None:
                counts["failed"] += 1
            else:
                counts["judged"] += 1
                right += verdict
            if bar is not None:
                bar.update(1)
                bar.set_postfix(acc=f"{right / max(1, counts['judged']):.3f}", failed=counts["failed"])
    if bar is not None:
        bar.close()
    return counts
