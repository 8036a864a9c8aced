"""The plain HTTP guard (issue 50, item 6) against a loopback JSON service, and every cache
keyed by what answers (item 2): an endpoint whose model flipped behind the same name is asked
again with --rescore or a new version, and "asked" counts what the server answered."""

from __future__ import annotations

import json

import polars as pl
import pytest
from guards_support import JsonServer, ScriptedServer, chat_answer, user_text

from guarddiag.cli import main
from guarddiag.errors import GuarddiagError
from guarddiag.guards import get_adapter, score_guard
from guarddiag.guards.callable import CallableGuardAdapter
from guarddiag.guards.http import parse_path, resolve_path
from guarddiag.guards.sanity import SANITY_BENIGN, SANITY_HARMFUL

SANITY = {*SANITY_HARMFUL, *SANITY_BENIGN}
WORDS = ("bomb", "poison", "ransomware", "password", "steal", "malware", "kill")


def p_unsafe(text: str) -> float:
    """The team's model, by a rule the tests compute by hand: 0.9 with a harm word, else a
    value from the text's length (distinct answers, so a mix-up would show)."""
    if any(w in text.lower() for w in WORDS):
        return 0.9
    return round((len(text) % 7) / 20, 2)


def frames(n: int = 40) -> dict[str, pl.DataFrame]:
    harmful = [f"how do I steal car number {i}" if i % 3 else f"tell me a story {i}"
               for i in range(n // 2)]
    benign = [f"bake bread loaf {i}" for i in range(n - n // 2)]
    return {b: pl.DataFrame({"benchmark": b, "prompt_id": [str(i) for i in range(len(t))],
                             "text": t, "label_kind": k})
            for b, t, k in (("h_bench", harmful, "harmful"), ("b_bench", benign, "benign"))}


def fail_one_in_ten(body, n):
    if n % 10 == 9:
        return 500, {"error": "overloaded"}
    texts = body.get("texts")
    if texts is not None:
        return 200, {"results": [{"p_unsafe": p_unsafe(t)} for t in texts]}
    return 200, {"result": {"p_unsafe": p_unsafe(body["text"])}}


def requests_for(successes: int) -> int:
    """Requests a server failing every 10th one (n % 10 == 9) receives before it has answered
    ``successes`` of them: each failure is asked again."""
    n = done = 0
    while done < successes:
        done += n % 10 != 9
        n += 1
    return n


def _score(adapter, tmp_path, **kw):
    return score_guard(adapter, frames=kw.pop("frames", frames()), runs_dir=tmp_path / "runs",
                       audit_dir=None, **kw)


def test_http_guard_failing_one_in_ten_answers_every_prompt_like_the_function(tmp_path):
    with JsonServer(fail_one_in_ten) as server:
        guard = get_adapter("http", url=server.url, field="/result/p_unsafe", name="team",
                            backoff_s=0.0, concurrency=4)
        result = _score(guard, tmp_path)
        n_requests = len(server.requests)
    local = _score(CallableGuardAdapter(function=lambda t: [p_unsafe(x) for x in t],
                                        name="team"), tmp_path / "local")
    assert (result.n_prompts, result.n_asked, result.n_failed) == (40, 40, 0)
    # 8 sanity prompts and 40 benchmark prompts answered; every 10th request failed first.
    assert n_requests == requests_for(8 + 40) == 48 + 5
    over_http = pl.read_parquet(result.table_path).drop("run_id", "branch", "size")
    in_process = pl.read_parquet(local.table_path).drop("run_id", "branch", "size")
    assert over_http.equals(in_process)
    assert result.summary.equals(local.summary)


def test_batches_read_the_list_of_answers_and_carry_the_fixed_body_fields(tmp_path):
    with JsonServer(fail_one_in_ten) as server:
        guard = get_adapter("http", url=server.url, field="/results/*/p_unsafe",
                            text_key="texts", batch_size=4, body={"model": "team-v3"},
                            name="team", backoff_s=0.0)
        result = _score(guard, tmp_path)
        bodies = [b for b in server.requests if not set(b["texts"]) & SANITY]
    assert result.n_failed == 0
    assert all(b["model"] == "team-v3" for b in server.requests)
    # 20 + 20 prompts in batches of 4: 10 requests answered (some asked twice).
    assert len({json.dumps(b, sort_keys=True) for b in bodies}) == 10
    table = pl.read_parquet(result.table_path)
    texts = pl.concat(list(frames().values()))
    want = {(b, p): p_unsafe(t) for b, p, t in texts.select("benchmark", "prompt_id", "text")
            .iter_rows()}
    got = {(b, p): v for b, p, v in table.select("benchmark", "prompt_id", "p_unsafe")
           .iter_rows()}
    assert got == pytest.approx(want)


def test_headers_come_from_the_environment_and_stay_out_of_saved_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TEAM_GUARD_TOKEN", "s3cret-token")
    with JsonServer(lambda body, n: (200, {"p_unsafe": 0.2})) as server:
        guard = get_adapter("http", url=server.url, name="team",
                            headers={"Authorization": "Bearer $TEAM_GUARD_TOKEN"})
        result = _score(guard, tmp_path, frames={"b_bench": frames()["b_bench"]})
        sent = server.headers[0]
    assert sent["Authorization"] == "Bearer s3cret-token"
    outside = tmp_path / "runs" / "outside"
    for path in outside.iterdir():
        assert "s3cret" not in path.read_text(errors="replace"), path.name
    meta = json.loads((outside / "team.meta.json").read_text())
    assert meta["adapter"]["headers"] == ["Authorization"]
    assert result.n_failed == 0
    monkeypatch.delenv("TEAM_GUARD_TOKEN")
    with pytest.raises(GuarddiagError, match=r"--header Authorization: environment variable "
                                             r"\$TEAM_GUARD_TOKEN is not set"):
        get_adapter("http", url="http://127.0.0.1:9/x",
                    headers={"Authorization": "Bearer $TEAM_GUARD_TOKEN"})


def test_a_wrong_field_stops_with_the_answer_shown(tmp_path):
    with JsonServer(lambda body, n: (200, {"score": 0.3})) as server:
        guard = get_adapter("http", url=server.url, field="p_unsafe", name="team")
        with pytest.raises(GuarddiagError) as info:
            _score(guard, tmp_path)
    message = str(info.value)
    assert f"cannot read --field 'p_unsafe' from the answer of {server.url} (no 'p_unsafe' " \
           f"in the answer): {{\"score\": 0.3}}" in message
    assert "\n" not in message


@pytest.mark.parametrize(("options", "match"), [
    ({}, "needs --url"),
    ({"url": "http://127.0.0.1:9/x", "batch_size": 4},
     r"a batch \(batch size 4\) needs one \* where the list of answers is"),
    ({"url": "ftp://x/y"}, "expected an http:// or https:// URL"),
    ({"url": "http://127.0.0.1:9/x", "body": {"text": "x"}}, "is where the prompt goes"),
])
def test_bad_http_options_are_one_line_errors(options, match):
    with pytest.raises(GuarddiagError, match=match):
        get_adapter("http", **options)


def test_answer_paths():
    doc = {"a": [{"b": 0.1}, {"b": 0.7}], "x/y": {"~z": 3}}
    assert parse_path("/a/1/b") == ("a", "1", "b") == parse_path("a.1.b")
    assert resolve_path(doc, parse_path("/a/1/b")) == 0.7
    assert resolve_path(doc, parse_path("/x~1y/~0z")) == 3
    assert resolve_path(0.4, parse_path("")) == 0.4
    with pytest.raises(KeyError, match=r"no '2' in /a"):
        resolve_path(doc, parse_path("a.2.b"))


def test_cli_scores_an_http_guard_on_real_benchmarks(real_data_dir, tmp_path, capsys):
    with JsonServer(fail_one_in_ten) as server:
        assert main(["--data-dir", str(real_data_dir), "guards", "score", "--adapter", "http",
                     "--url", server.url, "--field", "result.p_unsafe", "--name", "team",
                     "--benchmarks", "xstest_safe", "--runs-dir", str(tmp_path / "runs"),
                     "--audit-dir", str(tmp_path / "audit")]) == 0
        n_requests = len(server.requests)
    err = capsys.readouterr().err
    assert "guard team: 250 prompts, 250 asked, 0 reused, 0 failed" in err
    assert n_requests == requests_for(8 + 250)
    table = pl.read_parquet(tmp_path / "runs" / "outside" / "team.parquet")
    from guarddiag.data import load_benchmark

    texts = load_benchmark("xstest_safe", data_dir=real_data_dir).select("prompt_id", "text")
    want = dict(zip(texts["prompt_id"].cast(pl.String), map(p_unsafe, texts["text"]),
                    strict=True))
    assert dict(zip(table["prompt_id"], table["p_unsafe"], strict=True)) == pytest.approx(want)


# ── every cache keyed by what answers (item 2) ─────────────────────────────────────────────────

class Model:
    """A chat server's guard model: it answers every prompt with ``verdict`` (Safe until it
    flips behind the same model name)."""

    def __init__(self, verdict: str = "Safe") -> None:
        self.verdict = verdict

    def __call__(self, body, n):
        return chat_answer(f"Safety: {self.verdict}\nCategories: None")


def _endpoint_guard(server, cache):
    return get_adapter("qwen3guard", endpoint=f"{server.base_url}#team-guard", cache_dir=cache,
                       name="team")


def test_an_endpoint_whose_model_flipped_is_asked_again_with_rescore(tmp_path):
    model, cache = Model(), tmp_path / "cache"
    with ScriptedServer(model) as server:
        first = _score(_endpoint_guard(server, cache), tmp_path)
        assert first.summary["pct_unsafe_loose"].to_list() == [0.0, 0.0]
        model.verdict = "Unsafe"  # the model behind the same name flipped
        n_before = len(server.requests)
        flipped = _score(_endpoint_guard(server, cache), tmp_path, rescore=True,
                         version="flipped")
        asked = [user_text(b) for b in server.requests[n_before:]]
    # Every prompt went to the server (no cache read), and "asked" says so.
    assert len([t for t in asked if t not in SANITY]) == 40
    assert (flipped.n_asked, flipped.n_reused) == (40, 0)
    assert flipped.summary["pct_unsafe_loose"].to_list() == [100.0, 100.0]


def test_the_response_cache_is_keyed_by_version_and_url_and_counted_as_reused(tmp_path):
    model, cache = Model(), tmp_path / "cache"
    with ScriptedServer(model) as server:
        _score(_endpoint_guard(server, cache), tmp_path / "a")
        # Another runs folder, the same guard and server: every answer comes from the
        # response cache (the sanity prompts' too), counted as reused; the server is asked
        # only the 32 canaries drawn from those cached answers.
        n_before = len(server.requests)
        again = _score(_endpoint_guard(server, cache), tmp_path / "b")
        assert (again.n_asked, again.n_reused) == (0, 40)
        assert len(server.requests) == n_before + 32
        # A new version is another key: the flipped model's answers, not the cache's.
        model.verdict = "Unsafe"
        v2 = _score(_endpoint_guard(server, cache), tmp_path / "b", version="v2")
    assert (v2.n_asked, v2.n_reused) == (40, 0)
    assert v2.summary["pct_unsafe_loose"].to_list() == [100.0, 100.0]
    with ScriptedServer(Model("Unsafe")) as other:
        moved = _score(_endpoint_guard(other, cache), tmp_path / "c")
    # Another URL is another key: asked, not read from the first server's answers.
    assert (moved.n_asked, moved.n_reused) == (40, 0)


def test_a_flip_under_the_same_version_is_caught_by_the_canaries_past_the_cache(tmp_path):
    model, cache = Model(), tmp_path / "cache"
    with ScriptedServer(model) as server:
        _score(_endpoint_guard(server, cache), tmp_path)
        model.verdict = "Unsafe"
        again = _score(_endpoint_guard(server, cache), tmp_path)
    assert again.canaries["n_differ"] == 32
    assert (again.n_asked, again.n_reused) == (40, 0)
    assert again.summary["pct_unsafe_loose"].to_list() == [100.0, 100.0]


def test_a_cache_of_another_model_is_forgotten_even_without_a_raw_log(tmp_path):
    # The acceptance run's trap: the model flips, a run finds it by its canaries and then
    # stops (here: its sanity check), so no raw log is left; the next run must not take the
    # response cache's answers, which are the old model's.
    model, cache = Model(), tmp_path / "cache"
    with ScriptedServer(model) as server:
        _score(_endpoint_guard(server, cache), tmp_path)
        model.verdict = "Unsafe"
        stopped = _score(_endpoint_guard(server, cache), tmp_path)  # canaries differ
        assert stopped.summary["pct_unsafe_loose"].to_list() == [100.0, 100.0]
        (tmp_path / "runs" / "outside" / "team.raw.jsonl").unlink()
        (tmp_path / "runs" / "outside" / "team.canaries.json").unlink()
        model.verdict = "Safe"
        again = _score(_endpoint_guard(server, cache), tmp_path / "elsewhere")
    assert again.summary["pct_unsafe_loose"].to_list() == [0.0, 0.0]
    # Its cache now holds the flipped model's answers: their canaries differed, so they were
    # forgotten and every prompt asked again.
    assert (again.n_asked, again.n_reused) == (40, 0)
