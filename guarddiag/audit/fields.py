"""Text fields as a user names them: nested paths into a pool row, and the texts they reach.

A path is dot-separated steps; a step is a key, optionally followed by one selector::

    response                      a top-level key
    data.prompt                   a key inside an object
    messages[].content            every element of a list, then a key of each
    messages[role=user].content   the elements whose "role" is "user"
    messages[0].content           one element (0-based)

:func:`extract` walks one row's value and returns every text the path reaches with its concrete
path (``messages[2].content``), or says why there is none: the path is **missing** (a key
absent or null on the way, or a list with no element selected) or every text it reaches is
**empty** (blank). A value that is neither text nor null where text is expected, or not a
list or object where the path goes on, is an error naming the row and the field. Lone UTF-16
surrogates (a ``"\\ud800"`` escape in JSON) are replaced by U+FFFD and counted.

Where the path ends at a list of content parts (the OpenAI multimodal form: ``[{"type":
"text", "text": ...}, {"type": "image_url", ...}]``), the texts are the text parts' (at
``messages[1].content[0].text``) and the other parts are counted (``non_text``), so
``messages[].content`` reads a corpus that mixes plain strings with part lists.

Own code, not a JSONPath library: the audit needs the concrete path of every text and the
missing / empty distinction per row, which the JSONPath libraries do not report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from guarddiag.errors import GuarddiagError

__all__ = ["FieldPath", "Step", "WrongTypeError", "extract", "parse_field", "replace_surrogates"]

_STEP = re.compile(r"^(?P<key>[^.\[\]=]+)(?:\[(?P<sel>[^\[\]]*)\])?$")
_SURROGATE = re.compile("[\ud800-\udfff]")


class WrongTypeError(GuarddiagError):
    """A value of the wrong type where a path goes: ``where field "path": problem``."""

    def __init__(self, where: str, path: str, problem: str) -> None:
        super().__init__(f'{where} field "{path}": {problem}')
        self.path, self.problem = path, problem


@dataclass(frozen=True)
class Step:
    key: str
    each: bool = False
    """``key[]`` or ``key[k=v]``: the value is a list, every (matching) element goes on."""
    where: tuple[str, str] | None = None
    """``key[k=v]``: only elements whose ``k`` is the text ``v``."""
    index: int | None = None
    """``key[N]``: only element N."""


@dataclass(frozen=True)
class FieldPath:
    text: str
    steps: tuple[Step, ...]

    @property
    def root(self) -> str:
        """The top-level column the path starts in."""
        return self.steps[0].key


@cache
def parse_field(path: str) -> FieldPath:
    """The parsed path (module docstring); a ``ValueError`` saying what is wrong otherwise."""
    if not path or path != path.strip():
        raise ValueError(f"field path {path!r}: expected key[.key...], e.g. messages[].content")
    steps = []
    for part in path.split("."):
        m = _STEP.match(part)
        if m is None:
            raise ValueError(f"field path {path!r}: cannot read step {part!r}; a step is key, "
                             "key[], key[N] or key[name=value]")
        sel = m.group("sel")
        if sel is None:
            steps.append(Step(m.group("key")))
        elif sel == "":
            steps.append(Step(m.group("key"), each=True))
        elif sel.isdigit():
            steps.append(Step(m.group("key"), index=int(sel)))
        elif "=" in sel and sel.split("=", 1)[0]:
            k, v = sel.split("=", 1)
            steps.append(Step(m.group("key"), each=True, where=(k, v)))
        else:
            raise ValueError(f"field path {path!r}: cannot read selector [{sel}]; expected [], "
                             "[N] or [name=value]")
    return FieldPath(path, tuple(steps))


def replace_surrogates(text: str) -> tuple[str, int]:
    """``text`` with lone surrogates replaced by U+FFFD, and how many there were."""
    if text.isascii():
        return text, 0
    return _SURROGATE.subn("\ufffd", text)


@dataclass
class Found:
    """What a path reached in one row."""

    texts: list[tuple[str, str]]
    """(concrete path, non-blank text) in document order."""
    status: str
    """``ok``, ``missing`` or ``empty``."""
    surrogates: int = 0
    non_text: int = 0
    """Content parts of another type than text (images, audio), counted, not audited."""


def extract(field: FieldPath, value: Any, *, where: str) -> Found:
    """Walk ``value`` (the row's value of ``field.root``); ``where`` names the row in errors."""
    reached: list[tuple[str, Any]] = [(field.steps[0].key, value)]
    reached = _select(field.steps[0], reached, where)
    for step in field.steps[1:]:
        nxt: list[tuple[str, Any]] = []
        for path, node in reached:
            if node is None:
                continue
            if not isinstance(node, dict):
                hint = ("" if not isinstance(node, list) else f" (use {path}[{step.key}])"
                        if step.key.isdigit() else
                        f" (use {path}[].{step.key} for every element, or {path}[N])")
                raise WrongTypeError(where, path, f"expected an object with key {step.key!r}, "
                                             f"found {_kind(node)}{hint}")
            if step.key in node:
                nxt.append((f"{path}.{step.key}", node[step.key]))
        reached = _select(step, nxt, where)
    texts: list[tuple[str, str]] = []
    blank = surrogates = parts = 0
    for path, node in _text_parts(reached):
        if node is None:
            continue
        if node is _NOT_TEXT:
            parts += 1
            continue
        if not isinstance(node, str):
            hint = (" (name a path into it, e.g. messages[].content)"
                    if isinstance(node, list | dict) else "")
            raise WrongTypeError(where, path, f"expected text, found {_kind(node)}{hint}")
        node, n = replace_surrogates(node)
        surrogates += n
        if node.strip():
            texts.append((path, node))
        else:
            blank += 1
    status = "ok" if texts else "empty" if blank or parts else "missing"
    return Found(texts, status, surrogates, parts)


_NOT_TEXT = object()
"""A content part that holds no text (an image, an audio clip): counted, not audited."""


def _text_parts(reached: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``reached`` with every list of content parts (the OpenAI form: objects each with a
    ``type``; ``{"type": "text", "text": ...}`` holds text) replaced by its parts' texts, at
    their concrete paths (``messages[1].content[0].text``), and :data:`_NOT_TEXT` for each part
    of another type. A turn's content may then be a string in one row and parts in the next."""
    out: list[tuple[str, Any]] = []
    for path, node in reached:
        if not (isinstance(node, list) and node
                and all(isinstance(p, dict) and "type" in p for p in node)):
            out.append((path, node))
            continue
        for j, part in enumerate(node):
            if part["type"] == "text":
                out.append((f"{path}[{j}].text", part.get("text")))
            else:
                out.append((f"{path}[{j}]", _NOT_TEXT))
    return out


def _select(step: Step, reached: list[tuple[str, Any]], where: str) -> list[tuple[str, Any]]:
    if not step.each and step.index is None:
        return reached
    out: list[tuple[str, Any]] = []
    for path, node in reached:
        if node is None:
            continue
        if not isinstance(node, list):
            raise WrongTypeError(where, path, f"expected a list, found {_kind(node)}")
        for i, item in enumerate(node):
            if step.index is not None and i != step.index:
                continue
            if step.where is not None:
                k, v = step.where
                if not isinstance(item, dict) or item.get(k) != v:
                    continue
            out.append((f"{path}[{i}]", item))
    return out


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean"}.get(
        type(value), type(value).__name__)
