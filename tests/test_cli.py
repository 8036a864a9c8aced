import subprocess
import sys

import pytest

from guarddiag.cli import build_parser, main


def _subcommands(parser):
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            yield from action.choices.items()


def test_every_subcommand_has_help(capsys):
    parser = build_parser()
    seen = 0
    stack = [((), parser)]
    while stack:
        path, p = stack.pop()
        for name, child in _subcommands(p):
            assert child.description, f"{' '.join((*path, name))} has no description"
            for action in child._actions:
                if action.option_strings and action.dest != "help":
                    assert action.help, f"{' '.join((*path, name))} {action.dest} has no help"
            stack.append(((*path, name), child))
            seen += 1
    assert seen >= 1


def test_user_error_is_one_line_without_traceback(tmp_path):
    # A GuarddiagError from a handler becomes "guarddiag: error: ..." and exit status 2.
    out = subprocess.run([sys.executable, "-m", "guarddiag", "--data-dir", str(tmp_path),
                          "nonexistent-command"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert "guarddiag" in capsys.readouterr().out
