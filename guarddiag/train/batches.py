"""Tokenised rows, span-token targets, padded batches and the seeded epoch order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from guarddiag.model.guard import pad_batch
from guarddiag.model.sizes import N_PILLARS
from guarddiag.model.tokenizer import GuardTokenizer
from guarddiag.train.rows import LabelledRows


@dataclass(frozen=True)
class EncodedRows:
    ids: list[list[int]]
    span_tokens: list[np.ndarray | None]
    """Per row, a bool mask over its tokens: the tokens inside the harmful span."""

    @property
    def lengths(self) -> list[int]:
        return [len(x) for x in self.ids]


def encode_rows(tokenizer: GuardTokenizer, rows: LabelledRows, *,
                max_length: int) -> EncodedRows:
    encodings = tokenizer.encode(rows.texts, max_length=max_length)
    ids: list[list[int]] = []
    span_tokens: list[np.ndarray | None] = []
    for enc, span in zip(encodings, rows.spans, strict=True):
        ids.append(list(enc.ids))
        if span is None:
            span_tokens.append(None)
            continue
        s, e = span
        special = np.array(enc.special_tokens_mask, dtype=bool)
        offsets = np.array(enc.offsets, dtype=np.int64).reshape(-1, 2)
        inside = (offsets[:, 0] < e) & (offsets[:, 1] > s) & ~special
        span_tokens.append(inside)
    return EncodedRows(ids, span_tokens)


def collate(idx: Sequence[int], enc: EncodedRows, rows: LabelledRows, *, pad_id: int
            ) -> dict[str, torch.Tensor]:
    ids, mask = pad_batch([enc.ids[i] for i in idx], pad_id=pad_id)
    width = ids.shape[1]
    span_targets = torch.zeros((len(idx), width, N_PILLARS))
    span_mask = torch.zeros((len(idx), width), dtype=torch.bool)
    for r, i in enumerate(idx):
        inside = enc.span_tokens[i]
        if inside is None:
            continue
        n = len(enc.ids[i])
        special = torch.zeros(n, dtype=torch.bool)
        special[0] = True
        special[n - 1] = True
        span_mask[r, :n] = ~special
        tags = torch.from_numpy(rows.pillars[i])
        span_targets[r, :n][torch.from_numpy(inside)] = tags
    return {"input_ids": ids, "attention_mask": mask,
            "classes": torch.from_numpy(rows.classes[list(idx)]),
            "pillars": torch.from_numpy(rows.pillars[list(idx)]),
            "span_targets": span_targets, "span_mask": span_mask}


def epoch_batches(lengths: Sequence[int], *, batch_size: int, seed: int,
                  epoch: int) -> list[list[int]]:
    """A seeded shuffle for one epoch, with similar lengths grouped to cut padding: shuffle,
    sort within windows of 50 batches, cut into batches, shuffle the batch order."""
    gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
    perm = torch.randperm(len(lengths), generator=gen).tolist()
    window = batch_size * 50
    batches: list[list[int]] = []
    for start in range(0, len(perm), window):
        chunk = sorted(perm[start:start + window], key=lambda i: lengths[i])
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    order = torch.randperm(len(batches), generator=gen).tolist()
    return [batches[i] for i in order]

