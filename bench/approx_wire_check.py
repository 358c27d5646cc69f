#!/usr/bin/env python3
"""The `approx` cache mode through both wire formats on a running `swizzle-rt serve` of any
backend (bench/gpu_speed.sh `run ... approx` points it at an sm_90 package on the H200).
Standard library only (the GPU machine has no network for the SDKs).

A pinned Python file of twelve functions is sent twice per mode: as it is, then with its
first function edited. Checked: every response names its mode (X-Swizzle-Cache-Mode,
usage.swizzle_cache_mode); the cached-token header equals usage; at the edit, `approx`
reuses at least 256 more prompt tokens than `exact` (the functions after the edited one);
the Anthropic wire (by header) reports the same way. Each OpenAI request generates one
token and is timed (ms: the request's wall time, so prefill plus one token: TTFT). Prints
one JSON line with the counts and exits 1 when a check fails.

    approx_wire_check.py http://127.0.0.1:8080
"""
import json
import sys
import time
import urllib.request

BASE = sys.argv[1].rstrip("/")


def source(first_body: str) -> str:
    funcs = [f"def check_{i}(items, bound={3 * i + 1}):\n"
             f"    \"\"\"Count the items above {3 * i + 1}; None counts as zero.\"\"\"\n"
             f"    total = 0\n"
             f"    for item in items:\n"
             f"        if (item or 0) > bound:\n"
             f"            total += 1\n"
             f"    return total\n" for i in range(12)]
    funcs[0] = funcs[0].replace("    return total\n", first_body)
    return "import sys\nimport json\n\n\n" + "\n\n".join(funcs)


ORIGINAL = source("    return total\n")
EDITED = source("    return max(total, 0)\n")


def messages(code: str, note: str) -> list:
    return [{"role": "user", "content": f"Pinned files:\n<file path=\"lib/checks.py\">\n{code}</file>\n"},
            {"role": "assistant", "content": "Read it."},
            {"role": "user", "content": f"{note} What does check_5 return for [None, 20]?"}]


def post(path: str, body: dict, headers: dict) -> tuple:
    req = urllib.request.Request(BASE + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(req, timeout=600) as r:
        return dict(r.headers), json.load(r)


def openai_turn(code: str, note: str, mode: str) -> dict:
    t0 = time.perf_counter()
    h, r = post("/v1/chat/completions", {"model": "m", "messages": messages(code, note), "max_tokens": 1,
                                         "temperature": 0, "swizzle_cache_mode": mode}, {})
    ms = (time.perf_counter() - t0) * 1e3
    u = r["usage"]
    ok = (h["X-Swizzle-Cache-Mode"] == mode and u["swizzle_cache_mode"] == mode
          and int(h["X-Swizzle-Cache-Hit-Tokens"]) == u["prompt_tokens_details"]["cached_tokens"])
    return {"prompt": u["prompt_tokens"], "cached": u["prompt_tokens_details"]["cached_tokens"],
            "answer": r["choices"][0]["message"]["content"], "reported": ok, "ms": round(ms, 2)}


def main() -> int:
    res, failures = {}, []
    for mode in ("exact", "approx"):
        res[mode] = [openai_turn(ORIGINAL, f"{mode} turn one.", mode), openai_turn(EDITED, f"{mode} turn two.", mode)]
        failures += [f"{mode} turn {i + 1} not reported" for i, t in enumerate(res[mode]) if not t["reported"]]
    if res["approx"][1]["cached"] < res["exact"][1]["cached"] + 256:
        failures.append("approx did not reuse the functions after the edit")
    msgs = messages(source("    return min(total, 99)\n"), "anthropic turn.")
    h, r = post("/v1/messages", {"model": "m", "max_tokens": 8, "messages": msgs}, {"X-Swizzle-Cache-Mode": "approx"})
    u = r["usage"]
    res["anthropic_approx"] = {"cached": u["cache_read_input_tokens"], "prompt": u["input_tokens"] +
                               u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]}
    if h["X-Swizzle-Cache-Mode"] != "approx" or u["swizzle_cache_mode"] != "approx" or \
            int(h["X-Swizzle-Cache-Hit-Tokens"]) != u["cache_read_input_tokens"]:
        failures.append("anthropic approx not reported")
    if u["cache_read_input_tokens"] < res["exact"][1]["cached"] + 256:
        failures.append("anthropic approx did not reuse the functions after the edit")
    res["failures"] = failures
    print(json.dumps(res))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
