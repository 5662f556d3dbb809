"""onecat.LLM on the CPU backend (no GPU): many requests at once give what onecat.Model gives
each alone, step() and cancel(), the prefix cache's statistics, and the ValueErrors."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

import onecat
from conftest import tiny_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory, "llama-fp8", "--arch", "llama", "--format", "fp8")


def prompts():
    return [[(7 * i + 3 * j) % 128 for j in range(n)] for i, n in enumerate([1, 5, 17, 33, 64, 70, 3, 48, 90])]


def test_generate_equals_each_prompt_alone(checkpoint):
    alone = onecat.Model(str(checkpoint), device="cpu", kv_cache_tokens=512)
    want = [alone.generate(p, 12, stop_ids=[]) for p in prompts()]
    llm = onecat.LLM(str(checkpoint), device="cpu", max_num_seqs=4, max_num_batched_tokens=48, kv_cache_tokens=2048)
    assert llm.generate(prompts(), 12, temperature=0, stop_ids=[]) == want
    assert llm.idle
    stats = llm.stats
    assert stats["generated_tokens"] == 12 * len(want)
    assert stats["prompt_tokens"] == sum(len(p) for p in prompts())
    # Sampled: request i draws from seed + i, as a lone request with that seed does.
    sampled = llm.generate(prompts(), 6, temperature=0.9, top_k=20, seed=40, stop_ids=[])
    assert sampled == [alone.generate(p, 6, temperature=0.9, top_k=20, seed=40 + i, stop_ids=[])
                       for i, p in enumerate(prompts())]
    # The second run found the first run's full prompt pages in the prefix cache.
    assert llm.stats["prefix_hit_tokens"] > 0


def test_device_sampling_gives_the_host_samplers_tokens(checkpoint):
    # On the CPU backend sampling where the logits are is cpu::sample too: the same tokens,
    # and the stats say which steps took that path.
    kwargs = dict(max_num_seqs=4, max_num_batched_tokens=48, kv_cache_tokens=2048)
    host = onecat.LLM(str(checkpoint), device="cpu", device_sampling=False, **kwargs)
    device = onecat.LLM(str(checkpoint), device="cpu", **kwargs)  # device_sampling is the default
    settings = dict(temperature=0.8, top_p=0.9, repetition_penalty=1.1, seed=7, stop_ids=[])
    assert device.generate(prompts(), 8, **settings) == host.generate(prompts(), 8, **settings)
    assert host.stats["device_sampled_steps"] == 0
    assert 0 < device.stats["device_sampled_steps"] == device.stats["sampled_steps"]


def test_step_and_cancel(checkpoint):
    llm = onecat.LLM(str(checkpoint), device="cpu", max_num_seqs=2, max_num_batched_tokens=32, kv_cache_tokens=512)
    a = llm.add_request(list(range(1, 41)), 30, temperature=0, stop_ids=[])
    b = llm.add_request(list(range(5, 15)), 3, temperature=0, stop_ids=[])
    seen = {a: [], b: []}
    finished = {}
    for _ in range(4):
        for out in llm.step():
            assert isinstance(out, onecat.StepOutput)
            seen[out.id].append(out.token)
            if out.finished:
                finished[out.id] = out.finish_reason
    assert finished.get(b) == "length" and len(seen[b]) == 3
    assert llm.cancel(a) and not llm.cancel(a) and not llm.cancel(999)
    outs = llm.step()
    assert [(o.id, o.token, o.finished, o.finish_reason) for o in outs] == [(a, -1, True, "cancelled")]
    assert llm.idle
    assert llm.stats["pages"] == 512 // 16
    # Left out (None), the limits are the device's: on the CPU a pool of 8192 tokens.
    assert onecat.LLM(str(checkpoint), device="cpu").stats["pages"] == 8192 // 16


def test_value_errors(checkpoint):
    with pytest.raises(ValueError, match="tpu"):
        onecat.LLM(str(checkpoint), device="tpu")
    with pytest.raises(ValueError, match="device cuda"):  # a pool sized from memory is a GPU's
        onecat.LLM(str(checkpoint), device="cpu", kv_cache_tokens=0)
    llm = onecat.LLM(str(checkpoint), device="cpu", kv_cache_tokens=64)
    with pytest.raises(ValueError, match="no tokens"):
        llm.add_request([], 4)
    with pytest.raises(ValueError, match="vocabulary"):
        llm.add_request([1, 500], 4)
    with pytest.raises(ValueError, match="top_p"):
        llm.add_request([1, 2], 4, top_p=2.0)
    with pytest.raises(ValueError, match="KV cache"):
        llm.generate([[1, 2], [3] * 60], 10)
    assert llm.idle  # the first prompt of the refused batch was taken back


def test_step_outputs_carry_logprobs(checkpoint):
    llm = onecat.LLM(str(checkpoint), device="cpu", kv_cache_tokens=512)
    prompt = list(range(3, 30))
    a = llm.add_request(prompt, 4, temperature=0, stop_ids=[], logprobs=3)
    b = llm.add_request(prompt, 4, temperature=0, stop_ids=[])
    got = {a: [], b: []}
    while not llm.idle:
        for out in llm.step():
            got[out.id].append(out)
    assert [o.token for o in got[a]] == [o.token for o in got[b]]
    alone = onecat.Model(str(checkpoint), device="cpu", kv_cache_tokens=512)
    history = list(prompt)
    for out in got[a]:
        # The raw logits' log-softmax, from the model alone (float64 here, float32 in the sampler).
        row = alone.logits(history, last_only=True)[-1].astype(np.float64)
        logp = row - row.max() - np.log(np.exp(row - row.max()).sum())
        best = np.argsort(-logp, kind="stable")[:3]
        assert out.logprob == pytest.approx(logp[out.token], abs=1e-4)
        assert [i for i, _ in out.top_logprobs] == best.tolist()
        assert [lp for _, lp in out.top_logprobs] == pytest.approx(logp[best].tolist(), abs=1e-4)
        assert out.token == best[0]  # greedy
        history.append(out.token)
    assert all(o.logprob == 0 and o.top_logprobs == [] for o in got[b])
    with pytest.raises(ValueError, match="logprobs"):
        llm.add_request(prompt, 2, logprobs=21)


def test_stream_yields_each_token_as_made(checkpoint):
    llm = onecat.LLM(str(checkpoint), device="cpu", max_num_seqs=3, max_num_batched_tokens=40, kv_cache_tokens=1024)
    ps = prompts()[:5]
    want = llm.generate(ps, 7, temperature=0.8, seed=11, stop_ids=[])
    seen = [[] for _ in ps]
    finished = []
    for i, out in llm.stream(ps, 7, temperature=0.8, seed=11, stop_ids=[]):
        assert not seen[i] or not seen[i][-1][1], "nothing after a prompt's finished output"
        seen[i].append((out.token, out.finished))
        if out.finished:
            finished.append((i, out.finish_reason))
    assert [[t for t, _ in s] for s in seen] == want
    assert sorted(finished) == [(i, "length") for i in range(len(ps))]
    # Leaving early cancels the rest: every page is back, and the LLM takes new work.
    it = llm.stream(ps, 50, temperature=0, stop_ids=[])
    first = [next(it) for _ in range(3)]
    assert len(first) == 3
    it.close()
    assert llm.idle
    assert llm.stats["available_pages"] == llm.stats["pages"]
    alone = onecat.Model(str(checkpoint), device="cpu", kv_cache_tokens=512)
    assert llm.generate([ps[3]], 3, temperature=0, stop_ids=[]) == [alone.generate(ps[3], 3, stop_ids=[])]
    with pytest.raises(ValueError, match="vocabulary"):
        list(llm.stream([[1, 2], [1, 999]], 4))
    assert llm.idle


def test_speculative_greedy_equals_plain(checkpoint):
    motif = [11, 40, 7, 93, 2]
    ps = [motif * 4, [5, 6] * 9, list(range(20, 60))]
    plain = onecat.LLM(str(checkpoint), device="cpu", kv_cache_tokens=1024).generate(ps, 16, temperature=0, stop_ids=[])
    llm = onecat.LLM(str(checkpoint), device="cpu", kv_cache_tokens=1024, num_speculative_tokens=4)
    assert llm.generate(ps, 16, temperature=0, stop_ids=[]) == plain
    stats = llm.stats
    assert 0 < stats["accepted_tokens"] <= stats["draft_tokens"]
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        onecat.LLM(str(checkpoint), device="cpu", num_speculative_tokens=99)
    # The n-gram drafter's match lengths: only 3-grams here, the same output, fewer drafts.
    three = onecat.LLM(str(checkpoint), device="cpu", kv_cache_tokens=1024, num_speculative_tokens=4, prompt_lookup_min=3,
                       prompt_lookup_max=3)
    assert three.generate(ps, 16, temperature=0, stop_ids=[]) == plain
    assert 0 < three.stats["draft_tokens"] <= stats["draft_tokens"]
    with pytest.raises(ValueError, match="prompt-lookup-min"):
        onecat.LLM(str(checkpoint), device="cpu", num_speculative_tokens=4, prompt_lookup_min=3, prompt_lookup_max=2)


def test_speculative_sampled_and_draft_model(checkpoint):
    motif = [11, 40, 7, 93, 2]
    ps = [motif * 4, [5, 6] * 9, list(range(20, 60))]
    # Sampled requests get n-gram drafts too, verified with the plain sampler's own draws: the
    # same tokens, seed for seed.
    plain = onecat.LLM(str(checkpoint), device="cpu", kv_cache_tokens=1024).generate(ps, 16, temperature=0.5, seed=3, stop_ids=[])
    llm = onecat.LLM(str(checkpoint), device="cpu", kv_cache_tokens=1024, num_draft_tokens=4)
    assert llm.generate(ps, 16, temperature=0.5, seed=3, stop_ids=[]) == plain
    assert llm.stats["draft_rounds"] > 0
    assert len(llm.stats["drafted_at"]) == 4
    # The checkpoint as its own draft model: every draft accepted, the greedy output unchanged.
    greedy = onecat.LLM(str(checkpoint), device="cpu", kv_cache_tokens=1024).generate(ps, 16, temperature=0, stop_ids=[])
    selfdraft = onecat.LLM(str(checkpoint), device="cpu", kv_cache_tokens=1024, num_draft_tokens=3,
                           speculative=f"draft:{checkpoint}")
    assert selfdraft.generate(ps, 16, temperature=0, stop_ids=[]) == greedy
    stats = selfdraft.stats
    assert stats["draft_tokens"] > 0 and stats["accepted_tokens"] == stats["draft_tokens"]
    # draft_p_min 1: no draft of a random model is that sure, so none is proposed.
    sure = onecat.LLM(str(checkpoint), device="cpu", kv_cache_tokens=1024, num_draft_tokens=3, speculative=f"draft:{checkpoint}",
                      draft_p_min=1.0)
    assert sure.generate(ps, 16, temperature=0, stop_ids=[]) == greedy and sure.stats["draft_tokens"] == 0
    with pytest.raises(ValueError, match="speculative must be ngram or draft:DIR"):
        onecat.LLM(str(checkpoint), device="cpu", num_draft_tokens=2, speculative="eagle")
    with pytest.raises(ValueError, match="other name"):
        onecat.LLM(str(checkpoint), device="cpu", num_draft_tokens=2, num_speculative_tokens=3)


def test_prompt_logprobs_logit_bias_and_draft_tokens_per_request(checkpoint):
    llm = onecat.LLM(str(checkpoint), device="cpu", max_num_batched_tokens=16, kv_cache_tokens=512, num_speculative_tokens=3)
    prompt = [(5 * j + 2) % 128 for j in range(40)]
    a = llm.add_request(prompt, 1, temperature=0, stop_ids=[], prompt_logprobs=2)
    outs = []
    while not llm.idle:
        outs += llm.step()
    first = next(o for o in outs if o.id == a)
    # Prompt tokens 1 … P−1, each under the model's own logits of the tokens before it.
    assert len(first.prompt_logprobs) == len(prompt) - 1
    rows = onecat.Model(str(checkpoint), device="cpu", kv_cache_tokens=512).logits(prompt).astype(np.float64)
    for i, (logprob, top) in enumerate(first.prompt_logprobs):
        row = rows[i]
        logp = row - row.max() - np.log(np.exp(row - row.max()).sum())
        assert logprob == pytest.approx(logp[prompt[i + 1]], abs=1e-4)
        assert [t for t, _ in top] == np.argsort(-logp, kind="stable")[:2].tolist()
    # logit_bias: +100 forces a token under greedy, −100 bans the one greedy picks.
    greedy = llm.generate([prompt], 3, temperature=0, stop_ids=[])[0]
    forced = llm.add_request(prompt, 3, temperature=0, stop_ids=[], logit_bias={77: 100.0})
    banned = llm.add_request(prompt, 1, temperature=0, stop_ids=[], logit_bias={greedy[0]: -100.0})
    got = {forced: [], banned: []}
    while not llm.idle:
        for o in llm.step():
            got[o.id].append(o.token)
    assert got[forced] == [77, 77, 77]
    assert got[banned][0] != greedy[0]
    # num_draft_tokens=0 turns speculation off for one request: the same greedy tokens.
    plain = llm.add_request(prompt, 3, temperature=0, stop_ids=[], num_draft_tokens=0)
    tokens = []
    while not llm.idle:
        tokens += [o.token for o in llm.step() if o.id == plain]
    assert tokens == greedy
    with pytest.raises(ValueError, match="logit_bias"):
        llm.add_request(prompt, 2, logit_bias={100000: 1.0})


def test_fp8_kv_cache(checkpoint):
    # kv_cache_dtype: the pool's elements. fp8 rounds K and V, so greedy outputs may differ from
    # fp16's; each is deterministic, and an unknown type is one ValueError naming the choices.
    kwargs = dict(max_num_seqs=4, max_num_batched_tokens=48, kv_cache_tokens=2048)
    for dtype in ("fp8", "fp8_e5m2"):
        settings = dict(temperature=0.0, stop_ids=[])
        first = onecat.LLM(str(checkpoint), device="cpu", kv_cache_dtype=dtype, **kwargs).generate(prompts(), 6, **settings)
        again = onecat.LLM(str(checkpoint), device="cpu", kv_cache_dtype=dtype, **kwargs).generate(prompts(), 6, **settings)
        assert first == again
        assert all(len(ids) == 6 for ids in first)
    with pytest.raises(ValueError, match="fp8_e4m3"):
        onecat.LLM(str(checkpoint), device="cpu", kv_cache_dtype="int4", **kwargs)


def test_max_model_len(checkpoint):
    # max_model_len: the checkpoint's positions by default; a request past it is one ValueError,
    # one at it runs; more than the positions is refused when the LLM is made.
    kwargs = dict(max_num_seqs=4, max_num_batched_tokens=48, kv_cache_tokens=2048)
    llm = onecat.LLM(str(checkpoint), device="cpu", **kwargs)
    positions = llm.max_model_len
    assert positions > 0
    with pytest.raises(ValueError, match="max_position_embeddings"):
        onecat.LLM(str(checkpoint), device="cpu", max_model_len=positions + 1, **kwargs)
    short = onecat.LLM(str(checkpoint), device="cpu", max_model_len=20, **kwargs)
    assert short.max_model_len == 20
    prompt = prompts()[2][:15]
    with pytest.raises(ValueError, match="max_model_len 20"):
        short.add_request(prompt, 7)
    assert [len(ids) for ids in short.generate([prompt], 6, temperature=0.0, stop_ids=[])] == [6]


@pytest.fixture(scope="module")
def text_checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory, "llama-f16-tokenizer", "--arch", "llama", "--format", "f16", "--tokenizer")


def test_default_sampling_params_are_the_checkpoints(text_checkpoint, tmp_path):
    """generate(prompts) without SamplingParams samples as generation_config.json recommends
    (vLLM's get_default_sampling_params); generation_config="vllm" keeps SamplingParams' own."""
    llm = onecat.LLM(str(text_checkpoint), device="cpu", kv_cache_tokens=1024)
    assert llm.generation_defaults == {}  # the tiny checkpoint's file names only its special ids
    assert llm.get_default_sampling_params() == onecat.SamplingParams()
    (tmp_path / "generation_config.json").write_text(json.dumps(
        {"temperature": 0.0, "top_k": 20, "top_p": 0.95, "top_k_unused": 1, "max_new_tokens": 9}))
    tuned = onecat.LLM(str(text_checkpoint), device="cpu", kv_cache_tokens=1024, generation_config=str(tmp_path))
    assert tuned.generation_defaults == {"temperature": 0.0, "top_k": 20, "top_p": 0.95, "max_tokens": 9}
    params = tuned.get_default_sampling_params()
    assert (params.temperature, params.top_k, params.top_p, params.max_tokens) == (0.0, 20, 0.95, 9)
    # temperature 0 from the file: greedy, the seed does not matter; 9 tokens unless EOS comes first.
    first = tuned.generate("the cat sat on")[0].outputs[0]
    assert 1 <= len(first.token_ids) <= 9
    assert tuned.generate("the cat sat on")[0].outputs[0].token_ids == first.token_ids
    want = llm.generate([onecat.Tokenizer(str(text_checkpoint)).encode("the cat sat on")], 9, temperature=0)[0]
    assert first.token_ids == want[:len(first.token_ids)]
    assert onecat.LLM(str(text_checkpoint), device="cpu", kv_cache_tokens=64,
                      generation_config="vllm").generation_defaults == {}
    with pytest.raises(ValueError, match="auto, vllm or a directory"):
        onecat.LLM(str(text_checkpoint), device="cpu", generation_config=str(tmp_path / "none"))


def test_generate_with_sampling_params_gives_text(text_checkpoint):
    """vLLM's surface: generate(prompts, SamplingParams) → RequestOutputs whose samples are the
    id-level generate()'s tokens, their text decoded, cut at stop strings; n samples draw with
    seed + j; logprobs per token."""
    llm = onecat.LLM(str(text_checkpoint), device="cpu", kv_cache_tokens=1024)
    tok = onecat.Tokenizer(str(text_checkpoint))
    texts = ["the cat sat on", "a b c"]
    ids = [tok.encode(t) for t in texts]
    want = llm.generate(ids, 12, temperature=0, stop_ids=[])
    greedy = onecat.SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)
    outs = llm.generate(texts, greedy)
    for out, text, prompt_ids, tokens in zip(outs, texts, ids, want):
        assert out.prompt == text and out.prompt_token_ids == prompt_ids
        (sample,) = out.outputs
        assert sample.token_ids == tokens and sample.finish_reason == "length"
        # The tiny model's vocabulary is larger than its tokenizer's: those ids decode to nothing.
        assert sample.text == tok.decode([t for t in tokens if t < tok.vocab_size], skip_special_tokens=True)
    assert [o.outputs[0].token_ids for o in llm.generate(ids, greedy)] == want
    assert llm.generate(texts[0], greedy)[0].outputs[0].token_ids == want[0]
    # A stop string ends the sample at its first occurrence (left out of the text unless asked).
    full = outs[0].outputs[0].text
    assert len(full) >= 6
    stop = full[4:6]
    at = full.find(stop)
    for include in (False, True):
        cut = llm.generate(texts[0], onecat.SamplingParams(temperature=0, max_tokens=12, ignore_eos=True, stop=stop,
                                                           include_stop_str_in_output=include))[0].outputs[0]
        assert cut.text == full[:at + (len(stop) if include else 0)]
        assert cut.finish_reason == "stop" and cut.stop_reason == stop
        assert cut.token_ids == want[0][:len(cut.token_ids)] and len(cut.token_ids) < 12
        # With speculative decoding a step may give several tokens: the same cut.
        spec = onecat.LLM(str(text_checkpoint), device="cpu", kv_cache_tokens=1024, num_draft_tokens=4)
        again = spec.generate(texts[0], onecat.SamplingParams(temperature=0, max_tokens=12, ignore_eos=True, stop=stop,
                                                              include_stop_str_in_output=include))[0].outputs[0]
        assert (again.text, again.token_ids) == (cut.text, cut.token_ids) and spec.idle
    assert llm.idle
    # n samples of one prompt: sample j draws with seed + j, as request j of the id-level call does.
    sampled = llm.generate(texts[0], onecat.SamplingParams(n=3, temperature=0.9, seed=5, max_tokens=6,
                                                           ignore_eos=True, logprobs=2))[0].outputs
    assert [s.index for s in sampled] == [0, 1, 2]
    assert [s.token_ids for s in sampled] == llm.generate([ids[0]] * 3, 6, temperature=0.9, seed=5, stop_ids=[])
    for s in sampled:
        assert len(s.logprobs) == 6 and all(t in lp and len(lp) >= 2 for t, lp in zip(s.token_ids, s.logprobs))
    with pytest.raises(ValueError, match="n must be"):
        onecat.SamplingParams(n=0)
    with pytest.raises(ValueError, match="SamplingParams for 2 prompts"):
        llm.generate(texts, [greedy] * 3)
    assert llm.idle


def test_structured_outputs(text_checkpoint):
    """SamplingParams(structured_outputs=StructuredOutputsParams(...)), vLLM's: every sample ends
    ("stop") once its text is whole, and that text is what it was asked for — an instance of the
    schema (properties in its order), one of the choices, a JSON object — the tiny random model's
    own choices under the grammar (tests/grammar_test.cpp checks the grammar itself)."""
    llm = onecat.LLM(str(text_checkpoint), device="cpu", kv_cache_tokens=2048)
    schema = {"type": "object", "properties": {"b": {"type": "boolean"}, "a": {"enum": ["x", "y"]}},
              "required": ["b", "a"]}
    for given in (schema, json.dumps(schema)):
        params = onecat.SamplingParams(n=4, temperature=1.0, seed=3, max_tokens=80,
                                       structured_outputs=onecat.StructuredOutputsParams(json=given))
        for sample in llm.generate("json:", params)[0].outputs:
            assert sample.finish_reason == "stop", sample.text
            value = json.loads(sample.text)
            assert list(value) == ["b", "a"] and isinstance(value["b"], bool) and value["a"] in ("x", "y")
    choices = ["red", "green", "blue"]
    params = onecat.SamplingParams(n=5, temperature=1.0, seed=1, max_tokens=20,
                                   structured_outputs=onecat.StructuredOutputsParams(choice=choices))
    assert {s.text for s in llm.generate("colour:", params)[0].outputs} <= set(choices)
    params = onecat.SamplingParams(n=3, temperature=1.0, seed=2, max_tokens=120,
                                   structured_outputs=onecat.StructuredOutputsParams(json_object=True))
    for sample in llm.generate("obj:", params)[0].outputs:
        if sample.finish_reason == "stop":
            assert isinstance(json.loads(sample.text), dict)
    params = onecat.SamplingParams(n=4, temperature=1.0, seed=4, max_tokens=20,
                                   structured_outputs=onecat.StructuredOutputsParams(regex=r"[a-c]{2}-\d{1,3}"))
    for sample in llm.generate("id:", params)[0].outputs:
        assert re.fullmatch(r"[a-c]{2}-\d{1,3}", sample.text), sample.text
    with pytest.raises(ValueError, match="one of json, regex, choice and json_object"):
        onecat.StructuredOutputsParams()
    bad = onecat.SamplingParams(structured_outputs=onecat.StructuredOutputsParams(json={"type": "string",
                                                                                        "pattern": "(a)\\1"}))
    with pytest.raises(ValueError, match="backreference"):
        llm.generate("x", bad)
    assert llm.idle


def test_chat_renders_the_template_then_generates(tmp_path_factory):
    """vLLM's LLM.chat: the checkpoint's template (or one given) renders each conversation, the
    reply is generate()'s on those prompt ids."""
    ckpt = tiny_checkpoint(tmp_path_factory, "llama-f16-chat", "--arch", "llama", "--format", "f16", "--tokenizer",
                           "--chat-template")
    llm = onecat.LLM(str(ckpt), device="cpu", kv_cache_tokens=1024)
    tok = onecat.Tokenizer(str(ckpt))
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the cat sat on"}]
    greedy = onecat.SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
    out = llm.chat(messages, greedy)
    assert len(out) == 1
    rendered = onecat.apply_chat_template(messages, model=str(ckpt), add_generation_prompt=True)
    assert out[0].prompt == rendered
    assert out[0].prompt_token_ids == tok.encode(rendered, False)
    want = llm.generate([tok.encode(rendered, False)], 8, temperature=0, stop_ids=[])[0]
    assert out[0].outputs[0].token_ids == want
    # Several conversations, a template of one's own, its variables.
    both = llm.chat([messages, messages[1:]], greedy, chat_template="{% for m in messages %}{{ m.content }}|"
                    "{% endfor %}{% if loud %}!{% endif %}", chat_template_kwargs={"loud": True})
    assert [o.prompt for o in both] == ["be brief|the cat sat on|!", "the cat sat on|!"]
    with pytest.raises(ValueError, match="conversation"):
        llm.chat([], greedy)


def test_vllm_constructor_keywords(text_checkpoint):
    """onecat.LLM takes vLLM's constructor: model=, dtype, tensor_parallel_size, trust_remote_code,
    quantization (the checkpoint's own), enforce_eager, enable_prefix_caching and seed (seeds of
    SamplingParams(seed=None) reproducible); what onecat cannot do is a clear error."""
    kw = dict(device="cpu", kv_cache_tokens=1024)
    params = onecat.SamplingParams(temperature=1.0, max_tokens=8, ignore_eos=True)
    texts = []
    for _ in range(2):
        llm = onecat.LLM(model=str(text_checkpoint), dtype="half", tensor_parallel_size=1, trust_remote_code=True,
                         quantization="none", enforce_eager=True, enable_prefix_caching=False, seed=3, **kw)
        texts.append([o.outputs[0].token_ids for o in llm.generate(["the cat", "the cat"], params)])
    assert texts[0] == texts[1]  # the same seeds in the same order
    assert texts[0][0] != texts[0][1]  # one request's seed is not the next's
    assert llm.stats["prefix_hit_tokens"] == 0  # the repeated prompt found no cache
    assert onecat.LLM(path=str(text_checkpoint), **kw).model_path == str(text_checkpoint)
    for bad, match in ((dict(dtype="bfloat16"), "dtype must be auto, half or float16"),
                       (dict(tensor_parallel_size=2), "tensor_parallel_size must be 1"),
                       (dict(quantization="awq"), "quantization awq, but"),
                       (dict(tokenizer="/elsewhere"), "tokenizer must be the model's own")):
        with pytest.raises(ValueError, match=match):
            onecat.LLM(str(text_checkpoint), **kw, **bad)
    with pytest.raises(TypeError):
        onecat.LLM(str(text_checkpoint), swap_space=4, **kw)
