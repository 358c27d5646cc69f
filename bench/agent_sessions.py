"""Realistic multi-turn coding-agent sessions over a real open-source project, for the
prefix-cache benchmark (bench_prefix_cache.py).

The project is `itsdangerous` (pure Python, BSD-3-Clause, pinned in requirements.txt);
its files are read from site-packages. Each session is what an OpenAI-wire coding agent
(aider, mini-swe-agent, Claude Code through a proxy) sends, turn after turn:

- a system prompt with the agent's rules and its tool schemas (as JSON text: agents that
  talk to servers without function calling put them in the prompt);
- a first user message with the task and the *pinned* files (full text, as aider's
  "added files" or an editor's open buffers);
- a growing conversation: scripted assistant tool calls (JSON) and the tool outputs that
  come back as user messages: directory listings, file excerpts, grep hits, unified diffs
  (made with difflib from a real edit of the real file), test-run logs.

Assistant turns are scripted, not generated, so both servers see byte-identical prompts
(what a replayed agent trace gives) and the cache behaviour is the servers', not the
model's. Session "edit-pinned-turn3" applies an edit to a pinned file at turn 3, and from
then on the pinned section carries the edited file (as aider re-sends edited files):
every cache loses the prefix from the edit point on.

`build_sessions(scale)` returns the sessions; `scale` (0..1] shortens the tool outputs,
so the driver can fit the longest prompt into a model's context (8192 for SmolLM2).
"""
from __future__ import annotations

import difflib
import importlib.metadata
import importlib.util
import json
import os
import re
from dataclasses import dataclass, field

PROJECT = "itsdangerous"

TOOLS = [
    {"name": "list_dir", "description": "List the files of a directory with their sizes in bytes.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "read_file", "description": "Read a file, optionally a range of lines (1-based, inclusive).",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "start": {"type": "integer"},
                                                     "end": {"type": "integer"}}, "required": ["path"]}},
    {"name": "grep", "description": "Search files for a regular expression; prints path:line:text.",
     "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
                    "required": ["pattern"]}},
    {"name": "apply_patch", "description": "Apply a unified diff to the working tree.",
     "parameters": {"type": "object", "properties": {"diff": {"type": "string"}}, "required": ["diff"]}},
    {"name": "run_tests", "description": "Run the test suite (pytest) and return its output.",
     "parameters": {"type": "object", "properties": {"args": {"type": "string"}}}},
]

SYSTEM = """You are a coding agent working in a checkout of the Python package `{project}` {version}.
Work in small, verifiable steps. To act, answer with exactly one JSON object
{{"tool": NAME, "args": {{...}}}} and nothing else; the tool's output comes back in the next
user message. When the task is done, answer in plain text with a short summary.

Rules:
- Read code before changing it; keep the existing style (type hints, docstrings).
- Patches are unified diffs against the current file; never rewrite whole files.
- Run the tests after every change; do not claim success with failing tests.
- Public behaviour and signatures stay backwards compatible unless the task says otherwise.

Tools (JSON schema):
{tools}
"""


@dataclass
class Session:
    name: str
    description: str
    turns: list = field(default_factory=list)  # turns[i]: the full messages list of request i+1


def project_dir() -> str:
    spec = importlib.util.find_spec(PROJECT)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{PROJECT} is not installed (pip install -r requirements.txt)")
    return spec.submodule_search_locations[0]


def read(name: str) -> str:
    with open(os.path.join(project_dir(), name), encoding="utf-8") as f:
        return f.read()


def cut(text: str, max_chars: int) -> str:
    """The first lines of `text` that fit in max_chars, with a truncation marker."""
    if len(text) <= max_chars:
        return text
    lines, n = [], 0
    for line in text.splitlines(keepends=True):
        if n + len(line) > max_chars:
            break
        lines.append(line)
        n += len(line)
    return "".join(lines) + f"... [{len(text) - n} more characters truncated]\n"


def numbered(text: str, start: int, end: int) -> str:
    lines = text.splitlines()
    return "\n".join(f"{i:4d}  {lines[i - 1]}" for i in range(start, min(end, len(lines)) + 1)) + "\n"


def pinned(files: dict) -> str:
    return "".join(f'<file path="{PROJECT}/{name}">\n{text}</file>\n' for name, text in files.items())


def tool_call(tool: str, **args) -> dict:
    return {"role": "assistant", "content": json.dumps({"tool": tool, "args": args})}


def tool_result(tool: str, output: str) -> dict:
    return {"role": "user", "content": f"[{tool} output]\n{output}"}


def listing() -> str:
    d = project_dir()
    return "".join(f"{os.path.getsize(os.path.join(d, n)):7d}  {PROJECT}/{n}\n"
                   for n in sorted(os.listdir(d)) if n.endswith(".py") or n == "py.typed")


def grep(pattern: str, names: list, max_chars: int) -> str:
    rx = re.compile(pattern)
    out = []
    for name in names:
        for i, line in enumerate(read(name).splitlines(), 1):
            if rx.search(line):
                out.append(f"{PROJECT}/{name}:{i}:{line}")
    return cut("\n".join(out) + "\n", max_chars)


def edit(name: str, old: str, new: str) -> tuple:
    """(edited text, unified diff) of replacing `old` (must occur once) by `new` in a real file."""
    text = read(name)
    if text.count(old) != 1:
        raise RuntimeError(f"{name}: the edit anchor occurs {text.count(old)} times (package version changed?)")
    edited = text.replace(old, new)
    diff = "".join(difflib.unified_diff(text.splitlines(keepends=True), edited.splitlines(keepends=True),
                                        f"a/{PROJECT}/{name}", f"b/{PROJECT}/{name}"))
    return edited, diff


def pytest_log(passed: int, failed: list, seconds: float) -> str:
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.2, pytest-8.3.4, pluggy-1.5.0",
             f"rootdir: /work/{PROJECT}", f"collected {passed + len(failed)} items", ""]
    for name in ("test_encoding.py", "test_signer.py", "test_serializer.py", "test_timed.py"):
        lines.append(f"tests/{name} " + "." * 12 + ("F" if any(name in f for f in failed) else "") + "  [ 25%]")
    for f in failed:
        lines += ["", "=================================== FAILURES ===================================",
                  f"_____ {f} _____", "    def test_roundtrip():", ">       assert base64_decode(base64_encode(b'\\xff')) == b'\\xff'",
                  "E       AssertionError", ""]
    summary = f"{len(failed)} failed, {passed} passed" if failed else f"{passed} passed"
    lines.append(f"========================= {summary} in {seconds:.2f}s =========================")
    return "\n".join(lines) + "\n"


# Questions about the pinned files (encoding.py, exc.py), asked after a session's last turn
# (bench_prefix_cache.py --questions): whether a cache mode that changes the prompt (reorder)
# changes what the model can answer about the code. Each has its answer's keywords (any one,
# case-sensitive, as a whole word in the first 32 generated tokens), read off itsdangerous's
# sources.
QUESTIONS = [
    ("Which exception class does base64_decode raise for invalid input? Answer with the class name only.",
     ["BadData"]),
    ("In exc.py, what is the base class of BadSignature? Answer with the class name only.", ["BadData"]),
    ("In exc.py, what is the base class of SignatureExpired? Answer with the class name only.",
     ["BadTimeSignature"]),
    ("Which base64 function from the standard library does base64_encode call? Answer with the function name only.",
     ["urlsafe_b64encode"]),
    ("Which character does base64_encode strip from the end of its result? Answer with the character only.",
     ["="]),
    ("What is the default value of the encoding parameter of want_bytes? Answer with the value only.",
     ["utf-8", "utf8"]),
    ("Which struct format string does encoding.py use to pack 64-bit integers? Answer with the format string only.",
     [">Q"]),
    ("Which function in encoding.py converts bytes back to an integer? Answer with the function name only.",
     ["bytes_to_int"]),
]


def build_sessions(scale: float = 1.0) -> list:
    """The benchmark's sessions; tool outputs are cut to `scale` of their full size."""
    version = importlib.metadata.version(PROJECT)
    system = SYSTEM.format(project=PROJECT, version=version, tools=json.dumps(TOOLS, indent=1))
    big = max(400, int(6000 * scale))   # a file excerpt or a long log
    small = max(200, int(1500 * scale))  # grep hits, listings

    enc_edited, enc_diff = edit("encoding.py", '    string += b"=" * (-len(string) % 4)\n',
                                '    # Restore the padding that base64_encode strips.\n'
                                '    string += b"=" * (-len(string) % 4)\n')
    signer = read("signer.py")
    # The change under review: verify_signature stops swallowing every exception.
    _, signer_diff = edit("signer.py", "            sig = base64_decode(sig)\n        except Exception:\n",
                          "            sig = base64_decode(sig)\n        except BadData:\n")

    sessions = []

    # 1. A feature session: pinned encoding.py + exc.py; explores, patches, tests.
    files = {"encoding.py": read("encoding.py"), "exc.py": read("exc.py")}
    task = ("Task: base64_decode should reject input that contains characters outside the URL-safe "
            "alphabet with BadData instead of silently ignoring them. Add the check and a test.\n\n"
            "Pinned files:\n")
    first = [{"role": "system", "content": system}, {"role": "user", "content": task + pinned(files)}]
    steps = [
        (tool_call("list_dir", path=PROJECT), tool_result("list_dir", listing())),
        (tool_call("grep", pattern="base64_decode", path=PROJECT),
         tool_result("grep", grep(r"base64_decode", ["encoding.py", "signer.py", "serializer.py", "timed.py",
                                                      "url_safe.py"], small))),
        (tool_call("read_file", path=f"{PROJECT}/signer.py", start=1, end=120),
         tool_result("read_file", cut(numbered(signer, 1, 120), big))),
        (tool_call("apply_patch", diff=enc_diff), tool_result("apply_patch", f"Applied 1 hunk to {PROJECT}/encoding.py.")),
        (tool_call("run_tests", args="-q"), tool_result("run_tests", cut(pytest_log(61, ["tests/test_encoding.py::test_roundtrip"], 0.42), big))),
        (tool_call("read_file", path=f"{PROJECT}/timed.py", start=1, end=80),
         tool_result("read_file", cut(numbered(read("timed.py"), 1, 80), big))),
        (tool_call("run_tests", args="-q tests/test_encoding.py"), tool_result("run_tests", pytest_log(62, [], 0.39))),
    ]
    s = Session("feature", "pinned encoding.py + exc.py; list, grep, read, patch, test, read, test")
    msgs = list(first)
    s.turns.append(list(msgs))
    for call, result in steps:
        msgs += [call, result]
        s.turns.append(list(msgs))
    sessions.append(s)

    # 2. The same start, but at turn 3 the agent edits a pinned file and the pinned
    #    section is re-sent with the edited text (the prefix breaks inside message 1).
    s = Session("edit-pinned-turn3", "as 'feature', with an edit to pinned encoding.py applied at turn 3")
    patch = (tool_call("apply_patch", diff=enc_diff), tool_result("apply_patch", f"Applied 1 hunk to {PROJECT}/encoding.py."))
    msgs = list(first)
    s.turns.append(list(msgs))
    for turn, step in enumerate([steps[0], patch, steps[1], steps[2], steps[4], steps[5]], start=2):
        if turn == 3:  # the patched pinned file replaces the original in message 1
            msgs[1] = {"role": "user", "content": task + pinned(dict(files, **{"encoding.py": enc_edited}))}
        msgs += list(step)
        s.turns.append(list(msgs))
    sessions.append(s)

    # 3. A review session on other files: pinned url_safe.py + a diff to review.
    files3 = {"url_safe.py": read("url_safe.py")}
    review = ("Task: review this change to signer.py for correctness and style; answer with findings.\n\n"
              f"```diff\n{signer_diff}```\n\nPinned files:\n")
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": review + pinned(files3)}]
    s = Session("review", "pinned url_safe.py + a diff; reads signer.py and serializer.py, greps")
    s.turns.append(list(msgs))
    for call, result in [
        (tool_call("read_file", path=f"{PROJECT}/signer.py", start=200, end=270),
         tool_result("read_file", cut(numbered(signer, 200, 270), big))),
        (tool_call("grep", pattern=r"def (sign|unsign|verify)", path=PROJECT),
         tool_result("grep", grep(r"def (sign|unsign|verify)", ["signer.py", "timed.py", "serializer.py"], small))),
        (tool_call("read_file", path=f"{PROJECT}/serializer.py", start=1, end=90),
         tool_result("read_file", cut(numbered(read("serializer.py"), 1, 90), big))),
        (tool_call("run_tests", args="-q tests/test_signer.py"), tool_result("run_tests", pytest_log(24, [], 0.21))),
    ]:
        msgs += [call, result]
        s.turns.append(list(msgs))
    sessions.append(s)
    return sessions


def build_edit_twice_session(scale: float = 1.0) -> Session:
    """'edit-pinned-twice' (cache-mode comparison of bench_prefix_cache.py --modes): as
    'edit-pinned-turn3', and at turn 5 the agent edits the same function of the pinned
    encoding.py again (the check the task asks for), so the pinned section changes twice.
    The case `reorder` is for: after the first edit the edited function sits at the end of
    its file's region, so the second edit keeps the rest of the file cached."""
    version = importlib.metadata.version(PROJECT)
    system = SYSTEM.format(project=PROJECT, version=version, tools=json.dumps(TOOLS, indent=1))
    big = max(400, int(6000 * scale))
    small = max(200, int(1500 * scale))
    enc = read("encoding.py")
    first_old = '    string += b"=" * (-len(string) % 4)\n'
    first_new = '    # Restore the padding that base64_encode strips.\n' + first_old
    assert first_old in enc
    enc1 = enc.replace(first_old, first_new, 1)
    second_new = ('    if string.strip(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_="):\n'
                  '        raise BadData("Invalid base64-encoded data")\n') + first_new
    enc2 = enc1.replace(first_new, second_new, 1)
    _, diff1 = edit("encoding.py", first_old, first_new)
    diff2 = f"--- a/{PROJECT}/encoding.py\n+++ b/{PROJECT}/encoding.py\n" + "".join(
        "+" + l + "\n" for l in second_new.splitlines()[:2])
    files = {"encoding.py": enc, "exc.py": read("exc.py")}
    task = ("Task: base64_decode should reject input that contains characters outside the URL-safe "
            "alphabet with BadData instead of silently ignoring them. Add the check and a test.\n\n"
            "Pinned files:\n")
    signer = read("signer.py")
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": task + pinned(files)}]
    s = Session("edit-pinned-twice", "as 'edit-pinned-turn3', with a second edit of the same function at turn 5")
    s.turns.append(list(msgs))
    steps = [
        (tool_call("list_dir", path=PROJECT), tool_result("list_dir", listing())),
        (tool_call("apply_patch", diff=diff1), tool_result("apply_patch", f"Applied 1 hunk to {PROJECT}/encoding.py.")),
        (tool_call("grep", pattern="base64_decode", path=PROJECT),
         tool_result("grep", grep(r"base64_decode", ["encoding.py", "signer.py", "serializer.py"], small))),
        (tool_call("apply_patch", diff=diff2), tool_result("apply_patch", f"Applied 1 hunk to {PROJECT}/encoding.py.")),
        (tool_call("read_file", path=f"{PROJECT}/signer.py", start=1, end=120),
         tool_result("read_file", cut(numbered(signer, 1, 120), big))),
        (tool_call("run_tests", args="-q tests/test_encoding.py"), tool_result("run_tests", pytest_log(62, [], 0.39))),
        (tool_call("read_file", path=f"{PROJECT}/timed.py", start=1, end=80),
         tool_result("read_file", cut(numbered(read("timed.py"), 1, 80), big))),
    ]
    for turn, step in enumerate(steps, start=2):
        if turn == 3:
            msgs[1] = {"role": "user", "content": task + pinned(dict(files, **{"encoding.py": enc1}))}
        if turn == 5:
            msgs[1] = {"role": "user", "content": task + pinned(dict(files, **{"encoding.py": enc2}))}
        msgs += list(step)
        s.turns.append(list(msgs))
    return s


if __name__ == "__main__":
    for sess in build_sessions():
        sizes = [sum(len(m["content"]) for m in t) for t in sess.turns]
        print(f"{sess.name}: {len(sess.turns)} turns, prompt chars {sizes}")
