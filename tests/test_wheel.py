"""Only the product in the wheel: build it as pip does and read what it holds."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEV_TOOLS = {"pytest", "_pytest", "mutmut", "hypothesis", "ruff", "mypy", "deptry"}


def _imported_roots(source: bytes) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.slow
def test_the_wheel_holds_the_package_and_its_specs_and_no_developer_tooling(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=600)
    (wheel,) = tmp_path.glob("guarddiag-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        modules = {n: zf.read(n) for n in names if n.endswith(".py")}
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} \
        == {"guarddiag"}
    # Every module of the package and nothing else: no tests, no developer tools beside it.
    assert set(modules) == {p.relative_to(ROOT).as_posix()
                            for p in (ROOT / "guarddiag").rglob("*.py")}
    assert not any("devtools" in n or "/tests/" in n for n in names)
    # The specs a user's run reads travel inside the package.
    for folder in ("branches", "data_manifests"):
        specs = {f"guarddiag/_specs/{p.relative_to(ROOT).as_posix()}"
                 for p in (ROOT / folder).rglob("*") if p.is_file()}
        assert specs, folder
        assert specs <= names, folder
    assert "guarddiag/report/results.schema.json" in names
    # No shipped module imports a developer tool.
    dev = {n: sorted(_imported_roots(src) & DEV_TOOLS) for n, src in modules.items()}
    assert {n: d for n, d in dev.items() if d} == {}
