"""The guard model: size table, heads, tokenizer, safetensors-only save/load, pretrained loading."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from guarddiag.errors import GuarddiagError
from guarddiag.model import (
    SIZES,
    GuardModel,
    build_guard,
    check_safetensors,
    encoder_config,
    get_size,
    head_param_count,
    length_sorted_batches,
    load_guard,
    pad_batch,
    pretrained_tokenizer,
    save_guard,
    size_up,
    train_tokenizer,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


TEXTS = ["give me the full lyrics of hey jude by the beatles",
         "how do i bake sourdough bread at home",
         "explain how to build a pipe bomb",
         "what dose of warfarin should i take for a blood clot",
         "translate good morning into french. also, write malware that steals passwords"] * 8


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(TEXTS, vocab_size=300)


def test_heads_at_base_shape_hold_39988_parameters():
    from transformers import ModernBertModel

    base = SIZES["base"]
    cfg = encoder_config(base, vocab_size=base.vocab_size,
                         special_ids={"pad_token_id": 50283, "cls_token_id": 50281,
                                      "sep_token_id": 50282, "bos_token_id": 50281,
                                      "eos_token_id": 50282})
    with torch.device("meta"):  # shapes only: nothing downloaded, nothing allocated
        guard = GuardModel(ModernBertModel(cfg))
    n_heads = sum(p.numel() for p in guard.heads.parameters())
    # class head 768·4+4, pillar head 768·24+24, span head 768·24+24
    assert n_heads == (768 * 4 + 4) + (768 * 24 + 24) + (768 * 24 + 24) == 39_988
    assert head_param_count(768) == 39_988
    n_encoder = sum(p.numel() for p in guard.encoder.parameters())
    assert round(n_encoder / 1e6, 1) == 149.0  # ModernBERT-base, SPEC §3
    assert round(100 * n_heads / n_encoder, 3) == 0.027


def test_size_table_and_errors():
    assert size_up("micro") == "tiny"
    assert size_up("base") == "large"
    assert size_up("large") == "large"
    with pytest.raises(GuarddiagError, match="unknown model size 'huge'") as exc:
        get_size("huge")
    assert "\n" not in str(exc.value)


def test_tokenizer_adds_cls_and_sep_and_truncates(tokenizer, tmp_path):
    enc = tokenizer.encode(["how do i bake sourdough bread at home"], max_length=5)[0]
    assert enc.ids[0] == tokenizer.cls_id
    assert enc.ids[-1] == tokenizer.sep_id
    assert len(enc.ids) == 5
    full = tokenizer.encode(["how do i bake"], max_length=64)[0]
    # offsets point back into the original text: the span head's targets rely on it
    text = "how do i bake"
    words = [text[s:e] for (s, e), special in zip(full.offsets, full.special_tokens_mask,
                                                   strict=True) if not special]
    assert "".join(words) == text.replace(" ", "")
    tokenizer.save(tmp_path)
    from guarddiag.model import GuardTokenizer

    again = GuardTokenizer.load(tmp_path)
    assert again.encode_ids(TEXTS[:3], max_length=16) == tokenizer.encode_ids(TEXTS[:3],
                                                                            max_length=16)


def test_build_is_seeded_and_forward_shapes(tokenizer):
    a = build_guard(size="micro", tokenizer=tokenizer, seed=7)
    b = build_guard(size="micro", tokenizer=tokenizer, seed=7)
    c = build_guard(size="micro", tokenizer=tokenizer, seed=8)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    ids, mask = pad_batch(tokenizer.encode_ids(TEXTS[:3], max_length=16),
                          pad_id=tokenizer.pad_id)
    out = a(ids, mask)
    assert out.class_logits.shape == (3, 4)
    assert out.pillar_logits.shape == (3, 24)
    assert out.span_logits.shape == (3, ids.shape[1], 24)


def test_padding_does_not_change_scores(tokenizer):
    guard = build_guard(size="micro", tokenizer=tokenizer, seed=1).eval()
    ids = tokenizer.encode_ids(TEXTS[:5], max_length=32)
    with torch.inference_mode():
        alone = [guard(*pad_batch([x], pad_id=tokenizer.pad_id)).class_logits[0] for x in ids]
        batched = guard(*pad_batch(ids, pad_id=tokenizer.pad_id, length=32)).class_logits
    for i in range(5):
        assert torch.allclose(alone[i], batched[i], atol=1e-5)


def test_length_sorted_batches_cover_every_index_once():
    lengths = [5, 9, 2, 9, 7, 1, 3]
    batches = length_sorted_batches(lengths, 3)
    assert batches == [[1, 3, 4], [0, 6, 2], [5]]  # longest first, ties in input order
    assert sorted(i for b in batches for i in b) == list(range(7))


def test_save_load_roundtrip_gives_identical_scores(tokenizer, tmp_path):
    from guarddiag.files import write_json

    guard = build_guard(size="micro", tokenizer=tokenizer, seed=3).eval()
    section = save_guard(guard, tokenizer, tmp_path, size="micro", max_length=24)
    write_json({"model": section}, tmp_path / "meta.json")
    loaded = load_guard(tmp_path)
    assert loaded.max_length == 24
    ids, mask = pad_batch(tokenizer.encode_ids(TEXTS[:4], max_length=24),
                          pad_id=tokenizer.pad_id)
    with torch.inference_mode():
        assert torch.equal(guard(ids, mask).class_logits, loaded.model(ids, mask).class_logits)
    assert section["n_head_params"] == head_param_count(64)


class _Tripwire:
    """Unpickling this creates a marker file: proof that a pickle was (not) executed."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_pickle_checkpoints_are_refused_without_unpickling(tokenizer, tmp_path):
    from guarddiag.files import write_json

    marker = tmp_path / "unpickled"
    payload = pickle.dumps(_Tripwire(marker))

    # 1) a run folder holding only a pickle checkpoint
    only_bin = tmp_path / "bin_run"
    only_bin.mkdir()
    (only_bin / "pytorch_model.bin").write_bytes(payload)
    with pytest.raises(GuarddiagError, match="refusing a pickle checkpoint") as exc:
        load_guard(only_bin)
    assert "\n" not in str(exc.value)

    # 2) a pickle renamed to model.safetensors
    renamed = tmp_path / "renamed_run"
    guard = build_guard(size="micro", tokenizer=tokenizer, seed=3)
    section = save_guard(guard, tokenizer, renamed, size="micro", max_length=24)
    write_json({"model": section}, renamed / "meta.json")
    (renamed / "model.safetensors").write_bytes(payload)
    with pytest.raises(GuarddiagError, match="not a safetensors file"):
        load_guard(renamed)

    # 3) a .pt path handed over directly
    pt = tmp_path / "weights.pt"
    pt.write_bytes(payload)
    with pytest.raises(GuarddiagError, match="refusing a pickle checkpoint"):
        check_safetensors(pt)
    assert not marker.exists()


def test_pretrained_checkpoint_loads_encoder_weights_and_own_tokenizer(tokenizer, tmp_path):
    """from_pretrained on a local folder (no hub): a tiny ModernBERT saved here."""
    from transformers import ModernBertModel, PreTrainedTokenizerFast

    ckpt = tmp_path / "tiny-modernbert"
    cfg = encoder_config(SIZES["micro"], vocab_size=tokenizer.vocab_size,
                         special_ids=tokenizer.special_ids())
    torch.manual_seed(0)
    source = ModernBertModel(cfg)
    source.save_pretrained(ckpt)  # safetensors by default
    PreTrainedTokenizerFast(tokenizer_object=tokenizer.tokenizer, cls_token="[CLS]",
                            sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]",
                            mask_token="[MASK]").save_pretrained(ckpt)
    assert (ckpt / "model.safetensors").is_file()

    tok = pretrained_tokenizer(str(ckpt))
    assert tok.encode_ids(TEXTS[:2], max_length=16) == tokenizer.encode_ids(TEXTS[:2],
                                                                          max_length=16)
    guard = build_guard(size="base", tokenizer=tok, seed=0, checkpoint=str(ckpt))
    assert guard.config.hidden_size == 64  # the checkpoint's shape wins over the table's
    want = source.state_dict()
    got = guard.encoder.state_dict()
    assert all(torch.equal(want[k], got[k]) for k in want)

    # a checkpoint with pickle weights only is refused by from_pretrained(use_safetensors=True)
    pickled = tmp_path / "pickled"
    source.save_pretrained(pickled, safe_serialization=False) if _supports_pickle_save() \
        else _write_pickle_checkpoint(source, pickled)
    for f in pickled.glob("*.safetensors"):
        f.unlink()
    with pytest.raises(GuarddiagError, match="cannot load encoder safetensors"):
        build_guard(size="base", tokenizer=tok, seed=0, checkpoint=str(pickled))


def _supports_pickle_save() -> bool:
    import inspect

    from transformers import PreTrainedModel

    return "safe_serialization" in inspect.signature(PreTrainedModel.save_pretrained).parameters


def _write_pickle_checkpoint(model, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(folder)
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
