"""``guarddiag bench --record FILE``: what a bench prints, kept for the docs under a dated
header; a bench that fails leaves no file (an older one stays as it was)."""

from __future__ import annotations

import datetime
from pathlib import Path

from guarddiag.cli import main
from guarddiag.files import git_sha

REPO = Path(__file__).resolve().parents[1]


def test_a_recorded_bench_keeps_what_it_printed_under_a_dated_header(tmp_path, capsys):
    out = tmp_path / "measured" / "bench_reproduce.md"
    example = str(REPO / "reports" / "example")
    assert main(["bench", "--record", str(out), "reproduce", "--example", example]) == 0
    printed = capsys.readouterr().out
    assert printed.endswith(f"wrote {out}\n")
    text = out.read_text(encoding="utf-8")
    header, body = text.split("\n\n", 1)
    assert header.startswith(f"Measured {datetime.date.today().isoformat()} at commit "
                             f"`{git_sha() or 'unknown'}` by `guarddiag bench reproduce "
                             f"--example {example}` in ")
    assert " core(s), load average " in header
    assert "CPU " in header
    assert "avx2" in header
    # the body is exactly what the terminal showed, before the "wrote" line
    assert body == "```text\n" + printed.removesuffix(f"wrote {out}\n").rstrip() + "\n```\n"
    assert "encoder states of the pinned prompts: same bytes" in body


def test_a_failed_bench_leaves_the_old_record_alone(tmp_path, capsys):
    out = tmp_path / "bench_reproduce.md"
    out.write_text("an older measurement\n", encoding="utf-8")
    assert main(["bench", "--record", str(out), "reproduce", "--example",
                 str(tmp_path / "nowhere")]) == 2
    assert "guarddiag: error: " in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "an older measurement\n"
