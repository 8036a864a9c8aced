"""The generative back ends: the endpoint client against a scripted loopback server (retries,
timeouts, 500s, garbage, refused connections, the response cache, bounded concurrency, kept-alive
connections counted at the server, Retry-After waits timed) and the spec parser. The local HF
back end runs in test_guards_models.py with tiny real models."""

from __future__ import annotations

import email.utils
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from guards_support import ScriptedServer, chat_answer, user_text

from guarddiag.errors import GuarddiagError
from guarddiag.guards import transport
from guarddiag.guards.backends import (
    EndpointGenerator,
    EndpointUnreachableError,
    ResponseCache,
    make_generator,
)
from guarddiag.guards.transport import RetryingClient


def _conv(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def _endpoint(server: ScriptedServer, model: str = "m", **kw) -> EndpointGenerator:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("timeout_s", 5.0)
    return make_generator(f"endpoint:{server.base_url}#{model}", **kw)  # type: ignore[return-value]


def test_answers_in_order_with_logprobs_and_request_fields():
    def script(body, n):
        text = user_text(body)
        return chat_answer(f"echo {text}", logprobs=[("echo", [("echo", -0.1), ("x", -2.5)])])

    with ScriptedServer(script) as server:
        gen = _endpoint(server, concurrency=3)
        texts = [f"prompt {i}" for i in range(7)]
        out = gen.generate([_conv(t) for t in texts], max_new_tokens=5, temperature=0.0,
                           seed=11, top_logprobs=2,
                           template_kwargs={"guardian_config": {"risk_name": "harm"}})
    assert [g.text for g in out] == [f"echo {t}" for t in texts]
    assert out[0].tokens == ("echo",)
    assert out[0].top_logprobs == ((("echo", -0.1), ("x", -2.5)),)
    body = server.requests[0]
    assert body["model"] == "m"
    assert body["max_tokens"] == 5
    assert body["seed"] == 11
    assert body["logprobs"] is True
    assert body["top_logprobs"] == 2
    assert body["chat_template_kwargs"] == {"guardian_config": {"risk_name": "harm"}}


def test_complete_returns_texts():
    with ScriptedServer(lambda body, n: "Hi!") as server:
        assert _endpoint(server).complete([_conv("a"), _conv("b")], max_new_tokens=4,
                                          temperature=0.7, seed=0) == ["Hi!", "Hi!"]


def test_500_then_success_is_retried():
    def script(body, n):
        return ("status", 500) if n < 2 else "ok"

    with ScriptedServer(script) as server:
        gen = _endpoint(server, retries=3, concurrency=1)
        out = gen.generate([_conv("x")], max_new_tokens=2)
    assert out[0].text == "ok"
    assert len(server.requests) == 3
    assert gen.stats.retries == 2


def test_timeout_then_success_is_retried():
    def script(body, n):
        return ("sleep", 1.0, "late") if n == 0 else "fast"

    with ScriptedServer(script) as server:
        gen = _endpoint(server, retries=2, timeout_s=0.2, concurrency=1)
        out = gen.generate([_conv("x")], max_new_tokens=2)
    assert out[0].text == "fast"
    assert len(server.requests) == 2


def test_persistent_garbage_and_500_fail_per_item_and_are_not_cached(tmp_path):
    def script(body, n):
        text = user_text(body)
        if text == "garbage":
            return ("garbage", b"<html>oops</html>")
        if text == "nochoices":
            return {"object": "chat.completion"}
        if text == "error":
            return ("status", 503)
        return "fine"

    with ScriptedServer(script) as server:
        gen = _endpoint(server, retries=2, cache_dir=tmp_path)
        out = gen.generate([_conv("garbage"), _conv("good"), _conv("nochoices"), _conv("error")],
                           max_new_tokens=2)
    assert [g.ok for g in out] == [False, True, False, False]
    assert "not JSON" in out[0].error
    assert "choices" in out[2].error
    assert "503" in out[3].error
    assert "after 3 attempts" in out[3].error
    # A 200 that is not a chat completion is asked once; the 503 three times; the good one once.
    assert len(server.requests) == 1 + 1 + 1 + 3
    assert len(ResponseCache(tmp_path)) == 1


def test_4xx_is_not_retried():
    with ScriptedServer(lambda body, n: ("status", 400)) as server:
        gen = _endpoint(server, retries=3)
        out = gen.generate([_conv("x")], max_new_tokens=2)
    assert not out[0].ok
    assert "HTTP 400" in out[0].error
    assert len(server.requests) == 1


def test_dropped_connection_is_retried():
    def script(body, n):
        return ("close",) if n == 0 else "back"

    with ScriptedServer(script) as server:
        out = _endpoint(server, retries=2, concurrency=1).generate([_conv("x")],
                                                                   max_new_tokens=2)
    assert out[0].text == "back"


def test_refused_connection_is_one_line_error():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens on this port now
    gen = make_generator(f"endpoint:http://127.0.0.1:{port}/v1#m", retries=1, backoff_s=0.01)
    with pytest.raises(EndpointUnreachableError) as info:
        gen.generate([_conv("x")], max_new_tokens=2)
    msg = str(info.value)
    assert "refused the connection" in msg
    assert "\n" not in msg
    with pytest.raises(GuarddiagError):
        gen.complete([[{"role": "user", "content": "x"}]], max_new_tokens=2, temperature=0.0,
                     seed=0)


def test_complete_raises_one_line_when_an_item_failed():
    with ScriptedServer(lambda body, n: ("status", 500)) as server, \
            pytest.raises(GuarddiagError, match=r"1 of 1 conversation\(s\) got no answer"):
        _endpoint(server, retries=0).complete([_conv("x")], max_new_tokens=2, temperature=0.0,
                                              seed=0)


def test_cache_resumes_without_asking_again(tmp_path):
    with ScriptedServer(lambda body, n: f"a{user_text(body)}") as server:
        convs = [_conv(str(i)) for i in range(5)]
        first = _endpoint(server, cache_dir=tmp_path).generate(convs[:3], max_new_tokens=3)
        assert len(server.requests) == 3
        gen = _endpoint(server, cache_dir=tmp_path)
        second = gen.generate(convs, max_new_tokens=3)
    assert len(server.requests) == 5  # only the two new ones were asked
    assert [g.text for g in second] == ["a0", "a1", "a2", "a3", "a4"]
    assert [g.cached for g in second] == [True, True, True, False, False]
    assert [g.text for g in first] == ["a0", "a1", "a2"]
    assert gen.stats.cache_hits == 3
    # A different request (other seed) is a different cache key.
    with ScriptedServer(lambda body, n: "new") as server2:
        out = make_generator(f"endpoint:{server2.base_url}#m", cache_dir=tmp_path).generate(
            convs[:1], max_new_tokens=3, seed=5)
    assert out[0].text == "new"


def test_cache_skips_a_torn_last_line(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.put("k1", {"text": "one", "tokens": [], "top_logprobs": []})
    with open(cache.path, "a", encoding="utf-8") as fh:
        fh.write('{"key": "k2", "answer": {"te')  # killed mid-write
    again = ResponseCache(tmp_path)
    assert again.get("k1")["text"] == "one"
    assert again.get("k2") is None
    again.put("k3", {"text": "three", "tokens": [], "top_logprobs": []})
    assert ResponseCache(tmp_path).get("k3")["text"] == "three"


def test_concurrency_is_bounded():
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def script(body, n):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return "x"

    with ScriptedServer(script) as server:
        _endpoint(server, concurrency=3).generate([_conv(str(i)) for i in range(12)],
                                                  max_new_tokens=1)
    assert 1 < state["max"] <= 3


def test_on_result_sees_every_answer_as_it_arrives():
    seen = []
    with ScriptedServer(lambda body, n: user_text(body).upper()) as server:
        _endpoint(server, concurrency=2).generate(
            [_conv("a"), _conv("b"), _conv("c")], max_new_tokens=1,
            on_result=lambda i, g: seen.append((i, g.text)))
    assert sorted(seen) == [(0, "A"), (1, "B"), (2, "C")]


def test_consecutive_failures_stop_the_run():
    with ScriptedServer(lambda body, n: ("status", 500)) as server:
        gen = EndpointGenerator(server.base_url, "m", retries=0, backoff_s=0.0, concurrency=1,
                                max_consecutive_failures=3)
        with pytest.raises(GuarddiagError, match="3 requests in a row failed"):
            gen.generate([_conv(str(i)) for i in range(10)], max_new_tokens=1)
    assert len(server.requests) == 3


@pytest.mark.parametrize(("spec", "match"), [
    ("nothing", "expected 'hf:"),
    ("gpt:foo", "unknown back end 'gpt'"),
    ("hf:", "missing model folder"),
    ("endpoint:http://x/v1", "expected 'endpoint:<base url>#<model name>'"),
    ("endpoint:127.0.0.1:8000#m", "must start with http"),
    ("hf:/no/such/folder", "model folder not found"),
])
def test_bad_specs_are_one_line_errors(spec, match):
    with pytest.raises(GuarddiagError, match=match) as info:
        make_generator(spec)
    assert "\n" not in str(info.value)


# ── kept-alive connections and Retry-After, against an HTTP/1.1 server ───────────────────────


class KeepAliveServer:
    """An HTTP/1.1 chat server on 127.0.0.1 that counts TCP connections and times requests.

    ``script(n)`` gives, for the n-th request (0-based): ``None`` (answer "ok"),
    ``("status", code, retry_after_header_or_None)``, or ``("close_after",)`` (answer "ok",
    then close the connection without saying so, as a server's idle timeout does).
    """

    def __init__(self, script=lambda n: None):
        self.connections = 0
        self.times: list[float] = []
        self.paths: list[str] = []
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                return

            def setup(self):
                super().setup()
                with lock:
                    outer.connections += 1

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    n = len(outer.times)
                    outer.times.append(time.monotonic())
                    outer.paths.append(self.path)
                action = script(n)
                if action is not None and action[0] == "status":
                    payload = b'{"error": "busy"}'
                    self.send_response(action[1])
                    if action[2] is not None:
                        self.send_header("Retry-After", action[2])
                else:
                    payload = json.dumps(chat_answer("ok")).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                if action is not None and action[0] == "close_after":
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_one_worker_keeps_one_connection_across_requests_and_calls():
    with KeepAliveServer() as server:
        gen = EndpointGenerator(server.base_url, "m", concurrency=1, timeout_s=5.0)
        first = gen.generate([_conv(str(i)) for i in range(10)], max_new_tokens=1)
        second = gen.generate([_conv(f"again {i}") for i in range(5)], max_new_tokens=1)
        gen.close()
    assert [g.text for g in first + second] == ["ok"] * 15
    assert len(server.times) == 15
    assert server.connections == 1  # a new connection per request would make 15


def test_concurrent_workers_open_at_most_one_connection_each():
    with KeepAliveServer() as server:
        gen = EndpointGenerator(server.base_url, "m", concurrency=4, timeout_s=5.0)
        out = gen.generate([_conv(str(i)) for i in range(40)], max_new_tokens=1)
        gen.close()
    assert [g.text for g in out] == ["ok"] * 40
    assert len(server.times) == 40
    assert 1 <= server.connections <= 4


def test_a_connection_closed_by_the_server_while_idle_is_reopened_without_a_retry():
    with KeepAliveServer(lambda n: ("close_after",) if n == 0 else None) as server:
        gen = EndpointGenerator(server.base_url, "m", concurrency=1, retries=0, timeout_s=5.0)
        out = gen.generate([_conv("a")], max_new_tokens=1)
        out += gen.generate([_conv("b")], max_new_tokens=1)
        gen.close()
    assert [g.text for g in out] == ["ok", "ok"]
    assert gen.stats.retries == 0
    assert gen.stats.failures == 0
    assert server.connections == 2


def test_429_with_retry_after_seconds_waits_that_long():
    with KeepAliveServer(lambda n: ("status", 429, "1") if n == 0 else None) as server:
        gen = EndpointGenerator(server.base_url, "m", concurrency=1, retries=2,
                                backoff_s=0.01, timeout_s=5.0)
        out = gen.generate([_conv("a")], max_new_tokens=1)
        gen.close()
    assert out[0].text == "ok"
    assert len(server.times) == 2
    # Without the header the backoff would be 0.01 s × (0.5 … 1.5).
    assert server.times[1] - server.times[0] >= 1.0
    assert server.connections == 1  # an error answer keeps the connection too


def test_503_with_an_http_date_waits_until_that_date():
    def script(n):
        if n == 0:
            # Whole seconds only: the wait is between 1 and 2 s from now.
            return ("status", 503, email.utils.formatdate(time.time() + 2, usegmt=True))
        return None

    with KeepAliveServer(script) as server:
        gen = EndpointGenerator(server.base_url, "m", concurrency=1, retries=1,
                                backoff_s=0.01, timeout_s=5.0)
        out = gen.generate([_conv("a")], max_new_tokens=1)
    assert out[0].text == "ok"
    assert server.times[1] - server.times[0] >= 0.9


def test_a_long_retry_after_is_capped(monkeypatch):
    monkeypatch.setattr(transport, "RETRY_AFTER_CAP_S", 1)
    with KeepAliveServer(lambda n: ("status", 429, "3600") if n == 0 else None) as server:
        gen = EndpointGenerator(server.base_url, "m", concurrency=1, retries=1,
                                backoff_s=0.01, timeout_s=5.0)
        out = gen.generate([_conv("a")], max_new_tokens=1)
    assert out[0].text == "ok"
    assert 1.0 <= server.times[1] - server.times[0] < 3.0


def test_retry_after_is_not_read_on_other_statuses():
    # A 500 carrying Retry-After is retried on the ordinary backoff (0.01 s × 0.5 … 1.5).
    with KeepAliveServer(lambda n: ("status", 500, "5") if n == 0 else None) as server:
        gen = EndpointGenerator(server.base_url, "m", concurrency=1, retries=1,
                                backoff_s=0.01, timeout_s=5.0)
        out = gen.generate([_conv("a")], max_new_tokens=1)
    assert out[0].text == "ok"
    assert server.times[1] - server.times[0] < 1.0


def test_an_unreadable_retry_after_falls_back_to_backoff():
    # urllib3 would raise on this header; the client waits the ordinary backoff instead.
    with KeepAliveServer(lambda n: ("status", 429, "soon") if n == 0 else None) as server:
        gen = EndpointGenerator(server.base_url, "m", concurrency=1, retries=1,
                                backoff_s=0.01, timeout_s=5.0)
        out = gen.generate([_conv("a")], max_new_tokens=1)
    assert out[0].text == "ok"
    assert server.times[1] - server.times[0] < 1.0


def test_retries_exhausted_return_the_last_answer_and_count_every_request():
    with KeepAliveServer(lambda n: ("status", 502, None)) as server:
        client = RetryingClient(f"{server.base_url}/chat/completions", timeout_s=5.0, retries=2,
                                backoff_s=0.0, retry_after_cap_s=1, max_connections=1)
        answer = client.post(b"{}", {"Content-Type": "application/json"})
        client.close()
    assert (answer.status, answer.attempts) == (502, 3)
    assert len(server.times) == 3


def test_an_http_proxy_from_the_environment_is_asked_by_full_address(monkeypatch):
    with KeepAliveServer() as proxy:
        monkeypatch.setenv("http_proxy", proxy.base_url.removesuffix("/v1"))
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        gen = EndpointGenerator("http://guard.invalid:8000/v1", "m", concurrency=1,
                                retries=0, timeout_s=5.0)
        out = gen.generate([_conv("a"), _conv("b")], max_new_tokens=1)
        gen.close()
    assert [g.text for g in out] == ["ok", "ok"]
    assert proxy.paths == ["http://guard.invalid:8000/v1/chat/completions"] * 2
    assert proxy.connections == 1


def test_no_proxy_hosts_are_asked_directly(monkeypatch):
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead_port = dead.getsockname()[1]
    dead.close()  # a proxy that is not there: using it would be refused
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{dead_port}")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    with KeepAliveServer() as server:
        gen = EndpointGenerator(server.base_url, "m", concurrency=1, retries=0, timeout_s=5.0)
        out = gen.generate([_conv("a")], max_new_tokens=1)
    assert out[0].text == "ok"
    assert server.paths == ["/v1/chat/completions"]
