"""The README's and the docs' commands stay true: the CI script runs the README's test command
verbatim, every `guarddiag …` line in their shell blocks parses with the real command-line
parser, and together they show every command."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from guarddiag.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = {"README.md": README} | {
    p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
    for p in sorted((ROOT / "docs").rglob("*.md"))}


def _shell_lines(text: str) -> list[str]:
    """Commands in ```bash blocks, continuation lines joined, comments dropped."""
    lines: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        lines += [ln.strip() for ln in joined.splitlines()
                  if ln.strip() and not ln.lstrip().startswith("#")]
    return lines


def _guarddiag_calls(text: str) -> list[list[str]]:
    calls = []
    for line in _shell_lines(text):
        for part in re.split(r"&&|\|\|", line):
            words = shlex.split(part, comments=True)
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words.pop(0)  # VAR=value prefixes
            if words and words[0] == "guarddiag":
                calls.append(words[1:])
    return calls


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_second():
    setup = README.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    commands = [ln for ln in re.search(r"```bash\n(.*?)```", setup, flags=re.S).group(1)
                .splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(commands) == 2
    assert commands[0].endswith("guarddiag demo")
    ci_script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci_script.splitlines()


CALLS = [(page, call) for page, text in PAGES.items() for call in _guarddiag_calls(text)]


def test_readme_and_docs_show_every_command():
    shown = {call[0] for _, call in CALLS}
    parser = build_parser()
    commands = set(parser._subparsers._group_actions[0].choices)
    assert commands - shown == set()


def test_readme_stays_short():
    """Issue 54: a newcomer reads the README in five minutes; the rest is in docs/."""
    assert len(README.splitlines()) <= 250


@pytest.mark.parametrize(("page", "argv"), CALLS,
                         ids=[f"{page} {' '.join(c[:2])}" for page, c in CALLS])
def test_readme_command_parses(page, argv):
    build_parser().parse_args(argv)  # SystemExit (status 2) on an unknown option or command
