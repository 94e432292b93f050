"""eval/judge.py against a fake OpenAI-compatible server on loopback (http.server in a thread)."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eval.judge import Judge, JudgeError, judge_rows, parse_verdict


class FakeOpenAI:
    """POST /v1/chat/completions. `reply(prompt)` gives the content, or (status, raw body)."""

    def __init__(self, reply, key: str = ""):
        self.reply = reply
        self.key = key
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def _send(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(payload)
                fake.headers.append(dict(self.headers))
                if self.path != "/v1/chat/completions":
                    return self._send(404, '{"error": "not found"}')
                if fake.key and self.headers.get("Authorization") != f"Bearer {fake.key}":
                    return self._send(401, '{"error": "invalid api key"}')
                out = fake.reply(payload["messages"][-1]["content"])
                if isinstance(out, tuple):
                    return self._send(*out)
                body = {"choices": [{"message": {"role": "assistant", "content": out}}]}
                return self._send(200, json.dumps(body))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def grade_paris(prompt: str) -> str:
    """Says yes when the predicted answer is Paris, no for other answers, rambles for "maybe"."""
    pred = prompt.split("Predicted answer:", 1)[1].split("\n", 1)[0].strip()
    if pred == "maybe":
        return "I am not sure about this one."
    if pred == "Reply":  # never sent: the check prompt has no "Predicted answer"
        return "?"
    return "Yes." if "paris" in pred.lower() else "No"


def reply_fn(prompt: str):
    if "Predicted answer:" not in prompt:
        return "yes"  # judge.check()
    return grade_paris(prompt)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_yes_no_verdicts_and_request_shape():
    with FakeOpenAI(reply_fn, key="secret") as fake:
        judge = Judge(fake.url, "tiny-judge", api_key="secret", timeout_s=5)
        assert judge.score("Capital of France?", ["Paris"], "It is Paris.") == 1.0
        assert judge.score("Capital of France?", ["Paris"], "Lyon") == 0.0
        judge.close()
    sent = fake.requests[0]
    assert sent["model"] == "tiny-judge" and sent["temperature"] == 0.0
    prompt = sent["messages"][-1]["content"]
    assert "Capital of France?" in prompt and "Reference answer: Paris" in prompt
    assert "yes or no" in prompt
    assert fake.headers[0]["Authorization"] == "Bearer secret"


def test_unparseable_reply_is_none():
    with FakeOpenAI(reply_fn) as fake, Judge(fake.url, "m", timeout_s=5) as judge:
        assert judge.score("q", ["Paris"], "maybe") is None


def test_base_url_may_include_the_route():
    with FakeOpenAI(reply_fn) as fake, Judge(fake.url + "/chat/completions/", "m", timeout_s=5) as judge:
        assert judge.url == fake.url + "/chat/completions"
        judge.check()
        assert len(fake.requests) == 1


def test_unreachable_endpoint_names_the_url():
    url = f"http://127.0.0.1:{free_port()}/v1"
    judge = Judge(url, "m", timeout_s=2, retries=3, backoff_s=0.0)
    with pytest.raises(JudgeError) as err:
        judge.check()
    assert f"{url}/chat/completions" in str(err.value)
    assert "connect" in str(err.value) and "1 attempt" in str(err.value)  # check() does not retry


def test_401_mentions_the_key():
    with FakeOpenAI(reply_fn, key="secret") as fake:
        with pytest.raises(JudgeError) as err:
            Judge(fake.url, "m", timeout_s=5).check()
        assert "key" in str(err.value) and "missing" in str(err.value) and fake.url in str(err.value)
        with pytest.raises(JudgeError, match="wrong"):
            Judge(fake.url, "m", api_key="nope", timeout_s=5).check()
        Judge(fake.url, "m", api_key="secret", timeout_s=5).check()  # the right key passes
        assert len(fake.requests) == 3  # 401s are not retried


def test_404_explains_the_base_url():
    with FakeOpenAI(reply_fn) as fake:
        root = fake.url[: -len("/v1")]
        with pytest.raises(JudgeError) as err:
            Judge(root, "m", timeout_s=5).check()
    assert "404" in str(err.value) and "/v1" in str(err.value) and "/models" in str(err.value)


def test_server_errors_are_retried():
    calls = {"n": 0}

    def flaky(prompt: str):
        calls["n"] += 1
        return (500, '{"error": "overloaded"}') if calls["n"] == 1 else reply_fn(prompt)

    with FakeOpenAI(flaky) as fake, Judge(fake.url, "m", timeout_s=5, backoff_s=0.0) as judge:
        assert judge.score("q", ["Paris"], "Paris") == 1.0
        assert len(fake.requests) == 2
    always = FakeOpenAI(lambda p: (503, "down"))
    with always, Judge(always.url, "m", timeout_s=5, retries=2, backoff_s=0.0) as judge:
        with pytest.raises(JudgeError, match="3 attempt"):
            judge.score("q", ["Paris"], "Paris")


def test_429_backs_off_exponentially_and_other_4xx_are_not_retried(monkeypatch):
    sleeps: list[float] = []
    monkeypatch.setattr("time.sleep", sleeps.append)  # the waits are recorded, not slept
    calls = {"n": 0}

    def limited(prompt: str):
        calls["n"] += 1
        return (429, '{"error": "rate limited"}') if calls["n"] <= 2 else reply_fn(prompt)

    with FakeOpenAI(limited) as fake, Judge(fake.url, "m", timeout_s=5, retries=3, backoff_s=0.5) as judge:
        assert judge.score("q", ["Paris"], "Paris") == 1.0
    assert calls["n"] == 3 and sleeps == [0.5, 1.0]
    with FakeOpenAI(lambda p: (400, "bad request")) as fake, Judge(fake.url, "m", timeout_s=5) as judge:
        with pytest.raises(JudgeError, match=r"rejected the request \(HTTP 400\): bad request"):
            judge.score("q", ["Paris"], "Paris")
        assert len(fake.requests) == 1


def test_non_openai_reply_is_a_clear_error():
    with FakeOpenAI(lambda p: (200, "<html>hello</html>")) as fake, Judge(fake.url, "m") as judge:
        with pytest.raises(JudgeError, match="OpenAI-compatible"):
            judge.check()


def test_judge_rows_counts_and_fills_scores():
    rows = [
        {"question": "q1", "gold": ["Paris"], "pred": "Paris", "scores": {"judge": None}},
        {"question": "q2", "gold": ["Paris"], "pred": "Rome", "scores": {"judge": None}},
        {"question": "q3", "gold": ["Paris"], "pred": "maybe", "scores": {"judge": None}},
        {"question": "q4", "gold": ["Paris"], "pred": None, "scores": {"judge": None}},
        {"question": "q5", "gold": ["Paris"], "pred": "Lyon", "scores": {"judge": 1.0}},  # kept
        {"question": "q6", "gold": ["Paris"], "pred": "paris!"},  # no scores dict yet
    ]
    with FakeOpenAI(reply_fn) as fake, Judge(fake.url, "m", timeout_s=5) as judge:
        counts = judge_rows(rows, judge, progress=False, workers=3)
    assert counts == {"judged": 3, "skipped": 2, "failed": 1}
    assert [r["scores"]["judge"] for r in rows] == [1.0, 0.0, None, 0.0, 1.0, 1.0]
    assert len(fake.requests) == 1 + 4  # one check, then one request per row to judge


def test_judge_rows_fails_fast_on_a_missing_endpoint():
    rows = [{"question": "q", "gold": ["a"], "pred": "a", "scores": {"judge": None}}]
    judge = Judge(f"http://127.0.0.1:{free_port()}/v1", "m", timeout_s=2, backoff_s=0.0)
    with pytest.raises(JudgeError, match="127.0.0.1"):
        judge_rows(rows, judge, progress=False)
    assert rows[0]["scores"]["judge"] is None


def test_judge_rows_with_nothing_to_judge_sends_nothing():
    rows = [{"question": "q", "gold": ["a"], "pred": "", "scores": {}}]
    judge = Judge(f"http://127.0.0.1:{free_port()}/v1", "m")  # unreachable, never contacted
    assert judge_rows(rows, judge, progress=False) == {"judged": 0, "skipped": 1, "failed": 0}
    assert rows[0]["scores"]["judge"] == 0.0


@pytest.mark.parametrize(
    "reply, verdict",
    [
        ("yes", 1.0),
        ("No.", 0.0),
        ("TRUE", 1.0),
        ("False", 0.0),
        ("<think>no</think>Yes", 1.0),
        ("The prediction is not correct", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_verdict(reply, verdict):
    assert parse_verdict(reply) == verdict
