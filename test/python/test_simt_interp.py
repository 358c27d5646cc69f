"""The PTX-only tensor-core attention kernels (codegen/kernels/attention_f16kv_mma.mlir)
run on the CPU: swizzle-opt materialises the swizzle and prints the kernel in generic
form, codegen/check/simt_interp.py interprets it (nvgpu ldmatrix / mma.sync / cp.async
per the PTX ISA fragment layouts, 128 threads in lockstep), and swz-case-io checks the
results against the float64 references of codegen/check/cases_attention.cpp (the same
cases the H200 run uses). A kernel with V read without .trans must fail them.

Environment: SWZ_BUILD_DIR (default build) holds compiler/mlir/swizzle-opt and
codegen/swz-case-io; SWZ_REQUIRE=1 fails instead of skipping when they are missing.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SWZ_BUILD_DIR", ROOT / "build"))
KERNEL = ROOT / "codegen" / "kernels" / "attention_f16kv_mma.mlir"
MODULE = "swz_attention_f16kv_mma"
sys.path.insert(0, str(ROOT / "codegen" / "check"))
import simt_interp  # noqa: E402


def _tool(rel: str) -> Path:
    p = BUILD / rel
    if not p.exists():
        if os.environ.get("SWZ_REQUIRE") == "1":
            pytest.fail(f"{p} missing (SWZ_REQUIRE=1)")
        pytest.skip(f"{p} missing")
    return p


def _generic_ir(src: Path, out: Path) -> Path:
    subprocess.run([str(_tool("compiler/mlir/swizzle-opt")), str(src), "-swz-materialize-swizzle",
                    "--mlir-print-op-generic", "-o", str(out)], check=True)
    return out


def _dump(tmp: Path, *only: str) -> list[str]:
    r = subprocess.run([str(_tool("codegen/swz-case-io")), "dump", "ptx", MODULE, str(tmp), *only],
                       check=True, capture_output=True, text=True)
    return [line.split()[0] for line in r.stdout.splitlines()]


def _check(tmp: Path, *only: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(_tool("codegen/swz-case-io")), "check", "ptx", MODULE, str(tmp), *only],
                          capture_output=True, text=True)


def test_mma_attention_cases_pass_in_the_interpreter(tmp_path):
    ir = _generic_ir(KERNEL, tmp_path / "k.mlir")
    cases = _dump(tmp_path / "cases")
    assert len(cases) >= 10  # head_dim 64 and 128, prefill and split-K
    for c in cases:
        simt_interp.run_case_dir(str(ir), str(tmp_path / "cases" / c))
    r = _check(tmp_path / "cases")
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok   case") == len(cases)


def test_v_without_transpose_fails(tmp_path):
    # ldmatrix without .trans hands the P.V product V's rows as columns: the cases
    # must catch it (outputs off by O(1)). The smallest case (T = 1, context 65).
    r = subprocess.run([str(_tool("codegen/swz-case-io")), "list", "ptx", MODULE],
                       check=True, capture_output=True, text=True)
    small = next(line.split()[0] for line in r.stdout.splitlines() if "T=1 pos0=64 " in line)
    bad = tmp_path / "bad.mlir"
    bad.write_text(KERNEL.read_text().replace("transpose = true", "transpose = false"))
    ir = _generic_ir(bad, tmp_path / "k.mlir")
    assert _dump(tmp_path / "cases", small) == [small]
    simt_interp.run_case_dir(str(ir), str(tmp_path / "cases" / small))
    r = _check(tmp_path / "cases", small)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"FAIL {small} " in r.stdout
