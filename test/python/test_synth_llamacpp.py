"""`swizzlec synth` output loads and runs in llama.cpp (llama-cpp-python).

Each case writes a small random-weight GGUF (2 layers, rows that are multiples of 256 so
the k-quants apply) with the swizzlec binary, loads it with llama.cpp, evaluates a few
tokens and checks what synth promises: llama.cpp reads the intended shape, the logits are
finite with std near kHeadLogitStd (6, synth.h), and greedy decoding is reproducible.

The swizzlec binary: $SWIZZLEC, else build/compiler/swizzlec under the repository root.
Run: /work/main/.venv/bin/python -m pytest test/python/test_synth_llamacpp.py
"""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

# Needs llama-cpp-python, which builds llama.cpp from source (too slow for CI): this
# module is the `llamacpp` tier, deselected by scripts/test-all.sh unless SWZ_WITH_LLAMACPP=1.
pytestmark = pytest.mark.llamacpp
import llama_cpp  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
SWIZZLEC = os.environ.get("SWZ_SWIZZLEC", str(ROOT / "build" / "compiler" / "swizzlec"))

SMALL = ["--n-layer", "2", "--n-embd", "256", "--n-head", "4", "--n-head-kv", "2",
         "--head-dim", "64", "--n-ff", "512", "--n-ctx", "512"]


def synth(tmp_path, arch, qtype, *extra):
    out = tmp_path / f"{arch}-{qtype}.gguf"
    subprocess.run([SWIZZLEC, "synth", "--arch", arch, "--type", qtype, "--seed", "3", *SMALL,
                    *extra, "-o", str(out)], check=True, capture_output=True, text=True)
    return out


def load(path):
    return llama_cpp.Llama(model_path=str(path), vocab_only=False, n_ctx=256, n_threads=2,
                           logits_all=True, verbose=False)


def eval_logits(llm, tokens):
    llm.reset()
    llm.eval(tokens)
    return np.array(llm.scores[:llm.n_tokens], dtype=np.float64)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
@pytest.mark.parametrize("qtype", ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q4_k", "q5_k", "q6_k"])
def test_llamacpp_loads_and_evaluates(tmp_path, arch, qtype):
    path = synth(tmp_path, arch, qtype, "--n-vocab", "2000")
    llm = load(path)
    assert llm.n_vocab() == 2000
    assert llm.metadata["general.architecture"] == arch
    assert int(llm.metadata[f"{arch}.block_count"]) == 2
    tokens = llm.tokenize(b"def add(a, b):\n    return a + b", add_bos=False)
    # The built-in vocabulary has no merges: one token per byte.
    assert len(tokens) == len(b"def add(a, b):\n    return a + b")
    logits = eval_logits(llm, tokens)
    assert logits.shape == (len(tokens), 2000)
    assert np.isfinite(logits).all()
    std = logits.std(axis=1)
    assert np.all((std > 4.0) & (std < 8.5)), std
    # Greedy continuation is a deterministic function of the file.
    again = eval_logits(llm, tokens)
    np.testing.assert_array_equal(logits.argmax(axis=1), again.argmax(axis=1))


def test_same_arguments_give_the_same_file(tmp_path):
    a = synth(tmp_path, "qwen3", "q4_k", "--n-vocab", "600")
    data = a.read_bytes()
    b = synth(tmp_path, "qwen3", "q4_k", "--n-vocab", "600", "-j", "1")
    assert b.read_bytes() == data


def smollm2_path():
    sys.path.insert(0, str(ROOT / "test" / "parity"))
    import models
    try:
        path = pathlib.Path(models.default_gguf())
    except RuntimeError:
        path = None
    if path is None or not path.is_file():
        pytest.skip("SmolLM2 GGUF not installed (scripts/setup.sh)")
    return path


def test_vocab_from_a_real_model_tokenizes_like_it(tmp_path):
    real = smollm2_path()
    path = synth(tmp_path, "llama", "q8_0", "--vocab-from", str(real))
    llm = load(path)
    ref = llama_cpp.Llama(model_path=str(real), vocab_only=True, verbose=False)
    assert llm.n_vocab() == ref.n_vocab() == 49152
    text = "<|im_start|>user\nWrite a function that adds two numbers.<|im_end|>\n"
    toks = llm.tokenize(text.encode(), add_bos=False, special=True)
    assert toks == ref.tokenize(text.encode(), add_bos=False, special=True)
    logits = eval_logits(llm, toks)
    assert np.isfinite(logits).all()
