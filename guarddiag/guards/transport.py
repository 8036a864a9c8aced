"""HTTP for the endpoint client: kept-alive connections, ``Retry-After``, the response cache.

Standard library only (``http.client``). A :class:`KeepAliveClient` keeps a pool of idle
connections to one URL: a request takes an idle connection (or opens one), and gives it back
once the whole answer is read, so N requests from c worker threads open at most c TCP
connections instead of N. A connection the server closed while it sat idle is reopened and the
request sent once more before any error is reported: that is the server's keep-alive timeout,
not a failed request. Proxies are taken from the environment as ``urllib`` takes them
(``http_proxy``/``https_proxy``/``no_proxy``): an https URL is tunnelled through the proxy
(CONNECT), an http URL is asked of the proxy by its full address.

:func:`retry_after_seconds` reads a ``Retry-After`` header, either delay-seconds or an
HTTP-date (RFC 9110 §10.2.3). :class:`ResponseCache` keeps every answer on disk so an
interrupted run resumes without asking again.
"""

from __future__ import annotations

import email.utils
import hashlib
import http.client
import json
import os
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import timezone
from pathlib import Path
from typing import Any

from guarddiag.errors import GuarddiagError

__all__ = ["HttpAnswer", "KeepAliveClient", "ResponseCache", "repair_jsonl_tail",
           "retry_after_seconds"]

# Errors that mean "the server had already closed this kept-alive connection": worth one
# immediate resend on a fresh connection.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
          ConnectionAbortedError)


@dataclass(frozen=True)
class HttpAnswer:
    """One HTTP response, read in full."""

    status: int
    body: bytes
    retry_after: str | None
    """The raw ``Retry-After`` header, when the server sent one."""


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait that a ``Retry-After`` header asks for; None when absent or unreadable.

    Accepts delay-seconds (``"120"``) and an HTTP-date (``"Wed, 21 Oct 2026 07:28:00 GMT"``);
    a date in the past gives 0. ``now`` (epoch seconds) is for tests.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _proxy_for(scheme: str, netloc: str) -> tuple[str, int | None] | None:
    """(host, port) of the environment's proxy for this URL, or None (as urllib decides)."""
    proxy = urllib.request.getproxies().get(scheme)
    if not proxy or urllib.request.proxy_bypass(netloc.rpartition("@")[2]):
        return None
    parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return (parts.hostname, parts.port) if parts.hostname else None


class KeepAliveClient:
    """POSTs to one ``http(s)://`` URL over a pool of kept-alive connections (thread-safe)."""

    def __init__(self, url: str, *, timeout_s: float):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise GuarddiagError(f"{url}: expected an http:// or https:// URL")
        self.url = url
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.timeout_s = float(timeout_s)
        self.proxy = _proxy_for(parts.scheme, parts.netloc)
        if self.proxy is not None and self.scheme == "http":
            self.path = urllib.parse.urlunsplit(parts._replace(fragment=""))
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _connection(self) -> http.client.HTTPConnection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        if self.proxy is not None:
            proxy_host, proxy_port = self.proxy
            if self.scheme == "https":
                conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                    proxy_host, proxy_port, timeout=self.timeout_s)
                conn.set_tunnel(self.host, self.port)
                return conn
            return http.client.HTTPConnection(proxy_host, proxy_port, timeout=self.timeout_s)
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout_s)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)

    def post(self, payload: bytes, headers: dict[str, str]) -> HttpAnswer:
        """Send one POST and read the whole answer (any status).

        Raises what ``http.client`` raises for a transport failure (``ConnectionRefusedError``,
        ``TimeoutError``, another ``OSError`` or ``http.client.HTTPException``); the connection
        is then dropped, never reused.
        """
        conn = self._connection()
        reused = conn.sock is not None
        try:
            try:
                answer = self._send(conn, payload, headers)
            except _STALE:
                if not reused:
                    raise
                conn.close()  # the server closed it while idle: one resend, fresh connection
                answer = self._send(conn, payload, headers)
        except BaseException:
            conn.close()
            raise
        # A response that said "Connection: close" has already closed conn; given back, it
        # reconnects on its next request.
        with self._lock:
            self._idle.append(conn)
        return answer

    def _send(self, conn: http.client.HTTPConnection, payload: bytes,
              headers: dict[str, str]) -> HttpAnswer:
        conn.request("POST", self.path, body=payload, headers=headers)
        resp = conn.getresponse()
        body = resp.read()  # read in full, or the connection cannot carry the next request
        return HttpAnswer(status=resp.status, body=body,
                          retry_after=resp.getheader("Retry-After"))

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


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
