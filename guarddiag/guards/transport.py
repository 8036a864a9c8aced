"""HTTP for the endpoint client: urllib3's connection pool and retries, the response cache.

:class:`RetryingClient` POSTs to one URL through ``urllib3`` (thread-safe): a pool of kept-alive
connections, so N requests from c worker threads open at most c TCP connections (a connection
the server closed while it sat idle is noticed and reopened, not counted as a failure), and
``urllib3.Retry`` for the retries: connection failures, timeouts, dropped connections and the
statuses in :data:`RETRY_STATUSES` are asked again up to ``retries`` times, after 0, 2b, 4b, …
seconds (b = ``backoff_s``, capped at 30 s) plus a jitter of up to b, or after the server's
``Retry-After`` on 429 and 503 (seconds or an HTTP-date, capped at ``retry_after_cap_s``).
Proxies are taken from the environment as ``urllib`` takes them (``http_proxy``/
``https_proxy``/``no_proxy``): an https URL is tunnelled through the proxy (CONNECT), an http
URL is asked of the proxy by its full address. :class:`ResponseCache` keeps every answer on
disk so an interrupted run resumes without asking again.

:class:`JsonClient` is what the guards share on top: a JSON body in, a parsed JSON answer out,
many requests at a time (bounded concurrency, a stop after too many failures in a row) and the
response cache keyed by the URL, the caller's scope (a guard's identity and version) and the
request. The OpenAI-compatible endpoint (:mod:`guarddiag.guards.backends`) and the plain HTTP
guard (:mod:`guarddiag.guards.http`) both ask through it, so both retry, time out, wait on
``Retry-After`` and resume alike. :func:`call_with_retries` gives a Python function the same
retry policy (a guard function that calls a service itself).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import urllib3
from urllib3.exceptions import InvalidHeader, MaxRetryError

from guarddiag import files
from guarddiag.errors import GuarddiagError

__all__ = ["RETRY_AFTER_CAP_S", "RETRY_STATUSES", "EndpointUnreachableError", "HttpAnswer",
           "JsonClient", "NoAnswerError", "Reply", "RequestStats", "ResponseCache",
           "RetryingClient", "TransportError", "call_with_retries", "repair_jsonl_tail",
           "retry_policy"]

RETRY_STATUSES = frozenset({408, 409, 425, 429, *range(500, 600)})
"""Statuses worth asking again (timeouts, conflicts, rate limits, server errors); any other
4xx is the request's fault and is not retried."""

_BACKOFF_MAX_S = 30.0

RETRY_AFTER_CAP_S = 60
"""The longest a ``Retry-After`` header (on 429 or 503) makes a request wait before its retry.
A server asking for more (or a far-off HTTP-date) is waited on for this long, so one
overloaded server cannot stall a run for hours; the retry budget (``retries``) still applies."""


@dataclass(frozen=True)
class HttpAnswer:
    """The last HTTP response of one request, read in full, and how many tries it took."""

    status: int
    body: bytes
    attempts: int
    """Requests sent for it: 1 + the retries."""


class _Retry(urllib3.Retry):
    # Own code: urllib3 reads Retry-After on every status and raises on an unreadable one;
    # only 429 and 503 give it a meaning here, and a header it cannot read falls back to backoff.
    def get_retry_after(self, response: urllib3.BaseHTTPResponse) -> float | None:
        if response.status not in (429, 503):
            return None
        try:
            return super().get_retry_after(response)
        except InvalidHeader:
            return None


def retry_policy(retries: int, backoff_s: float, *,
                 retry_after_cap_s: int = RETRY_AFTER_CAP_S) -> urllib3.Retry:
    """The one retry policy of every guard that asks a service: ``retries`` more tries after
    0, 2b, 4b, … seconds (b = ``backoff_s``, capped at 30 s) plus a jitter of up to b."""
    return _Retry(
        total=max(0, int(retries)), allowed_methods=None, status_forcelist=RETRY_STATUSES,
        backoff_factor=float(backoff_s), backoff_jitter=float(backoff_s),
        backoff_max=_BACKOFF_MAX_S, respect_retry_after_header=True,
        retry_after_max=int(retry_after_cap_s), raise_on_status=False, redirect=False)


T = TypeVar("T")


def call_with_retries(fn: Callable[[], T], *, retries: int, backoff_s: float,
                      on_retry: Callable[[Exception, int], None] | None = None) -> T:
    """``fn()``, asked again after an exception with :func:`retry_policy`'s waits; the last
    exception is raised once no retry is left. ``on_retry(exception, n)`` before the n-th
    retry."""
    # urllib3's Retry does the counting and the waits, so a function guard's retries wait
    # exactly as an HTTP guard's do; an exception it does not know counts as a failed try.
    retry = retry_policy(retries, backoff_s)
    while True:
        try:
            return fn()
        except Exception as exc:
            try:
                retry = retry.increment(error=exc)
            except MaxRetryError:
                raise exc from None
            if on_retry is not None:
                on_retry(exc, len(retry.history))
            retry.sleep()


class TransportError(Exception):
    """No answer after every retry; ``unreachable`` when no connection could be made at all."""

    def __init__(self, message: str, *, unreachable: bool, attempts: int):
        super().__init__(message)
        self.unreachable = unreachable
        self.attempts = attempts


def _proxy_for(url: str) -> str | None:
    # Own code: urllib3 does not read proxies from the environment; urllib's rules are kept.
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.netloc.rpartition("@")[2]):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


class RetryingClient:
    """POSTs to one ``http(s)://`` URL with kept-alive connections and retries (thread-safe)."""

    def __init__(self, url: str, *, timeout_s: float, retries: int, backoff_s: float,
                 retry_after_cap_s: int, max_connections: int):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise GuarddiagError(f"{url}: expected an http:// or https:// URL")
        self.url = url
        self.timeout_s = float(timeout_s)
        self.retries = max(0, int(retries))
        self._retry = retry_policy(self.retries, backoff_s, retry_after_cap_s=retry_after_cap_s)
        proxy = _proxy_for(url)
        pool_kw: dict[str, Any] = {"maxsize": max(1, int(max_connections)), "block": False}
        self._pool: urllib3.PoolManager = (
            urllib3.PoolManager(**pool_kw) if proxy is None
            else urllib3.ProxyManager(proxy, **pool_kw))

    def post(self, payload: bytes, headers: dict[str, str]) -> HttpAnswer:
        """Send one POST, retrying as the class says, and read the whole last answer.

        Returns the answer of any status once no retry is left or wanted; raises
        :class:`TransportError` when no answer came back at all.
        """
        try:
            resp = self._pool.request(
                "POST", self.url, body=payload, headers=headers, retries=self._retry,
                timeout=urllib3.Timeout(connect=self.timeout_s, read=self.timeout_s))
        except urllib3.exceptions.MaxRetryError as exc:
            raise _transport_error(exc.reason, self.retries + 1, self.timeout_s) from None
        except urllib3.exceptions.HTTPError as exc:  # with retries=0 urllib3 raises the cause
            raise _transport_error(exc, 1, self.timeout_s) from None
        history = resp.retries.history if resp.retries is not None else ()
        return HttpAnswer(status=resp.status, body=resp.data, attempts=1 + len(history))

    def close(self) -> None:
        """Close every idle connection (a later request opens new ones)."""
        self._pool.clear()


def _transport_error(reason: Exception | None, attempts: int, timeout_s: float
                     ) -> TransportError:
    after = f" (after {attempts} attempts)" if attempts > 1 else ""
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        refused = isinstance(reason.__cause__ or reason.__context__, ConnectionRefusedError) \
            or "refused" in str(reason).lower()
        what = "refused the connection" if refused else f"could not be reached ({reason})"
        return TransportError(what + after, unreachable=True, attempts=attempts)
    if isinstance(reason, urllib3.exceptions.TimeoutError):
        return TransportError(f"no answer within {timeout_s:g} s{after}", unreachable=False,
                              attempts=attempts)
    return TransportError(f"connection failed ({type(reason).__name__}: {reason}){after}",
                          unreachable=False, attempts=attempts)


class ResponseCache:
    """Answers of an endpoint on disk, keyed by the sha256 of the canonical request.

    One JSON object per line in ``responses.jsonl``, appended and flushed as each answer
    arrives, so a killed run keeps every answer it received. A line torn by a kill is skipped.
    Each line names its ``scope`` (what answered: a guard's identity), so the answers of one
    scope can be forgotten at once when they turn out to be another model's.
    """

    FILE = "responses.jsonl"

    def __init__(self, folder: str | Path):
        self.path = Path(folder) / self.FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._items: dict[str, dict[str, Any]] = {}
        self._scopes: dict[str, str] = {}
        if self.path.is_file():
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                        self._items[rec["key"]] = rec["answer"]
                        self._scopes[rec["key"]] = str(rec.get("scope", ""))
                    except (json.JSONDecodeError, KeyError, TypeError):
                        continue  # a torn last line from a killed run
            self._repair_tail()

    def _repair_tail(self) -> None:
        repair_jsonl_tail(self.path)

    @staticmethod
    def key(body: dict[str, Any]) -> str:
        canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: str, answer: dict[str, Any], *, scope: str = "") -> None:
        line = json.dumps({"key": key, "scope": scope, "answer": answer}, sort_keys=True,
                          ensure_ascii=False)
        with self._lock:
            self._items[key] = answer
            self._scopes[key] = scope
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
                fh.flush()

    def forget(self, scope: str) -> int:
        """Drop every answer of ``scope`` (from memory and the file); returns how many."""
        with self._lock:
            gone = {k for k, s in self._scopes.items() if s == scope}
            if not gone:
                return 0
            for k in gone:
                self._items.pop(k, None)
                self._scopes.pop(k, None)
            files.write_text("".join(
                json.dumps({"key": k, "scope": self._scopes[k], "answer": a}, sort_keys=True,
                           ensure_ascii=False) + "\n" for k, a in self._items.items()),
                self.path)
        return len(gone)

    def __len__(self) -> int:
        return len(self._items)


class EndpointUnreachableError(GuarddiagError):
    """The endpoint refused or dropped every attempt; nothing more can be asked of it."""


class NoAnswerError(Exception):
    """No usable answer for one request after every retry the client made. A malformed 200
    answer (not JSON, not the shape the caller reads) is the server's fault and is not asked
    again; a 4xx other than those in :data:`RETRY_STATUSES` is the request's and is not either."""


@dataclass
class RequestStats:
    """Counters of one client's life, for reports and tests."""

    requests: int = 0
    """HTTP requests sent (each retry counts)."""
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Reply:
    """What one request gave: the parsed answer, or why none came."""

    answer: Any = None
    error: str | None = None
    cached: bool = False
    """The answer came from the response cache, not from a request."""

    @property
    def ok(self) -> bool:
        return self.error is None


def _snippet(raw: bytes, n: int = 120) -> str:
    text = raw.decode("utf-8", errors="replace").strip().replace("\n", " ")
    return text if len(text) <= n else text[:n] + "…"


class JsonClient:
    """JSON requests to one URL: retries (:class:`RetryingClient`), bounded concurrency, a stop
    after ``max_consecutive_failures`` failed requests in a row, and an optional response cache.

    A cache entry is keyed by the URL, :attr:`cache_scope` and the request body: the same
    request to another server, or for another identity of the guard (its options, its
    version), is asked afresh. :attr:`read_cache` False asks every request again (a rescore,
    a canary check) and still stores the answers.
    """

    def __init__(self, url: str, *, timeout_s: float = 120.0, retries: int = 4,
                 backoff_s: float = 1.0, concurrency: int = 8,
                 headers: dict[str, str] | None = None, cache_dir: str | Path | None = None,
                 max_consecutive_failures: int = 20, spec: str | None = None):
        self.url = url
        self.spec = spec or url
        self.concurrency = max(1, int(concurrency))
        self.max_consecutive_failures = max(1, int(max_consecutive_failures))
        self.headers = {"Content-Type": "application/json", "Accept": "application/json",
                        **(headers or {})}
        self.cache = ResponseCache(cache_dir) if cache_dir is not None else None
        self.cache_scope = ""
        """What answers beside the request (a guard's identity digest, which holds its
        version); set by the guard before it asks."""
        self.read_cache = True
        self.stats = RequestStats()
        self._stats_lock = threading.Lock()
        self._client = RetryingClient(url, timeout_s=timeout_s, retries=retries,
                                      backoff_s=backoff_s, retry_after_cap_s=RETRY_AFTER_CAP_S,
                                      max_connections=self.concurrency)

    def cache_key(self, body: Any) -> str:
        return ResponseCache.key({"url": self.url, "scope": self.cache_scope, "request": body})

    def post_json(self, body: Any, parse: Callable[[Any], Any]) -> Any:
        """Send one request (the client retries it) and return ``parse(answer JSON)``.

        Raises :class:`NoAnswerError` (this request got no usable answer) or
        :class:`EndpointUnreachableError` (no connection could be made at all)."""
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        try:
            answer = self._client.post(payload, self.headers)
        except TransportError as exc:
            self._count(exc.attempts)
            if exc.unreachable:
                raise EndpointUnreachableError(f"{self.url} {exc}") from None
            raise NoAnswerError(str(exc)) from None
        self._count(answer.attempts)
        if answer.status >= 400:
            detail = f"HTTP {answer.status} {_snippet(answer.body)}".strip()
            after = f" (after {answer.attempts} attempts)" if answer.attempts > 1 else ""
            raise NoAnswerError(detail + (after if answer.status in RETRY_STATUSES else ""))
        try:
            doc = json.loads(answer.body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise NoAnswerError(f"answer is not JSON: {_snippet(answer.body)}") from None
        return parse(doc)

    def _count(self, attempts: int) -> None:
        with self._stats_lock:
            self.stats.requests += attempts
            self.stats.retries += attempts - 1

    def ask_all(self, bodies: Sequence[Any], *, parse: Callable[[Any], Any],
                on_reply: Callable[[int, Reply], None] | None = None) -> list[Reply]:
        """One :class:`Reply` per body, in order; ``on_reply(i, reply)`` as each arrives (so a
        caller can store it before the whole batch is done). Parsed answers go to the cache."""
        keys = [self.cache_key(b) for b in bodies]
        out: list[Reply | None] = [None] * len(bodies)
        pending: list[int] = []
        for i, key in enumerate(keys):
            hit = self.cache.get(key) if self.cache is not None and self.read_cache else None
            if hit is None:
                pending.append(i)
                continue
            out[i] = reply = Reply(answer=hit, cached=True)
            self.stats.cache_hits += 1
            if on_reply is not None:
                on_reply(i, reply)
        if pending:
            self._ask_pending(pending, bodies, keys, parse, out, on_reply)
        return [r for r in out if r is not None]

    def _ask_pending(self, pending: list[int], bodies: Sequence[Any], keys: list[str],
                     parse: Callable[[Any], Any], out: list[Reply | None],
                     on_reply: Callable[[int, Reply], None] | None) -> None:
        consecutive = 0
        pool = ThreadPoolExecutor(max_workers=self.concurrency,
                                  thread_name_prefix="guarddiag-endpoint")
        try:
            # Submit at most `concurrency` requests at a time, so an abort leaves few in flight.
            todo = iter(pending)
            running: dict[Future[Any], int] = {}

            def submit_next() -> None:
                i = next(todo, None)
                if i is not None:
                    running[pool.submit(self.post_json, bodies[i], parse)] = i

            for _ in range(self.concurrency):
                submit_next()
            while running:
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in done:
                    i = running.pop(fut)
                    try:
                        answer = fut.result()
                    except EndpointUnreachableError as exc:
                        raise EndpointUnreachableError(
                            f"{exc} (is the server running? spec {self.spec})") from None
                    except NoAnswerError as exc:
                        reply = Reply(error=str(exc))
                        self.stats.failures += 1
                        self.stats.errors.append(str(exc))
                        consecutive += 1
                        if consecutive >= self.max_consecutive_failures:
                            raise GuarddiagError(
                                f"{self.spec}: {consecutive} requests in a row failed, "
                                f"stopping (last: {exc}); answers so far are kept") from None
                    else:
                        consecutive = 0
                        if self.cache is not None:
                            self.cache.put(keys[i], answer, scope=self.cache_scope)
                        reply = Reply(answer=answer)
                    out[i] = reply
                    if on_reply is not None:
                        on_reply(i, reply)
                    submit_next()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def forget_scope(self) -> int:
        """Forget every cached answer of :attr:`cache_scope` (another model's, as it turned
        out); returns how many."""
        return self.cache.forget(self.cache_scope) if self.cache is not None else 0

    def close(self) -> None:
        """Close the kept-alive connections (a later request opens new ones)."""
        self._client.close()


def repair_jsonl_tail(path: Path) -> None:
    """End an append-only JSON-lines file with a newline.

    A kill can leave a last line without its newline; the next append would glue onto it.
    """
    with open(path, "rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) != b"\n":
            fh.write(b"\n")
