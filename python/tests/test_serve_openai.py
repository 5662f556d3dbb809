"""`onecat serve` driven by the official `openai` Python client (pinned in scripts/requirements.txt),
unmodified, as users' code drives it: models, chat (with tools too, and a named tool_choice) and completions,
streamed and not, n with seeds, stop strings, logprobs, and the client's own error classes for 4xx answers."""

from __future__ import annotations

import json

import pytest

# scripts/requirements.txt pins it, so CI always has it; the device image (which runs only the
# GPU-marked tests) does not, and must still collect this module.
openai = pytest.importorskip("openai", reason="the openai client is not installed (scripts/requirements.txt pins it)")

from test_serve_cpu import API_KEY, MODEL_NAME, model, server  # noqa: F401 (fixtures)

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the cat sat on"}]


@pytest.fixture(scope="module")
def client(server):  # noqa: F811
    return openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key=API_KEY, max_retries=0, timeout=60)


def test_models(client):
    assert [m.id for m in client.models.list().data] == [MODEL_NAME]


def test_chat_whole_and_streamed_agree(client):
    whole = client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=16, temperature=0)
    choice = whole.choices[0]
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length")
    assert whole.usage.completion_tokens > 0
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens
    chunks = list(client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=16, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == choice.finish_reason
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_completion_logprobs(client):
    r = client.completions.create(model=MODEL_NAME, prompt="the quick brown fox", max_tokens=10, temperature=0,
                                  logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == r.usage.completion_tokens
    assert all(x <= 0 for x in lp.token_logprobs)
    # Greedy: each token is the best of its top two. The legacy format keys them by text, so two
    # tokens of the same text (the tiny vocabulary has several that print nothing) make one entry.
    for logprob, top in zip(lp.token_logprobs, lp.top_logprobs):
        assert 1 <= len(top) <= 2
        assert all(v <= logprob + 1e-5 for v in top.values())
        if len(top) == 2:
            assert max(top.values()) == pytest.approx(logprob, abs=1e-5)


def test_echo_with_logprobs_as_lm_eval_asks(client):
    """lm-eval's log-likelihood request: token-id prompts, echo, logprobs 1, max_tokens 1 (or 0)."""
    ids = [[5, 6, 7, 8, 9, 10], [11, 12, 13]]
    r = client.completions.create(model=MODEL_NAME, prompt=ids, max_tokens=1, temperature=0, logprobs=1, echo=True,
                                  seed=1234)
    assert [c.index for c in r.choices] == [0, 1]
    for choice, prompt in zip(r.choices, ids):
        lp = choice.logprobs
        assert len(lp.token_logprobs) == len(prompt) + 1
        assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
        assert all(x <= 0 for x in lp.token_logprobs[1:])
        assert all(len(top) == 1 for top in lp.top_logprobs[1:])
    none = client.completions.create(model=MODEL_NAME, prompt=ids[0], max_tokens=0, logprobs=1, echo=True)
    assert none.choices[0].logprobs.token_logprobs == r.choices[0].logprobs.token_logprobs[:-1]
    assert none.usage.completion_tokens == 0


def test_n_with_a_seed_is_reproducible(client):
    def run():
        r = client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=12, temperature=1.0,
                                           n=3, seed=1234)
        return [c.message.content for c in r.choices]

    first = run()
    assert len(first) == 3 and run() == first


def test_stop_string(client):
    free = client.completions.create(model=MODEL_NAME, prompt="once upon", max_tokens=24, temperature=0)
    text = free.choices[0].text
    if len(text) < 4:
        pytest.fail(f"the tiny model's greedy text is too short to pick a stop string from: {text!r}")
    stop = text[2:4]
    cut = client.completions.create(model=MODEL_NAME, prompt="once upon", max_tokens=24, temperature=0, stop=[stop])
    assert cut.choices[0].text == text[: text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_errors_are_the_clients_exceptions(client, server):  # noqa: F811
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, temperature=-1)
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL_NAME, prompt="x", max_tokens=10**9)
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no-such-model", prompt="x", max_tokens=2)
    wrong = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    assert client.models.list().data  # still serving


def test_streamed_completion_and_tools(client):
    """A streamed completion reads as the whole one; a streamed chat with tools (the tiny model
    writes no call) reads as its whole reply, through the client's own stream classes."""
    whole = client.completions.create(model=MODEL_NAME, prompt="the quick brown fox", max_tokens=10, temperature=0)
    chunks = list(client.completions.create(model=MODEL_NAME, prompt="the quick brown fox", max_tokens=10,
                                            temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "the weather in a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    reply = client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, tools=tools, max_tokens=8,
                                           temperature=0)
    streamed = list(client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, tools=tools, max_tokens=8,
                                                   temperature=0, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == (reply.choices[0].message.content or "")
    assert not any(c.choices[0].delta.tool_calls for c in streamed) and not reply.choices[0].message.tool_calls
    assert streamed[-1].choices[0].finish_reason == reply.choices[0].finish_reason


def test_named_tool_choice(client, server):  # noqa: F811
    """A named tool_choice, as LangChain's with_structured_output sends it, read through the client's
    own classes, whole and streamed. The call follows the tool's parameters (constrained decoding);
    logit_bias on "}" makes the tiny model close the arguments at once: {} (test_serve_cpu.py's
    test_tool_choice_forces_a_call says how). A json_schema response_format parses into the schema."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    close = server.ok("/tokenize", {"prompt": "}", "add_special_tokens": False})["tokens"][0]
    kw = dict(model=MODEL_NAME, messages=[{"role": "user", "content": "weather?"}], tools=tools,
              tool_choice={"type": "function", "function": {"name": "get_weather"}}, temperature=0, max_tokens=8,
              logit_bias={str(close): 100})
    r = client.chat.completions.create(**kw)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather" and call.function.arguments == "{}"
    chunks = list(client.chat.completions.create(**kw, stream=True))
    [streamed] = [t for c in chunks for t in (c.choices[0].delta.tool_calls or [])]
    assert streamed.function.name == "get_weather" and streamed.function.arguments == "{}"
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}, "sure": {"type": "boolean"}},
              "required": ["answer", "sure"], "additionalProperties": False}
    r = client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=60, temperature=0.7, seed=4,
                                       response_format={"type": "json_schema",
                                                        "json_schema": {"name": "verdict", "schema": schema,
                                                                        "strict": True}})
    assert r.choices[0].finish_reason == "stop"
    verdict = json.loads(r.choices[0].message.content)
    assert verdict["answer"] in ("yes", "no") and isinstance(verdict["sure"], bool)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL_NAME, messages=MESSAGES, max_tokens=4,
                                       response_format={"type": "json_schema",
                                                        "json_schema": {"name": "x", "schema": {"not": {}}}})
    assert '"not"' in str(e.value)
