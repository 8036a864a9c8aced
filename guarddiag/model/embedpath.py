"""The frozen encoder's numeric path on this machine, picked by a timed probe.

On the portable path (the default, :mod:`guarddiag.numerics`) the encoder runs float32 and there is
nothing to choose. On the native path a short timed probe picks bf16 only where it is at least
:data:`BF16_MIN_GAIN` times float32's rate here (bf16 without bf16 units is emulated, slower than
float32: docs/decisions.md#2026-12-06-the-encoders-numeric-paths), and remembers the answer per CPU,
torch version and encoder, so later runs start at once.

``guarddiag bench embed`` (:mod:`guarddiag.bench.embed`) times every path.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from guarddiag import numerics
from guarddiag.model.sizes import EncoderSpec
from guarddiag.model.states import FrozenEncoder, states_root

logger = logging.getLogger(__name__)

BF16_MIN_GAIN = 1.1
"""The native path takes bf16 only at this many times float32's measured rate."""
PROBE_FILE = "numeric-probe.json"
PROBE_TEXTS: tuple[str, ...] = tuple(
    f"{opening} {subject} {tail}" for opening in (
        "How do I", "Write a short story where someone tries to", "Explain whether it is legal to")
    for subject in ("bake sourdough bread", "pick the lock of my own front door",
                    "get the full lyrics of a famous song", "treat a sprained ankle at home")
    for tail in ("?", "without anyone noticing, step by step, with every detail spelled out?"))
"""24 prompts of 8-30 tokens, fixed: the probe's workload."""


@dataclass(frozen=True)
class ProbeResult:
    """prompts/s per numeric path on this machine's native kernels, and the one chosen."""

    per_s: dict[str, float]
    chosen: str
    cpu: str


def encoder_numeric(spec: EncoderSpec) -> str:
    """The numeric path the frozen encoder ``spec`` embeds with here: fp32 on the portable
    path; on the native path the probe's choice."""
    if numerics.active().mode == "portable":
        return "fp32"
    return probe_numeric_path(spec).chosen


def probe_numeric_path(spec: EncoderSpec, *, root: Path | None = None,
                       repeats: int = 2) -> ProbeResult:
    """Time float32 and bf16 on :data:`PROBE_TEXTS` (native kernels), once per CPU, torch
    version, thread count and encoder (timed at its full depth with the mean pooling, whatever
    ``spec``'s pooling); the answer is kept in ``<states>/numeric-probe.json``."""
    state = numerics.active()
    cpu = numerics.cpu_flags()
    key = hashlib.sha256(json.dumps([cpu, torch.__version__, state.tag, spec.checkpoint,
                                     spec.max_length, torch.get_num_threads()]
                                    + ([spec.template] if spec.template else [])).encode()
                         ).hexdigest()[:20]
    path = (root or states_root()) / PROBE_FILE
    known = _read_json(path)
    if key in known:
        hit = known[key]
        return ProbeResult({k: float(v) for k, v in dict(hit["per_s"]).items()},
                           str(hit["chosen"]), str(hit["cpu"]))
    per_s = {}
    for numeric in ("fp32", "bf16"):
        enc = FrozenEncoder.load(replace(spec, pooling="mean"), numeric=numeric)
        per_s[numeric] = embed_rate(enc, list(PROBE_TEXTS), batch_size=len(PROBE_TEXTS),
                               repeats=repeats)[0]
    chosen = "bf16" if per_s["bf16"] >= BF16_MIN_GAIN * per_s["fp32"] else "fp32"
    result = ProbeResult(per_s, chosen, cpu)
    known[key] = asdict(result)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
    tmp.replace(path)
    logger.info(f"encoder numeric path (native kernels, {cpu}): fp32 {per_s['fp32']:.0f}/s, "
                f"bf16 {per_s['bf16']:.0f}/s: {chosen} (kept in {path})")
    return result


def _read_json(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def embed_rate(enc: FrozenEncoder, texts: list[str], *, batch_size: int, repeats: int
          ) -> tuple[float, np.ndarray]:
    """(prompts/s, states) of the best of ``repeats`` timed passes after a warm-up batch."""
    embed = enc.embed
    embed(texts[:batch_size], batch_size=batch_size)
    best, states = math.inf, np.zeros(0)
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        states = embed(texts, batch_size=batch_size)
        best = min(best, time.perf_counter() - t0)
    return len(texts) / max(best, 1e-9), states
