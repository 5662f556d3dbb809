"""onecat.LLM.stream: each prompt's tokens as the engine makes them (a streaming iterator over
LLM.add_request and LLM.step), and vLLM's offline surface: LLM.generate(prompts, SamplingParams)
→ RequestOutputs with text (docs/python.md)."""
from __future__ import annotations

import itertools
import json as _json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from ._C import LLM, DecodeStream, StepOutput, Tokenizer


def stream(self: LLM, prompts: Sequence[Sequence[int]], max_tokens: int = 64, *, seed: int = 0,
           **sampling) -> Iterator[tuple[int, StepOutput]]:
    """Runs `prompts` together and yields (index of the prompt, StepOutput) for every new token,
    step by step, as the engine makes them; the last output of each prompt has finished=True.
    Takes add_request's keywords (temperature, top_k, ..., stop_ids, logprobs); prompt i samples
    with seed + i, as generate() does. Closing the iterator early (break, or an exception in the
    loop) cancels the prompts not yet finished, so their KV pages are let go. The LLM must be
    idle: its other requests would be stepped here too."""
    if not self.idle:
        raise ValueError("stream() needs an idle LLM: finish or cancel its requests.")
    index: dict[int, int] = {}
    try:
        for i, prompt in enumerate(prompts):
            index[self.add_request(list(prompt), max_tokens, seed=seed + i, **sampling)] = i
        while not self.idle:
            for out in self.step():
                if out.finish_reason != "cancelled":
                    yield index[out.id], out
    finally:
        _cancel_all(self, index)


def _cancel_all(llm: LLM, requests) -> None:
    """Cancels `requests` (ids) if the LLM still runs any, and steps until it is idle, so their
    KV pages are let go (a loop left early, or an exception in it)."""
    if not llm.idle:
        for request in requests:
            llm.cancel(request)
        while not llm.idle:
            llm.step()


# ---- vLLM's offline surface: LLM.generate(prompts, SamplingParams) → RequestOutputs ----------

@dataclass
class StructuredOutputsParams:
    """vLLM's structured outputs, one of: json (a JSON schema, as a dict or its text), regex (a
    regular expression, matched whole), choice (a list of strings) or json_object=True (any JSON
    object). Each sample's text follows it (grammar-constrained decoding; the schema keywords and
    regex syntax onecat takes are in docs/serve.md)."""
    json: dict | str | None = None
    regex: str | None = None
    choice: list[str] | None = None
    json_object: bool | None = None

    def __post_init__(self):
        given = (self.json is not None) + (self.regex is not None) + (self.choice is not None) + bool(self.json_object)
        if given != 1:
            raise ValueError("StructuredOutputsParams takes one of json, regex, choice and json_object.")

    def _kwargs(self) -> dict:
        if self.json is not None:
            return {"json_schema": self.json if isinstance(self.json, str) else _json.dumps(self.json)}
        if self.regex is not None:
            return {"regex": self.regex}
        if self.choice is not None:
            return {"choice": list(self.choice)}
        return {"json_object": True}


@dataclass
class SamplingParams:
    """The sampling settings of one generate() call, named as vLLM names them (the fields onecat's
    engine runs). top_k 0 or -1: off. seed None: a random one per request (each of n samples draws
    with seed + its index otherwise). stop: strings that end a sample (left out of its text unless
    include_stop_str_in_output); stop_token_ids: ids that end it besides the checkpoint's EOS
    (ignore_eos: only these). logprobs k: each token's logprob and the k most likely."""
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    max_tokens: int = 16
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    logprobs: int | None = None
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    structured_outputs: StructuredOutputsParams | None = None

    def __post_init__(self):
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n must be a positive integer, got {self.n!r}.")
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens!r}.")
        if self.top_k == -1:
            self.top_k = 0
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if not all(isinstance(s, str) and s for s in stops):
            raise ValueError("stop must be a non-empty string or a list of them.")
        self.stop = stops


@dataclass
class CompletionOutput:
    """One sample: its text, token ids, why it ended ('stop' or 'length'), and with logprobs a
    {token id: logprob} per token (the sampled token's and the k most likely)."""
    index: int
    text: str
    token_ids: list[int]
    finish_reason: str
    logprobs: list[dict[int, float]] | None = None
    stop_reason: str | int | None = None


@dataclass
class RequestOutput:
    """One prompt's result: the prompt (text, or None when given as ids), its ids, its n samples."""
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True


class _Sample:
    """A sample in flight: its tokens, its text as they decode, and its stop strings."""

    def __init__(self, tokenizer: Tokenizer, params: SamplingParams, index: int):
        self.params, self.index = params, index
        self.stream = DecodeStream(tokenizer, params.skip_special_tokens)
        self.vocab = tokenizer.vocab_size  # a model's ids past its tokenizer's decode to nothing, as in serve
        self.tokens: list[int] = []
        self.text = ""
        self.logprobs: list[dict[int, float]] | None = [] if params.logprobs is not None else None
        self.finish_reason: str | None = None
        self.stop_reason: str | int | None = None

    def take(self, out: StepOutput) -> bool:
        """Adds a step's token; True when a stop string ended the sample here."""
        self.tokens.append(out.token)
        if self.logprobs is not None:
            entry = {out.token: out.logprob}
            entry.update((i, lp) for i, lp in out.top_logprobs)
            self.logprobs.append(entry)
        before = len(self.text)
        if 0 <= out.token < self.vocab:
            self.text += self.stream.step(out.token)
        if out.finished:
            self.text += self.stream.finish()
        # A stop string may straddle earlier text: search from where the longest one could begin.
        for stop in self.params.stop:
            at = self.text.find(stop, max(0, before - len(stop) + 1))
            if at >= 0:
                self.text = self.text[:at + (len(stop) if self.params.include_stop_str_in_output else 0)]
                self.finish_reason, self.stop_reason = "stop", stop
                return True
        if out.finished:
            self.finish_reason = out.finish_reason
            if out.finish_reason == "stop" and self.tokens:
                self.stop_reason = self.tokens[-1]
        return False


def _tokenizer(llm: LLM) -> Tokenizer:
    tok = _tokenizers.get(llm.model_path)
    if tok is None:
        tok = _tokenizers[llm.model_path] = Tokenizer(llm.model_path)
    return tok


_tokenizers: dict[str, Tokenizer] = {}
_generate_ids = LLM.generate
_request_counter = itertools.count()


def get_default_sampling_params(self: LLM) -> SamplingParams:
    """vLLM's: a SamplingParams with the sampling the checkpoint recommends (generation_config.json's
    temperature, top_k, top_p, min_p, repetition_penalty and max_new_tokens as max_tokens; see
    LLM(generation_config=)), SamplingParams' own defaults elsewhere. What generate() uses without
    sampling_params."""
    return SamplingParams(**self.generation_defaults)


def generate(self: LLM, prompts, sampling_params=None, *args, **kwargs):
    """vLLM's LLM.generate: prompts as a string, a list of strings, or token ids (a list of ints
    or a list of such lists), sampling_params a SamplingParams (or one per prompt; default
    get_default_sampling_params()) → a RequestOutput per prompt, with text. Called as before (prompt id
    lists, then max_tokens and keywords) it returns each prompt's new token ids."""
    texts = isinstance(prompts, str) or (isinstance(prompts, Sequence) and len(prompts) > 0
                                         and all(isinstance(p, str) for p in prompts))
    params_given = isinstance(sampling_params, SamplingParams) or (
        isinstance(sampling_params, Sequence) and len(sampling_params) > 0
        and all(isinstance(p, SamplingParams) for p in sampling_params))
    if not texts and not params_given:
        return _generate_ids(self, prompts, *(() if sampling_params is None else (sampling_params,)), *args, **kwargs)
    if args or kwargs:
        raise TypeError("generate(prompts, SamplingParams) takes no other arguments.")
    if not self.idle:
        raise ValueError("generate() needs an idle LLM: finish or cancel its requests.")
    tok = _tokenizer(self)
    if isinstance(prompts, str):
        prompts = [prompts]
    ids = _ids_of_many(prompts)
    if ids is not None:
        prompt_texts, prompt_ids = [None] * len(ids), ids
    else:
        prompt_texts = list(prompts)
        prompt_ids = [tok.encode(p) for p in prompt_texts]
    params = sampling_params or self.get_default_sampling_params()
    per_prompt = list(params) if isinstance(params, Sequence) else [params] * len(prompt_ids)
    if len(per_prompt) != len(prompt_ids):
        raise ValueError(f"{len(per_prompt)} SamplingParams for {len(prompt_ids)} prompts.")
    results = [RequestOutput(str(next(_request_counter)), t, list(i)) for t, i in zip(prompt_texts, prompt_ids)]
    samples: dict[int, tuple[int, _Sample]] = {}
    try:
        for r, (ids_, p) in enumerate(zip(prompt_ids, per_prompt)):
            base = p.seed if p.seed is not None else getattr(self, '_seeds', random).getrandbits(62)
            stop_ids = list(p.stop_token_ids or [])
            if not p.ignore_eos:
                stop_ids += [i for i in self.eos_token_ids if i not in stop_ids]
            for j in range(p.n):
                request = self.add_request(list(ids_), p.max_tokens, temperature=p.temperature, top_k=p.top_k,
                                           top_p=p.top_p, min_p=p.min_p, repetition_penalty=p.repetition_penalty,
                                           presence_penalty=p.presence_penalty,
                                           frequency_penalty=p.frequency_penalty, seed=base + j, stop_ids=stop_ids,
                                           logprobs=p.logprobs or 0,
                                           **(p.structured_outputs._kwargs() if p.structured_outputs else {}))
                samples[request] = (r, _Sample(tok, p, j))
        while not self.idle:
            for out in self.step():
                r, sample = samples[out.id]
                # A cancelled request's report, or tokens after a stop string (a verifying step
                # may give one request several).
                if out.finish_reason == "cancelled" or sample.finish_reason is not None:
                    continue
                if sample.take(out) and not out.finished:
                    self.cancel(out.id)
    finally:
        _cancel_all(self, samples)
    for r, sample in sorted(samples.values(), key=lambda rs: (rs[0], rs[1].index)):
        results[r].outputs.append(CompletionOutput(sample.index, sample.text, sample.tokens,
                                                   sample.finish_reason or "stop", sample.logprobs,
                                                   sample.stop_reason))
    return results


def chat(self: LLM, messages, sampling_params=None, *, chat_template: str | None = None,
         add_generation_prompt: bool = True, tools: list | None = None,
         chat_template_kwargs: dict | None = None) -> list[RequestOutput]:
    """vLLM's LLM.chat: one conversation (a list of {"role", "content", ...} dicts) or a list of
    them, rendered by the checkpoint's chat template (or `chat_template`, its source) with
    `tools` and `chat_template_kwargs` (e.g. {"enable_thinking": False}) as onecat.apply_chat_template
    renders them, then generate()d with sampling_params (default get_default_sampling_params()).
    Each RequestOutput's prompt is the rendered text. Tool calls are not parsed here (the server
    does that): the outputs are the replies' text."""
    from .chat import apply_chat_template

    if not isinstance(messages, Sequence) or isinstance(messages, str) or len(messages) == 0:
        raise ValueError("chat(): messages must be a conversation (a list of message dicts) or a list of them.")
    conversations = [messages] if isinstance(messages[0], dict) else list(messages)
    source = dict(template=chat_template) if chat_template is not None else dict(model=self.model_path)
    prompts = [apply_chat_template(list(c), tools=tools, add_generation_prompt=add_generation_prompt,
                                   **source, **(chat_template_kwargs or {})) for c in conversations]
    tok = _tokenizer(self)
    # The template writes the special tokens (BOS) itself, as vLLM's chat tokenizes it.
    ids = [tok.encode(p, False) for p in prompts]
    outputs = self.generate(ids, sampling_params or self.get_default_sampling_params())
    for out, text in zip(outputs, prompts):
        out.prompt = text
    return outputs


def _ids_of_many(prompts) -> list[list[int]] | None:
    """prompts as token ids — one list of ints or a list of such lists — else None."""
    if isinstance(prompts, Sequence) and prompts and all(isinstance(t, int) for t in prompts):
        return [list(prompts)]
    if isinstance(prompts, Sequence) and prompts and all(
            isinstance(p, Sequence) and not isinstance(p, str) and all(isinstance(t, int) for t in p)
            for p in prompts):
        return [list(p) for p in prompts]
    return None


class VllmLLM(LLM):
    """onecat.LLM: the engine (onecat._C.LLM) constructed as vLLM's LLM is.

    ``LLM(model, device="auto", *, …)``: `model` a checkpoint directory or a Hugging Face hub id in
    the local cache (`path=` is its older name). The engine's own keywords (max_num_seqs,
    max_num_batched_tokens, kv_cache_tokens, gpu_memory_utilization, max_model_len,
    kv_cache_dtype, num_speculative_tokens, speculative, generation_config, …) pass through. vLLM's
    are taken where they ask for what onecat does: dtype "auto"/"half"/"float16" (fp16 is the
    compute type), tensor_parallel_size 1, trust_remote_code (no checkpoint code runs), tokenizer
    None or the model itself, quantization naming the method the checkpoint declares;
    enforce_eager=True runs without CUDA graphs, enable_prefix_caching sets the prefix cache and
    seed makes the seeds of SamplingParams(seed=None) reproducible. Anything else is an error.
    """

    def __init__(self, model=None, device: str = "auto", *, path=None, tokenizer=None, dtype: str = "auto",
                 quantization: str | None = None, tensor_parallel_size: int = 1, trust_remote_code: bool = False,
                 enforce_eager: bool = False, enable_prefix_caching: bool | None = None, seed: int | None = None,
                 **kwargs):
        if (model is None) == (path is None):
            raise TypeError("LLM() takes the checkpoint as model (or its older name path), once.")
        model = str(model if model is not None else path)
        if dtype not in ("auto", "half", "float16"):
            raise ValueError(f"dtype must be auto, half or float16: onecat computes in fp16 (Volta has no bf16; "
                             f"bf16 checkpoints are converted at load), not {dtype!r}.")
        if tensor_parallel_size != 1:
            raise ValueError("tensor_parallel_size must be 1: an LLM runs on one GPU.")
        if tokenizer is not None and str(tokenizer) != model:
            raise ValueError("tokenizer must be the model's own: onecat reads the checkpoint's tokenizer.json.")
        del trust_remote_code  # accepted: onecat runs no code from a checkpoint
        if quantization is not None:
            from . import _C

            _C.check_quantization(model, str(quantization))
        if enforce_eager:
            kwargs.setdefault("cuda_graphs", False)
        if enable_prefix_caching is not None:
            kwargs.setdefault("prefix_caching", bool(enable_prefix_caching))
        super().__init__(model, device, **kwargs)
        if seed is not None:
            self._seeds = random.Random(seed)
