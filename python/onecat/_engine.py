"""onecat.LLM.stream: each prompt's tokens as the engine makes them (a streaming iterator over
LLM.add_request and LLM.step; docs/python.md)."""
from __future__ import annotations

from collections.abc import Iterator, Sequence

from ._C import LLM, StepOutput


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
        if not self.idle:
            for request in index:
                self.cancel(request)
            while not self.idle:
                self.step()
