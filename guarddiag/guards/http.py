"""A guard behind a plain HTTP JSON service: POST the prompt, read P(unsafe) from the answer.

A team's moderation service rarely speaks the OpenAI chat protocol; it takes ``{"text": …}`` and
answers ``{"p_unsafe": …}``. This adapter asks it as the endpoint adapter asks a chat server,
through the same :class:`~guarddiag.guards.transport.JsonClient`: bounded concurrency, a
timeout per request, urllib3's retries with backoff and ``Retry-After`` on 429/503, a stop after
too many failures in a row, and a response cache; with the raw log of
:func:`~guarddiag.guards.scoring.score_guard`, a killed run resumes.

    guarddiag guards score --adapter http --url https://guard.internal/v1/score \\
        --field p_unsafe --header 'Authorization=Bearer $GUARD_TOKEN'

* The request body is ``{<text_key>: prompt}`` (``batch_size`` 1) or ``{<text_key>: [prompts]}``
  (``batch_size`` > 1), plus the fixed fields of ``body`` (``--option key=value``).
* ``field`` is where the answer is: a JSON pointer (``/result/p_unsafe``, ``/scores/0``) or dotted
  keys (``result.p_unsafe``); ``*`` marks the list holding one answer per prompt of a batch
  (``/results/*/p_unsafe``; a batch needs one). The value is read as a callable guard's answer
  (:class:`~guarddiag.guards.answers.AnswerReader`): a number is P(unsafe), a label or a mapping
  of class probabilities works too.
* ``headers`` values may name environment variables (``Bearer $GUARD_TOKEN``), so a token never
  sits on the command line or in a saved file; only the header names are part of the identity.

A request that fails after every retry leaves its prompts unanswered (status failed, asked
again by the next run); an answer without the field, or with an unreadable value, is failed and
counted, never read as safe. Until one answer has been read, an unreadable one stops the run
with one line showing it: a wrong ``field`` costs one chunk of requests, not a whole run.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from guarddiag.errors import GuarddiagError
from guarddiag.guards.answers import AnswerReader
from guarddiag.guards.base import GuardAdapter, GuardVerdict, slug
from guarddiag.guards.transport import JsonClient, Reply

__all__ = ["HttpGuardAdapter", "parse_path", "resolve_path"]

WILDCARD = "*"


def parse_path(path: str) -> tuple[str, ...]:
    """The keys of ``path``: a JSON pointer (``/a/0/b``, ``~1`` for ``/``, ``~0`` for ``~``)
    or dotted keys (``a.0.b``); empty for the whole answer (``""`` or ``/``)."""
    text = path.strip()
    if text in ("", "/"):
        return ()
    if text.startswith("/"):
        return tuple(p.replace("~1", "/").replace("~0", "~") for p in text[1:].split("/"))
    return tuple(text.split("."))


def _step(doc: Any, key: str, where: tuple[str, ...]) -> Any:
    if isinstance(doc, Mapping) and key in doc:
        return doc[key]
    if isinstance(doc, list) and key.isdigit() and int(key) < len(doc):
        return doc[int(key)]
    at = "/" + "/".join(where) if where else "the answer"
    raise KeyError(f"no {key!r} in {at}")


def resolve_path(doc: Any, keys: Sequence[str]) -> Any:
    """The value at ``keys`` (without a wildcard); ``KeyError`` naming the missing step."""
    for i, key in enumerate(keys):
        doc = _step(doc, key, tuple(keys[:i]))
    return doc


def _snippet(doc: Any, n: int = 160) -> str:
    text = json.dumps(doc, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= n else text[:n] + "…"


def _expand_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Header values with ``$VAR``/``${VAR}`` taken from the environment."""
    out = {}
    for name, template in headers.items():
        try:
            out[name] = string.Template(template).substitute(os.environ)
        except KeyError as exc:
            raise GuarddiagError(f"--header {name}: environment variable ${exc.args[0]} is not "
                                 f"set") from None
        except ValueError as exc:
            raise GuarddiagError(f"--header {name}: {exc} (write $$ for a literal $)") from None
    return out


class HttpGuardAdapter(GuardAdapter):
    """Answers from a plain HTTP JSON service (see module doc)."""

    kind = "http"

    def __init__(self, *, url: str | None = None, field: str = "p_unsafe",
                 text_key: str = "text", batch_size: int = 1,
                 body: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None,
                 name: str | None = None, definition: str | None = None, concurrency: int = 8,
                 timeout_s: float = 120.0, retries: int = 4, backoff_s: float = 1.0,
                 cache_dir: str | Path | None = None):
        if not url:
            raise GuarddiagError("guard 'http' needs --url <the service's URL>")
        if batch_size < 1:
            raise GuarddiagError(f"guard 'http': batch size must be ≥ 1, got {batch_size}")
        keys = parse_path(field)
        if keys.count(WILDCARD) > 1 or (batch_size > 1 and WILDCARD not in keys):
            raise GuarddiagError(
                f"guard 'http': --field {field!r}: a batch (batch size {batch_size}) needs one * "
                f"where the list of answers is, e.g. /results/*/p_unsafe (or * for a JSON list "
                f"of numbers)" if batch_size > 1 else
                f"guard 'http': --field {field!r} has more than one *")
        self.url, self.field, self.keys = url, field, keys
        self.text_key, self.batch_size = text_key, int(batch_size)
        self.body = dict(body or {})
        if text_key in self.body:
            raise GuarddiagError(f"guard 'http': the body option {text_key!r} is where the "
                                 f"prompt goes (--text-key)")
        self.header_names = tuple(sorted(headers or {}))
        self.name = name or slug(url.split("://", 1)[-1].split("/", 1)[0])
        self._definition = definition or ""
        self.reader = AnswerReader(self.name, source="http")
        self._read_any = False
        self.client = JsonClient(url, timeout_s=timeout_s, retries=retries, backoff_s=backoff_s,
                                 concurrency=concurrency, headers=_expand_headers(headers or {}),
                                 cache_dir=cache_dir, spec=f"http:{url}")

    @property
    def definition(self) -> str:
        return self._definition

    @property
    def chunk_size(self) -> int:
        # Enough to keep every connection busy; the raw log stores each chunk's answers.
        return 4 * self.batch_size * self.client.concurrency

    @property
    def source(self) -> str:
        return self.client.spec

    def describe(self) -> dict[str, Any]:
        # What answers: the service and how it is asked and read; never a header's value.
        return {"adapter": self.kind, "url": self.url, "field": self.field,
                "text_key": self.text_key, "body": self.body,
                "headers": list(self.header_names)}

    def use_cache(self, *, scope: str, read: bool, forget: bool = False) -> None:
        self.client.cache_scope, self.client.read_cache = scope, read
        if forget:
            self.client.forget_scope()

    def notes(self) -> tuple[str, ...]:
        return self.reader.notes()

    def score(self, texts: Sequence[str]) -> list[GuardVerdict]:
        batches = [list(texts[i:i + self.batch_size])
                   for i in range(0, len(texts), self.batch_size)]
        bodies = [{**self.body, self.text_key: b if self.batch_size > 1 else b[0]}
                  for b in batches]
        replies = self.client.ask_all(bodies, parse=lambda doc: doc)
        out: list[GuardVerdict] = []
        for batch, reply in zip(batches, replies, strict=True):
            out += self._read(batch, reply)
        return out

    def _values(self, doc: Any, n: int) -> list[Any]:
        """One value per prompt of a batch of ``n`` from the answer ``doc``."""
        if WILDCARD not in self.keys:
            return [resolve_path(doc, self.keys)]
        cut = self.keys.index(WILDCARD)
        items = resolve_path(doc, self.keys[:cut])
        if not isinstance(items, list) or len(items) != n:
            size = f"{len(items)} item(s)" if isinstance(items, list) else "no list"
            raise KeyError(f"{size} at /{'/'.join(self.keys[:cut + 1])} for {n} prompt(s)")
        return [resolve_path(item, self.keys[cut + 1:]) for item in items]

    def _read(self, batch: list[str], reply: Reply) -> list[GuardVerdict]:
        if not reply.ok:
            return [GuardVerdict.failed(reply.error or "no answer", answered=False)
                    for _ in batch]
        raw = _snippet(reply.answer)
        try:
            values = self._values(reply.answer, len(batch))
            verdicts = [self.reader.verdict(v, f"prompt {t[:60]!r}")
                        for v, t in zip(values, batch, strict=True)]
        except (KeyError, GuarddiagError) as exc:
            problem = exc.args[0] if isinstance(exc, KeyError) else str(exc)
            if not self._read_any:
                raise GuarddiagError(f"guard {self.name!r}: cannot read --field {self.field!r} "
                                     f"from the answer of {self.url} ({problem}): {raw}"
                                     ) from None
            return [GuardVerdict.failed(f"{problem}", raw=raw) for _ in batch]
        self._read_any = True
        return [replace(v, cached=True) for v in verdicts] if reply.cached else verdicts

    def close(self) -> None:
        self.client.close()
