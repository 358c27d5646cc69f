#!/usr/bin/env python3
"""edit256 on the CPU: a real code model rewrites a ~256-token code file with one small edit
(rename one function), greedy. This is where prompt-lookup speculative decoding pays: the
answer is mostly a copy of the prompt.

Four engines on the same GGUF (default: Qwen2.5-Coder-0.5B-Instruct Q4_K_M), the same chat
prompt, the same thread count, in the same run; repetitions interleaved so drift of the
machine's speed hits all alike; medians:
  swizzle plain        `swizzle-rt run --no-spec`
  swizzle spec         `swizzle-rt run --spec` (prompt lookup, engine/speculative.h)
  llama.cpp plain      llama-cpp-python `Llama.create_chat_completion`
  llama.cpp lookup     the same with `draft_model=LlamaPromptLookupDecoding(num_pred_tokens=10)`
                       (llama-cpp-python's prompt-lookup decoding; max_ngram_size 2, its default)

tok/s = completion tokens / decode seconds (first token to last; prefill excluded, as tg in
llama-bench), and end-to-end (prefill included). Swizzle's two runs must produce identical
text (asserted); whether llama.cpp's text equals ours is reported. Swizzle's acceptance rate
is accepted / drafted tokens.

Usage: bench_edit256.py [--gguf PATH] [--reps 5] [--threads 2] [--max-tokens 320] [--json out.json]
       bench_edit256.py --print-chatml   (the prompt as ChatML text, for bench/gpu_speed.sh)
Needs llama-cpp-python in the venv (the peer; not in requirements.txt)."""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SYSTEM = "You are a careful coding assistant. When asked to edit a file, output the complete edited file and nothing else."
EDIT = "In the file below, rename the function `parse_record` to `parse_entry` (and its call sites). Change nothing else."
# The file: ~256 tokens of Python with the Qwen2.5 tokenizer (the script prints the count).
FILE = '''import csv
import sys
from dataclasses import dataclass


@dataclass
class Record:
    name: str
    team: str
    score: int


def parse_record(row):
    """Turn one CSV row into a Record; None for a malformed row."""
    if len(row) != 3:
        return None
    name, team, score = (field.strip() for field in row)
    try:
        return Record(name, team, int(score))
    except ValueError:
        return None


def load(path):
    with open(path, newline="") as f:
        rows = [parse_record(r) for r in csv.reader(f)]
    return [r for r in rows if r is not None]


def best_by_team(records):
    best = {}
    for r in records:
        if r.team not in best or r.score > best[r.team].score:
            best[r.team] = r
    return best


if __name__ == "__main__":
    for team, r in sorted(best_by_team(load(sys.argv[1])).items()):
        print(f"{team}: {r.name} ({r.score})")
'''
USER = f"{EDIT}\n\n```python\n{FILE}```"


def chatml_prompt():
    """The chat prompt above rendered in ChatML (the template of SmolLM2-Instruct and the
    Qwen models), ending with the assistant's turn: the text bench/gpu_speed.sh gives both
    engines as a raw prompt (special tokens parsed), so they see the same tokens."""
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{USER}<|im_end|>\n"
            "<|im_start|>assistant\n")

TIMING_RE = {
    "prompt": re.compile(r"prompt: (\d+) tokens \((\d+) cached\) in ([\d.]+) ms"),
    "gen": re.compile(r"generated: (\d+) tokens in ([\d.]+) ms"),
    "spec": re.compile(r"speculative: \w+, drafted (\d+), accepted (\d+)"),
}


def qwen_gguf():
    if os.environ.get("SWZ_QWEN_GGUF"):
        return os.environ["SWZ_QWEN_GGUF"]
    return subprocess.run([os.path.join(ROOT, "scripts", "fetch-qwen.sh")], check=True, capture_output=True,
                          text=True).stdout.strip()


def swizzle_run(rt, pkg, spec, threads, max_tokens):
    out = subprocess.run([rt, "run", pkg, "--chat", "-s", SYSTEM, "-p", USER, "--temp", "0", "-n", str(max_tokens), "-t",
                          str(threads), "--spec" if spec else "--no-spec"], check=True, capture_output=True, text=True)
    p = TIMING_RE["prompt"].search(out.stderr)
    g = TIMING_RE["gen"].search(out.stderr)
    s = TIMING_RE["spec"].search(out.stderr)
    if not (p and g and s):
        raise RuntimeError(f"unexpected swizzle-rt output:\n{out.stderr}")
    return {"text": out.stdout.rstrip("\n"), "prompt_tokens": int(p.group(1)), "prefill_s": float(p.group(3)) / 1e3,
            "completion_tokens": int(g.group(1)), "decode_s": float(g.group(2)) / 1e3, "drafted": int(s.group(1)),
            "accepted": int(s.group(2))}


class LlamaCppPeer:
    def __init__(self, gguf, threads, lookup):
        import llama_cpp
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
        # llama-cpp-python's draft verification reads the logits of every drafted position,
        # which needs logits_all (its documented requirement for draft_model).
        self.llm = llama_cpp.Llama(model_path=gguf, n_ctx=1024, n_threads=threads, n_threads_batch=threads,
                                   n_batch=512, verbose=False, seed=0, logits_all=lookup,
                                   draft_model=LlamaPromptLookupDecoding(num_pred_tokens=10) if lookup else None)

    def run(self, max_tokens):
        msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
        self.llm.reset()  # no prompt reuse across repetitions: every run prefills, as swizzle-rt run does
        t0 = time.perf_counter()
        first = None
        text = ""
        n = 0
        for chunk in self.llm.create_chat_completion(msgs, temperature=0.0, max_tokens=max_tokens, stream=True):
            delta = chunk["choices"][0]["delta"].get("content")
            if delta:
                if first is None:
                    first = time.perf_counter()
                text += delta
                n += 1
        end = time.perf_counter()
        # Completion tokens: llama.cpp's own count of the text (stream chunks may merge tokens).
        n_tok = len(self.llm.tokenize(text.encode(), add_bos=False, special=False)) if text else 0
        return {"text": text, "completion_tokens": n_tok, "prefill_s": (first or end) - t0, "decode_s": end - (first or end)}


def summarize(runs):
    dec = statistics.median(r["decode_s"] for r in runs)
    e2e = statistics.median(r["decode_s"] + r["prefill_s"] for r in runs)
    n = runs[0]["completion_tokens"]
    # Decode rate counts the tokens after the first (the first comes from prefill).
    out = {"completion_tokens": n, "decode_seconds": [r["decode_s"] for r in runs],
           "prefill_seconds": [r["prefill_s"] for r in runs], "decode_tok_s": (n - 1) / dec if dec > 0 else 0.0,
           "e2e_tok_s": n / e2e if e2e > 0 else 0.0}
    if "drafted" in runs[0]:
        out["drafted"], out["accepted"] = runs[0]["drafted"], runs[0]["accepted"]
        out["acceptance_rate"] = runs[0]["accepted"] / max(runs[0]["drafted"], 1)
    return out


def main():
    if sys.argv[1:] == ["--print-chatml"]:  # for bench/gpu_speed.sh
        sys.stdout.write(chatml_prompt())
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=None, help="default: Qwen2.5-Coder-0.5B-Instruct Q4_K_M (scripts/fetch-qwen.sh)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--max-tokens", type=int, default=320)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--no-llamacpp", action="store_true", help="swizzle only (no peer installed)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    gguf = args.gguf or qwen_gguf()
    rt = os.path.join(args.build, "server", "swizzle-rt")
    runs = {"swizzle plain": [], "swizzle spec": [], "llama.cpp plain": [], "llama.cpp lookup": []}
    peers = {}
    if not args.no_llamacpp:
        peers = {"llama.cpp plain": LlamaCppPeer(gguf, args.threads, False),
                 "llama.cpp lookup": LlamaCppPeer(gguf, args.threads, True)}
    with tempfile.TemporaryDirectory() as tmp:
        pkg = os.path.join(tmp, "model.swz")
        subprocess.run([os.path.join(args.build, "compiler", "swizzlec"), "compile", gguf, "--target", "cpu", "-o", pkg],
                       check=True, stdout=subprocess.DEVNULL)
        for rep in range(args.reps):
            runs["swizzle plain"].append(swizzle_run(rt, pkg, False, args.threads, args.max_tokens))
            runs["swizzle spec"].append(swizzle_run(rt, pkg, True, args.threads, args.max_tokens))
            for name, peer in peers.items():
                runs[name].append(peer.run(args.max_tokens))
            print(f"rep {rep + 1}/{args.reps}: " + ", ".join(
                f"{k} {r[-1]['decode_s']:.2f}s" for k, r in runs.items() if r), file=sys.stderr)
    plain, spec = runs["swizzle plain"], runs["swizzle spec"]
    for a, b in zip(plain, spec):
        if a["text"] != b["text"]:
            raise SystemExit("FAIL: swizzle's output differs with speculative decoding on and off")
    res = {k: summarize(v) for k, v in runs.items() if v}
    base = res["swizzle plain"]["decode_tok_s"]
    for k in res:
        res[k]["vs_swizzle_plain"] = res[k]["decode_tok_s"] / base if base else 0.0
        if k.startswith("llama.cpp"):
            res[k]["same_text_as_swizzle"] = runs[k][0]["text"].strip().strip("`") == plain[0]["text"].strip().strip("`")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    peer_version = None
    if peers:
        import llama_cpp
        peer_version = f"llama-cpp-python {llama_cpp.__version__} (CPU build)"
    out = {"date": datetime.date.today().isoformat(), "commit": commit, "benchmark": "edit256",
           "machine": f"{platform.machine()} {os.cpu_count()} cores",
           "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
           "gguf": os.path.basename(gguf), "threads": args.threads, "reps": args.reps, "interleaved": True,
           "prompt_tokens": plain[0]["prompt_tokens"], "peer": peer_version, "results": res}
    print(f"edit256: {out['gguf']}, prompt {out['prompt_tokens']} tokens, {args.threads} threads, median of {args.reps}")
    print("| engine | completion tokens | decode tok/s | end-to-end tok/s | acceptance rate | decode vs swizzle plain |")
    print("|---|---|---|---|---|---|")
    for k, r in res.items():
        acc = f"{r['acceptance_rate']:.2f} ({r['accepted']}/{r['drafted']})" if "acceptance_rate" in r else "n/a"
        print(f"| {k} | {r['completion_tokens']} | {r['decode_tok_s']:.1f} | {r['e2e_tok_s']:.1f} | {acc} | "
              f"{r['vs_swizzle_plain']:.2f}x |")
    path = args.json or os.path.join(ROOT, "bench", "results", f"edit256-cpu-{out['date']}-{commit}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
