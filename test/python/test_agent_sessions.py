"""The session generator of the prefix-cache benchmark (bench/agent_sessions.py): sessions
are built from the installed `itsdangerous` sources, grow turn by turn as an agent's
conversation does (each prompt extends the previous one), and the edit session changes
its pinned file at turn 3 exactly as the diff it shows says. No model needed."""
from __future__ import annotations

import importlib.util
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import agent_sessions  # noqa: E402


def pkg_file(name):
    d = importlib.util.find_spec("itsdangerous").submodule_search_locations[0]
    return open(os.path.join(d, name), encoding="utf-8").read()


def test_sessions_are_deterministic_and_grow_by_appending():
    a, b = agent_sessions.build_sessions(), agent_sessions.build_sessions()
    assert [s.turns for s in a] == [s.turns for s in b]
    assert [s.name for s in a] == ["feature", "edit-pinned-turn3", "review"]
    for s in a:
        assert len(s.turns) >= 5
        for t in s.turns:
            assert t[0]["role"] == "system" and '"apply_patch"' in t[0]["content"]  # tool schemas
            assert [m["role"] for m in t[1:]] == ["user", "assistant"] * ((len(t) - 2) // 2) + ["user"]
        for i in range(1, len(s.turns)):
            prev, cur = s.turns[i - 1], s.turns[i]
            assert len(cur) == len(prev) + 2
            if s.name == "edit-pinned-turn3" and i == 2:
                continue  # turn 3 re-sends the edited pinned file
            assert cur[:len(prev)] == prev, (s.name, i)


def test_pinned_files_are_the_installed_sources():
    feature = agent_sessions.build_sessions()[0]
    first_user = feature.turns[0][1]["content"]
    assert pkg_file("encoding.py") in first_user and pkg_file("exc.py") in first_user


def test_turn3_edit_replaces_the_pinned_file_by_the_patched_text():
    s = agent_sessions.build_sessions()[1]
    t2, t3 = s.turns[1], s.turns[2]
    assert t2[1]["content"] != t3[1]["content"]
    assert t2[0] == t3[0]  # the system prompt is still shared
    call = json.loads(t3[-2]["content"])
    assert call["tool"] == "apply_patch" and call["args"]["diff"].startswith("--- a/itsdangerous/encoding.py")
    original = pkg_file("encoding.py")
    assert original in t2[1]["content"] and original not in t3[1]["content"]
    added = [l[1:] for l in call["args"]["diff"].splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert added and all(line in t3[1]["content"] for line in added)
    # The two prompts share everything up to the edit point inside the pinned encoding.py.
    a, b = t2[1]["content"], t3[1]["content"]
    common = len(os.path.commonprefix([a, b]))
    start = a.index('<file path="itsdangerous/encoding.py">')
    assert start + len(original) // 2 < common < start + len(original)


def test_scale_shrinks_tool_outputs_but_keeps_the_structure():
    full, small = agent_sessions.build_sessions(1.0), agent_sessions.build_sessions(0.2)
    for f, s in zip(full, small):
        assert len(f.turns) == len(s.turns)
        assert sum(len(m["content"]) for m in s.turns[-1]) < sum(len(m["content"]) for m in f.turns[-1])


def test_question_answers_are_read_off_the_pinned_files():
    # bench_prefix_cache --questions scores an answer by its keywords: each keyword must be
    # what the pinned sources actually say (a question whose key is not in them scores
    # every mode wrong and compares nothing).
    import re
    sources = pkg_file("encoding.py") + pkg_file("exc.py")
    feature = agent_sessions.build_sessions()[0]
    assert "encoding.py" in feature.turns[-1][1]["content"] and "exc.py" in feature.turns[-1][1]["content"]
    assert len(agent_sessions.QUESTIONS) == 8
    for question, keys in agent_sessions.QUESTIONS:
        assert question.endswith("only."), question
        assert any(re.search(rf"(?<!\w){re.escape(k)}(?!\w)", sources) for k in keys), (question, keys)
    assert re.search(r"class BadSignature\(BadData\)", sources)
    assert re.search(r"class SignatureExpired\(BadTimeSignature\)", sources)
    assert 'struct.Struct(">Q")' in sources and 'encoding: str = "utf-8"' in sources
