"""The PTX-only kernels run on the CPU: the tensor-core prefill GEMM (gemm_f16.mlir) and
attention (codegen/kernels/attention_f16kv_mma.mlir) and the int8 decode GEMVs (gemv_q8x.mlir:
quantize_q8_x, matmul_<type>_q8x for Q4_K, Q8_0, Q6_K, Q4_1, Q5_0 with dp4a) and F16's
tensor-core decode GEMV (gemv_f16_mma.mlir); swizzle-opt materialises the swizzle and prints the kernel in generic
form, test/gpu/simt_interp.py interprets it (nvgpu ldmatrix / mma.sync / cp.async
per the PTX ISA fragment layouts, 128 threads in lockstep), and swz-case-io checks the
results against the float64 references of test/gpu/cases_attention.cpp (the same
cases the H200 run uses). A kernel with V read without .trans must fail them.

Environment: SWZ_BUILD_DIR (default build) holds compiler/tools/swizzle-opt and
test/gpu/swz-case-io; SWZ_REQUIRE=1 fails instead of skipping when they are missing.
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
sys.path.insert(0, str(ROOT / "test" / "gpu"))
import simt_interp  # noqa: E402


def _tool(rel: str) -> Path:
    p = BUILD / rel
    if not p.exists():
        if os.environ.get("SWZ_REQUIRE") == "1":
            pytest.fail(f"{p} missing (SWZ_REQUIRE=1)")
        pytest.skip(f"{p} missing")
    return p


# Tile specs (gemm_f16.mlir) become kernels by a schedule, as swizzlec does it: sm_80's
# (mma.sync, which the interpreter runs). sm_90's wgmma kernel is checked on the H200
# (bench/tune_gemm.sh: against float64, and bitwise the mma.sync kernel's y).
SM80 = ROOT / "compiler" / "schedules" / "sm_80.json"


def _generic_ir(src: Path, out: Path, schedule: Path = SM80) -> Path:
    subprocess.run([str(_tool("compiler/tools/swizzle-opt")), str(src), f"-swz-apply-schedule=schedule={schedule}",
                    "-swz-lower-tiles", "-swz-materialize-swizzle", "--mlir-print-op-generic", "-o", str(out)],
                   check=True)
    return out


def _dump(tmp: Path, *only: str, module: str = MODULE) -> list[str]:
    r = subprocess.run([str(_tool("test/gpu/swz-case-io")), "dump", "ptx", module, str(tmp), *only],
                       check=True, capture_output=True, text=True)
    return [line.split()[0] for line in r.stdout.splitlines()]


def _check(tmp: Path, *only: str, module: str = MODULE) -> subprocess.CompletedProcess:
    return subprocess.run([str(_tool("test/gpu/swz-case-io")), "check", "ptx", module, str(tmp), *only],
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


GEMM = ROOT / "codegen" / "kernels" / "gemm_f16.mlir"


def _small_gemm_cases() -> list[str]:
    # gemm_f16's cases the interpreter runs in seconds: the exact 64x64x64 tile, T = 1
    # (N, K = 576: 9 column tiles, 9 k tiles through the 3-stage ring), T = 33, N = 100,
    # K = 544 with bias (partial row and column tiles, a 32-wide k tail) and T = 5, N = 40,
    # K = 32 (one partial k tile).
    return [line.split()[0] for line in _list("swz_gemm_f16")
            if any(f" {s}" in line + " " for s in ("T=64 N=64 K=64 ", "T=1 N=576 K=576 ",
                                                   "T=33 N=100 K=544 ", "T=5 N=40 K=32 "))]


def test_gemm_f16_cases_pass_in_the_interpreter(tmp_path):
    cases = _small_gemm_cases()
    assert len(cases) == 4
    _assert_all_ok(_interpret_and_check(tmp_path, GEMM, "swz_gemm_f16", cases), cases)


@pytest.mark.parametrize("gemm", [
    # 8 warps as 4 x 2 over 128 x 64, 32-wide k tiles (64-byte rows: Swizzle<2,3,3>), 2 stages.
    {"tile_m": 128, "tile_n": 64, "tile_k": 32, "warps": 8, "stages": 2,
     "swizzle": {"bits": 2, "base": 3, "shift": 3, "units": "elements"}},
    # 4 warps as 1 x 4 over 32 x 128, 4 stages of 32-wide k tiles.
    {"tile_m": 32, "tile_n": 128, "tile_k": 32, "warps": 4, "stages": 4,
     "swizzle": {"bits": 2, "base": 3, "shift": 3, "units": "elements"}},
], ids=["128x64x32-w8-s2", "32x128x32-w4-s4"])
def test_gemm_f16_from_another_schedule_is_bitwise_the_sm_80_one(tmp_path, monkeypatch, gemm):
    """A schedule edit regenerates the kernel (swz-lower-tiles): with other tile sizes,
    warps, stages and swizzle the kernel passes the float64 case and gives bitwise the
    sm_80 kernel's y (each output's k sum is the same mma.sync chain)."""
    import json
    import numpy as np
    label = "T=33 N=100 K=544 +bias"  # partial row and column tiles, a k tail
    case = next(line.split()[0] for line in _list("swz_gemm_f16") if line.split(None, 2)[2] == label)
    base = tmp_path / "base"
    ir = _generic_ir(GEMM, tmp_path / "k.mlir")
    assert _dump(base, case, module="swz_gemm_f16") == [case]
    simt_interp.run_case_dir(str(ir), str(base / case))

    sched = json.loads(SM80.read_text())
    sched["gemm"].update(gemm)
    (tmp_path / "alt.json").write_text(json.dumps(sched))
    alt_ir = _generic_ir(GEMM, tmp_path / "alt.mlir", tmp_path / "alt.json")
    text = alt_ir.read_text()
    threads = 32 * gemm["warps"]
    assert f"known_block_size = array<i32: {threads}, 1, 1>" in text
    assert f'swz.grid = "ceil(N/{gemm["tile_n"]}), ceil(T/{gemm["tile_m"]}), 1"' in text
    rows_x, rows_w = gemm["stages"] * gemm["tile_m"], gemm["stages"] * gemm["tile_n"]
    assert f"memref<{rows_x}x{gemm['tile_k']}xf16, #gpu.address_space<workgroup>>" in text
    assert f"memref<{rows_w}x{gemm['tile_k']}xf16, #gpu.address_space<workgroup>>" in text
    monkeypatch.setenv("SWZ_GEMM_TILE", f"{gemm['tile_m']}x{gemm['tile_n']}x{threads}")
    assert _dump(tmp_path / "cases", case, module="swz_gemm_f16") == [case]
    simt_interp.run_case_dir(str(alt_ir), str(tmp_path / "cases" / case))
    r = _check(tmp_path / "cases", case, module="swz_gemm_f16")
    assert r.returncode == 0 and f"ok   {case}" in r.stdout, r.stdout + r.stderr
    shipped = np.frombuffer((base / case / "out2.bin").read_bytes(), np.uint32)
    other = np.frombuffer((tmp_path / "cases" / case / "out2.bin").read_bytes(), np.uint32)
    assert shipped.shape == other.shape == (33 * 100,)
    assert (shipped == other).all(), f"{int((shipped != other).sum())} of {33 * 100} outputs differ"


def test_gemm_f16_fragment_error_fails(tmp_path):
    # The second n8 tile's B fragment taken from the first (one vector.extract position
    # changed in the generic IR): the cases must catch it.
    ir = _generic_ir(GEMM, tmp_path / "k.mlir")
    needle = "static_position = array<i64: 2>}> : (vector<4x2xf16>) -> vector<2xf16>"
    text = ir.read_text()
    assert needle in text
    ir.write_text(text.replace(needle, needle.replace("i64: 2", "i64: 0"), 1))
    case = _small_gemm_cases()[0]
    assert _dump(tmp_path / "cases", case, module="swz_gemm_f16") == [case]
    simt_interp.run_case_dir(str(ir), str(tmp_path / "cases" / case))
    r = _check(tmp_path / "cases", case, module="swz_gemm_f16")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"FAIL {case} " in r.stdout


def test_v_without_transpose_fails(tmp_path):
    # ldmatrix without .trans hands the P.V product V's rows as columns: the cases
    # must catch it (outputs off by O(1)). The smallest case (T = 1, context 65).
    r = subprocess.run([str(_tool("test/gpu/swz-case-io")), "list", "ptx", MODULE],
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


Q8X = ROOT / "codegen" / "kernels" / "gemv_q8x.mlir"


@pytest.fixture(autouse=True)
def _cases_as_shipped(monkeypatch):
    """The case runner's tuning switches (bench/tune_*.sh) never leak into these tests."""
    for name in ("SWZ_CHECK_ATTN_TIMING", "SWZ_CHECK_DEC_WARPS", "SWZ_CHECK_GEMV_7B", "SWZ_CHECK_Q8X_ROWS"):
        monkeypatch.delenv(name, raising=False)


def _variant_module(path: Path, spec: str) -> Path:
    """gen_quant_kernels.py --variant SPEC (e.g. "q4_k:rpw=2") written to `path`."""
    subprocess.run([sys.executable, str(ROOT / "codegen" / "kernels" / "gen_quant_kernels.py"),
                    "--variant", spec, "--out", str(path)], check=True)
    return path


def _list(module: str) -> list[str]:
    """`swz-case-io list ptx MODULE`: one line per case ("caseN entry label...")."""
    r = subprocess.run([str(_tool("test/gpu/swz-case-io")), "list", "ptx", module],
                       check=True, capture_output=True, text=True)
    return r.stdout.splitlines()


def _interpret_and_check(tmp_path, kernel: Path, module: str, cases: list[str]) -> subprocess.CompletedProcess:
    """Dumps `cases` of `module`, runs each in the interpreter on `kernel`, checks them."""
    ir = _generic_ir(kernel, tmp_path / "k.mlir")
    assert _dump(tmp_path / "cases", *cases, module=module) == cases
    for c in cases:
        simt_interp.run_case_dir(str(ir), str(tmp_path / "cases" / c))
    r = _check(tmp_path / "cases", *cases, module=module)
    print(r.stdout)
    return r


def _assert_all_ok(r: subprocess.CompletedProcess, cases: list[str]) -> None:
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok   case") == len(cases)


def _run_at_3_and_1_tokens(tmp_path, kernel: Path, module: str, case: str, t_arg: int, out: int):
    """Runs a T = 3 case of `module` in the interpreter as it is and again with T = 1
    (kernel argument `t_arg`), returning buffer `out` of both runs as raw u32 words."""
    import numpy as np
    ir = _generic_ir(kernel, tmp_path / "k.mlir")
    assert _dump(tmp_path / "cases", case, module=module) == [case]
    src = tmp_path / "cases" / case
    meta = (src / "meta.txt").read_text().split("\n")
    t_line = [i for i, l in enumerate(meta) if l.startswith("arg ")][t_arg]
    assert meta[t_line] == "arg i 3"
    outs = []
    for tokens in (3, 1):
        run = tmp_path / f"T{tokens}"
        run.mkdir()
        for f in src.iterdir():
            (run / f.name).write_bytes(f.read_bytes())
        m = list(meta)
        m[t_line] = f"arg i {tokens}"
        (run / "meta.txt").write_text("\n".join(m))
        simt_interp.run_case_dir(str(ir), str(run))
        outs.append(np.fromfile(run / f"out{out}.bin", np.uint32))
    return outs


def test_q8x_gemv_cases_pass_in_the_interpreter(tmp_path):
    # gemv_q8x's cases but the full-size ones (minutes in the interpreter).
    # (Q4_K's tensor-core kernels: test_q4k_mma_gemv_cases_pass_in_the_interpreter.)
    small = [line.split()[0] for line in _list("swz_gemv_q8x")
             if "N=18944" not in line and "N=1024 " not in line and "N=3584" not in line
             and "N=2048" not in line and "N=3072" not in line and "_mma" not in line]
    assert len(small) == 30  # the quantizer, RMSNorm and SwiGLU writing int8 (2 each); q4_k, q8_0, q6_k, q4_1, q5_0 at T = 1, 3, 9, merged 3 and 2 outputs
    _assert_all_ok(_interpret_and_check(tmp_path, Q8X, "swz_gemv_q8x", small), small)


@pytest.mark.parametrize("rpw", [2, 3])
def test_q8x_gemv_with_more_rows_a_warp_passes_in_the_interpreter(tmp_path, monkeypatch, rpw):
    # The tuning parameter rpw (rows a warp, bench/tune_q8x.sh) for both types: a warp's
    # rows share each unit's activation loads, the rows of one warp may belong to two
    # outputs (merged q/k/v: 131 + 66 + 37 rows) or lie past the last row (T = 9: 7
    # rows); the cases launch the matching grid (SWZ_CHECK_Q8X_ROWS: 4 rpw rows a
    # workgroup).
    for t in ("q4_k", "q8_0", "q6_k", "q4_1", "q5_0"):
        monkeypatch.setenv("SWZ_CHECK_Q8X_ROWS", f"{t}:{4 * rpw}")
        cases = [line.split()[0] for line in _list("swz_gemv_q8x")
                 if f"matmul_{t}_q8x" in line and "N=18944" not in line and "N=1024 " not in line
                 and "N=3584" not in line and "N=2048" not in line and "N=3072" not in line]
        assert len(cases) == 5  # T = 1, 3, 9, merged 3 and 2 outputs
        (tmp_path / t).mkdir()
        src = tmp_path / f"{t}-rpw{rpw}.mlir"
        _variant_module(src, f"{t}:rpw={rpw}")
        _assert_all_ok(_interpret_and_check(tmp_path / t, src, "swz_gemv_q8x", cases), cases)


@pytest.mark.parametrize("t", ["q4_k", "q8_0", "q6_k", "q4_1", "q5_0"])
def test_q8x_gemv_one_token_reproduces_the_many_token_path_bitwise(tmp_path, t):
    # Speculative verification (and a batch) runs a token through the many-token path
    # (per-thread workgroup-memory slots, segment sums through workgroup memory and a
    # barrier), plain decoding through the one-token path (registers, shuffles only): the
    # two must add the same terms in the same order. The T = 3 case with a residual (every
    # lane and every 8-lane segment holds units: 47-152 a row) runs again with T = 1;
    # token 0's outputs must be equal bit for bit.
    import numpy as np
    line = next(l for l in _list("swz_gemv_q8x") if f"matmul_{t}_q8x T=3 N=131 " in l)
    case = line.split()[0]
    many, one = _run_at_3_and_1_tokens(tmp_path, Q8X, "swz_gemv_q8x", case, t_arg=16, out=5)
    assert np.array_equal(many[:131], one[:131])  # N0 = 131 rows of token 0


def _q4k_mma_small(entry: str | None = None) -> list[str]:
    return [line.split()[0] for line in _list("swz_gemv_q8x")
            if line.split()[1].startswith("matmul_q4_k_mma") and "N=18944" not in line and "N=3584" not in line
            and (entry is None or line.split()[1] == entry)]


def test_q4k_mma_gemv_cases_pass_in_the_interpreter(tmp_path):
    # matmul_q4_k_mma_q8x and _w8_q8x (Q4_K's sub-block dot products on mma.sync.m16n8k32,
    # 4 and 8 warps splitting K): T = 1 (577 rows, the last workgroup partial), 3
    # (residual), 9 (two token blocks, 7 rows, bias, in place; K = 256: one block for all
    # the warps), merged q/k/v and gate/up.
    small = _q4k_mma_small()
    assert len(small) == 10
    _assert_all_ok(_interpret_and_check(tmp_path, Q8X, "swz_gemv_q8x", small), small)


@pytest.mark.parametrize("warps,extra", [(2, ""), (4, ",pf=1,v2=0"), (8, ",pf=1,rolled=1")])
def test_q4k_mma_gemv_variants_pass_in_the_interpreter(tmp_path, monkeypatch, warps, extra):
    # The tuning parameters (bench/tune_q8x.sh): warps a workgroup splitting K (8: more warps
    # than the K = 256 and 512 cases have blocks), the next block's weights loaded ahead
    # (pf: a warp with no block loads the last one, never past it), 16-byte loads (v2=0), the
    # many-token loop's chunks in an scf.for (rolled).
    monkeypatch.setenv("SWZ_CHECK_Q8X_ROWS", f"q4k_mma:16x{warps}")
    cases = _q4k_mma_small("matmul_q4_k_mma_q8x")
    src = tmp_path / f"q4k-mma-w{warps}.mlir"
    _variant_module(src, f"q4k_mma:warps={warps}{extra}")
    _assert_all_ok(_interpret_and_check(tmp_path, src, "swz_gemv_q8x", cases), cases)


@pytest.mark.parametrize("variant", ["", "rolled=1"])
def test_q4k_mma_gemv_one_token_reproduces_the_many_token_path_bitwise(tmp_path, variant):
    # One token takes the kernel's own branch (every B column token t0; each thread one
    # chain, its C entry picked from the two mma); more tokens keep 8 chains a thread (their
    # chunks unrolled, or in an scf.for decoding the scales from a run-time index: rolled).
    # Both must add the same terms in the same order: token 0 of the T = 3 case alone and
    # among three, bit for bit (19 blocks a row: warps of 4 and 5 blocks).
    import numpy as np
    src = Q8X
    if variant:
        src = tmp_path / "variant.mlir"
        _variant_module(src, f"q4k_mma:{variant}")
    line = next(l for l in _list("swz_gemv_q8x") if "matmul_q4_k_mma_q8x T=3 N=131 " in l)
    many, one = _run_at_3_and_1_tokens(tmp_path, src, "swz_gemv_q8x", line.split()[0], t_arg=16, out=5)
    assert np.array_equal(many[:131], one[:131])


def test_q8_0_weights_read_unsigned_fail(tmp_path):
    # Q8_0 weights are signed int8: dp4a.u32 on them turns -1 into 255, and the cases
    # must catch it (and the interpreter must model dp4a's operand signedness).
    case = next(line.split()[0] for line in _list("swz_gemv_q8x") if "matmul_q8_0_q8x T=9 " in line)
    bad = tmp_path / "bad.mlir"
    bad.write_text(Q8X.read_text().replace("dp4a.s32.s32", "dp4a.u32.s32"))
    r = _interpret_and_check(tmp_path, bad, "swz_gemv_q8x", [case])
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"FAIL {case} " in r.stdout


F16_MMA = ROOT / "codegen" / "kernels" / "gemv_f16_mma.mlir"


def _f16_mma_small(entry: str | None = None) -> list[str]:
    return [line.split()[0] for line in _list("swz_gemv_f16_mma") if "N=18944" not in line and "N=3584" not in line
            and (entry is None or line.split()[1] == entry)]


def test_f16_mma_gemv_cases_pass_in_the_interpreter(tmp_path):
    # matmul_f16_mma and matmul_f16_mma_w16 (the F16 decode GEMV on mma.sync, 4 and 16 warps
    # a workgroup): T = 1, 3 (residual, a partial last k chunk), 9 (two token blocks, bias,
    # in place), K = 8 (one chunk: 15 of 16 warps hold nothing).
    small = _f16_mma_small()
    assert len(small) == 8
    _assert_all_ok(_interpret_and_check(tmp_path, F16_MMA, "swz_gemv_f16_mma", small), small)


@pytest.mark.parametrize("mt,unroll,warps", [(2, 4, 4), (4, 2, 4), (1, 2, 16)])
def test_f16_mma_gemv_variants_pass_in_the_interpreter(tmp_path, monkeypatch, mt, unroll, warps):
    # The tuning parameters (bench/tune_q8x.sh): m-tiles a warp (rows a workgroup 16 mt;
    # a workgroup past N at mt = 4 for N = 19 and 45), chunks in flight, and warps a
    # workgroup splitting K (16: more threads than outputs, K = 8 has one chunk for 16 warps).
    monkeypatch.setenv("SWZ_CHECK_Q8X_ROWS", f"f16:{16 * mt}x{warps}")
    cases = _f16_mma_small("matmul_f16_mma")
    assert len(cases) == 4
    src = tmp_path / f"f16-mt{mt}-w{warps}.mlir"
    _variant_module(src, f"f16:mt={mt},unroll={unroll},warps={warps}")
    _assert_all_ok(_interpret_and_check(tmp_path, src, "swz_gemv_f16_mma", cases), cases)


@pytest.mark.parametrize("entry", ["matmul_f16_mma", "matmul_f16_mma_w16"])
def test_f16_mma_gemv_one_token_equals_the_same_token_among_three_bitwise(tmp_path, entry):
    # A token is one column of the mma: its outputs must not depend on the other tokens of
    # the launch (a batch, speculative verification), bit for bit.
    import numpy as np
    line = next(l for l in _list("swz_gemv_f16_mma") if l.split()[1] == entry and "T=3 N=131 " in l)
    case = line.split()[0]
    many, one = _run_at_3_and_1_tokens(tmp_path, F16_MMA, "swz_gemv_f16_mma", case, t_arg=7, out=2)
    assert np.array_equal(many[:131], one[:131])  # token 0's 131 rows


def test_f16_mma_gemv_with_rows_g_and_g8_swapped_fails(tmp_path):
    # The A fragment holds row g in registers 0 and 2, row g + 8 in 1 and 3: registers 1 and
    # 2 exchanged must fail the cases.
    case = next(line.split()[0] for line in _list("swz_gemv_f16_mma") if "T=1 N=577 " in line)
    bad = tmp_path / "bad.mlir"
    text = F16_MMA.read_text()
    a1, a2 = "[1] : vector<2xf16> into vector<4x2xf16>", "[2] : vector<2xf16> into vector<4x2xf16>"
    swapped = text.replace(a1, "\0").replace(a2, a1).replace("\0", a2)
    assert swapped != text and text.count(a1) == text.count(a2) > 0
    bad.write_text(swapped)
    r = _interpret_and_check(tmp_path, bad, "swz_gemv_f16_mma", [case])
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"FAIL {case} " in r.stdout


ARGMAX = ROOT / "codegen" / "kernels" / "argmax_f32.mlir"


def test_two_pass_argmax_cases_pass_in_the_interpreter(tmp_path):
    # PTX packages run greedy sampling as argmax_split_f32 then argmax_reduce_f32: the
    # parts' first maxima (ties, NaN, an all-NaN part) and their reduction (ties to the
    # lowest index, none -> 0, more parts than threads) against the exact references.
    cases = [line.split()[0] for line in _list("swz_argmax")
             if "argmax_split_f32" in line or "argmax_reduce_f32" in line]
    assert len(cases) == 4
    _assert_all_ok(_interpret_and_check(tmp_path, ARGMAX, "swz_argmax", cases), cases)


DECODE = ROOT / "codegen" / "kernels" / "attention_decode.mlir"


def test_decode_attention_cases_pass_in_the_interpreter(tmp_path):
    # flash_decode_f16kv_hd128 (PTX decode at head_dim 128): warps over keys, butterfly
    # shuffles, per-row online softmax, the warps merged in workgroup memory and the last
    # split merging the partials (its counters back to 0); against the float64 reference
    # of cases_attention.cpp (splits, one split, 17-token verification, the 7B shape at a
    # 540-key context, and two decode steps of a batch: sequences at different contexts,
    # each through its own block table, in one launch). The 4,096-key timing case runs on
    # the GPU only (minutes here).
    lines = _list("swz_attention_decode")
    cases = [line.split()[0] for line in lines if "ctx=4096 " not in line]
    assert len(lines) == 9 and len(cases) == 8
    assert sum(" sequences (T/pos0 " in line for line in lines) == 2
    _assert_all_ok(_interpret_and_check(tmp_path, DECODE, "swz_attention_decode", cases), cases)


def test_decode_attention_merging_too_early_fails(tmp_path):
    # The split that finishes last merges the partials; merging at the one before it
    # (the count compared with n_split - 2), before the last partial is written, must
    # fail the cases (and leave a counter at 1).
    case = next(line.split()[0] for line in _list("swz_attention_decode") if "n_split=5" in line)
    bad = tmp_path / "bad.mlir"
    src = DECODE.read_text()
    assert src.count("= arith.subi %n_split, %c1_index : index") == 1
    bad.write_text(src.replace("= arith.subi %n_split, %c1_index : index", "= arith.subi %n_split, %c2_index : index"))
    r = _interpret_and_check(tmp_path, bad, "swz_attention_decode", [case])
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"FAIL {case} " in r.stdout


def test_decode_attention_ignoring_a_sequences_block_table_fails(tmp_path):
    # In a batch, sequence s reads its pages through its own block table (at offset TB of
    # the launch's tables, from its record); reading every sequence through the first
    # table (offset 0) must fail the batch cases, whose tables are separated by -1 entries.
    cases = [line.split()[0] for line in _list("swz_attention_decode") if " sequences (T/pos0 " in line]
    bad = tmp_path / "bad.mlir"
    src = DECODE.read_text()
    assert src.count("arith.addi %TB, ") == 4
    bad.write_text(src.replace("arith.addi %TB, ", "arith.addi %c0_index, "))
    for case in cases:  # a wrong page fails the check; a -1 entry reads out of bounds
        try:
            (tmp_path / case).mkdir()
            r = _interpret_and_check(tmp_path / case, bad, "swz_attention_decode", [case])
        except AssertionError as e:
            assert "OOB" in str(e), e
            continue
        assert r.returncode == 1 and f"FAIL {case} " in r.stdout, r.stdout + r.stderr


SKINNY = ROOT / "codegen" / "kernels" / "gemm_skinny.mlir"
DEQUANT = ROOT / "codegen" / "kernels" / "dequant_f16.mlir"


def _skinny_cases() -> list[str]:
    # gemm_skinny's small cases (every type, its 1-, 2- and 4-m-tile loops, partial
    # workgroups, Q6_K's unaligned super-blocks); the 7B shapes are for the H200.
    return [line.split()[0] for line in _list("swz_gemm_skinny") if " N=3584 " not in line and " N=4608 " not in line]


def test_gemm_skinny_cases_pass_in_the_interpreter(tmp_path):
    cases = _skinny_cases()
    assert len(cases) == 7
    _assert_all_ok(_interpret_and_check(tmp_path, SKINNY, "swz_gemm_skinny", cases), cases)


def _write_case(d: Path, module: str, entry: str, grid, block: int, buffers, args) -> None:
    """A case directory as `swz-case-io dump` writes it: buffers [(elem bytes, sizes,
    raw bytes)], args [("m", buffer) | ("i", value)]."""
    d.mkdir(parents=True)
    lines = [f"{module} {entry}", " ".join(map(str, grid)), f"block {block} 1 1"]
    for i, (eb, sizes, raw) in enumerate(buffers):
        lines.append(f"buffer {i} {eb} " + " ".join(map(str, sizes)))
        (d / f"buf{i}.bin").write_bytes(raw)
    lines += [f"arg {k} {v}" for k, v in args]
    (d / "meta.txt").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("label", ["gemm_skinny_q4_k T=17 N=64 K=512 +bias", "gemm_skinny_q6_k T=33 N=33 K=512",
                                   "gemm_skinny_q8_0 T=1 N=70 K=1024"])
def test_gemm_skinny_equals_dequant_then_gemm_f16_bitwise(tmp_path, label):
    """The skinny GEMM and the path it replaces (dequant_<type>_f16, convert_f32_f16,
    gemm_f16) on the same blocks and activations give the same f32 bits: the same f16
    operands in the same mma.sync chain (in the interpreter, which rounds each mma's sum
    to f32 as one chain; the H200 run checks the hardware: swz-backend-compare's batch
    invariance). A k16 step taken out of order, or a weight rounded differently, breaks it."""
    import numpy as np
    case = next(line.split()[0] for line in _list("swz_gemm_skinny") if line.split(None, 1)[1] == label)
    ir = _generic_ir(SKINNY, tmp_path / "skinny.mlir")
    assert _dump(tmp_path / "cases", case, module="swz_gemm_skinny") == [case]
    src = tmp_path / "cases" / case
    simt_interp.run_case_dir(str(ir), str(src))
    meta = (src / "meta.txt").read_text().split("\n")
    ints = [int(l.split()[2]) for l in meta if l.startswith("arg i")]
    T, N, K, has_bias = ints
    ty = label.split()[0][len("gemm_skinny_"):]
    w = (src / "buf1.bin").read_bytes()
    x, bias = (src / "buf0.bin").read_bytes(), (src / "buf3.bin").read_bytes()
    dq = _generic_ir(DEQUANT, tmp_path / "dequant.mlir")
    _write_case(tmp_path / "dq", "swz_dequant_f16", f"dequant_{ty}_f16", (N, 1, 1), 256,
                [(1, [len(w)], w), (2, [N * K], b"\0" * (2 * N * K))], [("m", 0), ("m", 1), ("i", N), ("i", K)])
    simt_interp.run_case_dir(str(dq), str(tmp_path / "dq"))
    _write_case(tmp_path / "cv", "swz_dequant_f16", "convert_f32_f16", (T, 1, 1), 256,
                [(4, [T * K], x), (2, [T * K], b"\0" * (2 * T * K))], [("m", 0), ("m", 1), ("i", T), ("i", K)])
    simt_interp.run_case_dir(str(dq), str(tmp_path / "cv"))
    gm = _generic_ir(GEMM, tmp_path / "gemm.mlir")
    _write_case(tmp_path / "gm", "swz_gemm_f16", "gemm_f16", ((N + 63) // 64, (T + 63) // 64, 1), 128,
                [(2, [T, K], (tmp_path / "cv" / "out1.bin").read_bytes()),
                 (2, [N, K], (tmp_path / "dq" / "out1.bin").read_bytes()),
                 (4, [T, N], b"\0" * (4 * T * N)), (4, [len(bias) // 4], bias)],
                [("m", 0), ("m", 1), ("m", 2), ("m", 3), ("i", has_bias)])
    simt_interp.run_case_dir(str(gm), str(tmp_path / "gm"))
    skinny = np.frombuffer((src / "out2.bin").read_bytes(), np.uint32)
    pair = np.frombuffer((tmp_path / "gm" / "out2.bin").read_bytes(), np.uint32)
    assert skinny.shape == pair.shape == (T * N,)
    assert (skinny == pair).all(), f"{int((skinny != pair).sum())} of {T * N} outputs differ"
