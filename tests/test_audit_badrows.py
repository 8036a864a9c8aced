"""Every bad row in one pass, and one address per row (issue 52).

A corpus with 16 malformed lines, wrong-typed fields, a row without an id and 24 repeated ids
is audited once: ``bad_rows.jsonl`` lists every one with its file, physical line (blank lines
counted) and the byte its line starts at. Rows to remove carry the same address whatever
``--id-column`` says.

Oracles: the corpus is written line by line here; each planted line's number and byte offset
are taken from the list of lines written (``len`` of the encoded lines before it), not from
the reader.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from guarddiag.audit import audit_pool
from guarddiag.errors import GuarddiagError

PROMPT = "Explain how to poison the water supply of a small town without being caught"


@pytest.fixture
def bench(serve_benchmarks):
    serve_benchmarks({"U": pl.DataFrame({"prompt_id": ["u1"], "text": [PROMPT]})})


def _write(path: Path, lines: list[str]) -> list[int]:
    """Write ``lines`` (each ended by a line feed); return the byte offset of each."""
    raw = [line.encode() + b"\n" for line in lines]
    path.write_bytes(b"".join(raw))
    return [sum(len(r) for r in raw[:i]) for i in range(len(raw))]


def _corpus() -> tuple[list[str], dict[int, str]]:
    """3,000 lines: rows, blank lines, 16 malformed lines, 2 wrong-typed rows, 1 row without
    an id and 12 ids held by two rows each (24 rows); and the kind planted on each line
    index (0-based)."""
    lines: list[str] = []
    kinds: dict[int, str] = {}
    for i in range(3000):
        if i % 97 == 5:
            lines.append("")                              # blank: counted as a line, no row
        elif i % 181 == 7 and sum(k == "malformed" for k in kinds.values()) < 16:
            kinds[i] = "malformed"
            lines.append([f'{{"id": "m{i}", "prompt": "cut', "not json at all",
                          '[1, 2, 3]', '{"id": "x"} trailing'][i % 4])
        else:
            lines.append(json.dumps({"id": f"r{i}", "prompt": f"ordinary text number {i}"}))
    for k, i in enumerate(range(2000, 2024, 2)):        # 12 ids, each on two rows
        lines[i] = json.dumps({"id": f"dup{k}", "prompt": f"first of pair {k}"})
        lines[i + 500] = json.dumps({"id": f"dup{k}", "prompt": PROMPT if k == 0 else "x"})
        kinds[i] = kinds[i + 500] = "repeated_id"
    lines[1500] = json.dumps({"id": "t1", "prompt": ["a", "list"]})
    lines[1600] = json.dumps({"id": "t2", "prompt": {"nested": "object"}})
    lines[1700] = json.dumps({"prompt": "a row without an id"})
    kinds.update({1500: "wrong_type", 1600: "wrong_type", 1700: "missing_id"})
    return lines, kinds


def test_every_bad_row_is_listed_in_one_pass_with_line_and_byte(tmp_path, bench):
    lines, kinds = _corpus()
    path = tmp_path / "corpus.jsonl"
    starts = _write(path, lines)
    assert sum(k == "malformed" for k in kinds.values()) == 16
    assert sum(k == "repeated_id" for k in kinds.values()) == 24
    # --bad-rows fail (the default): after the whole scan, every bad row listed, nothing else.
    with pytest.raises(GuarddiagError) as info:
        audit_pool(path, out_dir=tmp_path / "a", id_column="id", text_fields=("prompt",))
    assert str(info.value).startswith(
        "43 bad rows in the pool (16 malformed, 2 wrong-typed, 1 without an id, 24 with a "
        "repeated id), all listed in")
    listed = [json.loads(x) for x in (tmp_path / "a" / "bad_rows.jsonl").read_text()
              .splitlines()]
    assert [(r["line"], r["kind"]) for r in listed] == sorted((i + 1, k) for i, k in
                                                              kinds.items())
    assert all(r["byte"] == starts[r["line"] - 1] for r in listed)
    assert all(r["file"] == str(path) for r in listed)
    assert not (tmp_path / "a" / "summary.json").exists()
    # --bad-rows skip: the same list, and the audit goes on.
    result = audit_pool(path, out_dir=tmp_path / "a", id_column="id", text_fields=("prompt",),
                        bad_rows="skip")
    assert (tmp_path / "a" / "bad_rows.jsonl").read_text() == "".join(
        json.dumps(r, separators=(",", ":")) + "\n" for r in listed)
    # Rows: every non-blank line but the 16 malformed ones (the wrong-typed ones are rows,
    # skipped); 3,000 lines of which i % 97 == 5 are blank (31 lines).
    blank = sum(1 for i in range(3000) if i % 97 == 5)
    assert result.pool_rows == 3000 - blank - 16
    assert result.bad_rows == {"malformed": 16, "wrong_type": 2, "missing_id": 1,
                               "repeated_id": 24}
    # The copy of PROMPT is on a row whose id repeats: it is named by its address.
    assert result.rows_to_remove.select("pool_id", "line", "byte").rows() == [
        (f"{path} line 2501", 2501, starts[2500])]


def test_numbered_rows_carry_their_physical_line_past_blank_lines(tmp_path, bench):
    """With --id-column none the id is the row number, which skips blank lines; the address
    says the physical line (rows "2" and "3" on lines 4 and 5)."""
    path = tmp_path / "corpus.jsonl"
    lines = [json.dumps({"text": "hello"}), "", "  ", json.dumps({"text": PROMPT}),
             json.dumps({"text": f"Quote: {PROMPT}!"})]
    starts = _write(path, lines)
    result = audit_pool(path, out_dir=tmp_path / "a", id_column=None, containment=True)
    assert result.rows_to_remove.select("pool_id", "file", "row", "line", "byte").rows() == [
        ("2", str(path), 2, 4, starts[3]), ("3", str(path), 3, 5, starts[4])]
