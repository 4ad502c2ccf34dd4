"""Drives Relay's compatible endpoints with the official `openai` and `anthropic` SDKs.

Run by tests/api/compat_sdk.rs as `python compat_sdk.py CASE` with RELAY_URL (and RELAY_TOKEN
when accounts are on); prints one JSON object of what the SDK gave back, which the Rust test checks.
"""

import json
import os
import sys

import anthropic
import openai

URL = os.environ["RELAY_URL"]
TOKEN = os.environ.get("RELAY_TOKEN", "unused-in-open-mode")
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


def oa(**kw):
    return openai.OpenAI(base_url=URL + "/v1", api_key=TOKEN, max_retries=0, **kw)


def an(**kw):
    return anthropic.Anthropic(base_url=URL, api_key=TOKEN, max_retries=0, **kw)


def user(text):
    return [{"role": "user", "content": text}]


def openai_text():
    c = oa()
    plain = c.chat.completions.create(model="auto", messages=user("hi"))
    pieces = [ch.choices[0].delta.content or "" for ch in
              c.chat.completions.create(model="auto", messages=user("hi"), stream=True,
                                        stream_options={"include_usage": True})
              if ch.choices]
    return {"text": plain.choices[0].message.content, "finish": plain.choices[0].finish_reason,
            "usage": [plain.usage.prompt_tokens, plain.usage.completion_tokens, plain.usage.total_tokens],
            "model": plain.model, "streamed": "".join(pieces)}


def openai_tools():
    c = oa()
    with c.chat.completions.stream(model="auto", messages=user("read both"), tools=TOOLS) as s:
        final = s.get_final_completion()
    msg = final.choices[0].message
    calls = [[t.id, t.function.name, t.function.arguments] for t in msg.tool_calls]
    history = user("read both") + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": t.id, "type": "function", "function": {"name": t.function.name, "arguments": t.function.arguments}}
            for t in msg.tool_calls]},
    ] + [{"role": "tool", "tool_call_id": t.id, "content": "contents of " + t.id} for t in msg.tool_calls]
    answer = c.chat.completions.create(model="auto", messages=history, tools=TOOLS)
    return {"calls": calls, "finish": final.choices[0].finish_reason,
            "usage": [final.usage.prompt_tokens, final.usage.completion_tokens] if final.usage else None,
            "answer": answer.choices[0].message.content}


def anthropic_all():
    c = an()
    plain = c.messages.create(model="auto", max_tokens=64, messages=user("hi"))
    with c.messages.stream(model="auto", max_tokens=64, messages=user("read both"),
                           tools=[{"name": "read_file", "input_schema": TOOLS[0]["function"]["parameters"]}]) as s:
        streamed_text = "".join(s.text_stream)
        final = s.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    answer = c.messages.create(model="auto", max_tokens=64, system=[{"type": "text", "text": "Sys."}], messages=[
        {"role": "user", "content": "read both"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": u.id, "name": u.name, "input": u.input} for u in uses]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": u.id, "content": "ok"} for u in uses]},
    ])
    return {"text": plain.content[0].text, "stop": plain.stop_reason,
            "usage": [plain.usage.input_tokens, plain.usage.output_tokens],
            "streamed_text": streamed_text, "tool_uses": [[u.id, u.name, u.input] for u in uses],
            "stream_stop": final.stop_reason, "stream_usage": [final.usage.input_tokens, final.usage.output_tokens],
            "answer": answer.content[0].text}


def errors():
    """One call per expected failure; the name of the exception class each raised."""
    out = {}
    cases = {
        "openai_401": lambda: openai.OpenAI(base_url=URL + "/v1", api_key="rly_bad", max_retries=0)
        .chat.completions.create(model="auto", messages=user("x")),
        "openai_400": lambda: oa().chat.completions.create(model="nope", messages=user("x")),
        "anthropic_401": lambda: anthropic.Anthropic(base_url=URL, api_key="rly_bad", max_retries=0)
        .messages.create(model="auto", max_tokens=5, messages=user("x")),
        "anthropic_400": lambda: an().messages.create(model="auto", max_tokens=5, messages=[{"role": "user", "content": [{"type": "image", "source": {}}]}]),
        "openai_ok": lambda: oa().chat.completions.create(model="auto", messages=user("x")),
        "openai_403": lambda: oa().chat.completions.create(model="auto", messages=user("x")),
        "anthropic_429_billing": lambda: an().messages.create(model="auto", max_tokens=5, messages=user("x")),
    }
    for name, call in cases.items():
        try:
            call()
            out[name] = "ok"
        except (openai.APIStatusError, anthropic.APIStatusError) as e:
            out[name] = [type(e).__name__, e.status_code]
    return out


def rate_limited():
    out = {}
    for name, call in {
        "openai": lambda: oa().chat.completions.create(model="auto", messages=user("x")),
        "anthropic": lambda: an().messages.create(model="auto", max_tokens=5, messages=user("x")),
    }.items():
        try:
            call()
            out[name] = "ok"
        except (openai.RateLimitError, anthropic.RateLimitError) as e:
            out[name] = [type(e).__name__, e.response.headers.get("retry-after")]
    return out


def notes():
    headers = {"x-relay-project": "sdkproj"}
    raw = oa(default_headers=headers).chat.completions.with_raw_response.create(model="auto", messages=user("test?"))
    araw = an(default_headers=headers).messages.with_raw_response.create(model="auto", max_tokens=5, messages=user("test?"))
    return {"openai": raw.headers.get("x-relay-note-ids"), "text": raw.parse().choices[0].message.content,
            "anthropic": araw.headers.get("x-relay-note-ids")}


def cross():
    final = oa().chat.completions.create(model="claude", messages=user("names"))
    m = final.choices[0].message
    return {"model": final.model, "finish": final.choices[0].finish_reason,
            "calls": [[t.id, t.function.name, json.loads(t.function.arguments)] for t in m.tool_calls],
            "models": [x.id for x in oa().models.list()]}


def anthropic_models():
    # Claude Code's model discovery and the SDK's models.list() send the key as x-api-key.
    page = an().models.list()
    try:
        anthropic.Anthropic(base_url=URL, api_key="rly_bad", max_retries=0).models.list()
        bad = None
    except anthropic.APIStatusError as e:
        bad = [type(e).__name__, e.status_code]
    return {"ids": [m.id for m in page.data], "types": sorted({m.type for m in page.data}),
            "bad_key": bad}


print(json.dumps(globals()[sys.argv[1]]()))
