"""Chat templates rendered in C++ exactly as transformers' apply_chat_template renders them."""

from __future__ import annotations

import json
import os

from . import _C


def apply_chat_template(messages, *, model=None, template=None, tools=None, add_generation_prompt=False,
                        special_tokens=None, **kwargs) -> str:
    """The prompt text for `messages` (a list of {"role", "content", ...} dicts).

    The template comes from a checkpoint directory (`model`: chat_template.jinja, or
    tokenizer_config.json's chat_template, with its bos/eos tokens) or from its source
    (`template`). Extra keyword arguments (e.g. enable_thinking=False) become template
    variables, as in transformers. A template feature onecat does not support, or the
    template's own raise_exception, raises ValueError naming the template line.
    """
    if (model is None) == (template is None):
        raise ValueError("apply_chat_template: give exactly one of model= (a checkpoint directory) or template= (its source)")
    specials = {}
    if model is not None:
        template, _, specials_json = _C.load_chat_template(os.fspath(model), tools is not None)
        specials = json.loads(specials_json)
    specials.update(special_tokens or {})
    return _C.ChatTemplate(template).apply_json(
        json.dumps(messages), "" if tools is None else json.dumps(tools), bool(add_generation_prompt),
        json.dumps(specials), json.dumps(kwargs))
