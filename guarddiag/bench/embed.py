"""``guarddiag bench embed``: the frozen encoder's rate on every numeric path, and how far apart.

Every path is timed in a child process of its own (torch's kernels are fixed per process) on the
same prompts, and its states are compared with the portable path's float32 ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from guarddiag import numerics
from guarddiag.errors import GuarddiagError
from guarddiag.model.embedpath import BF16_MIN_GAIN, embed_rate
from guarddiag.model.sizes import EncoderSpec
from guarddiag.model.states import FrozenEncoder

PATHS = (("portable", "fp32"), ("native", "fp32"), ("native", "bf16"))
"""(kernels, numeric path) pairs ``bench embed`` times."""


@dataclass(frozen=True)
class EmbedBenchResult:
    """``guarddiag bench embed``: prompts/s of each path on the same prompts, and how far each
    path's states are from the portable path's."""

    checkpoint: str
    n_texts: int
    max_length: int
    batch_size: int
    threads: int
    cpu: str
    onednn_isa: str
    """``ONEDNN_MAX_CPU_ISA`` as the native children saw it (``default``: unset)."""
    per_s: dict[str, float]
    """``<kernels>/<numeric>`` → prompts/s (best of ``repeats`` timed passes)."""
    cosine_min: dict[str, float]
    max_abs_diff: dict[str, float]
    """Per path, against the portable float32 states."""
    native_choice: str
    """What the native path would embed with here (bf16 only at 1.1x float32's rate)."""

    def to_markdown(self, *, date: str, commit: str | None, load: Sequence[float]) -> str:
        """The result as the Markdown table the docs include (docs/measured/bench_embed.md):
        when, at which commit and on which CPU it was measured, then one row per path."""
        rows = [f"| {name} | {rate:.1f} | {self.cosine_min[name]:.6f} | "
                f"{self.max_abs_diff[name]:.2e} |" for name, rate in self.per_s.items()]
        return "\n".join([
            f"Measured {date} at commit `{commit or 'unknown'}` by `guarddiag bench embed`: "
            f"`{self.checkpoint}`, {self.n_texts} prompts, {self.max_length} tokens, batch "
            f"{self.batch_size}, {self.threads} torch thread(s), load average "
            + " ".join(f"{x:.2f}" for x in load) + f"; native passes with ONEDNN_MAX_CPU_ISA="
            f"{self.onednn_isa}.", "", f"CPU: {self.cpu}.", "",
            "| path | prompts/s | cosine min vs portable fp32 | max abs diff |",
            "|---|---:|---:|---:|", *rows, "",
            f"The native path would embed with {self.native_choice} here; the portable path "
            "(the default) with fp32.", ""])


def bench_embed(spec: EncoderSpec, texts: Sequence[str], *, batch_size: int = 64,
                repeats: int = 1, threads: int | None = None) -> EmbedBenchResult:
    """Embed ``texts`` with the frozen encoder ``spec`` on every path of :data:`PATHS`, each in
    a child process (no cache)."""
    per_s, states = {}, {}
    with tempfile.TemporaryDirectory(prefix="guarddiag-embed-") as tmp:
        job = Path(tmp) / "job.json"
        job.write_text(json.dumps({"encoder": spec.to_record(), "texts": list(texts),
                                   "batch_size": batch_size, "repeats": repeats,
                                   "threads": threads}))
        for kernels, numeric in PATHS:
            out = Path(tmp) / f"{kernels}-{numeric}.npy"
            cmd = [sys.executable, "-m", "guarddiag.bench.embed", str(job), numeric,
                   str(out)]
            proc = subprocess.run(cmd, env=numerics.child_env(kernels), capture_output=True,
                                  text=True, check=False)
            if proc.returncode != 0:
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                raise GuarddiagError(f"bench embed: the {kernels} {numeric} pass failed: {last}")
            name = f"{kernels}/{numeric}"
            per_s[name] = float(proc.stdout.strip().splitlines()[-1])
            states[name] = np.load(out)
    ref = states["portable/fp32"]
    cos, diff = {}, {}
    for name, s in states.items():
        norms = np.maximum(np.linalg.norm(ref, axis=1) * np.linalg.norm(s, axis=1), 1e-12)
        cos[name] = float(((ref * s).sum(1) / norms).min())
        diff[name] = float(np.abs(ref - s).max())
    choice = ("bf16" if per_s["native/bf16"] >= BF16_MIN_GAIN * per_s["native/fp32"]
              else "fp32")
    user = numerics.child_env("native").get("ONEDNN_MAX_CPU_ISA", "default")
    return EmbedBenchResult(spec.checkpoint, len(texts), spec.max_length, batch_size,
                            threads or os.cpu_count() or 1, numerics.cpu_flags(), user, per_s,
                            cos, diff, choice)


def _bench_child(job_file: str, numeric: str, out: str) -> None:
    """One timed pass of ``bench embed`` in this (child) process, whose kernels were pinned
    (or not) when ``-m`` imported the package: prints prompts/s."""
    job = json.loads(Path(job_file).read_text())
    if job["threads"]:
        torch.set_num_threads(int(job["threads"]))
    enc = FrozenEncoder.load(EncoderSpec.from_record(job["encoder"]), numeric=numeric)
    rate, states = embed_rate(enc, job["texts"], batch_size=job["batch_size"],
                         repeats=job["repeats"])
    np.save(out, states)
    print(rate)


if __name__ == "__main__":
    _bench_child(*sys.argv[1:4])
