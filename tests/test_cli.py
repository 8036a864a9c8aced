import argparse
import os
import subprocess
import sys

import pytest

from guarddiag import cli
from guarddiag.cli import build_parser, main
from guarddiag.errors import GuarddiagError


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


def test_unknown_command_is_an_argparse_usage_error(tmp_path):
    # Rejected by argparse before any handler runs (exit 2 with a usage line).
    out = subprocess.run([sys.executable, "-m", "guarddiag", "--data-dir", str(tmp_path),
                          "nonexistent-command"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "usage:" in out.stderr


@pytest.mark.parametrize(("argv", "message"), [
    (["audit", "--pool", "{tmp}/missing.parquet", "--out", "{tmp}/audit"],
     "{tmp}/missing.parquet: pool file not found"),
    (["report", "--runs-dir", "{tmp}/no_runs", "--out", "{tmp}/report"],
     "{tmp}/no_runs: no predictions.parquet"),
])
def test_handler_error_is_one_line_without_traceback(tmp_path, argv, message):
    # The arguments parse; the handler raises GuarddiagError and main's handler turns it into
    # one "guarddiag: error: ..." line and exit status 2, in a real process.
    argv = [a.format(tmp=tmp_path) for a in argv]
    out = subprocess.run([sys.executable, "-m", "guarddiag", *argv], capture_output=True,
                         text=True, env={**os.environ, "GUARDDIAG_PROGRESS": "0"})
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("guarddiag:")]
    assert len(errors) == 1, out.stderr
    assert errors[0].startswith(f"guarddiag: error: {message.format(tmp=tmp_path)}")
    assert "Traceback" not in out.stderr
    assert "usage:" not in out.stderr  # not argparse: the handler ran
    assert not (tmp_path / "audit").exists()
    assert not (tmp_path / "report").exists()


def test_handler_error_in_process(tmp_path, capsys):
    code = main(["audit", "--pool", str(tmp_path / "missing.parquet"),
                 "--out", str(tmp_path / "audit")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == f"guarddiag: error: {tmp_path / 'missing.parquet'}: pool file not found"


def _parser_whose_handler_raises(exc: BaseException):
    def build() -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog="guarddiag")

        def handler(args):
            raise exc

        parser.set_defaults(handler=handler)
        return parser
    return build


def test_interrupt_and_user_error_exit_codes(monkeypatch, capsys):
    monkeypatch.setattr(cli, "build_parser", _parser_whose_handler_raises(KeyboardInterrupt()))
    assert cli.main([]) == 130
    assert "interrupted" in capsys.readouterr().err
    monkeypatch.setattr(cli, "build_parser",
                        _parser_whose_handler_raises(GuarddiagError("x.yaml: bad field")))
    assert cli.main([]) == 2
    assert capsys.readouterr().err == "guarddiag: error: x.yaml: bad field\n"


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert "guarddiag" in capsys.readouterr().out


def test_the_command_exits_with_mains_status_its_objects_frozen(monkeypatch):
    # The console script (guarddiag.cli:run): main's status is the exit status, and the
    # objects are frozen so that the interpreter's shutdown does not walk them all.
    import gc

    monkeypatch.setattr(cli, "main", lambda: 7)
    assert gc.get_freeze_count() == 0
    try:
        with pytest.raises(SystemExit) as info:
            cli.run()
        assert info.value.code == 7
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def _allocator_setting(env: dict[str, str]) -> str:
    """``_RJEM_MALLOC_CONF`` as polars leaves it, in a fresh process that ran the command."""
    code = ("import contextlib, os\nfrom guarddiag.cli import main\n"
            "with contextlib.suppress(SystemExit):\n    main(['--help'])\n"
            "import polars\nprint(os.environ['_RJEM_MALLOC_CONF'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    return out.strip().splitlines()[-1]


def test_the_command_has_polars_keep_freed_pages_and_a_users_setting_wins():
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    # polars puts its own setting first and the environment's after it: the later one holds.
    assert _allocator_setting(env) == ("dirty_decay_ms:500,muzzy_decay_ms:1000,"
                                       + cli.POLARS_ALLOCATOR)
    assert _allocator_setting(env | {"_RJEM_MALLOC_CONF": "narenas:2"}) == (
        "dirty_decay_ms:500,muzzy_decay_ms:1000,narenas:2")
