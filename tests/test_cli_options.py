"""Every command-line flag against its options model, field by field (issue 51 item 1).

A sub-command whose options have a model declares them with
:func:`guarddiag.cli.options.add_options`; this file walks every sub-command of
``guarddiag`` and holds each to the model: each generated flag names a field (its dest) and
leaves the default to it; each field has a flag, is set by a shared option (``--runs-dir``,
``--data-dir``), or is listed as API-only with a reason; a flag written by hand beside them is
listed below with a reason; ``--help`` states the model's default. A command with option flags
and no model is listed in :data:`NOT_MODELLED`, so a new one cannot slip in unnoticed.
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Iterator

import pytest

from guarddiag.cli import build_parser
from guarddiag.cli.options import Flag, add_options, field_of, model_class, stated_default

SHARED = {"--help", "--data-dir", "--work-dir", "--pool", "--runs-dir", "--audit-dir",
          "--derived-dir", "--branches-dir", "--record"}
"""Options every command spells the same way (help, where things are)."""

HAND_WRITTEN: dict[str, dict[str, str]] = {
    "train": {"--run": "picks one run of the plan, not an option of training",
              "--list-sizes": "prints the size table instead of training"},
    "train plan": {"--json": "output format of the printed graph",
                   "--out": "where the printed graph goes"},
    "guards score": {
        **dict.fromkeys(
            ("--adapter", "--model", "--endpoint", "--file", "--target", "--option", "--url",
             "--field", "--text-key", "--header", "--strict", "--labels", "--risk-name",
             "--risk-definition", "--question", "--categories", "--exclude-categories",
             "--max-new-tokens", "--device", "--dtype", "--concurrency", "--timeout",
             "--cache-dir"),
            "builds the adapter: one of its keyword arguments, declared by the adapter itself "
            "(guarddiag guards list)")},
    "mutate": {"--benchmark": "the verb's argument (the base subset), not an option",
               "--generator": "builds the generator object mutate_benchmark takes"},
    "export card": {"--report": "the verb's argument (the report folder), not an option"},
    "audit": {"--out": "the audit folder, an argument of audit_pool, not an option",
              "--force": "an argument of audit_pool (recompute), not an option of the audit"},
}
"""Flags of a modelled command that set no field, with the reason."""

NOT_MODELLED: dict[str, str] = {
    "runs prune": "one required argument (the benchmarks), no option with a default",
}
"""Commands with option flags and no options model (checked: each really is such a command)."""


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
         ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (command name, parser) under ``parser``, ``bench`` excluded (measurements)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if path == () and name == "bench":
                    continue
                yield " ".join((*path, name)), sub
                yield from walk(sub, (*path, name))


def _literal(annotation: object) -> tuple[object, ...] | None:
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is typing.Literal:
            return typing.get_args(arg)
    return None


def problems_of(command: str, parser: argparse.ArgumentParser,
                hand_written: dict[str, str] | None = None) -> list[str]:
    """What is wrong with one parser's flags against its declared models (empty: nothing)."""
    found: list[str] = []
    declared = getattr(parser, "options_declared", ())
    options = {s for a in parser._actions for s in a.option_strings}
    generated = {a.dest: a for a in parser._actions if field_of(a) is not None}
    for action in parser._actions:
        if not action.option_strings:
            continue
        where = f"{command} {action.option_strings[0]}"
        if field_of(action) is None:
            if not set(action.option_strings) & (SHARED | set(hand_written or {})):
                found.append(f"{where}: written by hand, no model field and no reason")
            continue
        model, field = field_of(action)
        fields = model_class(model).model_fields
        if field not in fields:
            found.append(f"{where}: {model} has no field {field!r}")
            continue
        if action.dest != field or action.default is not argparse.SUPPRESS:
            found.append(f"{where}: must leave its default to {model}.{field}")
        choices = _literal(fields[field].annotation)
        if action.choices is not None and choices is not None \
                and tuple(action.choices) != choices:
            found.append(f"{where}: choices {action.choices} are not the field's {choices}")
        default = None if fields[field].is_required() else stated_default(
            fields[field].get_default(call_default_factory=True))
        if fields[field].is_required() and not action.required:
            found.append(f"{where}: {model}.{field} has no default, so the flag is required")
        shown = parser._get_formatter()._get_help_string(action) or ""
        if default is not None and action.nargs != 0 and \
                f"(default {default.replace('%', '%%')})" not in shown and "(default:" not in shown:
            found.append(f"{where}: --help does not state the model's default {default}")
    models: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
    for decl in declared:  # one model may be declared in several groups of a parser
        elsewhere, api_only = models.setdefault(decl.model, ({}, {}))
        elsewhere.update(decl.elsewhere)
        api_only.update(decl.api_only)
    for model, (elsewhere, api_only) in models.items():
        for field in model_class(model).model_fields:
            if field in generated:
                continue
            if field in elsewhere:
                if elsewhere[field] not in options:
                    found.append(f"{command}: {model}.{field} is said to be set by "
                                 f"{elsewhere[field]}, which the command lacks")
            elif not api_only.get(field, "").strip():
                found.append(f"{command}: {model}.{field} has no flag and no reason")
    return found


COMMANDS = dict(walk(build_parser()))


@pytest.mark.parametrize("command", sorted(c for c in COMMANDS if c not in NOT_MODELLED))
def test_every_flag_is_a_field_and_every_field_a_flag(command):
    assert problems_of(command, COMMANDS[command], HAND_WRITTEN.get(command)) == []


def test_the_modelled_commands_are_the_verbs():
    modelled = {c for c, p in COMMANDS.items() if getattr(p, "options_declared", ())}
    assert {"audit", "train", "train plan", "predict", "sweep", "report", "demo",
            "guards score", "label", "data add", "pool build", "mutate",
            "balance", "jaccard", "data list", "data pull", "export decontaminated",
            "export card", "audit apply", "judge-eval"} <= modelled


def test_the_unmodelled_list_holds_only_unmodelled_commands():
    for command in NOT_MODELLED:
        if command in COMMANDS:
            assert not getattr(COMMANDS[command], "options_declared", ()), command
    without = {c for c, p in COMMANDS.items() if not getattr(p, "options_declared", ())
               and any(a.option_strings and not set(a.option_strings) & SHARED
                       for a in p._actions)}
    assert without <= set(NOT_MODELLED), sorted(without - set(NOT_MODELLED))


def _toy(**flags: Flag) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_options(parser, "guarddiag.predict.options:PredictOptions", flags,
                elsewhere={"runs_dir": "--runs-dir"}, api_only={"pool_path": "a reason"})
    return parser


def test_the_check_finds_each_kind_of_drift():
    """The check above can fail: a flag naming no field, a field with no flag, a hand-written
    flag, choices that are not the field's, a default set on the flag."""
    parser = _toy(batch_sise=Flag())
    parser.add_argument("--jobs", type=int, default=3)
    found = "\n".join(problems_of("toy", parser))
    assert "has no field 'batch_sise'" in found
    assert "toy --jobs: written by hand" in found
    assert "PredictOptions.batch_size has no flag and no reason" in found
    assert "said to be set by --runs-dir, which the command lacks" in found
    parser = _toy(device=Flag(choices=("cpu", "cuda")))
    parser.set_defaults(device="cpu")
    assert problems_of("toy", parser)[0] == "toy --device: must leave its default to " \
        "guarddiag.predict.options:PredictOptions.device"


def test_help_states_the_models_default_not_a_copy():
    """The "(default …)" of a generated flag comes from the model at --help time."""
    predict = " ".join(COMMANDS["predict"].format_help().split())
    assert "--batch-size N prompts per scoring batch (sorted by length, padded per batch) " \
           "(default 64)" in predict
    demo = " ".join(COMMANDS["demo"].format_help().split())
    assert "--bootstrap B prompt-bootstrap resamples per score in the report (default 2000)" \
        in demo
