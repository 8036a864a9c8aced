"""Command-line flags generated from a verb's options model, so the model is the one declaration.

Each option flag names one field of a :class:`~guarddiag.typed.Model` (``PredictOptions``,
``ReportOptions``, …) by its ``dest``. The flag's default is the field's: the flag is absent
from the parsed arguments unless given (``argparse.SUPPRESS``) and :func:`options_from` builds
the model from the flags given, so every field the user leaves out keeps the model's default.
Its help is the field's docstring (or the command line's own words, :attr:`Flag.help`), and the
house formatter appends "(default …)" read from the model when ``--help`` is printed. The model
is named as ``"module:Class"`` and imported only then, so building the parser (every command's
start) never loads a stage package. ``tests/test_cli_options.py`` walks every sub-command and
checks each flag against its field, and each field against its flag.
"""

from __future__ import annotations

import argparse
import builtins
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any, TypeVar

from guarddiag.spec import SpecError
from guarddiag.typed import Model, name_list, validate

__all__ = ["FROM_MODEL", "Flag", "add_options", "comma_ints", "field_of",
           "help_of", "model_class", "options_from", "stated_default"]

M = TypeVar("M", bound=Model)

FROM_MODEL = "(the field's docstring)"
"""Placeholder help of a flag whose help is its field's docstring (argparse drops an action
with no help from ``--help``); the house formatter replaces it."""


@dataclass(frozen=True)
class Flag:
    """How one field of an options model is spelled on the command line; everything left
    unset comes from the field (``--<field-with-dashes>``, its docstring)."""

    names: tuple[str, ...] = ()
    """Option strings; empty: ``--`` and the field's name with dashes."""
    metavar: str | None = None
    type: Callable[[str], Any] | None = None
    """Parses one value (the model validates the result); None: the text as given."""
    choices: tuple[str, ...] | None = None
    action: str | builtins.type[argparse.Action] | None = None
    """``store_true``, ``store_false``, ``append`` or an Action class; None: one value."""
    help: str | None = None
    """The command line's words when the docstring is not enough; never a default (the
    formatter appends the model's)."""
    required: bool = False
    """The field has no default: the command line needs the flag."""
    convert: Callable[[Any], Any] | None = None
    """Turns the parsed value (of an ``append`` flag: the list) into the field's value."""


@dataclass(frozen=True)
class Declared:
    """One model's flags on one parser, and where its other fields come from."""

    model: str
    flags: Mapping[str, Flag]
    elsewhere: Mapping[str, str]
    """field → the option (shared work-folder or --data-dir flag) that sets it."""
    api_only: Mapping[str, str]
    """field → why it has no flag."""


def model_class(path: str) -> builtins.type[Model]:
    """The model a ``"module:Class"`` path names (imported now)."""
    module, _, name = path.partition(":")
    model: builtins.type[Model] = getattr(import_module(module), name)
    return model


def field_of(action: argparse.Action) -> tuple[str, str] | None:
    """``(model path, field)`` of a flag made by :func:`add_options`; None for any other."""
    return getattr(action, "option_field", None)


def stated_default(value: Any) -> str | None:
    """A field's default as ``--help`` states it; None where there is nothing to state (None,
    False, empty: the help says what leaving the flag out means)."""
    if value is None or value is False or value == () or value == "" or value == {}:
        return None
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def comma_ints(text: str) -> tuple[int, ...]:
    """``"43,44"`` → ``(43, 44)``."""
    try:
        return tuple(int(s) for s in name_list(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}"
                                         ) from None


def add_options(parser: argparse.ArgumentParser, model: str, flags: Mapping[str, Flag], *,
                group: argparse._ArgumentGroup | None = None,
                elsewhere: Mapping[str, str] | None = None,
                api_only: Mapping[str, str] | None = None) -> None:
    """Add one flag per entry of ``flags`` (field → :class:`Flag`) of the options model
    ``model`` (``"module:Class"``) to ``parser`` (or to its ``group``). ``elsewhere`` names the
    option that sets a field another way (``runs_dir``: ``--runs-dir``) and ``api_only`` why a
    field has no flag; tests/test_cli_options.py holds every field to one of the three."""
    target = group if group is not None else parser
    for field, flag in flags.items():
        names = flag.names or ("--" + field.replace("_", "-"),)
        extra: dict[str, Any] = {}
        if flag.action is not None:
            extra["action"] = flag.action
        if flag.type is not None:
            extra["type"] = flag.type
        if flag.metavar is not None:
            extra["metavar"] = flag.metavar
        if flag.choices is not None:
            extra["choices"] = flag.choices
        if flag.required:
            extra["required"] = True
        action = target.add_argument(*names, dest=field, default=argparse.SUPPRESS,
                                     help=flag.help or FROM_MODEL, **extra)
        action.option_field = (model, field)  # type: ignore[attr-defined]
    declared = [*getattr(parser, "options_declared", ()),
                Declared(model, dict(flags), dict(elsewhere or {}), dict(api_only or {}))]
    parser.options_declared = declared  # type: ignore[attr-defined]
    # What options_from needs at run time: which flag set which field, for its messages.
    spelled = dict(parser.get_default("option_flags") or {})
    spelled.update({f: (flag.names or ("--" + f.replace("_", "-"),))[0]
                    for f, flag in flags.items()})
    converts = dict(parser.get_default("option_converts") or {})
    converts.update({f: flag.convert for f, flag in flags.items() if flag.convert})
    parser.set_defaults(option_flags=spelled, option_converts=converts)


def options_from(args: argparse.Namespace, model: type[M], *, where: str,
                 **values: Any) -> M:
    """``model`` from the flags given on the command line (every other field at its default),
    with ``values`` (paths resolved from the work-folder flags, …) set too. A bad value is one
    line naming its flag."""
    spelled: dict[str, str] = getattr(args, "option_flags", None) or {}
    converts: dict[str, Callable[[Any], Any]] = getattr(args, "option_converts", None) or {}
    given = {f: getattr(args, f) for f in spelled if hasattr(args, f)
             and f in model.model_fields}
    given = {f: converts[f](v) if f in converts else v for f, v in given.items()}
    try:
        return validate(model, {**values, **given}, where="options")
    except SpecError as exc:
        def named(found: re.Match[str]) -> str:
            field, rest = found[1], found[2]
            flag = spelled.get(field)
            return flag + rest if flag else f'{where} field "{field}{rest}"'

        problems = [_FIELD.sub(named, problem, count=1) for problem in exc.problems]
        raise SpecError(where, problems) from None


_FIELD = re.compile(r'^options field "(\w+)([^"]*)"')


def help_of(action: argparse.Action) -> str:
    """A generated flag's help: its own words or its field's docstring, then the model's
    default (escaped for argparse's %-formatting)."""
    named = field_of(action)
    assert named is not None, "help_of is for flags made by add_options"
    model, field = named
    info = model_class(model).model_fields[field]
    text = action.help if action.help not in (None, FROM_MODEL) else plain(info.description)
    default = None if info.is_required() else stated_default(
        info.get_default(call_default_factory=True))
    if (default is not None and not _is_switch(action)
            and "(default" not in text):  # a default said in words (the usable cores) stays
        text = f"{text} (default {default.replace('%', '%%')})"
    return text


def plain(docstring: str | None) -> str:
    """A field's docstring as ``--help`` prints it: one paragraph, reST markup dropped."""
    text = " ".join((docstring or "").split())
    text = re.sub(r":\w+:`~?(?:[\w.]+\.)?([^`]+)`", r"\1", text).replace("``", "")
    text = re.sub(r"\bNone( =|:)", r"unset\1", text)  # the API's None is a flag left out
    first = text.split(" ", 1)[0]
    # "Report folder" → "report folder"; names (Ray, TOST) keep their capital
    if first[:1].isupper() and (first[1:].islower() or first == "A") and first not in _NAMES:
        text = text[0].lower() + text[1:]
    return text.removesuffix(".").replace("%", "%%")


_NAMES = frozenset({"Ray", "Python", "Hugging", "SORRY-Bench", "ModernBERT", "BH", "TOST"})
"""Capitalised first words a docstring keeps in ``--help``."""


def _is_switch(action: argparse.Action) -> bool:
    return action.nargs == 0
