"""The chat-template oracle: every published template in the test data, over a set of
conversations, rendered by Python's jinja2 exactly as transformers' apply_chat_template does
and by onecat's C++ engine (tests/onecat_chat_batch, one process for all cases).

Every case must be byte-identical, or onecat must fail with its clear error; different
output is never allowed. When jinja2 raises (a template that refuses tool messages, say),
onecat must raise too. The named families (Llama 3.x, Qwen2.5, Qwen3, Mistral) must render
every case, and at least 90 % of the templates must.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import jinja2
import pytest
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parents[2]
NOW = 1721995200  # 2024-07-26 12:00 UTC: strftime_now() is fixed on both sides
FAMILIES_THAT_MUST_RENDER = ("Llama-3", "Qwen2.5", "Qwen3", "Qwen-QwQ", "Mistral", "Ministral", "Devstral")


# ---- transformers' apply_chat_template, reproduced -------------------------------------


class GenerationBlock(Extension):
    """transformers' {% generation %} tag: renders its body (it only tracks offsets)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format):
    return datetime.fromtimestamp(NOW, timezone.utc).strftime(format)


def compile_like_transformers(source: str):
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(source)


def render_like_transformers(template, case) -> str:
    return template.render(
        messages=case["messages"],
        tools=case.get("tools"),
        documents=None,
        add_generation_prompt=case.get("add_generation_prompt", False),
        **case.get("kwargs", {}),
    )


# ---- the conversations ------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city — in °C or °F.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city, e.g. \"Paris\""},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "integer", "minimum": 0}},
                "required": ["a", "b"],
            },
        },
    },
]

TOOL_CALL = {
    "id": "call_0",
    "type": "function",
    "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
}

CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hello!"}],
    "system_user": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2 + 2?"},
    ],
    "multi_turn": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke.\nA short one, please."},
    ],
    "no_system_multi_turn": [
        {"role": "user", "content": "One"},
        {"role": "assistant", "content": "Two"},
        {"role": "user", "content": "Three"},
    ],
    "ends_with_assistant": [
        {"role": "user", "content": "Say hi"},
        {"role": "assistant", "content": "Hi there"},
    ],
    "empty_content": [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "Still there?"},
    ],
    "unicode": [
        {"role": "system", "content": "Réponds en français. 你好 🙂"},
        {"role": "user", "content": "Quote \"this\" and 'that', a \\ backslash, a\ttab and </s> <|im_end|>"},
    ],
    "reasoning": [
        {"role": "user", "content": "What is 17 * 3?"},
        {"role": "assistant", "content": "51", "reasoning_content": "17 * 3 = 51."},
        {"role": "user", "content": "And 17 * 4?"},
    ],
    "think_in_content": [
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "<think>\nLet me think.\n</think>\n\nBecause."},
        {"role": "user", "content": "OK"},
    ],
    "tool_call": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
        {"role": "tool", "tool_call_id": "call_0", "name": "get_weather", "content": "{\"temperature\": 21}"},
        {"role": "assistant", "content": "It is 21 °C in Paris."},
        {"role": "user", "content": "Thanks!"},
    ],
    "tool_call_pending": [
        {"role": "user", "content": "Add 2 and 3."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "name": "add", "content": "5"},
    ],
    "tool_call_json_string_args": [
        {"role": "user", "content": "Add 2.5 and 1e-7."},
        {
            "role": "assistant",
            "content": "Let me add them.",
            "tool_calls": [
                {"id": "c9", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 2.5, \"b\": 1e-07}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c9", "content": "2.5000001"},
        {"role": "assistant", "content": "2.5000001"},
    ],
    "parallel_tool_calls": [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather in Paris and Tokyo, and 1.5 + 2?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"id": "b", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "東京", "unit": None}}},
                {"id": "c", "type": "function", "function": {"name": "add", "arguments": {"a": 1.5, "b": 2, "exact": True}}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "name": "get_weather", "content": "18"},
        {"role": "tool", "tool_call_id": "b", "name": "get_weather", "content": "25"},
        {"role": "tool", "tool_call_id": "c", "name": "add", "content": "3.5"},
    ],
    "content_parts": [
        {"role": "system", "content": [{"type": "text", "text": "You describe things."}]},
        {"role": "user", "content": [{"type": "text", "text": "Describe"}, {"type": "text", "text": "this, please."}]},
    ],
    "system_only": [{"role": "system", "content": "Only a system prompt."}],
}


def cases():
    out = []
    for name, messages in CONVERSATIONS.items():
        for gen in (True, False):
            tools = TOOLS if "tool" in name or name == "system_user" else None
            case = {"name": f"{name}{'+gen' if gen else ''}", "messages": messages, "add_generation_prompt": gen}
            case["kwargs"] = {"bos_token": "<s>", "eos_token": "</s>"}
            if tools:
                case["tools"] = tools
            out.append(case)
    for thinking in (True, False):
        for name in ("user", "reasoning"):
            out.append(
                {
                    "name": f"{name}+gen+enable_thinking={thinking}",
                    "messages": CONVERSATIONS[name],
                    "add_generation_prompt": True,
                    "kwargs": {"bos_token": "<s>", "eos_token": "</s>", "enable_thinking": thinking},
                }
            )
    for c in out:
        c["now"] = NOW
    return out


# ---- the comparison ---------------------------------------------------------------------


def published_templates() -> list[Path]:
    data = os.environ.get("ONECAT_TESTDATA")
    assert data, "ONECAT_TESTDATA is not set: run scripts/fetch-testdata and export what it prints (scripts/test does)"
    folder = Path(data) / "templates"
    templates = sorted(folder.glob("*.jinja"))
    assert templates, f"{folder} holds no chat templates: run scripts/fetch-testdata again"
    return templates


def batch_binary() -> Path:
    build = Path(os.environ.get("ONECAT_BUILD_DIR", ROOT / "build"))
    binary = build / "tests" / "onecat_chat_batch"
    assert binary.exists(), f"{binary} is missing: build the project first (scripts/build)"
    return binary


def compare_all(tmp_path: Path):
    templates = published_templates()
    all_cases = cases()
    expected = {}
    jobs = []
    for path in templates:
        source = path.read_text(encoding="utf-8")
        try:
            compiled = compile_like_transformers(source)
        except Exception as e:  # noqa: BLE001 - jinja2 refuses the template itself
            compiled, compile_error = None, f"{type(e).__name__}: {e}"
        rows = []
        for case in all_cases:
            if compiled is None:
                rows.append(("error", compile_error))
                continue
            try:
                rows.append(("text", render_like_transformers(compiled, case)))
            except Exception as e:  # noqa: BLE001 - any jinja2 failure must be a onecat failure too
                rows.append(("error", f"{type(e).__name__}: {e}"))
        expected[path.name] = rows
        jobs.append({"template_file": str(path), "cases": [{k: v for k, v in c.items() if k != "name"} for c in all_cases]})
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps(jobs, ensure_ascii=False), encoding="utf-8")
    done = subprocess.run([str(batch_binary()), str(jobs_file)], capture_output=True, check=True)
    got = json.loads(done.stdout.decode("utf-8"))

    report = {}
    for path, results in zip(templates, got):
        r = {"cases": len(all_cases), "identical": 0, "both_raise": 0, "onecat_error": [], "different": []}
        for case, (kind, want), result in zip(all_cases, expected[path.name], results):
            if kind == "text" and result.get("text") == want:
                r["identical"] += 1
            elif kind == "error" and "error" in result:
                r["both_raise"] += 1
            elif "error" in result:
                r["onecat_error"].append((case["name"], result["error"]))
            else:
                r["different"].append((case["name"], f"jinja2: {want[:2000]}", f"onecat: {result['text'][:2000]}"))
        report[path.name] = r
    return report


def agrees(r) -> bool:
    """Every case byte-identical, or refused by both (the template's own raise_exception)."""
    return r["identical"] + r["both_raise"] == r["cases"]


def print_table(report):
    print(f"\n{'template':56s} {'same':>5s} {'both raise':>10s} {'onecat error':>12s} {'different':>9s}")
    for name, r in report.items():
        print(f"{name:56s} {r['identical']:5d} {r['both_raise']:10d} {len(r['onecat_error']):12d} {len(r['different']):9d}")
        if r["onecat_error"]:
            print(f"    e.g. {r['onecat_error'][0][0]}: {r['onecat_error'][0][1]}")
    full = sum(agrees(r) for r in report.values())
    print(f"{full} of {len(report)} templates agree with jinja2 on every case; "
          f"{sum(1 for r in report.values() if r['different'])} ever render differently")


def test_chat_templates_match_jinja2(tmp_path):
    report = compare_all(tmp_path)
    print_table(report)
    different = {name: r["different"] for name, r in report.items() if r["different"]}
    assert not different, "onecat rendered differently from jinja2:\n" + json.dumps(different, ensure_ascii=False, indent=1)[:20000]
    for name, r in report.items():
        if any(f in name for f in FAMILIES_THAT_MUST_RENDER):
            assert agrees(r), f"{name} must render every case as jinja2 does: {r['onecat_error'][:3]}"
    full = [n for n, r in report.items() if agrees(r)]
    assert len(full) >= 0.9 * len(report), f"only {len(full)} of {len(report)} templates agree with jinja2 on every case"


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        rep = compare_all(Path(d))
    print_table(rep)
    for n, r in rep.items():
        if len(sys.argv) > 1 and sys.argv[1] in n:
            for w in r["onecat_error"] + r["different"]:
                print(json.dumps(w, ensure_ascii=False)[:3000])
