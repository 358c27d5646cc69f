"""`python -m llama_cpp.server` with llama.cpp's extra CPU buffer types off
(llama_model_params.use_extra_bufts = false): a GGML_NATIVE build on a CPU that reports AMX
runs AMX tile instructions from those buffers, and a VM that does not grant AMX state
kills the process with SIGILL (seen on the 2-core dev VM, 2026-12-01). Same arguments as
llama_cpp.server."""
import runpy

import llama_cpp.llama_cpp as lc  # llama.py calls lc.llama_model_default_params() through this module

_default = lc.llama_model_default_params


def _params():
    p = _default()
    p.use_extra_bufts = False
    return p


lc.llama_model_default_params = _params
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
