"""The guard's tokenizer: a `tokenizers` BPE trained offline on the pool, or a checkpoint's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypedDict

from tokenizers import Tokenizer

from guarddiag.errors import GuarddiagError
from guarddiag.files import write_text
from guarddiag.runs import TOKENIZER_FILE

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class SpecialIds(TypedDict):
    """The special-token ids a ModernBertConfig takes as keyword arguments."""

    pad_token_id: int
    cls_token_id: int
    sep_token_id: int
    bos_token_id: int
    eos_token_id: int


class GuardTokenizer:
    """A `tokenizers` tokenizer that adds [CLS] … [SEP] and knows its special ids."""

    def __init__(self, tokenizer: Tokenizer, *, cls_token: str = "[CLS]",
                 sep_token: str = "[SEP]", pad_token: str = "[PAD]"):
        ids = {}
        for role, token in (("cls", cls_token), ("sep", sep_token), ("pad", pad_token)):
            tid = tokenizer.token_to_id(token)
            if tid is None:
                raise GuarddiagError(f"tokenizer: special token {token!r} ({role}) is missing")
            ids[role] = tid
        self.tokenizer = tokenizer
        self.cls_id: int = ids["cls"]
        self.sep_id: int = ids["sep"]
        self.pad_id: int = ids["pad"]
        self.tokens = {"cls": cls_token, "sep": sep_token, "pad": pad_token}

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def special_ids(self) -> SpecialIds:
        # ModernBERT uses [CLS] as BOS and [SEP] as EOS.
        return {"pad_token_id": self.pad_id, "cls_token_id": self.cls_id,
                "sep_token_id": self.sep_id, "bos_token_id": self.cls_id,
                "eos_token_id": self.sep_id}

    def encode(self, texts: Sequence[str], *, max_length: int) -> list[Any]:
        """`tokenizers` encodings, truncated to ``max_length`` tokens including [CLS]/[SEP]."""
        tok = self.tokenizer
        tok.enable_truncation(max_length=max_length)
        tok.no_padding()
        encodings = tok.encode_batch(list(texts))
        for enc in encodings[:1]:
            if not enc.ids or enc.ids[0] != self.cls_id:
                raise GuarddiagError("tokenizer: encodings must start with the [CLS] token "
                                     "(its post-processor does not add it)")
        return encodings

    def encode_ids(self, texts: Sequence[str], *, max_length: int) -> list[list[int]]:
        return [enc.ids for enc in self.encode(texts, max_length=max_length)]

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / TOKENIZER_FILE
        write_text(self.tokenizer.to_str(), path)
        return path

    def describe(self) -> dict[str, Any]:
        return {"tokens": dict(self.tokens), "vocab_size": self.vocab_size}

    @classmethod
    def load(cls, folder: str | Path, *, tokens: dict[str, str] | None = None
             ) -> GuardTokenizer:
        path = Path(folder) / TOKENIZER_FILE
        if not path.is_file():
            raise GuarddiagError(f"{path}: tokenizer file not found")
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust library raises plain Exceptions
            raise GuarddiagError(f"{path}: cannot read tokenizer ({exc})") from None
        tokens = tokens or {}
        return cls(tok, cls_token=tokens.get("cls", "[CLS]"),
                   sep_token=tokens.get("sep", "[SEP]"), pad_token=tokens.get("pad", "[PAD]"))


ALPHABET_LIMIT = 1000
"""Characters a trained tokenizer keeps as single-character tokens (the most frequent ones)."""


def _alphabet(tok: Tokenizer, texts: list[str], *, limit: int) -> list[str]:
    """The ``limit`` most frequent characters of the words the trainer will see, ties broken
    by the character. The trainer's own cut (``limit_alphabet``) breaks ties between equally
    frequent characters in hash-map order, which changes from process to process: with more
    than ``limit`` distinct characters (the multilingual train copies bring CJK, Devanagari,
    Arabic …) the vocabulary, and so every weight, differed between two runs. Handing it exactly
    this set makes the cut a no-op; below the limit the set is every character, as before."""
    counts: Counter[str] = Counter()
    normalizer, pre_tokenizer = tok.normalizer, tok.pre_tokenizer
    if normalizer is None or pre_tokenizer is None:  # pragma: no cover - set by the caller
        raise GuarddiagError("tokenizer: the alphabet needs the normaliser and pre-tokeniser")
    for text in texts:
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)):
            counts.update(word)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [char for char, _ in ranked[:limit]]


def train_tokenizer(texts: Iterable[str], *, vocab_size: int) -> GuardTokenizer:
    """Train a lower-cased BPE tokenizer offline on ``texts`` (the pool's training split).

    NFKC + lower-casing keeps the vocabulary small; the normalisers keep character offsets
    aligned with the original text, which the span head's token targets need.
    """
    from tokenizers import models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    # BertNormalizer spaces out CJK characters, so Chinese/Japanese prompts split per
    # character instead of becoming one unknown "word".
    tok.normalizer = normalizers.Sequence([
        normalizers.NFKC(),
        normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                   strip_accents=False, lowercase=True)])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    texts = list(texts)
    alphabet = _alphabet(tok, texts, limit=ALPHABET_LIMIT)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2,
                                  special_tokens=list(SPECIAL_TOKENS), limit_alphabet=len(alphabet),
                                  initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return GuardTokenizer(tok)


def pretrained_tokenizer(checkpoint: str) -> GuardTokenizer:
    """The checkpoint's own (fast) tokenizer, via transformers."""
    tok, hf = _checkpoint_tokenizer(checkpoint)
    return GuardTokenizer(tok, cls_token=hf.cls_token or "[CLS]",
                          sep_token=hf.sep_token or "[SEP]", pad_token=hf.pad_token or "[PAD]")


def _checkpoint_tokenizer(checkpoint: str) -> tuple[Tokenizer, Any]:
    """The checkpoint's fast tokenizer as a fresh `tokenizers` object, and the transformers
    tokenizer it came from (for its special tokens)."""
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(checkpoint)
    except (OSError, ValueError) as exc:
        raise GuarddiagError(f"checkpoint {checkpoint}: cannot load its tokenizer "
                             f"({str(exc).splitlines()[0]})") from None
    backend = getattr(hf, "backend_tokenizer", None)
    if backend is None:
        raise GuarddiagError(f"checkpoint {checkpoint}: needs a fast (tokenizer.json) tokenizer")
    # Round-trip through JSON so truncation settings never leak into the checkpoint's object.
    return Tokenizer.from_str(backend.to_str()), hf


PROMPT_MARK = "{prompt}"
"""Where the prompt goes in a frozen size's ``template``."""


def template_tokenizer(checkpoint: str, template: str) -> GuardTokenizer:
    """The checkpoint's own tokenizer with every prompt wrapped in ``template`` (text around one
    ``{prompt}``, e.g. a chat model's user turn): the wrapper's tokens are added around the
    prompt's as fixed ids and counted in ``max_length``, so truncation cuts the prompt, never the
    wrapper. Its first and last tokens play [CLS] and [SEP]."""
    from tokenizers import processors

    if template.count(PROMPT_MARK) != 1:
        raise GuarddiagError(f"prompt template {template!r}: expected one {PROMPT_MARK}")
    tok, hf = _checkpoint_tokenizer(checkpoint)
    tok.no_truncation()  # the template's own parts are never cut
    before, after = template.split(PROMPT_MARK)
    pre, post = (tok.encode(part, add_special_tokens=False).ids if part else []
                 for part in (before, after))
    if not pre or not post:
        raise GuarddiagError(f"prompt template {template!r}: needs text before and after "
                             f"{PROMPT_MARK}")
    names = [str(tok.id_to_token(i)) for i in pre + post]
    tok.post_processor = processors.TemplateProcessing(
        single=[*names[:len(pre)], "$A", *names[len(pre):]],
        special_tokens=sorted(set(zip(names, pre + post, strict=True))))
    return GuardTokenizer(tok, cls_token=names[0], sep_token=names[-1],
                          pad_token=str(hf.pad_token or hf.eos_token or tok.id_to_token(0)))

