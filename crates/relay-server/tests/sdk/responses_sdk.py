"""Drives Relay's `POST /v1/responses` with the official `openai` SDK (`client.responses`).

Run by tests/api/responses_sdk.rs as `python responses_sdk.py CASE` with RELAY_URL (and
RELAY_TOKEN when accounts are on); prints one JSON object of what the SDK gave back.
"""

import json
import os
import sys

import openai

URL = os.environ["RELAY_URL"]
TOKEN = os.environ.get("RELAY_TOKEN", "unused-in-open-mode")
TOOLS = [{"type": "function", "name": "read_file", "description": "Read a file", "strict": False,
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]


def oa(token=TOKEN):
    return openai.OpenAI(base_url=URL + "/v1", api_key=token, max_retries=0)


def text():
    c = oa()
    plain = c.responses.create(model="auto", instructions="Be brief.", input="hi")
    events = []
    with c.responses.stream(model="auto", input=[{"role": "user", "content": "hi"}]) as s:
        for e in s:
            events.append([e.type, e.sequence_number])
        final = s.get_final_response()
    u = plain.usage
    return {"text": plain.output_text, "status": plain.status, "model": plain.model,
            "usage": [u.input_tokens, u.input_tokens_details.cached_tokens, u.output_tokens,
                      u.output_tokens_details.reasoning_tokens, u.total_tokens],
            "events": events, "streamed": final.output_text, "stream_status": final.status}


def tools():
    c = oa()
    with c.responses.stream(model="auto", input="read both", tools=TOOLS) as s:
        deltas = [e.delta for e in s if e.type == "response.function_call_arguments.delta"]
        final = s.get_final_response()
    calls = [[i.call_id, i.name, i.arguments] for i in final.output if i.type == "function_call"]
    history = [{"role": "user", "content": "read both"}] + [i.model_dump(exclude_none=True) for i in final.output] + [
        {"type": "function_call_output", "call_id": i.call_id, "output": "contents of " + i.call_id}
        for i in final.output if i.type == "function_call"]
    answer = c.responses.create(model="auto", input=history, tools=TOOLS)
    return {"calls": calls, "deltas": deltas, "answer": answer.output_text}


def errors():
    out = {}
    for name, call in [
        ("401", lambda: oa("rly_wrong").responses.create(model="auto", input="x")),
        ("400", lambda: oa().responses.create(model="auto", input="x", previous_response_id="resp_1")),
        ("ok", lambda: oa().responses.create(model="auto", input="x")),
        ("403", lambda: oa().responses.create(model="auto", input="x")),
    ]:
        try:
            out[name] = call().output_text
        except openai.APIStatusError as e:
            out[name] = [type(e).__name__, e.status_code]
    return out


if __name__ == "__main__":
    print(json.dumps(globals()[sys.argv[1]]()))
