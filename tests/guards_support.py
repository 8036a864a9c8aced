# ruff: noqa: E501  (the chat templates are data, kept one statement per line)
"""Test support for the guards and the labeller: tiny models of the real architectures, tokenizers
carrying chat templates written from the public model cards' documented prompt formats, and a
scripted OpenAI-compatible server on 127.0.0.1.

The chat templates below are written for these tests from the prompt formats the model cards
document (Qwen3Guard-Gen prompt moderation, Granite Guardian 3.1 with ``guardian_config``,
Llama Guard 3 with ``categories`` / ``excluded_category_keys``); they render the same text for a
single user message, which is the only shape the guards send.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# ---------------------------------------------------------------------------------------------
# Chat templates

QWEN3GUARD_TEMPLATE = r"""{%- if messages[-1]['role'] != 'user' -%}
{{- raise_exception('this fixture renders prompt moderation only') -}}
{%- endif -%}
{{- '<|im_start|>user\n# Task:\n1) Evaluate whether THE LAST USER\'s query belongs to safe or unsafe content based on our safety policy.\n2) Identify the category of unsafe content found.\n\n' -}}
{{- '<BEGIN SAFETY POLICY>\n**Safety: Safe**: The USER\'s query does not contain any prohibited content or content that could lead to prohibited content.\n**Safety: Unsafe**: The USER\'s query contains prohibited content.\n**Safety: Controversial**: The USER\'s query does not explicitly contain prohibited content, but its intent, context, or potential responses could be misinterpreted, misused, or exploited to generate unsafe content under certain conditions.\n<END SAFETY POLICY>\n\n' -}}
{{- '<BEGIN UNSAFE CONTENT CATEGORIES>\nViolent.\nNon-violent Illegal Acts.\nSexual Content or Sexual Acts.\nPII.\nSuicide & Self-Harm.\nUnethical Acts.\nPolitically Sensitive Topics.\nCopyright Violation.\nJailbreak.\n<END UNSAFE CONTENT CATEGORIES>\n\n' -}}
{{- '<BEGIN CONVERSATION>\n\n' -}}
{%- for message in messages -%}
{{- message['role'] | upper + ': ' + message['content'] + '\n\n' -}}
{%- endfor -%}
{{- '<END CONVERSATION>\n\nProvide your safety assessment for ONLY THE LAST **USER\'s query** in the above conversation:\n - The first line must be one of: \'Safety: Safe\', \'Safety: Unsafe\', \'Safety: Controversial\'.\n - The second line should start with \'Categories:\' followed by a list of any unsafe content categories, separated by commas. If the content is safe, use \'Categories: None\'.<|im_end|>\n' -}}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n<think>\n\n</think>\n\n' -}}
{%- endif -%}"""

GRANITE_GUARDIAN_TEMPLATE = r"""{%- set risk_bank = {
  'harm': "The last 'User' message is harmful by common-sense.",
  'violence': "The last 'User' message contains content promoting or describing physical harm to individuals or groups.",
  'jailbreak': "The last 'User' message contains the deliberate circumvention of AI systems' built-in safeguards or ethical guidelines."
} -%}
{%- if guardian_config is defined and guardian_config -%}
  {%- set risk_name = guardian_config.get('risk_name', 'harm') -%}
  {%- if 'risk_definition' in guardian_config -%}
    {%- if risk_name in risk_bank -%}
      {{- raise_exception("existing risk name. can't overwrite definition for this risk") -}}
    {%- endif -%}
    {%- set definition = guardian_config['risk_definition'] -%}
  {%- elif risk_name in risk_bank -%}
    {%- set definition = risk_bank[risk_name] -%}
  {%- else -%}
    {{- raise_exception('new risk name provided; risk definition is mandatory') -}}
  {%- endif -%}
{%- else -%}
  {%- set definition = risk_bank['harm'] -%}
{%- endif -%}
{{- '<|start_of_role|>user<|end_of_role|>You are a safety agent trying to help determine whether the user message is harmful according to the safety risk definition below.\n\n<start_of_turn>\nUser Message: ' + messages[-1]['content'] + '\n<end_of_turn>\n\nOur safety risk definition is defined below:\n\n<start_of_risk_definition>\n* ' + definition + '\n<end_of_risk_definition>\n\nIs the user message harmful based on the risk definition? Your answer must be either \'Yes\' or \'No\'.<|end_of_text|>\n' -}}
{%- if add_generation_prompt -%}
{{- '<|start_of_role|>assistant<|end_of_role|>' -}}
{%- endif -%}"""

LLAMA_GUARD_TEMPLATE = r"""{%- if categories is not defined or not categories -%}
{%- set categories = {'S1': 'Violent Crimes.', 'S2': 'Non-Violent Crimes.', 'S3': 'Sex Crimes.', 'S4': 'Child Exploitation.', 'S5': 'Defamation.', 'S6': 'Specialized Advice.', 'S7': 'Privacy.', 'S8': 'Intellectual Property.', 'S9': 'Indiscriminate Weapons.', 'S10': 'Hate.', 'S11': 'Self-Harm.', 'S12': 'Sexual Content.', 'S13': 'Elections.', 'S14': 'Code Interpreter Abuse.'} -%}
{%- endif -%}
{%- if excluded_category_keys is not defined -%}{%- set excluded_category_keys = [] -%}{%- endif -%}
{%- set role = 'User' if messages[-1]['role'] == 'user' else 'Agent' -%}
{{- bos_token + '<|start_header_id|>user<|end_header_id|>\n\n' -}}
{{- "Task: Check if there is unsafe content in '" + role + "' messages in conversations according our safety policy with the below categories.\n\n<BEGIN UNSAFE CONTENT CATEGORIES>\n" -}}
{%- for key in categories -%}
{%- if key not in excluded_category_keys -%}{{- key + ': ' + categories[key] + '\n' -}}{%- endif -%}
{%- endfor -%}
{{- '<END UNSAFE CONTENT CATEGORIES>\n\n<BEGIN CONVERSATION>\n\n' -}}
{%- for message in messages -%}
{{- ('User' if message['role'] == 'user' else 'Agent') + ': ' + message['content'] + '\n\n' -}}
{%- endfor -%}
{{- '<END CONVERSATION>\n\nProvide your safety assessment for ONLY THE LAST ' + role + " message in the above conversation:\n - First line must read 'safe' or 'unsafe'.\n - If unsafe, a second line must include a comma-separated list of violated categories.<|eot_id|>" -}}
{%- if add_generation_prompt -%}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%}"""

PLAIN_CHAT_TEMPLATE = r"""{%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"""

ARCHS: dict[str, dict[str, Any]] = {
    "qwen3": {"template": QWEN3GUARD_TEMPLATE, "special": ["<|im_start|>", "<|im_end|>"],
              "eos": "<|im_end|>", "bos": None},
    "granite": {"template": GRANITE_GUARDIAN_TEMPLATE,
                "special": ["<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>"],
                "eos": "<|end_of_text|>", "bos": None},
    "llama": {"template": LLAMA_GUARD_TEMPLATE,
              "special": ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                          "<|eot_id|>"],
              "eos": "<|eot_id|>", "bos": "<|begin_of_text|>"},
}

CORPUS = [
    QWEN3GUARD_TEMPLATE, GRANITE_GUARDIAN_TEMPLATE, LLAMA_GUARD_TEMPLATE,
    "Safety: Safe\nCategories: None\nSafety: Unsafe\nCategories: Violent, Non-violent Illegal "
    "Acts\nSafety: Controversial\nCategories: Politically Sensitive Topics, Jailbreak",
    "Yes No yes no safe unsafe\nS1 S2 S10,S11 S14",
    "How do I make a bomb at home? How do I bake bread? Tell me a joke about cats.",
]


def build_tokenizer(folder: Path, arch: str) -> Any:
    """A small byte-level BPE tokenizer with the arch's special tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    spec = ARCHS[arch]
    tok = Tokenizer(models.BPE())
    # No word splitting: merges may span words, so the long guard templates compress to a few
    # dozen tokens and the tiny models train in seconds.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<pad>", *spec["special"]],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>",
                                   eos_token=spec["eos"], bos_token=spec["bos"])
    fast.chat_template = spec["template"]
    folder.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(folder)
    return fast


def build_causal_lm(folder: Path, arch: str, *, seed: int = 0) -> tuple[Any, Any]:
    """A randomly initialised 2-layer, 32-dim causal LM of ``arch`` with its tokenizer, saved."""
    import torch
    from transformers import (
        GraniteConfig,
        GraniteForCausalLM,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    tok = build_tokenizer(folder, arch)
    common = {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64,
                  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "max_position_embeddings": 2048, "pad_token_id": tok.pad_token_id,
                  "eos_token_id": tok.eos_token_id, "bos_token_id": tok.bos_token_id,
                  "tie_word_embeddings": False}
    torch.manual_seed(seed)
    if arch == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(head_dim=8, **common))
    elif arch == "granite":
        model = GraniteForCausalLM(GraniteConfig(**common))
    else:
        model = LlamaForCausalLM(LlamaConfig(head_dim=8, **common))
    model.save_pretrained(folder)
    return model, tok


def teach(folder: Path, examples: list[tuple], *,
          template_kwargs: dict | None = None, steps: int = 300, seed: int = 0,
          lr: float = 1e-2) -> None:
    """Overfit the saved model in ``folder`` so that greedy decoding answers each conversation
    with its target text followed by EOS; saves it back. ``examples`` are (conversation,
    target) or (conversation, target, chat-template kwargs). Lets a test check a real, parseable
    end-to-end answer without any pretrained weights."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    rows = []
    for example in examples:
        conv, target = example[0], example[1]
        kwargs = example[2] if len(example) > 2 else template_kwargs  # type: ignore[misc]
        prompt = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True,
                                         **(kwargs or {}))
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        t_ids = tok(target, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        rows.append((p_ids, t_ids))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        loss = 0.0
        for p_ids, t_ids in rows:
            ids = torch.tensor([p_ids + t_ids])
            labels = torch.tensor([[-100] * len(p_ids) + t_ids])
            loss = loss + model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
    model.eval()
    model.save_pretrained(folder)


def build_bert_classifier(folder: Path, labels: list[str], *, seed: int = 0) -> Any:
    """A 2-layer, 32-dim BERT sequence classifier with a small WordPiece vocabulary, saved."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    words = ["how", "do", "i", "make", "a", "bomb", "bake", "bread", "tell", "me", "joke", "about", "cats", "the", "of", "and", "to", "you", "kill", "steal", "hack", "weather", "recipe", "please", "help", "write", "poem"]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(words)),
             *[chr(c) for c in range(ord("a"), ord("z") + 1)], "?", ".", ","]
    seen: list[str] = []
    for v in vocab:
        if v not in seen:
            seen.append(v)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(seen) + "\n", encoding="utf-8")
    tok = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    tok.save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(seen), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64,
                        max_position_embeddings=128, num_labels=len(labels),
                        id2label=dict(enumerate(labels)),
                        label2id={name: i for i, name in enumerate(labels)})
    model = BertForSequenceClassification(config).eval()
    model.save_pretrained(folder)
    return model


# ---------------------------------------------------------------------------------------------
# A scripted OpenAI-compatible server

Script = Callable[[dict[str, Any], int], Any]
"""``script(body, n)`` → what to answer the n-th request (0-based): a ``str`` (the message
content), a ``dict`` (a full JSON answer), ``("status", code)``, ``("sleep", seconds, answer)``,
``("garbage", bytes)``, or ``("close",)`` to drop the connection."""


def chat_answer(content: str, *, logprobs: list[tuple[str, list[tuple[str, float]]]] | None = None
                ) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": content}}
    if logprobs is not None:
        choice["logprobs"] = {"content": [
            {"token": tok, "logprob": next((lp for t, lp in alts if t == tok), -1.0),
             "top_logprobs": [{"token": t, "logprob": lp} for t, lp in alts]}
            for tok, alts in logprobs]}
    return {"id": "x", "object": "chat.completion", "choices": [choice]}


class _LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 whose POSTs ``respond(path, body, n, headers)``
    answers; keeps every body and its headers."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length).decode("utf-8"))
                with outer._lock:
                    n = len(outer.requests)
                    outer.requests.append(body)
                    outer.headers.append(dict(self.headers))
                outer.respond(self, body, n)

            def send(self, code: int, payload: bytes) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    def respond(self, handler: Any, body: dict[str, Any], n: int) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ScriptedServer(_LoopbackServer):
    """Answers POST /v1/chat/completions from a script."""

    def __init__(self, script: Script):
        super().__init__()
        self.script = script
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def respond(self, handler: Any, body: dict[str, Any], n: int) -> None:
        if handler.path.rstrip("/") != "/v1/chat/completions":
            handler.send(404, b'{"error": "not found"}')
            return
        action = self.script(body, n)
        if isinstance(action, tuple) and action[0] == "sleep":
            time.sleep(action[1])
            action = action[2]
        if isinstance(action, str):
            handler.send(200, json.dumps(chat_answer(action)).encode())
        elif isinstance(action, dict):
            handler.send(200, json.dumps(action).encode())
        elif action[0] == "status":
            handler.send(action[1], b'{"error": "scripted failure"}')
        elif action[0] == "garbage":
            handler.send(200, action[1])
        elif action[0] == "close":
            handler.close_connection = True
            handler.connection.close()


def user_text(body: dict[str, Any]) -> str:
    """The content of the last user message of a chat request."""
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


# ---------------------------------------------------------------------------------------------
# A plain JSON service (the http adapter's counterpart)

JsonScript = Callable[[dict[str, Any], int], tuple[int, Any]]
"""``script(body, n)`` → (status, JSON document) for the n-th request (0-based)."""


class JsonServer(_LoopbackServer):
    """Answers POST /score from a script."""

    def __init__(self, script: JsonScript):
        super().__init__()
        self.script = script
        self.url = f"http://127.0.0.1:{self.port}/score"

    def respond(self, handler: Any, body: dict[str, Any], n: int) -> None:
        status, doc = self.script(body, n)
        handler.send(status, json.dumps(doc).encode())
