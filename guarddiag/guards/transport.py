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
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from urllib3.exceptions import InvalidHeader

from guarddiag.errors import GuarddiagError

__all__ = ["RETRY_STATUSES", "HttpAnswer", "ResponseCache", "RetryingClient", "TransportError",
           "repair_jsonl_tail"]

RETRY_STATUSES = frozenset({408, 409, 425, 429, *range(500, 600)})
"""Statuses worth asking again (timeouts, conflicts, rate limits, server errors); any other
4xx is the request's fault and is not retried."""

_BACKOFF_MAX_S = 30.0


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
        self._retry = _Retry(
            total=self.retries, allowed_methods=None, status_forcelist=RETRY_STATUSES,
            backoff_factor=float(backoff_s), backoff_jitter=float(backoff_s),
            backoff_max=_BACKOFF_MAX_S, respect_retry_after_header=True,
            retry_after_max=int(retry_after_cap_s), raise_on_status=False, redirect=False)
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
    """Answers of an endpoint on disk, keyed by the sha256 of the canonical request body.

    One JSON object per line in ``responses.jsonl``, appended and flushed as each answer
    arrives, so a killed run keeps every answer it received. A line torn by a kill is skipped.
    """

    FILE = "responses.jsonl"

    def __init__(self, folder: str | Path):
        self.path = Path(folder) / self.FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._items: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                        self._items[rec["key"]] = rec["answer"]
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

    def put(self, key: str, answer: dict[str, Any]) -> None:
        line = json.dumps({"key": key, "answer": answer}, sort_keys=True, ensure_ascii=False)
        with self._lock:
            self._items[key] = answer
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
                fh.flush()

    def __len__(self) -> int:
        return len(self._items)


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
