"""test_serve_api.py — `assay serve` API features beyond the basic ones, with the openai client on the house model:
n > 1 on completions (choices indexed prompt x n + sample, each sample equal to a lone request with seed + sample, as
vLLM seeds them; usage counts a prompt once), n > 1 streaming, 405 with an Allow header for a wrong method on a
known path, and chat logprobs / top_logprobs (through --chat-template chatml: the house model has no template)
equal to the completions logprobs of the same rendered prompt, streaming equal to non-streaming."""
import json
import urllib.error
import urllib.request

import openai

import testlib
from testlib import check, finish
from servelib import NAME, http, start, stop

proc, base = start(["--chat-template", "chatml"])
try:
    if base is None:
        raise SystemExit
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=60)

    # n > 1: three samples, each equal to the lone request with seed + its index
    prompt = "The house"
    r = client.completions.create(model=NAME, prompt=prompt, max_tokens=8, temperature=0.9, seed=11, n=3)
    texts = [c.text for c in sorted(r.choices, key=lambda c: c.index)]
    check([c.index for c in r.choices] == [0, 1, 2], f"n=3: choices indexed 0..2: {[c.index for c in r.choices]}")
    alone = [client.completions.create(model=NAME, prompt=prompt, max_tokens=8, temperature=0.9, seed=11 + j).choices[0].text
             for j in range(3)]
    check(texts == alone, f"n=3 samples == lone requests with seed 11, 12, 13: {texts} vs {alone}")
    check(len(set(texts)) > 1, f"the samples differ: {texts}")
    ntok = json.loads(http("POST", base + "/tokenize", {"prompt": prompt})[1])["count"]
    check(r.usage.prompt_tokens == ntok and r.usage.completion_tokens == 24, f"n=3 usage counts the prompt once: {r.usage}")

    # n = 2 over two prompts: index = prompt * n + sample
    prompts = ["The house", "A window"]
    r = client.completions.create(model=NAME, prompt=prompts, max_tokens=6, temperature=0.9, seed=5, n=2)
    got = {c.index: c.text for c in r.choices}
    want = {p * 2 + j: client.completions.create(model=NAME, prompt=prompts[p], max_tokens=6, temperature=0.9,
                                                 seed=5 + j).choices[0].text for p in range(2) for j in range(2)}
    check(got == want, f"2 prompts x n=2: {got} vs {want}")

    # n = 2 streaming: each index's chunks concatenate to the non-streaming text
    parts = {}
    for ch in client.completions.create(model=NAME, prompt=prompt, max_tokens=8, temperature=0.9, seed=11, n=2, stream=True):
        for c in ch.choices:
            parts[c.index] = parts.get(c.index, "") + c.text
    check(parts == {0: texts[0], 1: texts[1]}, f"n=2 stream {parts} == {texts[:2]}")

    # bad n
    for bad in (0, 1000):
        st, b = http("POST", base + "/v1/completions", {"prompt": prompt, "n": bad})
        check(st == 400 and json.loads(b)["error"]["param"] == "n", f"n={bad} -> 400: {st} {b[:120]}")

    # 405 on a known path with the wrong method (with Allow), 404 on an unknown one
    for method, path, allow in [("GET", "/v1/completions", "POST"), ("PUT", "/v1/chat/completions", "POST"),
                                ("POST", "/v1/models", "GET"), ("DELETE", "/metrics", "GET"), ("POST", "/health", "GET")]:
        req = urllib.request.Request(base + path, data=b"{}" if method != "GET" else None, method=method)
        try:
            urllib.request.urlopen(req, timeout=10)
            check(False, f"{method} {path} -> 405")
        except urllib.error.HTTPError as e:
            body = json.loads(e.read().decode())
            check(e.code == 405 and e.headers.get("Allow") == allow and body["error"]["code"] == 405,
                  f"{method} {path} -> {e.code} Allow {e.headers.get('Allow')} {body}")
    check(http("GET", base + "/v1/nope")[0] == 404, "unknown path: 404")
    check(http("GET", base + "/health")[0] == 200, "still serving")

    # chat logprobs: equal to the completions logprobs of the rendered prompt (chatml, no special tokens in house)
    msgs = [{"role": "user", "content": "Tell me about the house"}]
    rendered = "<|im_start|>user\nTell me about the house<|im_end|>\n<|im_start|>assistant\n"
    r = client.chat.completions.create(model=NAME, messages=msgs, max_tokens=6, temperature=0, logprobs=True,
                                       top_logprobs=3)
    content = r.choices[0].logprobs.content if r.choices[0].logprobs else []
    ref = client.completions.create(model=NAME, prompt=rendered, max_tokens=6, temperature=0, logprobs=3)
    check(r.choices[0].message.content == ref.choices[0].text, f"chat text {r.choices[0].message.content!r} == "
          f"completions on the rendered prompt {ref.choices[0].text!r}")
    check(len(content) == 6 == r.usage.completion_tokens, f"one logprob entry per token: {len(content)}")
    check([c.token for c in content] == ref.choices[0].logprobs.tokens, "chat tokens == completions tokens")
    check(all(abs(c.logprob - x) < 1e-6 for c, x in zip(content, ref.choices[0].logprobs.token_logprobs)),
          "chat logprobs == completions logprobs")
    check(all(len(c.top_logprobs) == 3 and c.top_logprobs[0].logprob == c.logprob and
              all(a.logprob >= b.logprob for a, b in zip(c.top_logprobs, c.top_logprobs[1:])) for c in content),
          "top_logprobs: 3 each, most likely first, greedy picks the first")
    check(all(bytes(c.bytes).decode("utf-8", "replace") == c.token for c in content), "bytes spell the token")
    check(all({t.token: t.logprob for t in c.top_logprobs} == d for c, d in zip(content, ref.choices[0].logprobs.top_logprobs)),
          "chat top_logprobs == completions top_logprobs")
    # logprobs without top_logprobs: entries with empty top lists; none asked: null
    r2 = client.chat.completions.create(model=NAME, messages=msgs, max_tokens=3, temperature=0, logprobs=True)
    check(r2.choices[0].logprobs and all(c.top_logprobs == [] for c in r2.choices[0].logprobs.content),
          "logprobs=true alone: no alternatives")
    r3 = client.chat.completions.create(model=NAME, messages=msgs, max_tokens=3, temperature=0)
    check(r3.choices[0].logprobs is None, "no logprobs asked: null")
    st, b = http("POST", base + "/v1/chat/completions", {"messages": msgs, "top_logprobs": 2})
    check(st == 400 and "logprobs" in b, f"top_logprobs without logprobs -> 400: {st}")
    # streaming chat: the chunks' logprobs concatenate to the same entries
    streamed = []
    text = ""
    for ch in client.chat.completions.create(model=NAME, messages=msgs, max_tokens=6, temperature=0, logprobs=True,
                                             top_logprobs=3, stream=True):
        for c in ch.choices:
            text += c.delta.content or ""
            if c.logprobs and c.logprobs.content:
                streamed += c.logprobs.content
    check(text == r.choices[0].message.content and [(c.token, c.logprob) for c in streamed] ==
          [(c.token, c.logprob) for c in content], "streamed chat logprobs == non-streamed")
    # chat with n = 2
    r = client.chat.completions.create(model=NAME, messages=msgs, max_tokens=5, temperature=0.9, seed=3, n=2)
    check(sorted(c.index for c in r.choices) == [0, 1] and r.usage.completion_tokens == 10, f"chat n=2: {r.usage}")
finally:
    stop(proc, testlib.failures > 0)
finish("serve api")
