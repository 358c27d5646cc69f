#!/usr/bin/env python3
"""Writes codegen/kernels/gemv_<type>.mlir: the decode-side dequantizing GEMV
(`matmul_<type>`) and embedding lookup (`get_rows_<type>`) for one GGUF weight
type per file, from one description of each block layout (ggml-common.h).

The seven files share their skeleton (launch geometry, reduction, loads); only
the per-block dequantization differs, so it is written once here. It also writes
the PTX-only decode kernels: gemv_q8x.mlir (the int8 GEMVs and their activation
quantizers), gemv_f16_mma.mlir (F16's tensor-core GEMV) and attention_decode.mlir
(flash decoding). The .mlir files are checked in (the build reads them); after
editing this script run
    python3 codegen/kernels/gen_quant_kernels.py
and commit both. test/lit/Codegen/gemv_generated.mlir fails when they differ.

Usage: gen_quant_kernels.py [--check]   (--check: exit 1 if a file is stale)
       gen_quant_kernels.py --variant TYPE:K=V[,K=V] --out FILE   (tuning: one module
       with Q8X[TYPE]'s, or for f16 MMA_F16's, parameters replaced; bench/tune_q8x.sh)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
XVEC = "memref<?xvector<4xf32>>"
IVEC = "memref<?xvector<4xi32>>"
TOK = 8  # tokens per block (grid y covers T in blocks of 8)

TARGET_ENV = """spirv.target_env = #spirv.target_env<#spirv.vce<v1.3,
          [Shader, Int16, Float16, StorageBuffer16BitAccess, GroupNonUniformShuffle],
          [SPV_KHR_storage_buffer_storage_class, SPV_KHR_16bit_storage]>,
          #spirv.resource_limits<>>"""

# Block layouts (ggml-common.h): bytes per block, weights per block, units (one
# thread's share of a block) per block, and whether every block starts on a
# 4-byte boundary (then words load directly, else two loads and a funnel shift).
FORMATS = {
    "q4_0": dict(unroll=2, bs=18, qk=32, units=4, aligned=False,
                 layout="block_q4_0 (18 B / 32 weights): d f16 | qs[16] (weight j: low nibble of qs[j], weight j+16: high nibble; value d*(q-8))"),
    "q4_1": dict(unroll=3, bs=20, qk=32, units=4, aligned=True,
                 layout="block_q4_1 (20 B / 32 weights): d f16 | m f16 | qs[16] (nibbles as q4_0; value d*q + m)"),
    "q5_0": dict(unroll=3, bs=22, qk=32, units=4, aligned=False,
                 layout="block_q5_0 (22 B / 32 weights): d f16 | qh[4] (bit j = 5th bit of weight j) | qs[16] (nibbles as q4_0; value d*(q-16))"),
    "q8_0": dict(unroll=3, bs=34, qk=32, units=4, aligned=False,
                 layout="block_q8_0 (34 B / 32 weights): d f16 | qs[32] int8 (value d*q)"),
    "q4_k": dict(unroll=2, bs=144, qk=256, units=16, aligned=True,
                 layout="block_q4_K (144 B / 256 weights): d f16 | dmin f16 | scales[12] (8 x 6-bit scale and min) | qs[128] (value d*sc*q - dmin*m per 32-weight sub-block)"),
    "q6_k": dict(unroll=2, bs=210, qk=256, units=16, aligned=False,
                 layout="block_q6_K (210 B / 256 weights): ql[128] | qh[64] | scales[16] int8 | d f16 (value d*sc*(q-32) per 16-weight sub-block)"),
    "f16": dict(unroll=2, bs=None, qk=8, units=1, aligned=None, layout="f16 elements (memref<?xf16>, row n at element n*K)"),
}


class Emitter:
    def __init__(self, indent):
        self.lines = []
        self.n = 0
        self.indent = indent
        self.consts = {}

    def emit(self, s):
        self.lines.append(" " * self.indent + s)

    def v(self, rhs, hint="v"):
        self.n += 1
        name = f"%{hint}{self.n}"
        self.emit(f"{name} = {rhs}")
        return name

    def ci(self, value, ty="i32"):
        key = (value, ty)
        if key not in self.consts:
            raw = f"c{value}_{ty}".replace("-", "m").replace(".", "p").replace("+", "")
            name = "%" + "".join(ch for ch in raw if ch.isalnum() or ch == "_")
            self.consts[key] = name
        return self.consts[key]

    def const_lines(self):
        out = []
        for (value, ty), name in sorted(self.consts.items(), key=lambda kv: kv[1]):
            if ty == "f32":
                out.append(f"{name} = arith.constant {value} : f32")
            else:
                out.append(f"{name} = arith.constant {value} : {ty}")
        return out

    # index / i32 helpers
    def add(self, a, b, ty="index"): return self.v(f"arith.addi {a}, {b} : {ty}", "a")
    def mul(self, a, b, ty="index"): return self.v(f"arith.muli {a}, {b} : {ty}", "m")
    def shr(self, a, b): return self.v(f"arith.shrui {a}, {b} : i32", "s")
    def sar(self, a, b): return self.v(f"arith.shrsi {a}, {b} : i32", "s")
    def shl(self, a, b): return self.v(f"arith.shli {a}, {b} : i32", "s")
    def band(self, a, b): return self.v(f"arith.andi {a}, {b} : i32", "b")
    def bor(self, a, b): return self.v(f"arith.ori {a}, {b} : i32", "o")
    def bxor(self, a, b): return self.v(f"arith.xori {a}, {b} : i32", "x")
    def fmul(self, a, b): return self.v(f"arith.mulf {a}, {b} : f32", "f")
    def fadd(self, a, b): return self.v(f"arith.addf {a}, {b} : f32", "f")
    def fsub(self, a, b): return self.v(f"arith.subf {a}, {b} : f32", "f")
    def fma(self, a, b, c): return self.v(f"math.fma {a}, {b}, {c} : f32", "f")
    def idx(self, a): return self.v(f"arith.index_cast {a} : i32 to index", "i")
    def i32(self, a): return self.v(f"arith.index_cast {a} : index to i32", "n")

    def word(self, fmt, byte, w="%w"):
        """The little-endian 32-bit word at byte offset `byte` (index; even) of w (memref<?xi32>)."""
        c2 = self.ci(2, "index")
        wi = self.v(f"arith.shrui {byte}, {c2} : index", "w")
        lo = self.v(f"memref.load {w}[{wi}] : memref<?xi32>", "ld")
        if FORMATS[fmt]["aligned"]:
            return lo
        # Blocks start on 2-byte boundaries only. hi is the next word when the
        # offset is 2 mod 4 and the same word otherwise (never out of bounds);
        # sh = 0 or 16 selects lo, or the upper half of lo and lower half of hi.
        b2 = self.add(byte, c2)
        hi_i = self.v(f"arith.shrui {b2}, {c2} : index", "w")
        hi = self.v(f"memref.load {w}[{hi_i}] : memref<?xi32>", "ld")
        bi = self.i32(byte)
        odd = self.band(bi, self.ci(2))
        sh = self.shl(odd, self.ci(3))
        lo_s = self.shr(lo, sh)
        rest = self.v(f"arith.subi {self.ci(16)}, {sh} : i32", "s")
        hi_s = self.shl(self.shl(hi, self.ci(16)), rest)
        return self.bor(lo_s, hi_s)

    def half(self, word, upper):
        """f16 bits in the low (or upper) half of an i32 word, as f32 (exact)."""
        if upper:
            word = self.shr(word, self.ci(16))
        t = self.v(f"arith.trunci {word} : i32 to i16", "h")
        h = self.v(f"arith.bitcast {t} : i16 to f16", "h")
        return self.v(f"arith.extf {h} : f16 to f32", "h")

    def u2f(self, q):
        """A small non-negative integer (< 2^23) to f32, exactly, with an OR and a
        subtraction (2^23 + q has q in the mantissa) instead of a conversion."""
        o = self.bor(q, self.ci(0x4B000000))
        f = self.v(f"arith.bitcast {o} : i32 to f32", "q")
        return self.fsub(f, self.ci("8.388608e+06", "f32"))

    def s2f(self, q):
        return self.v(f"arith.sitofp {q} : i32 to f32", "sc")

    def nib(self, word, byte, high):
        """Nibble of byte `byte` (0..3) of a word: low or high."""
        s = 8 * byte + (4 if high else 0)
        x = self.shr(word, self.ci(s)) if s else word
        return self.band(x, self.ci(15))

    def bits(self, word, shift, mask):
        x = self.shr(word, self.ci(shift)) if shift else word
        return self.band(x, self.ci(mask))


def func_text(head, e):
    """A gpu.func's text: its signature lines `head`, then e's constants and body."""
    consts = [" " * 6 + l for l in e.const_lines()]
    return "\n".join(head + consts + e.lines) + "\n    }\n"


def dequant_unit(e, fmt, blockbyte, q):
    """Emits the loads and integer unpacking of unit q (index, 0..units-1) of the
    block at byte offset `blockbyte`. Returns (kbase, groups): kbase is the index
    of the unit's first weight within the row; each group is (scale, offset,
    [(k offset, q as f32)]) with weight = scale * q + offset (offset may be None)."""
    c = lambda v: e.ci(v, "index")
    if fmt in ("q4_0", "q4_1", "q5_0"):
        d0 = e.word(fmt, blockbyte)
        d = e.half(d0, False)
        qoff = {"q4_0": 2, "q4_1": 4, "q5_0": 6}[fmt]
        b = e.add(e.add(blockbyte, c(qoff)), e.mul(q, c(4)))
        qs = e.word(fmt, b)
        if fmt == "q5_0":
            qh = e.word(fmt, e.add(blockbyte, c(2)))
            qi = e.i32(q)
            j4 = e.shl(qi, e.ci(2))             # 4q: first weight of the unit
            qh_lo = e.shr(qh, j4)                # bit j of weight j
            qh_hi = e.shr(qh_lo, e.ci(16))       # bit j+16 of weight j+16
        items = []
        for i in range(4):
            lo = e.nib(qs, i, False)
            hi = e.nib(qs, i, True)
            if fmt == "q5_0":
                lo = e.bor(lo, e.shl(e.bits(qh_lo, i, 1), e.ci(4)))
                hi = e.bor(hi, e.shl(e.bits(qh_hi, i, 1), e.ci(4)))
            items.append((i, e.u2f(lo)))
            items.append((16 + i, e.u2f(hi)))
        if fmt == "q4_1":
            off = e.half(d0, True)
        else:
            off = e.fmul(d, e.ci("-8.0" if fmt == "q4_0" else "-16.0", "f32"))
        kbase = e.mul(q, c(4))
        return kbase, [(d, off, items)]
    if fmt == "q8_0":
        d = e.half(e.word(fmt, blockbyte), False)
        b = e.add(e.add(blockbyte, c(2)), e.mul(q, c(8)))
        items = []
        for h in range(2):
            w = e.word(fmt, e.add(b, c(4 * h)) if h else b)
            # int8 q as unsigned q ^ 0x80 = q + 128; the 128 goes into the offset.
            w = e.bxor(w, e.ci(-2139062144))  # 0x80808080
            for i in range(4):
                items.append((4 * h + i, e.u2f(e.bits(w, 8 * i, 255))))
        off = e.fmul(d, e.ci("-1.280000e+02", "f32"))
        kbase = e.mul(q, c(8))
        return kbase, [(d, off, items)]
    if fmt == "q4_k":
        w0 = e.word(fmt, blockbyte)
        d = e.half(w0, False)
        dmin = e.half(w0, True)
        s0 = e.word(fmt, e.add(blockbyte, c(4)))
        s1 = e.word(fmt, e.add(blockbyte, c(8)))
        s2 = e.word(fmt, e.add(blockbyte, c(12)))
        p = e.v(f"arith.divui {q}, {c(4)} : index", "p")    # sub-block pair 0..3
        r = e.v(f"arith.remui {q}, {c(4)} : index", "p")
        l0 = e.mul(r, c(8))                                  # 0, 8, 16, 24
        pi = e.i32(p)
        groups_sm = []
        for jj in range(2):  # sub-blocks 2p (low nibbles) and 2p + 1 (high)
            scale, mins = q4k_scale(e, d, dmin, s0, s1, s2, e.add(e.shl(pi, e.ci(1)), e.ci(jj), "i32"))
            groups_sm.append((scale, e.v(f"arith.negf {mins} : f32", "f")))
        qb = e.add(e.add(blockbyte, c(16)), e.add(e.mul(p, c(32)), l0))
        qa = e.word(fmt, qb)
        qc = e.word(fmt, e.add(qb, c(4)))
        lo_items, hi_items = [], []
        for h, w in enumerate((qa, qc)):
            for i in range(4):
                lo_items.append((4 * h + i, e.u2f(e.nib(w, i, False))))
                hi_items.append((32 + 4 * h + i, e.u2f(e.nib(w, i, True))))
        kbase = e.add(e.mul(p, c(64)), l0)
        return kbase, [(groups_sm[0][0], groups_sm[0][1], lo_items),
                       (groups_sm[1][0], groups_sm[1][1], hi_items)]
    if fmt == "q6_k":
        h = e.v(f"arith.divui {q}, {c(8)} : index", "p")     # half 0..1
        g = e.v(f"arith.remui {q}, {c(8)} : index", "p")     # 4-weight group 0..7
        g4 = e.mul(g, c(4))
        h64 = e.mul(h, c(64))
        qla = e.word(fmt, e.add(e.add(blockbyte, h64), g4))
        qlb = e.word(fmt, e.add(e.add(e.add(blockbyte, h64), g4), c(32)))
        h32 = e.mul(h, c(32))
        qh = e.word(fmt, e.add(e.add(e.add(blockbyte, c(128)), h32), g4))
        d = e.half(e.word(fmt, e.add(blockbyte, c(208))), False)
        scb = e.add(e.add(blockbyte, c(192)), e.mul(h, c(8)))
        sw0 = e.word(fmt, scb)
        sw1 = e.word(fmt, e.add(scb, c(4)))
        isb = e.i32(e.v(f"arith.divui {g}, {c(4)} : index", "p"))   # is = l / 16
        # signed byte `is + 2m` of sw0 (m = 0, 1) or sw1 (m = 2, 3)
        groups = []
        for m in range(4):
            sw = sw0 if m < 2 else sw1
            pos = e.add(isb, e.ci(2 * (m % 2)), "i32")
            left = e.v(f"arith.subi {e.ci(24)}, {e.shl(pos, e.ci(3))} : i32", "s")
            scv = e.sar(e.shl(sw, left), e.ci(24))
            scale = e.fmul(d, e.s2f(scv))
            off = e.fmul(scale, e.ci("-3.200000e+01", "f32"))
            groups.append([scale, off, []])
        for i in range(4):
            qhi = e.bits(qh, 8 * i, 255)
            parts = [
                (qla, False, 0), (qlb, False, 2), (qla, True, 4), (qlb, True, 6)]
            for m, (w, high, hs) in enumerate(parts):
                v = e.bor(e.nib(w, i, high), e.shl(e.bits(qhi, hs, 3), e.ci(4)))
                groups[m][2].append((32 * m + i, e.u2f(v)))
        kbase = e.add(e.mul(h, c(128)), g4)
        return kbase, [tuple(gr) for gr in groups]
    raise ValueError(fmt)


# The int8 path (PTX only, gemv_q8x.mlir): quantize_q8_x rounds the activations to
# int8 per 32-element block (llama.cpp's block_q8_1: d = amax / 127, q = round(x / d),
# here round-half-even) with the block's d and d * (sum of q) over each 16-element half;
# matmul_<fmt>_q8x then forms each unit's dot product with dp4a (4 int8 products and
# their sum per instruction) and applies the scales once per 16 or 32 weights.
# units: one thread's share of a block; vecs: the row's 16-byte vectors per block (q4_k:
# a block is 9 aligned vectors, header | qs[0..7]); q8_0 blocks (34 B) are 2-byte
# aligned, so its weights load as words with a funnel shift, as matmul_q8_0 does.
# unroll: units in flight per thread; minctasm: workgroups an SM the registers must allow
# (.minnctapersm; 8 = 64 registers, 6 = 80); rpw: rows a warp (the workgroup's 4 warps take
# 4 rpw consecutive rows; a warp's rows share each unit's activation loads). Chosen by
# bench/tune_q8x.sh on the H200 (bench/RESULTS.md, 2026-12-02, buffers rotated over 512 MB):
# the Q4_K kernel, a 32-weight sub-block a unit, one in flight, is bound by instruction issue
# (ncu: 0.67 warps issued a scheduler a cycle at 1.9 TB/s; an L2 prefetch ahead of the loads
# changed nothing), and a 7B row of 3,584 weights is only 3.5 unit passes a lane: two rows a
# warp (80 registers) take Qwen2.5-Coder-7B's four decode launches in 61.8 us against 65.8
# for one row, and 182 us against 255 at eight tokens. A 32-byte chunk a unit (both
# sub-blocks; tried in that tuning, not kept) with two rows a warp was 6% faster at one
# token and 1.3x slower at eight. For Q8_0 at Qwen3-0.6B's shapes no variant beat three units, a row a warp, in all
# four. Q6_K (a unit: one 32-weight activation block, 72 registers: without a spill on
# sm_80), Q4_1 (a unit: one block, two in flight, 72 registers) and Q5_0 (one in flight,
# 64 registers) were timed on the H200 in the tenth session (bench/RESULTS.md: 45-65% of
# the copy peak at the 7B shapes, the Q6_K LM head 172.5 us). Each fits its
# registers without a spill on sm_80, sm_86, sm_89 and sm_90 (test_gpu_packages.py refuses
# spills).
Q8X = {
    "q4_k": dict(units=8, vecs=9, unroll=1, minctasm=6, rpw=2),
    "q8_0": dict(units=2, vecs=None, unroll=3, minctasm=8, rpw=1),
    "q6_k": dict(units=8, vecs=None, unroll=1, minctasm=7, rpw=1),
    "q4_1": dict(units=1, vecs=None, unroll=2, minctasm=7, rpw=1),
    "q5_0": dict(units=1, vecs=None, unroll=1, minctasm=8, rpw=1),
}


def shuffle_xor_sum(e, v, offsets):
    """v (f32) plus its partners' values by gpu.shuffle xor at each offset in turn (width
    32): offsets 4, 2, 1 sum an aligned 8-lane segment (any subgroup of >= 8 lanes); 8 and
    16 after them add the neighbouring segments, (s0 + s1) + (s2 + s3)."""
    for off in offsets:
        e.n += 1
        sh = f"%sh{e.n}"
        e.emit(f"{sh}:2 = gpu.shuffle xor {v}, {e.ci(off)}, {e.ci(32)} : f32")
        v = e.fadd(v, f"{sh}#0")
    return v


def dp4a(e, a, b, acc, a_unsigned):
    """acc + the sum of the four int8 products of a and b (b signed; a unsigned 0..255
    bytes when a_unsigned): PTX dp4a, as inline assembly (MLIR 19 has no NVVM op)."""
    at = "u32" if a_unsigned else "s32"
    return e.v(f'llvm.inline_asm "dp4a.{at}.s32 $0, $1, $2, $3;", "=r,r,r,r" {a}, {b}, {acc} : (i32, i32, i32) -> i32', "dp")


def dot16(e, blk, half, words, a_unsigned):
    """dp4a of 16 weights (4 words of 4 bytes or nibbles-as-bytes) with the int8
    activations of half `half` (index, 0 or 1) of activation block `blk` (index);
    returns (the i32 sum, the block's (d, d sum lo, d sum hi, 0) vector)."""
    c = lambda v: e.ci(v, "index")
    xv = e.v(f"memref.load %xq[{e.add(e.mul(blk, c(2)), half)}] : {IVEC}", "xq")
    ds = e.v(f"memref.load %xds[{blk}] : {XVEC}", "ds")
    acc = e.ci(0)
    for i in range(4):
        xw = e.v(f"vector.extract {xv}[{i}] : i32 from vector<4xi32>", "xw")
        acc = dp4a(e, words[i], xw, acc, a_unsigned)
    return acc, ds


def q4k_scale(e, d, dmin, s0, s1, s2, j):
    """block_q4_K's scale and min of sub-block j (i32, 0..7) from the header words s0, s1,
    s2 (scales[0..11]; get_scale_min_k4 of ggml-quants.c): (d sc, dmin m) as f32."""
    small = e.v(f"arith.cmpi ult, {j}, {e.ci(4)} : i32", "lt")
    sh = e.shl(e.band(j, e.ci(3)), e.ci(3))
    b0 = e.band(e.shr(s0, sh), e.ci(255))
    b1 = e.band(e.shr(s1, sh), e.ci(255))
    b2 = e.band(e.shr(s2, sh), e.ci(255))
    sc_hi = e.bor(e.band(b2, e.ci(15)), e.shl(e.shr(b0, e.ci(6)), e.ci(4)))
    m_hi = e.bor(e.shr(b2, e.ci(4)), e.shl(e.shr(b1, e.ci(6)), e.ci(4)))
    sc = e.v(f"arith.select {small}, {e.band(b0, e.ci(63))}, {sc_hi} : i32", "sel")
    m = e.v(f"arith.select {small}, {e.band(b1, e.ci(63))}, {m_hi} : i32", "sel")
    return e.fmul(d, e.u2f(sc)), e.fmul(dmin, e.u2f(m))


def words_at(e, w, byte, count, tail_inside=True):
    """`count` little-endian 32-bit words from byte offset `byte` (index, even) of w
    (memref<?xi32>): count + 1 aligned loads and a funnel shift when byte is 2 mod 4.
    tail_inside: the aligned word after the last lies inside the tensor; else the last load
    is that word only when the run straddles it (a run may end the tensor)."""
    c = lambda v: e.ci(v, "index")
    wi = e.v(f"arith.shrui {byte}, {c(2)} : index", "w")
    odd = e.v(f"arith.cmpi ne, {e.band(e.i32(byte), e.ci(2))}, {e.ci(0)} : i32", "od")
    idx = [e.add(wi, c(i)) if i else wi for i in range(count + 1)]
    if not tail_inside:
        idx[count] = e.v(f"arith.select {odd}, {idx[count]}, {idx[count - 1]} : index", "sel")
    raw = [e.v(f"memref.load {w}[{i}] : memref<?xi32>", "ld") for i in idx]
    out = []
    for i in range(count):
        fun = e.bor(e.shr(raw[i], e.ci(16)), e.shl(raw[i + 1], e.ci(16)))
        out.append(e.v(f"arith.select {odd}, {fun}, {raw[i]} : i32", "sel"))
    return out


def half_at(e, w, byte):
    """The 16 bits at byte offset `byte` (index, even) of w (memref<?xi32>) in the low half
    of an i32 (the upper half: what follows, or 0): one load of the aligned word holding
    them. At a 4-byte-aligned offset that word reaches 2 bytes past them: past the end of
    a tensor that ends with them, inside its buffer, which holds whole words (weights are
    zero-padded to a multiple of 4 bytes; the runtime pads to 16)."""
    wi = e.v(f"arith.shrui {byte}, {e.ci(2, 'index')} : index", "w")
    wd = e.v(f"memref.load {w}[{wi}] : memref<?xi32>", "ld")
    return e.shr(wd, e.shl(e.band(e.i32(byte), e.ci(2)), e.ci(3)))


def q8x_weights(e, fmt, b, q, w, rowbase):
    """One row's weight loads for unit (b, q) of the int8 path (w: the row's weight memref,
    rowbase: its first vector (q4_k) or block (q8_0), index); returns dot(act), which emits
    the unit's dp4a sums with the activations `act` (q8x_acts) and returns the f32
    contribution."""
    c = lambda v: e.ci(v, "index")
    if fmt == "q4_k":
        # Unit r of block b: sub-block r = 2p + jj, the low (jj = 0) or high (jj = 1)
        # nibbles of the 32-byte qs chunk p. The two lanes of a chunk load the same weight
        # bytes (one access), and each lane reads its sub-block's 32 int8 activations
        # (two vectors, next to its neighbour's): a warp's activation loads touch half the
        # cache lines per weight that a lane per chunk (both sub-blocks) does, which the
        # many-token path, reading them once per token, is bound by (bench/RESULTS.md).
        assert Q8X["q4_k"]["units"] == 8, "q4_k's int8 unit is one 32-weight sub-block, 8 a block"
        vb = e.add(rowbase, e.mul(b, c(9)))
        hdr = e.v(f"memref.load {w}[{vb}] : {IVEC}", "hd")
        p = e.v(f"arith.divui {q}, {c(2)} : index", "p")
        qb = e.add(e.add(vb, c(1)), e.mul(p, c(2)))
        qv = [e.v(f"memref.load {w}[{qb}] : {IVEC}", "qv"),
              e.v(f"memref.load {w}[{e.add(qb, c(1))}] : {IVEC}", "qv")]

        def dot(act):
            xv, dx, s_lo, s_hi = act
            w0, s0, s1, s2 = [e.v(f"vector.extract {hdr}[{i}] : i32 from vector<4xi32>", "hw") for i in range(4)]
            j = e.i32(q)
            scale, mins = q4k_scale(e, e.half(w0, False), e.half(w0, True), s0, s1, s2, j)
            nsh = e.shl(e.band(j, e.ci(1)), e.ci(2))  # 0: low nibbles, 4: high
            acc = e.ci(0)
            for h in range(2):
                for i in range(4):
                    wd = e.v(f"vector.extract {qv[h]}[{i}] : i32 from vector<4xi32>", "qw")
                    xw = e.v(f"vector.extract {xv[h]}[{i}] : i32 from vector<4xi32>", "xw")
                    acc = dp4a(e, e.band(e.shr(wd, nsh), e.ci(0x0F0F0F0F)), xw, acc, True)
            accf = e.v(f"arith.sitofp {acc} : i32 to f32", "af")
            return e.fsub(e.fmul(e.fmul(scale, dx), accf), e.fmul(mins, e.fadd(s_lo, s_hi)))
        return dot
    if fmt == "q4_1":
        # Unit: block b, 20 bytes (4-byte aligned): word 0 = d | m (f16 each), words 1..4 =
        # qs; weight j < 16 is the low nibble of qs[j], weight j + 16 the high one; value
        # d q + m. One activation block: d dx sum(q xq) + m (dx sum xq).
        wb = e.mul(e.add(rowbase, b), c(5))
        words = [e.v(f"memref.load {w}[{e.add(wb, c(i)) if i else wb}] : memref<?xi32>", "ld") for i in range(5)]
        d, m = e.half(words[0], False), e.half(words[0], True)

        def dot(act):
            xv, dx, s_lo, s_hi = act
            acc = e.ci(0)
            for half in range(2):
                for i in range(4):
                    wd = words[1 + i]
                    nib = e.band(e.shr(wd, e.ci(4)) if half else wd, e.ci(0x0F0F0F0F))
                    xw = e.v(f"vector.extract {xv[half]}[{i}] : i32 from vector<4xi32>", "xw")
                    acc = dp4a(e, nib, xw, acc, True)
            accf = e.v(f"arith.sitofp {acc} : i32 to f32", "af")
            return e.fadd(e.fmul(d, e.fmul(dx, accf)), e.fmul(m, e.fadd(s_lo, s_hi)))
        return dot
    if fmt == "q5_0":
        # Unit: block b, 22 bytes (2-byte aligned): d f16 | qh (32 bits: bit j the 5th bit of
        # weight j) | qs[16] (weight j < 16 the low nibble of qs[j], j + 16 the high one);
        # value d (q - 16). One activation block: d (dx sum(q xq) - 16 dx sum xq). The 5th
        # bits spread into bit 4 of each byte as llama.cpp's vec_dot_q5_0_q8_1 does.
        bb = e.mul(e.add(rowbase, b), c(22))
        d = e.half(half_at(e, w, bb), False)
        qh = e.word("q5_0", e.add(bb, c(2)), w)
        qs = words_at(e, w, e.add(bb, c(6)), 4, tail_inside=False)
        vals = []
        for half in range(2):
            for i in range(4):
                v = e.band(e.shr(qs[i], e.ci(4)) if half else qs[i], e.ci(0x0F0F0F0F))
                h = e.shr(qh, e.ci(4 * i + 16 * half)) if 4 * i + 16 * half else qh
                for k, (sh, mask) in enumerate(((4, 0x10), (11, 0x1000), (18, 0x100000), (25, 0x10000000))):
                    v = e.bor(v, e.band(e.shl(h, e.ci(sh)), e.ci(mask)))
                vals.append(v)

        def dot(act):
            xv, dx, s_lo, s_hi = act
            acc = e.ci(0)
            for half in range(2):
                for i in range(4):
                    xw = e.v(f"vector.extract {xv[half]}[{i}] : i32 from vector<4xi32>", "xw")
                    acc = dp4a(e, vals[4 * half + i], xw, acc, True)
            accf = e.v(f"arith.sitofp {acc} : i32 to f32", "af")
            return e.fmul(d, e.fsub(e.fmul(dx, accf), e.fmul(e.ci("1.600000e+01", "f32"), e.fadd(s_lo, s_hi))))
        return dot
    if fmt == "q6_k":
        # Unit q = 4 h + k of block b: the 32 weights 128 h + 32 k .. + 31 (one activation
        # block; dequantize_row_q6_K of ggml-quants.c): low 4 bits from ql[64 h + 32 (k & 1)
        # ..] (low nibbles for k < 2, high ones after), high 2 bits from qh[32 h ..] >> 2 k,
        # scales[8 h + 2 k] for weights 0..15 and scales[8 h + 2 k + 1] for 16..31, value
        # d sc (q - 32). Blocks are 210 bytes (2-byte aligned): funnel-shifted words.
        h = e.v(f"arith.divui {q}, {c(4)} : index", "h")
        k = e.v(f"arith.remui {q}, {c(4)} : index", "k")
        blockbyte = e.mul(e.add(rowbase, b), c(210))
        kodd = e.mul(e.v(f"arith.andi {k}, {c(1)} : index", "ko"), c(32))
        ql = words_at(e, w, e.add(blockbyte, e.add(e.mul(h, c(64)), kodd)), 8)
        qh = words_at(e, w, e.add(blockbyte, e.add(e.mul(h, c(32)), c(128))), 8)
        scw = half_at(e, w, e.add(blockbyte, e.add(e.add(e.mul(h, c(8)), e.mul(k, c(2))), c(192))))
        d = e.half(half_at(e, w, e.add(blockbyte, c(208))), False)
        ki = e.i32(k)
        nsh = e.shl(e.shr(ki, e.ci(1)), e.ci(2))  # 0 (k < 2) or 4
        hsh = e.shl(ki, e.ci(1))
        qs = [e.bor(e.band(e.shr(ql[i], nsh), e.ci(0x0F0F0F0F)),
                    e.shl(e.band(e.shr(qh[i], hsh), e.ci(0x03030303)), e.ci(4))) for i in range(8)]
        sc = [e.s2f(e.sar(e.shl(scw, e.ci(24 - 8 * i)), e.ci(24))) for i in range(2)]

        def dot(act):
            xv, dx, s_lo, s_hi = act
            terms = []
            for half, s_x in enumerate((s_lo, s_hi)):
                acc = e.ci(0)
                for i in range(4):
                    xw = e.v(f"vector.extract {xv[half]}[{i}] : i32 from vector<4xi32>", "xw")
                    acc = dp4a(e, qs[4 * half + i], xw, acc, True)
                accf = e.v(f"arith.sitofp {acc} : i32 to f32", "af")
                # sc (dx sum(q xq) - 32 dx sum(xq)): the -32 offset through the block's sums.
                terms.append(e.fmul(sc[half], e.fsub(e.fmul(dx, accf), e.fmul(e.ci("3.200000e+01", "f32"), s_x))))
            return e.fmul(d, e.fadd(terms[0], terms[1]))
        return dot
    if fmt == "q8_0":
        # Unit q of block b: weights 16q .. 16q+15 (qs bytes 2 + 16q ..), 4 words from 5
        # aligned loads and a funnel shift when the block is 2 mod 4 (the fifth only when
        # the unit straddles it: a block ending on a word boundary may end the tensor).
        blockbyte = e.mul(e.add(rowbase, b), c(34))
        d = e.half(e.word("q8_0", blockbyte, w), False)
        words = words_at(e, w, e.add(blockbyte, e.add(e.mul(q, c(16)), c(2))), 4, tail_inside=False)

        def dot(act):
            xv, dx = act
            acc = e.ci(0)
            for i in range(4):
                xw = e.v(f"vector.extract {xv}[{i}] : i32 from vector<4xi32>", "xw")
                acc = dp4a(e, words[i], xw, acc, False)
            accf = e.v(f"arith.sitofp {acc} : i32 to f32", "af")
            return e.fmul(e.fmul(d, dx), accf)
        return dot
    raise ValueError(fmt)


def q8x_acts(e, fmt, b, q, tg):
    """The int8 activations unit (b, q) dots with, of token tg (index): every row of the
    warp uses them (q8x_weights' dot)."""
    c = lambda v: e.ci(v, "index")
    if fmt in ("q4_k", "q6_k", "q4_1", "q5_0"):  # unit q of block b: activation block units b + q
        per = Q8X[fmt]["units"]
        sb = e.add(e.mul(tg, "%K32"), e.add(e.mul(b, c(per)), q) if per > 1 else b)
        s2 = e.mul(sb, c(2))
        xv = [e.v(f"memref.load %xq[{s2}] : {IVEC}", "xq"),
              e.v(f"memref.load %xq[{e.add(s2, c(1))}] : {IVEC}", "xq")]
        ds = e.v(f"memref.load %xds[{sb}] : {XVEC}", "ds")
        return [xv] + [e.v(f"vector.extract {ds}[{i}] : f32 from vector<4xf32>", "dx") for i in range(3)]
    if fmt == "q8_0":
        blk = e.add(e.mul(tg, "%K32"), b)
        xv = e.v(f"memref.load %xq[{e.add(e.mul(blk, c(2)), q)}] : {IVEC}", "xq")
        ds = e.v(f"memref.load %xds[{blk}] : {XVEC}", "ds")
        return [xv, e.v(f"vector.extract {ds}[0] : f32 from vector<4xf32>", "dx")]
    raise ValueError(fmt)


def q8_block(e, xs, live, vi, blk, l):
    """The int8 rounding of quantize_q8_x for one lane's four f32 values `xs` (elements
    4*vi .. 4*vi+3; a 32-element block is the 8 lanes l = 0..7 of one shuffle segment):
    the block's amax and sums by xor shuffles, the packed int8 word stored to xq[vi] and
    lane 0's (d, d*sum q lo16, d*sum q hi16, 0) to xds[blk], both only where `live` (an i1).
    Every lane of the warp must run it (shuffles)."""
    a = None
    for xv in xs:
        ab = e.v(f"math.absf {xv} : f32", "ab")
        a = ab if a is None else e.v(f"arith.maximumf {a}, {ab} : f32", "mx")
    for off in (1, 2, 4):
        e.n += 1
        sh = f"%sh{e.n}"
        e.emit(f"{sh}:2 = gpu.shuffle xor {a}, {e.ci(off)}, {e.ci(32)} : f32")
        a = e.v(f"arith.maximumf {a}, {sh}#0 : f32", "mx")
    d = e.v(f"arith.divf {a}, {e.ci('1.270000e+02', 'f32')} : f32", "d")
    pos = e.v(f"arith.cmpf ogt, {d}, {e.ci('0.0', 'f32')} : f32", "pos")
    qs = []
    for xv in xs:
        r = e.v(f"math.roundeven {e.v(f'arith.divf {xv}, {d} : f32', 'xd')} : f32", "r")
        qi = e.v(f"arith.fptosi {r} : f32 to i32", "qi")
        qs.append(e.v(f"arith.select {pos}, {qi}, {e.ci(0)} : i32", "sel"))
    packed = e.band(qs[0], e.ci(255))
    for i in (1, 2, 3):
        packed = e.bor(packed, e.shl(e.band(qs[i], e.ci(255)), e.ci(8 * i)))
    ssum = e.add(e.add(qs[0], qs[1], "i32"), e.add(qs[2], qs[3], "i32"), "i32")
    for off in (1, 2):
        e.n += 1
        sh = f"%sh{e.n}"
        e.emit(f"{sh}:2 = gpu.shuffle xor {ssum}, {e.ci(off)}, {e.ci(32)} : i32")
        ssum = e.add(ssum, f"{sh}#0", "i32")
    e.n += 1
    shh = f"%sh{e.n}"
    e.emit(f"{shh}:2 = gpu.shuffle xor {ssum}, {e.ci(4)}, {e.ci(32)} : i32")
    e.emit(f"scf.if {live} {{")
    e.emit(f"  memref.store {packed}, %xq[{vi}] : memref<?xi32>")
    e.emit("}")
    lead0 = e.v(f"arith.cmpi eq, {l}, {e.ci(0, 'index')} : index", "lead")
    lead = e.v(f"arith.andi {lead0}, {live} : i1", "lead")
    e.emit(f"scf.if {lead} {{")
    e.indent += 2
    flo = e.v(f"arith.sitofp {ssum} : i32 to f32", "sf")
    fhi = e.v(f"arith.sitofp {shh}#0 : i32 to f32", "sf")
    vec = e.ci("dense<0.0>", "vector<4xf32>")
    vec = e.v(f"vector.insert {d}, {vec} [0] : f32 into vector<4xf32>", "vi")
    vec = e.v(f"vector.insert {e.fmul(d, flo)}, {vec} [1] : f32 into vector<4xf32>", "vi")
    vec = e.v(f"vector.insert {e.fmul(d, fhi)}, {vec} [2] : f32 into vector<4xf32>", "vi")
    e.emit(f"memref.store {vec}, %xds[{blk}] : memref<?xvector<4xf32>>")
    e.indent -= 2
    e.emit("}")


def q8_lanes(e, with_nblk="%nblk"):
    """quantize_q8_x's thread layout: block 128 = 16 blocks of 32 elements, 8 lanes a block.
    Returns (live, vi, blk, l): lanes past `nblk` read block 0 (shuffles need every lane)."""
    c = lambda v: e.ci(v, "index")
    e.emit("%tid = gpu.thread_id x")
    e.emit("%bx = gpu.block_id x")
    e.emit(f"%g = arith.divui %tid, {c(8)} : index")
    e.emit(f"%l = arith.remui %tid, {c(8)} : index")
    e.emit(f"%blk0 = arith.muli %bx, {c(16)} : index")
    e.emit("%blk = arith.addi %blk0, %g : index")
    e.emit(f"%nb = arith.index_cast {with_nblk} : i32 to index")
    e.emit("%live = arith.cmpi ult, %blk, %nb : index")
    e.emit(f"%blkc = arith.select %live, %blk, {c(0)} : index")
    e.emit(f"%vb = arith.muli %blkc, {c(8)} : index")
    e.emit("%vi = arith.addi %vb, %l : index")
    return "%live", "%vi", "%blk", "%l"


def vec4(e, v):
    return [e.v(f"vector.extract {v}[{i}] : f32 from vector<4xf32>", "x") for i in range(4)]


def quantize_q8_x():
    """quantize_q8_x(x, xq, xds, nblk): the int8 activations of the q8x GEMVs."""
    e = Emitter(6)
    out = ["    gpu.func @quantize_q8_x(%x: memref<?xvector<4xf32>>, %xq: memref<?xi32>, %xds: memref<?xvector<4xf32>>,",
           "                            %nblk: i32) kernel",
           "        attributes {known_block_size = array<i32: 128, 1, 1>,",
           "                    swz.grid = \"ceil(nblk/16), 1, 1\"} {"]
    live, vi, blk, l = q8_lanes(e)
    e.emit(f"%v = memref.load %x[{vi}] : memref<?xvector<4xf32>>")
    q8_block(e, vec4(e, "%v"), live, vi, blk, l)
    e.emit("gpu.return")
    return func_text(out, e)


def swiglu_q8x():
    """swiglu_q8x(gate, up, a, xq, xds, nblk): swiglu_f32 and quantize_q8_x of its output."""
    e = Emitter(6)
    out = ["    gpu.func @swiglu_q8x(%gate: memref<?xvector<4xf32>>, %up: memref<?xvector<4xf32>>,",
           "                         %a: memref<?xvector<4xf32>>, %xq: memref<?xi32>, %xds: memref<?xvector<4xf32>>,",
           "                         %nblk: i32) kernel",
           "        attributes {known_block_size = array<i32: 128, 1, 1>,",
           "                    swz.grid = \"ceil(nblk/16), 1, 1\"} {"]
    live, vi, blk, l = q8_lanes(e)
    gs = vec4(e, e.v(f"memref.load %gate[{vi}] : memref<?xvector<4xf32>>", "gv"))
    us = vec4(e, e.v(f"memref.load %up[{vi}] : memref<?xvector<4xf32>>", "uv"))
    ys = []
    for g, u in zip(gs, us):  # swiglu_f32's operations, in its order: g / (1 + exp(-g)) * u
        den = e.fadd(e.ci("1.0", "f32"), e.v(f"math.exp {e.v(f'arith.negf {g} : f32', 'ng')} : f32", "ex"))
        ys.append(e.fmul(e.v(f"arith.divf {g}, {den} : f32", "sg"), u))
    vec = e.ci("dense<0.0>", "vector<4xf32>")
    for i, y in enumerate(ys):
        vec = e.v(f"vector.insert {y}, {vec} [{i}] : f32 into vector<4xf32>", "yv")
    e.emit(f"scf.if {live} {{")
    e.emit(f"  memref.store {vec}, %a[{vi}] : memref<?xvector<4xf32>>")
    e.emit("}")
    q8_block(e, ys, live, vi, blk, l)
    e.emit("gpu.return")
    return func_text(out, e)


def rms_norm_q8x():
    """rms_norm_q8x(x, gamma, y, xq, xds, d, eps): rms_norm_f32 and quantize_q8_x of its output."""
    e = Emitter(6)
    c = lambda v: e.ci(v, "index")
    out = ["    gpu.func @rms_norm_q8x(%x: memref<?xf32>, %gamma: memref<?xf32>, %y: memref<?xf32>,",
           "                           %xq: memref<?xi32>, %xds: memref<?xvector<4xf32>>, %d: i32, %eps: f32) kernel",
           "        attributes {known_block_size = array<i32: 256, 1, 1>,",
           "                    swz.grid = \"rows, 1, 1\"} {"]
    # The sum of squares and the scale exactly as rms_norm_f32.mlir computes them (same
    # columns per thread, same fma order, same tree): y is bitwise rms_norm_f32's.
    zero = e.ci("0.0", "f32")
    e.emit("%partials = memref.get_global @partials : memref<256xf32, #gpu.address_space<workgroup>>")
    e.emit("%row = gpu.block_id x")
    e.emit("%tid = gpu.thread_id x")
    e.emit("%D = arith.index_cast %d : i32 to index")
    e.emit("%base = arith.muli %row, %D : index")
    # Columns tid, tid + 256, ... summed in that order (rms_norm_f32's order, so the sum
    # is bitwise its), sixteen an iteration with all sixteen loads issued first: one
    # memory round trip a row up to d = 4096 (rms_norm_f32's four an iteration took
    # four dependent trips at d = 3584). Columns past d read column i and add 0.
    e.emit(f"%partial = scf.for %i = %tid to %D step {c(4096)} iter_args(%acc = {zero}) -> (f32) {{")
    e.indent += 2
    ks, ins, loads = [e.add("%base", "%i")], [], []
    for j in range(1, 16):
        ij = e.add("%i", c(256 * j))
        inj = e.v(f"arith.cmpi ult, {ij}, %D : index", "in")
        icj = e.v(f"arith.select {inj}, {ij}, %i : index", "ic")
        ks.append(e.add("%base", icj))
        ins.append(inj)
    for k in ks:
        loads.append(e.v(f"memref.load %x[{k}] : memref<?xf32>", "l"))
    vs = [loads[0]] + [e.v(f"arith.select {inj}, {lj}, {zero} : f32", "sv") for inj, lj in zip(ins, loads[1:])]
    acc = "%acc"
    for v in vs:
        acc = e.fma(v, v, acc)
    e.emit(f"scf.yield {acc} : f32")
    e.indent -= 2
    e.emit("}")
    e.emit("memref.store %partial, %partials[%tid] : memref<256xf32, #gpu.address_space<workgroup>>")
    e.emit("gpu.barrier")
    e.emit(f"%s_end = scf.for %step = {c(0)} to {c(8)} step {c(1)} iter_args(%s = {c(128)}) -> (index) {{")
    e.emit("  %active = arith.cmpi ult, %tid, %s : index")
    e.emit("  scf.if %active {")
    e.emit("    %o = arith.addi %tid, %s : index")
    e.emit("    %pa = memref.load %partials[%tid] : memref<256xf32, #gpu.address_space<workgroup>>")
    e.emit("    %pb = memref.load %partials[%o] : memref<256xf32, #gpu.address_space<workgroup>>")
    e.emit("    %pab = arith.addf %pa, %pb : f32")
    e.emit("    memref.store %pab, %partials[%tid] : memref<256xf32, #gpu.address_space<workgroup>>")
    e.emit("  }")
    e.emit("  gpu.barrier")
    e.emit(f"  %s2 = arith.divui %s, {c(2)} : index")
    e.emit("  scf.yield %s2 : index")
    e.emit("}")
    e.emit(f"%total = memref.load %partials[{c(0)}] : memref<256xf32, #gpu.address_space<workgroup>>")
    e.emit("%Df = arith.uitofp %d : i32 to f32")
    e.emit("%mean = arith.divf %total, %Df : f32")
    e.emit("%meps = arith.addf %mean, %eps : f32")
    e.emit("%inv = math.rsqrt %meps : f32")
    # Then 4 columns a thread (word w = tid + 256 j of the row, d % 32 == 0), normalised
    # as rms_norm_f32 does ((x * inv) * gamma), stored, and rounded to int8 in 8-lane
    # segments. Four passes j an iteration, their x and gamma loads issued before any
    # store (y may alias x, so a load after a store would wait for it). Every thread runs
    # every pass (the shuffles); words past the row read word 0.
    e.emit("%W = arith.divui %D, " + c(4) + " : index")
    e.emit(f"%D1023 = arith.addi %D, {c(1023)} : index")
    e.emit(f"%passes = arith.divui %D1023, {c(1024)} : index")
    e.emit(f"%rowword = arith.muli %row, %W : index")
    e.emit(f"%l = arith.remui %tid, {c(8)} : index")
    e.emit(f"scf.for %j0 = {c(0)} to %passes step {c(4)} {{")
    e.indent += 2
    passes = []
    for p in range(4):
        j = e.add("%j0", c(p)) if p else "%j0"
        w = e.add(e.mul(j, c(256)), "%tid")
        live = e.v(f"arith.cmpi ult, {w}, %W : index", "live")
        wc = e.v(f"arith.select {live}, {w}, {c(0)} : index", "wc")
        col = e.mul(wc, c(4))
        xg = []
        for i in range(4):
            ci = e.add(col, c(i)) if i else col
            k = e.add("%base", ci)
            xv = e.v(f"memref.load %x[{k}] : memref<?xf32>", "xv")
            gv = e.v(f"memref.load %gamma[{ci}] : memref<?xf32>", "gv")
            xg.append((xv, gv, k))
        passes.append((live, wc, xg))
    for p, (live, wc, xg) in enumerate(passes):
        # Passes 1..3 of an iteration exist only when the row has them (a branch uniform
        # over the workgroup, so the shuffles inside stay legal): a row of d <= 1024
        # runs one pass's rounding, not four.
        if p:
            jp = e.add("%j0", c(p))
            more = e.v(f"arith.cmpi ult, {jp}, %passes : index", "more")
            e.emit(f"scf.if {more} {{")
            e.indent += 2
        ys = [(e.fmul(e.fmul(xv, "%inv"), gv), k) for xv, gv, k in xg]
        e.emit(f"scf.if {live} {{")
        for yv, k in ys:
            e.emit(f"  memref.store {yv}, %y[{k}] : memref<?xf32>")
        e.emit("}")
        vi = e.add("%rowword", wc)
        blk = e.v(f"arith.divui {vi}, {c(8)} : index", "blk")
        q8_block(e, [yv for yv, _ in ys], live, vi, blk, "%l")
        if p:
            e.indent -= 2
            e.emit("}")
    e.indent -= 2
    e.emit("}")
    e.emit("gpu.return")
    return func_text(out, e)


def module_q8x():
    return ("""// Generated by codegen/kernels/gen_quant_kernels.py; edit that, then rerun it.
//
// The decode GEMVs' int8 path, PTX only (dp4a; the SPIR-V target keeps matmul_<type>).
//
// quantize_q8_x(x, xq, xds, nblk): the activations [T, K] (flat, nblk = T * K / 32
//   blocks of 32) rounded to int8 per block, as llama.cpp's quantize_q8_1 (d = amax / 127,
//   q = round(x / d), here half to even; d = 0 gives q = 0). x: memref<?xvector<4xf32>>
//   (16-byte aligned), xq: int8 [nblk * 32] as i32 words (byte i of word w = element
//   4w + i), xds: [nblk] vec4 (d, d * sum q over elements 0..15, d * sum q over 16..31, 0).
//   Launch: block 128 = 16 blocks of 32 elements, 8 lanes each (4 elements a lane; the
//   amax and the sums by shuffles inside 8-lane segments); grid (ceil(nblk / 16), 1, 1).
//
// rms_norm_q8x(x, gamma, y, xq, xds, d, eps): rms_norm_f32 (bitwise: same sums, same
//   order) and quantize_q8_x of its output in one launch; d % 32 == 0. Launch as
//   rms_norm_f32: block 256, grid (rows, 1, 1); each thread sums 16 columns an iteration
//   (loads first), then takes 4 columns a pass, four passes an iteration.
// swiglu_q8x(gate, up, a, xq, xds, nblk): swiglu_f32 (bitwise: the same operations) and
//   quantize_q8_x of its output in one launch; gate, up, a as memref<?xvector<4xf32>>.
//   Launch as quantize_q8_x.
//
// matmul_<type>_q8x(w0, w1, w2, xq, xds, y0, y1, y2, bias0, bias1, bias2, res, N0, N1, N2,
//   K, T, flags): up to three matmuls of one input, yo[t, n] = sum_k x[t, k] Wo[n, k]
//   (+ biaso[n]) for o = 0, 1, 2 with No rows each (No = 0: unused; q, k, v or gate, up run
//   as one launch), (+ res[t, n] on output 0), x the quantized activations of
//   quantize_q8_x (xq as memref<?xvector<4xi32>>: 16 int8 a vector). flags: 1 bias0,
//   2 res, 4 bias1, 8 bias2. Global row ng < N0 + N1 + N2 picks its output (a warp's
//   weight, y and bias are arith.selects of the three). Block 128 = 4 warps, a warp takes
//   P consecutive rows (P = rpw: 2 for q4_k, 1 for q8_0 and q6_k; a tuning parameter,
//   bench/tune_q8x.sh), grid (ceil((N0+N1+N2) / 4P), ceil(T / 8), 1): block_id.y covers
//   tokens 8y .. 8y+7. A lane takes units lane, lane + 32, ... of its rows (their loads
//   first, then each token's activations once for all P rows); one token accumulates in
//   registers, 2..8 in the thread's workgroup-memory slots. Reduction per (row, token):
//   shuffles xor 4, 2, 1 sum 8-lane segments, then (s0 + s1) + (s2 + s3) - by shuffles
//   xor 8, 16 for one token (lane 0 writes), through workgroup memory and a barrier for
//   more (lane t writes token t): the same additions in the same order either way.
//   q4_k: w is memref<?xvector<4xi32>> (a block = 9 vectors: d, dmin, scales | qs); a
//   unit is one 32-weight sub-block r = 2p + jj (the low or high nibbles of the 32-byte
//   qs chunk p, two vectors): 8 dp4a (weights as unsigned nibbles) over both activation
//   halves and one scale/min term: d sc dx sum(q xq) - dmin m (dx sum xq).
//   q8_0: w is memref<?xi32> (34-byte blocks, 2-byte aligned: funnel-shifted words); a
//   unit is 16 weights, 4 signed dp4a, one scale d dx.
//   q4_1: w is memref<?xi32> (20-byte blocks, word 0 = d | m, words 1..4 qs); a unit is
//   one block: 8 dp4a (nibbles as unsigned bytes), d dx sum(q xq) + m (dx sum xq).
//   q5_0: w is memref<?xi32> (22-byte blocks, 2-byte aligned); a unit is one block: the
//   5th bits spread into bit 4 of each byte, 8 dp4a, d (dx sum(q xq) - 16 dx sum xq).
//   q6_k: w is memref<?xi32> (210-byte blocks, 2-byte aligned: funnel-shifted words); a
//   unit is one 32-weight activation block (ql nibbles | qh bit pairs << 4 as unsigned
//   bytes): per 16-weight half 4 dp4a and d sc (dx sum(q xq) - 32 dx sum xq).
//
// matmul_q4_k_mma_q8x, matmul_q4_k_mma_w8_q8x: matmul_q4_k_q8x's contract (arguments,
//   flags, outputs) on the int8 tensor cores, for targets whose schedule sets
//   gemv.q4_k_mma (Codegen.cpp's kernelKey; the _w8 one below gemv.q4_k_mma_split_k_below_rows).
//   w and xq are memref<?xvector<2xi32>> (8-byte loads). Block 32 W (W = 4 or 8 warps),
//   grid (ceil((N0+N1+N2) / 16), ceil(T / 8), 1): a workgroup computes 16 rows for the
//   tokens 8 block_id.y .. + 7, warp w the blocks w, w + W, ... of them. A 32-byte qs chunk
//   p of 16 rows is two mma.sync.m16n8k32 (s8 x s8 -> s32): its low nibbles (sub-block 2p)
//   and its high ones (2p + 1) as A, the tokens' int8 activations of that sub-block as B
//   (column j: token 8 block_id.y + j; past T the last token, not written). The k order
//   inside one mma is free as long as A and B agree: thread (g, q) loads bytes 8q .. 8q + 7
//   of rows g and g + 8 and of the activations (one 8-byte load each). Each C entry is a
//   sub-block's exact integer sum, scaled as matmul_q4_k_q8x's unit; per (row, token) the
//   terms of the even and of the odd sub-blocks form two chains over the warp's blocks in
//   order, summed (even + odd), then the W warps' sums in a fixed tree through workgroup
//   memory. One token (the workgroup-uniform T = 1 branch): every B column is that token,
//   thread (g, q) keeps row g + 8 (q >= 2)'s chain of parity q % 2 and decodes one scale a
//   chunk; more tokens: each thread its 2 rows x 2 tokens x 2 parities. Both add the same
//   terms in the same order, so a token's output is the same bits in any batch.
module attributes {gpu.container_module} {
  gpu.module @swz_gemv_q8x {
    // Each matmul_<type>_q8x's own (sized by its rows a warp, rpw: a kernel reserves the
    // shared memory it names, and what it reserves the L1 cache loses), acc_<type>: the
    // 8-lane segment sums, [4 warps][rpw rows][8 tokens][4 segments] f32; slots_<type>:
    // the per-thread partial sums when the block has 2..8 tokens, [rpw rows][8 tokens][128
    // threads] f32.
""" + "".join(f"""    memref.global "private" @acc_{f} : memref<{128 * q['rpw']}xf32, #gpu.address_space<workgroup>>
    memref.global "private" @slots_{f} : memref<{1024 * q['rpw']}xf32, #gpu.address_space<workgroup>>
""" for f, q in Q8X.items()) + "".join(f"""    // {n}'s chains: [{p['warps']} warps][16 rows][8 tokens][2 parities] f32.
    memref.global "private" @acc_{n} : memref<{256 * p['warps']}xf32, #gpu.address_space<workgroup>>
""" for n, p in Q4K_MMA_KERNELS()) + """    // rms_norm_q8x's per-thread sums of squares.
    memref.global "private" @partials : memref<256xf32, #gpu.address_space<workgroup>>

""" + quantize_q8_x() + rms_norm_q8x() + swiglu_q8x() + "".join(gemv_q8x(f) for f in Q8X)
            + "".join(gemv_q4k_mma(n, p) for n, p in Q4K_MMA_KERNELS()) + "  }\n}\n")


def header(fmt):
    f = FORMATS[fmt]
    if fmt == "f16":
        unit = "8 consecutive elements (the last unit of a row is masked when K % 8 != 0)"
        kreq = "any K >= 1"
        wdecl = "memref<?xf16>"
    else:
        unit = f"{f['qk'] // f['units']} weights of one block ({f['units']} units per block)"
        kreq = f"K % {f['qk']} == 0"
        wdecl = "memref<?xi32>"
    xnote = "" if fmt == "f16" else (
        ";\n// matmul's x is the same f32 data typed memref<?xvector<4xf32>> (128-bit loads: ld.global.v4.f32 /\n"
        "// a vec4 OpLoad; K % 4 == 0 here, and the buffer must be 16-byte aligned; a memref descriptor's\n"
        "// offset and size count vec4s)")
    return f"""// Generated by codegen/kernels/gen_quant_kernels.py; edit that, then rerun it.
//
// Decode-side kernels for {fmt.upper()} weights (GGUF / ggml {f['layout']}).
// W is the GGUF tensor [N, K] (K contiguous), passed as {wdecl}{" (its raw bytes as little-endian 32-bit words: the buffer is the tensor's bytes, zero-padded to a multiple of 4)" if fmt != "f16" else ""}; {kreq}.
// Activations are f32, passed flat as memref<?xf32> (1-D: the SPIR-V lowering takes 1-D dynamic buffers){xnote}.
//
// matmul_{fmt}(w, x, y, bias, res, N, K, T, flags): y[t, n] = sum_k x[t, k] * W[n, k]
//   (+ bias[n] when flags & 1) (+ res[t, n] when flags & 2: a fused residual add; res may be y itself,
//   each element is read and then written by the same thread).
//   x: [T, K] f32, y, res: [T, N] f32, bias: [N] f32 (bias / res: any 1-element buffer when unused).
//   Launch: block 128 = 4 groups of 32 threads, one output row n = 4 * block_id.x + group per group;
//   grid (ceil(N / 4), ceil(T / 8), 1): block_id.y covers tokens 8*y .. 8*y+7 (T = 1 for decode,
//   up to 8 per block for speculative verification). A thread's unit is {unit};
//   a group's 32 threads take consecutive units (coalesced words) and dequantize each unit once.
//   One token in the block (decode): each thread accumulates its units in one register. 2..8
//   tokens: each thread accumulates each token into its own f32 slot of workgroup memory
//   (`slots`, [8 tokens][128 threads], touched by that thread only), keeping the registers of the
//   one-token path. Reduction, per token: butterfly shuffles xor 4, 2, 1 (gpu.shuffle width 32:
//   full-warp shfl.sync on PTX, OpGroupNonUniformShuffleXor on SPIR-V; offsets < 8 keep every
//   exchange inside an aligned 8-lane segment, so any subgroup size >= 8 works, lavapipe's 8
//   included) sum each 8-lane segment; segment leaders write [4 rows][8 tokens][4 segments]
//   (`acc`, 512 B); ONE barrier; then the group's thread t sums token t0 + t's 4 segment
//   sums and writes y[t, n]. Bandwidth: each weight byte is read once per launch.
//
// get_rows_{fmt}(w, tokens, out, K): out[t, :] = dequant(W[tokens[t], :]) (embedding lookup)
//   tokens: [T] i32 (each in [0, N)), out: [T, K] f32. Launch: block 128, grid (T, 1, 1);
//   threads stride over the row's units.
"""


def gemv(fmt):
    """matmul_<fmt>: the decode GEMV on f32 activations (every target)."""
    f = FORMATS[fmt]
    e = Emitter(6)
    wty = "memref<?xf16>" if fmt == "f16" else "memref<?xi32>"
    out = []
    xty = "memref<?xf32>" if fmt == "f16" else XVEC
    out.append(f"    gpu.func @matmul_{fmt}(%w: {wty}, %x: {xty}, %y: memref<?xf32>,")
    out.append(f"                           %bias: memref<?xf32>, %res: memref<?xf32>, %N: i32, %K: i32, %T: i32,")
    out.append(f"                           %flags: i32)")
    out.append(f"        kernel")
    out.append(f"        attributes {{known_block_size = array<i32: 128, 1, 1>,")
    out.append(f"                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [128, 1, 1]>,")
    out.append(f"                    swz.grid = \"ceil(N/4), ceil(T/8), 1\"}} {{")
    c = lambda v: e.ci(v, "index")
    e.emit("%acc = memref.get_global @acc : memref<128xf32, #gpu.address_space<workgroup>>")
    e.emit("%tid = gpu.thread_id x")
    e.emit("%bx = gpu.block_id x")
    e.emit("%by = gpu.block_id y")
    e.emit(f"%grp = arith.divui %tid, {c(32)} : index")
    e.emit(f"%lane = arith.remui %tid, {c(32)} : index")
    e.emit(f"%row4 = arith.muli %bx, {c(4)} : index")
    e.emit("%n = arith.addi %row4, %grp : index")
    e.emit("%Ni = arith.index_cast %N : i32 to index")
    e.emit("%Ki = arith.index_cast %K : i32 to index")
    e.emit("%Ti = arith.index_cast %T : i32 to index")
    e.emit(f"%t0 = arith.muli %by, {c(8)} : index")
    e.emit("%tleft = arith.subi %Ti, %t0 : index")
    e.emit(f"%tb = arith.minui %tleft, {c(8)} : index")
    e.emit("%live = arith.cmpi ult, %n, %Ni : index")
    # Units of this row (0 for a padding group past N).
    if fmt == "f16":
        e.emit(f"%k7 = arith.addi %Ki, {c(7)} : index")
        e.emit(f"%units_all = arith.divui %k7, {c(8)} : index")
    else:
        e.emit(f"%nb = arith.divui %Ki, {c(f['qk'])} : index")
        e.emit(f"%units_all = arith.muli %nb, {c(f['units'])} : index")
        e.emit(f"%rowbytes = arith.muli %nb, {c(f['bs'])} : index")
        e.emit("%rowbase = arith.muli %n, %rowbytes : index")
    e.emit(f"%units = arith.select %live, %units_all, {c(0)} : index")
    # Token j < tb of the block (uniform over the block; token 0 always is).
    for j in range(1, TOK):
        e.emit(f"%tok{j} = arith.cmpi ult, {c(j)}, %tb : index")
    zero = e.ci("0.0", "f32")
    SLOTS = "memref<1024xf32, #gpu.address_space<workgroup>>"

    def unit_body(u="%u", sfx=""):
        """Emits the current unit %u's weight loads and dequantization; returns
        token(tg): emits token tg's (index: absolute token) x loads and dot
        product with the unit and returns the f32 contribution."""
        if fmt == "f16":
            e.emit(f"%kb{sfx} = arith.muli {u}, {c(8)} : index")
            e.emit(f"%wrow{sfx} = arith.muli %n, %Ki : index")
            e.emit(f"%klast{sfx} = arith.subi %Ki, {c(1)} : index")
            vals = []
            for i in range(8):
                k = e.add("%kb" + sfx, c(i)) if i else "%kb" + sfx
                inb = e.v(f"arith.cmpi ult, {k}, %Ki : index", "in")
                kc = e.v(f"arith.minui {k}, %klast{sfx} : index", "kc")
                wi = e.add("%wrow" + sfx, kc)
                h = e.v(f"memref.load %w[{wi}] : memref<?xf16>", "ld")
                hf = e.v(f"arith.extf {h} : f16 to f32", "h")
                vals.append((kc, e.v(f"arith.select {inb}, {hf}, {zero} : f32", "sel")))

            def token(tg):
                xrow = e.mul(tg, "%Ki")
                s = zero
                for kc, wv in vals:
                    xv = e.v(f"memref.load %x[{e.add(xrow, kc)}] : memref<?xf32>", "xv")
                    s = e.fma(xv, wv, s)
                return s
            return token
        e.emit(f"%b{sfx} = arith.divui {u}, {c(f['units'])} : index")
        e.emit(f"%q{sfx} = arith.remui {u}, {c(f['units'])} : index")
        e.emit(f"%boff{sfx} = arith.muli %b{sfx}, {c(f['bs'])} : index")
        e.emit(f"%blockbyte{sfx} = arith.addi %rowbase, %boff{sfx} : index")
        kbase, groups = dequant_unit(e, fmt, "%blockbyte" + sfx, "%q" + sfx)
        e.emit(f"%bk{sfx} = arith.muli %b{sfx}, {c(f['qk'])} : index")
        e.emit(f"%kb{sfx} = arith.addi %bk{sfx}, {kbase} : index")

        def token(tg):
            # x as 16-byte vectors (K % 4 == 0, every unit's weights come in
            # aligned runs of 4): one 128-bit load per 4 weights.
            xk = e.add(e.mul(tg, "%Ki"), "%kb" + sfx)
            xk4 = e.v(f"arith.shrui {xk}, {c(2)} : index", "x4")
            vecs = {}
            contrib = None
            for scale, off, items in groups:
                sxq = None
                sx = None
                for koff, qf in items:
                    if koff // 4 not in vecs:
                        xi = e.add(xk4, c(koff // 4)) if koff // 4 else xk4
                        vecs[koff // 4] = e.v(f"memref.load %x[{xi}] : {XVEC}", "xq")
                    xv = e.v(f"vector.extract {vecs[koff // 4]}[{koff % 4}] : f32 from vector<4xf32>", "xv")
                    sxq = e.fmul(xv, qf) if sxq is None else e.fma(xv, qf, sxq)
                    if off is not None:
                        sx = xv if sx is None else e.fadd(sx, xv)
                part = e.fmul(scale, sxq)
                if off is not None:
                    part = e.fma(off, sx, part)
                contrib = part if contrib is None else e.fadd(contrib, part)
            return contrib
        return token

    # Per-thread partial sums of the block's tokens, %acc_r#t (0 for t >= tb).
    # One token (decode): a register accumulator. More (speculative verification):
    # one workgroup-memory slot per (token, thread), read and written by its
    # thread only (no barrier), so the register count stays that of one token.
    ys = ", ".join(["f32"] * TOK)
    e.emit(f"%one = arith.cmpi eq, %tb, {c(1)} : index")
    e.emit(f"%acc_r:{TOK} = scf.if %one -> ({ys}) {{")
    e.indent += 2
    R = f["unroll"]
    e.emit(f"%r1 = scf.for %u = %lane to %units step {c(32 * R)} iter_args(%sacc = {zero}) -> (f32) {{")
    e.indent += 2
    # Units u, u + 32, ..., u + 32 (R - 1): all R units' loads are issued before
    # any of them is used. A unit past the row loads unit u again (cached) and
    # contributes 0.
    units = []
    for r in range(R):
        if r == 0:
            units.append((None, unit_body()))
            continue
        ur = e.add("%u", c(32 * r))
        vr = e.v(f"arith.cmpi ult, {ur}, %units : index", "vr")
        uc = e.v(f"arith.select {vr}, {ur}, %u : index", "uc")
        units.append((vr, unit_body(uc, f"_{r}")))
    acc = "%sacc"
    for vr, tok in units:
        cr = tok("%t0")
        if vr is not None:
            cr = e.v(f"arith.select {vr}, {cr}, {zero} : f32", "sel")
        acc = e.fadd(acc, cr)
    e.emit(f"scf.yield {acc} : f32")
    e.indent -= 2
    e.emit("}")
    e.emit(f"scf.yield %r1, {', '.join([zero] * (TOK - 1))} : {ys}")
    e.indent -= 2
    e.emit("} else {")
    e.indent += 2
    e.emit(f"%slots = memref.get_global @slots : {SLOTS}")
    e.emit(f"scf.for %t = {c(0)} to {c(TOK)} step {c(1)} {{")
    e.emit(f"  %s = arith.muli %t, {c(128)} : index")
    e.emit("  %si = arith.addi %s, %tid : index")
    e.emit(f"  memref.store {zero}, %slots[%si] : {SLOTS}")
    e.emit("}")
    e.emit(f"scf.for %u = %lane to %units step {c(32)} {{")
    e.indent += 2
    tok = unit_body()
    e.emit(f"scf.for %t = {c(0)} to %tb step {c(1)} {{")
    e.indent += 2
    e.emit("%tg = arith.addi %t0, %t : index")
    contrib = tok("%tg")
    e.emit(f"%slot0 = arith.muli %t, {c(128)} : index")
    e.emit("%slot = arith.addi %slot0, %tid : index")
    e.emit(f"%old = memref.load %slots[%slot] : {SLOTS}")
    e.emit(f"%new = arith.addf %old, {contrib} : f32")
    e.emit(f"memref.store %new, %slots[%slot] : {SLOTS}")
    e.indent -= 2
    e.emit("}")
    e.indent -= 2
    e.emit("}")
    outs = []
    for j in range(TOK):
        si = e.add("%tid", c(128 * j)) if j else "%tid"
        outs.append(e.v(f"memref.load %slots[{si}] : {SLOTS}", "sv"))
    e.emit(f"scf.yield {', '.join(outs)} : {ys}")
    e.indent -= 2
    e.emit("}")
    # Sum each 8-lane segment's partials by shuffle-xor 4, 2, 1 (width 32, see the
    # header: the exchanges stay inside aligned 8-lane segments, so any subgroup
    # size >= 8 works); every lane of a segment then holds the segment's sum.
    sums = []
    for j in range(TOK):
        def seg_sum(v):
            return shuffle_xor_sum(e, v, (4, 2, 1))
        if j == 0:
            sums.append(seg_sum(f"%acc_r#{j}"))
        else:
            r = e.v(f"scf.if %tok{j} -> (f32) {{", "c")
            e.indent += 2
            v = seg_sum(f"%acc_r#{j}")
            e.emit(f"scf.yield {v} : f32")
            e.indent -= 2
            e.emit("} else {")
            e.emit(f"  scf.yield {zero} : f32")
            e.emit("}")
            sums.append(r)
    # Segment leaders store part[grp][token][seg] (4 rows x 8 tokens x 4 segments).
    e.emit(f"%seg = arith.divui %lane, {c(8)} : index")
    e.emit(f"%sl = arith.remui %lane, {c(8)} : index")
    e.emit(f"%lead = arith.cmpi eq, %sl, {c(0)} : index")
    e.emit(f"%pbase0 = arith.muli %grp, {c(32)} : index")
    e.emit("%pbase = arith.addi %pbase0, %seg : index")
    e.emit("scf.if %lead {")
    e.indent += 2
    for j, v in enumerate(sums):
        pi = e.add("%pbase", c(4 * j)) if j else "%pbase"
        e.emit(f"memref.store {v}, %acc[{pi}] : memref<128xf32, #gpu.address_space<workgroup>>")
    e.indent -= 2
    e.emit("}")
    e.emit("gpu.barrier")
    # Thread `lane` of the group sums token t0 + lane's 4 segment partials and writes it.
    e.emit("%wr0 = arith.cmpi ult, %lane, %tb : index")
    e.emit("%wr = arith.andi %wr0, %live : i1")
    e.emit("scf.if %wr {")
    e.emit(f"  %l4 = arith.muli %lane, {c(4)} : index")
    e.emit("  %si = arith.addi %pbase0, %l4 : index")
    e.emit(f"  %si1 = arith.addi %si, {c(1)} : index")
    e.emit(f"  %si2 = arith.addi %si, {c(2)} : index")
    e.emit(f"  %si3 = arith.addi %si, {c(3)} : index")
    e.emit("  %p0 = memref.load %acc[%si] : memref<128xf32, #gpu.address_space<workgroup>>")
    e.emit("  %p1 = memref.load %acc[%si1] : memref<128xf32, #gpu.address_space<workgroup>>")
    e.emit("  %p2 = memref.load %acc[%si2] : memref<128xf32, #gpu.address_space<workgroup>>")
    e.emit("  %p3 = memref.load %acc[%si3] : memref<128xf32, #gpu.address_space<workgroup>>")
    e.emit("  %p01 = arith.addf %p0, %p1 : f32")
    e.emit("  %p23 = arith.addf %p2, %p3 : f32")
    e.emit("  %sum = arith.addf %p01, %p23 : f32")
    e.emit("  %tg = arith.addi %t0, %lane : index")
    e.emit("  %yrow = arith.muli %tg, %Ni : index")
    e.emit("  %yi = arith.addi %yrow, %n : index")
    e.emit(f"  %fb = arith.andi %flags, {e.ci(1)} : i32")
    e.emit(f"  %hb = arith.cmpi ne, %fb, {e.ci(0)} : i32")
    e.emit("  %withb = scf.if %hb -> (f32) {")
    e.emit("    %bv = memref.load %bias[%n] : memref<?xf32>")
    e.emit("    %sb = arith.addf %sum, %bv : f32")
    e.emit("    scf.yield %sb : f32")
    e.emit("  } else {")
    e.emit("    scf.yield %sum : f32")
    e.emit("  }")
    e.emit(f"  %fr = arith.andi %flags, {e.ci(2)} : i32")
    e.emit(f"  %hr = arith.cmpi ne, %fr, {e.ci(0)} : i32")
    e.emit("  %out = scf.if %hr -> (f32) {")
    e.emit("    %rv = memref.load %res[%yi] : memref<?xf32>")
    e.emit("    %sr = arith.addf %withb, %rv : f32")
    e.emit("    scf.yield %sr : f32")
    e.emit("  } else {")
    e.emit("    scf.yield %withb : f32")
    e.emit("  }")
    e.emit("  memref.store %out, %y[%yi] : memref<?xf32>")
    e.emit("}")
    e.emit("gpu.return")
    return func_text(out, e)


def bias_residual_store(e, total, n, yi, has_bias, has_res, bias, y):
    """The GEMVs' epilogue: y[yi] = total (+ bias[n] when has_bias) (+ %res[yi] when
    has_res); has_bias / has_res are callables naming (or emitting) the i1 conditions,
    called in that order (the generated names stay in emission order)."""
    def add_if(cond, base, ref, i, name, lname):
        r = e.v(f"scf.if {cond} -> (f32) {{", name)
        e.indent += 2
        v = e.v(f"memref.load {ref}[{i}] : memref<?xf32>", lname)
        e.emit(f"scf.yield {e.fadd(base, v)} : f32")
        e.indent -= 2
        e.emit("} else {")
        e.emit(f"  scf.yield {base} : f32")
        e.emit("}")
        return r
    withb = add_if(has_bias(), total, bias, n, "wb", "bv")
    o = add_if(has_res(), withb, "%res", yi, "o", "rv")
    e.emit(f"memref.store {o}, {y}[{yi}] : memref<?xf32>")


def output_row(e, ngc, wq, rowstride):
    """Global row ngc (index) of a launch computing up to three matmuls: its output o (rows
    [0, N0) -> 0, [N0, N0 + N1) -> 1, the rest -> 2) as the conditions in0 / in1, its
    weight memref (of type wq) w, its local row n, and that row's first element of w,
    n * rowstride (rowbase)."""
    c = lambda v: e.ci(v, "index")
    in0 = e.v(f"arith.cmpi ult, {ngc}, %N0i : index", "in0")
    in1 = e.v(f"arith.cmpi ult, {ngc}, %N01 : index", "in1")
    w12 = e.v(f"arith.select {in1}, %w1, %w2 : {wq}", "w")
    w = e.v(f"arith.select {in0}, %w0, {w12} : {wq}", "w")
    nb12 = e.v(f"arith.select {in1}, %N0i, %N01 : index", "nbase")
    nbase = e.v(f"arith.select {in0}, {c(0)}, {nb12} : index", "nbase")
    n = e.v(f"arith.subi {ngc}, {nbase} : index", "n")
    return dict(in0=in0, in1=in1, w=w, n=n, rowbase=e.mul(n, rowstride))


def gemv_q8x(fmt):
    """matmul_<fmt>_q8x (PTX only): the decode GEMV on int8 activations (quantize_q8_x),
    each unit's dot product dp4a; a warp takes Q8X[fmt]["rpw"] consecutive rows."""
    q8 = Q8X[fmt]
    P, R = q8["rpw"], q8["unroll"]
    rows_wg = 4 * P
    e = Emitter(6)
    c = lambda v: e.ci(v, "index")
    wq = IVEC if q8["vecs"] else "memref<?xi32>"
    ACC = f"memref<{128 * P}xf32, #gpu.address_space<workgroup>>"
    SLOTS = f"memref<{1024 * P}xf32, #gpu.address_space<workgroup>>"
    out = [f"    gpu.func @matmul_{fmt}_q8x(%w0: {wq}, %w1: {wq}, %w2: {wq}, %xq: {IVEC}, %xds: {XVEC},",
           "                           %y0: memref<?xf32>, %y1: memref<?xf32>, %y2: memref<?xf32>,",
           "                           %bias0: memref<?xf32>, %bias1: memref<?xf32>, %bias2: memref<?xf32>,",
           "                           %res: memref<?xf32>, %N0: i32, %N1: i32, %N2: i32, %K: i32, %T: i32,",
           "                           %flags: i32)",
           "        kernel",
           "        attributes {known_block_size = array<i32: 128, 1, 1>,",
           # Workgroups an SM the registers must allow (Q8X): without it the driver's JIT
           # took 122 registers for the Q4_K kernel, 4 workgroups an SM, so a 7B Q/O
           # projection (896 workgroups) ran in two waves on the H200's 132 SMs.
           f"                    nvvm.minctasm = {q8['minctasm']} : i32,",
           f"                    swz.grid = \"ceil((N0+N1+N2)/{rows_wg}), ceil(T/8), 1\"}} {{"]
    e.emit(f"%acc = memref.get_global @acc_{fmt} : {ACC}")
    e.emit("%tid = gpu.thread_id x")
    e.emit("%bx = gpu.block_id x")
    e.emit("%by = gpu.block_id y")
    e.emit(f"%grp = arith.divui %tid, {c(32)} : index")
    e.emit(f"%lane = arith.remui %tid, {c(32)} : index")
    e.emit(f"%rowwg = arith.muli %bx, {c(rows_wg)} : index")
    e.emit(f"%rowgrp = arith.muli %grp, {c(P)} : index")
    e.emit("%row0 = arith.addi %rowwg, %rowgrp : index")
    e.emit("%N0i = arith.index_cast %N0 : i32 to index")
    e.emit("%N1i = arith.index_cast %N1 : i32 to index")
    e.emit("%N2i = arith.index_cast %N2 : i32 to index")
    e.emit("%N01 = arith.addi %N0i, %N1i : index")
    e.emit("%Ntot = arith.addi %N01, %N2i : index")
    e.emit("%Ki = arith.index_cast %K : i32 to index")
    e.emit("%Ti = arith.index_cast %T : i32 to index")
    e.emit(f"%t0 = arith.muli %by, {c(8)} : index")
    e.emit("%tleft = arith.subi %Ti, %t0 : index")
    e.emit(f"%tb = arith.minui %tleft, {c(8)} : index")
    e.emit(f"%nb = arith.divui %Ki, {c(FORMATS[fmt]['qk'])} : index")
    e.emit(f"%units_all = arith.muli %nb, {c(q8['units'])} : index")
    e.emit(f"%K32 = arith.divui %Ki, {c(32)} : index")
    if q8["vecs"]:  # rowbase in 16-byte vectors
        e.emit(f"%rowstride = arith.muli %nb, {c(q8['vecs'])} : index")
    # The warp's rows r = 0..P-1: global row ng_r picks its output (rows [0, N0) -> 0,
    # [N0, N0+N1) -> 1, the rest -> 2), whose weight the warp loads with local row n_r; y,
    # bias, row count and flags are selected after the loop (no registers across it). A
    # row past the last (live_r false) reads the warp's first row again and writes nothing;
    # a warp whose first row is past the last has no units.
    rows = []
    for r in range(P):
        ng = "%row0" if r == 0 else e.add("%row0", c(r))
        live = e.v(f"arith.cmpi ult, {ng}, %Ntot : index", "live")
        ngc = ng if r == 0 else e.v(f"arith.select {live}, {ng}, %row0 : index", "ngc")
        rows.append(dict(live=live, **output_row(e, ngc, wq, "%rowstride" if q8["vecs"] else "%nb")))
    e.emit(f"%units = arith.select {rows[0]['live']}, %units_all, {c(0)} : index")
    # Token j < tb of the block (uniform over the block; token 0 always is).
    for j in range(1, TOK):
        e.emit(f"%tok{j} = arith.cmpi ult, {c(j)}, %tb : index")
    zero = e.ci("0.0", "f32")

    def unit(u):
        """Unit u's weight loads for every row; returns contrib(tg): the activation loads
        of token tg (index) and each row's f32 contribution (a list of P)."""
        b = e.v(f"arith.divui {u}, {c(q8['units'])} : index", "b")
        q = e.v(f"arith.remui {u}, {c(q8['units'])} : index", "q")
        dots = [q8x_weights(e, fmt, b, q, rw["w"], rw["rowbase"]) for rw in rows]

        def contrib(tg):
            act = q8x_acts(e, fmt, b, q, tg)
            return [dot(act) for dot in dots]
        return contrib

    # Per-thread partial sums of (row, token), %acc_r#(r * TOK + t) (0 for t >= tb). One
    # token (decode): register accumulators. More (speculative verification, batches):
    # one workgroup-memory slot per (row, token, thread), read and written by its thread
    # only (no barrier), so the register count stays that of one token.
    NA = P * TOK
    ys = ", ".join(["f32"] * NA)
    e.emit(f"%one = arith.cmpi eq, %tb, {c(1)} : index")
    e.emit(f"%acc_r:{NA} = scf.if %one -> ({ys}) {{")
    e.indent += 2
    inits = ", ".join(f"%sacc{r} = {zero}" for r in range(P))
    e.emit(f"%r1:{P} = scf.for %u = %lane to %units step {c(32 * R)} iter_args({inits}) -> ({', '.join(['f32'] * P)}) {{")
    e.indent += 2
    # Units u, u + 32, ..., u + 32 (R - 1): all R units' loads are issued before any of
    # them is used. A unit past the row loads unit u again (cached) and contributes 0.
    units = []
    for k in range(R):
        if k == 0:
            units.append((None, unit("%u")))
            continue
        uk = e.add("%u", c(32 * k))
        vk = e.v(f"arith.cmpi ult, {uk}, %units : index", "vr")
        units.append((vk, unit(e.v(f"arith.select {vk}, {uk}, %u : index", "uc"))))
    accs = [f"%sacc{r}" for r in range(P)]
    for vk, contrib in units:
        for r, cr in enumerate(contrib("%t0")):
            if vk is not None:
                cr = e.v(f"arith.select {vk}, {cr}, {zero} : f32", "sel")
            accs[r] = e.fadd(accs[r], cr)
    e.emit(f"scf.yield {', '.join(accs)} : {', '.join(['f32'] * P)}")
    e.indent -= 2
    e.emit("}")
    e.emit("scf.yield " + ", ".join(f"%r1#{r}" if t == 0 else zero for r in range(P) for t in range(TOK)) + f" : {ys}")
    e.indent -= 2
    e.emit("} else {")
    e.indent += 2
    e.emit(f"%slots = memref.get_global @slots_{fmt} : {SLOTS}")
    e.emit(f"scf.for %t = {c(0)} to {c(P * TOK)} step {c(1)} {{")
    e.emit(f"  %s = arith.muli %t, {c(128)} : index")
    e.emit("  %si = arith.addi %s, %tid : index")
    e.emit(f"  memref.store {zero}, %slots[%si] : {SLOTS}")
    e.emit("}")
    e.emit(f"scf.for %u = %lane to %units step {c(32)} {{")
    e.indent += 2
    contrib = unit("%u")
    e.emit(f"scf.for %t = {c(0)} to %tb step {c(1)} {{")
    e.indent += 2
    e.emit("%tg = arith.addi %t0, %t : index")
    for r, cr in enumerate(contrib("%tg")):
        tr = e.add("%t", c(TOK * r)) if r else "%t"
        slot = e.add(e.mul(tr, c(128)), "%tid")
        old = e.v(f"memref.load %slots[{slot}] : {SLOTS}", "old")
        e.emit(f"memref.store {e.fadd(old, cr)}, %slots[{slot}] : {SLOTS}")
    e.indent -= 2
    e.emit("}")
    e.indent -= 2
    e.emit("}")
    outs = [e.v(f"memref.load %slots[{e.add('%tid', c(128 * j)) if j else '%tid'}] : {SLOTS}", "sv") for j in range(NA)]
    e.emit(f"scf.yield {', '.join(outs)} : {ys}")
    e.indent -= 2
    e.emit("}")
    # The reduction: each 8-lane segment's partials by shuffle-xor 4, 2, 1, then the four
    # segment sums as (s0 + s1) + (s2 + s3), the same additions in the same order for one
    # token and for many (speculative verification must reproduce plain decoding's bits).
    # Each row's output: its y, bias, row count and flags (selected here, after the loop,
    # at the top level: a memref value must not cross the blocks scf.if lowers to).
    for rw in rows:
        sel = rw["sel"] = {}
        for name, a0, a1, a2, ty in (("y", "%y0", "%y1", "%y2", "memref<?xf32>"),
                                     ("bias", "%bias0", "%bias1", "%bias2", "memref<?xf32>"),
                                     ("Ni", "%N0i", "%N1i", "%N2i", "index"),
                                     ("bflag", e.ci(1), e.ci(4), e.ci(8), "i32"),
                                     ("rflag", e.ci(2), e.ci(0), e.ci(0), "i32")):
            v12 = e.v(f"arith.select {rw['in1']}, {a1}, {a2} : {ty}", name)
            sel[name] = e.v(f"arith.select {rw['in0']}, {a0}, {v12} : {ty}", name)

    def write(rw, total, tg):
        """Row rw's output of token tg (index): total (+ its output's bias) (+ res on
        output 0; flags 1, 4, 8: bias of output 0, 1, 2; 2: res)."""
        sel = rw["sel"]
        yi = e.add(e.mul(tg, sel["Ni"]), rw["n"])
        flag = lambda f, name: lambda: e.v(f"arith.cmpi ne, {e.band('%flags', sel[f])}, {e.ci(0)} : i32", name)
        bias_residual_store(e, total, rw["n"], yi, flag("bflag", "hb"), flag("rflag", "hr"), sel["bias"], sel["y"])

    # One token (the workgroup-uniform %one): shuffles only, xor 8 adds the neighbouring
    # segment (s0 + s1), xor 16 the other pair; lane 0 writes. No workgroup memory, no
    # barrier: a 7B row of 3,584 weights is 3.5 unit passes a lane, so what a row costs
    # besides them counts. Both branches yield each row's total, the token and whether this
    # lane writes it; one write follows.
    rty = ", ".join(["f32"] * P + ["index"] + ["i1"] * P)
    e.emit(f"%lane0 = arith.cmpi eq, %lane, {c(0)} : index")
    e.emit(f"%fin:{2 * P + 1} = scf.if %one -> ({rty}) {{")
    e.indent += 2
    totals = [shuffle_xor_sum(e, f"%acc_r#{r * TOK}", (4, 2, 1, 8, 16)) for r in range(P)]
    wrs = [e.v(f"arith.andi %lane0, {rw['live']} : i1", "wr") for rw in rows]
    e.emit(f"scf.yield {', '.join(totals + ['%t0'] + wrs)} : {rty}")
    e.indent -= 2
    e.emit("} else {")
    e.indent += 2
    # 2..8 tokens: segment leaders store acc[(grp P + r) 32 + 4 t + seg] (the workgroup's
    # 4 P rows x 8 tokens x 4 segments); after the barrier lane t < tb sums token t0 + t's
    # four (lanes past 7 read token 7's, and write nothing).
    e.emit(f"%seg = arith.divui %lane, {c(8)} : index")
    e.emit(f"%sl = arith.remui %lane, {c(8)} : index")
    e.emit(f"%lead = arith.cmpi eq, %sl, {c(0)} : index")
    e.emit(f"%pbase1 = arith.muli %rowgrp, {c(32)} : index")
    e.emit("%pbase = arith.addi %pbase1, %seg : index")
    sums = []
    for r in range(P):
        for j in range(TOK):
            a = f"%acc_r#{r * TOK + j}"
            if j == 0:
                sums.append(shuffle_xor_sum(e, a, (4, 2, 1)))
                continue
            sv = e.v(f"scf.if %tok{j} -> (f32) {{", "c")
            e.indent += 2
            e.emit(f"scf.yield {shuffle_xor_sum(e, a, (4, 2, 1))} : f32")
            e.indent -= 2
            e.emit("} else {")
            e.emit(f"  scf.yield {zero} : f32")
            e.emit("}")
            sums.append(sv)
    e.emit("scf.if %lead {")
    e.indent += 2
    for i, v in enumerate(sums):
        r, j = divmod(i, TOK)
        off = 32 * r + 4 * j
        e.emit(f"memref.store {v}, %acc[{e.add('%pbase', c(off)) if off else '%pbase'}] : {ACC}")
    e.indent -= 2
    e.emit("}")
    e.emit("gpu.barrier")
    e.emit("%wr0 = arith.cmpi ult, %lane, %tb : index")
    e.emit("%tg = arith.addi %t0, %lane : index")
    e.emit(f"%lt = arith.minui %lane, {c(TOK - 1)} : index")
    e.emit(f"%l4 = arith.muli %lt, {c(4)} : index")
    e.emit("%si0 = arith.addi %pbase1, %l4 : index")
    totals = []
    for r in range(P):
        si = e.add("%si0", c(32 * r)) if r else "%si0"
        ps = [e.v(f"memref.load %acc[{e.add(si, c(k)) if k else si}] : {ACC}", "p") for k in range(4)]
        totals.append(e.fadd(e.fadd(ps[0], ps[1]), e.fadd(ps[2], ps[3])))
    wrs = [e.v(f"arith.andi %wr0, {rw['live']} : i1", "wr") for rw in rows]
    e.emit(f"scf.yield {', '.join(totals + ['%tg'] + wrs)} : {rty}")
    e.indent -= 2
    e.emit("}")
    for r, rw in enumerate(rows):
        e.emit(f"scf.if %fin#{P + 1 + r} {{")
        e.indent += 2
        write(rw, f"%fin#{r}", f"%fin#{P}")
        e.indent -= 2
        e.emit("}")
    e.emit("gpu.return")
    return func_text(out, e)


# ---------------------------------------------------------------------------
# Q4_K's decode GEMV on the int8 tensor cores (gemv_q8x.mlir, PTX only).
# warps: a workgroup's warps, each taking every warps-th block of its 16 rows (the
# K-split; fixed per kernel, never by T, so a token's sum is the same in any batch).
# v2: weights and int8 activations bound as 8-byte vectors (memref<?xvector<2xi32>>), so
# a thread loads its own 8 bytes of a chunk (ld.v2); 0: 16-byte vectors, two threads
# loading each and selecting their halves.
# minctasm: workgroups an SM the registers must allow (nvvm.minctasm; 0: none).
# pf: one token's loop loads the next block's weights before it computes this one's (two
# blocks in flight a warp; 1) or not (0).
# rolled: the many-token loop takes a block's 4 chunks in an scf.for (fewer registers live:
# the one-token branch's allocation then sets the kernel's) instead of unrolled.
MMA_Q4K = dict(warps=4, v2=1, minctasm=0, pf=0, rolled=0)
# matmul_q4_k_mma_w8_q8x: the same with 8 warps, for matrices of fewer rows than the target
# schedule's gemv.q4_k_mma_split_k_below_rows (few workgroups: more warps each).
MMA_Q4K_W8 = dict(warps=8, v2=1, minctasm=0, pf=0, rolled=0)


def Q4K_MMA_KERNELS():
    """The tensor-core Q4_K GEMVs gemv_q8x.mlir holds: (entry, parameters)."""
    return [("matmul_q4_k_mma_q8x", MMA_Q4K), ("matmul_q4_k_mma_w8_q8x", MMA_Q4K_W8)]


def q4k_scale_at(e, d, dmin, s0, s1, s2, p, sh):
    """block_q4_K's (d sc, dmin m) of sub-block j = 2p + par (get_scale_min_k4): p a Python
    int 0..3 (so j < 4 is known here), sh = 8 ((2p + par) & 3) (i32; 8 par + 16 (p & 1))."""
    b0, b1 = e.shr(s0, sh), e.shr(s1, sh)
    if p < 2:
        sc, m = e.band(b0, e.ci(63)), e.band(b1, e.ci(63))
    else:
        b2 = e.shr(s2, sh)
        sc = e.bor(e.band(b2, e.ci(15)), e.band(e.shr(b0, e.ci(2)), e.ci(48)))
        m = e.bor(e.band(e.shr(b2, e.ci(4)), e.ci(15)), e.band(e.shr(b1, e.ci(2)), e.ci(48)))
    return e.fmul(d, e.u2f(sc)), e.fmul(dmin, e.u2f(m))


def gemv_q4k_mma(name="matmul_q4_k_mma_q8x", params=None):
    """matmul_q4_k_mma_q8x: matmul_q4_k_q8x's contract, each 32-weight sub-block's integer
    dot products by mma.sync.m16n8k32 (s8 x s8 -> s32) for 16 rows and 8 tokens at once."""
    params = params or MMA_Q4K
    W, V2, PF, ROLLED = params["warps"], params["v2"], params["pf"], params.get("rolled", 0)
    e = Emitter(6)
    c = lambda v: e.ci(v, "index")
    V4I, V16B = "vector<4xi32>", "vector<16xi8>"
    WQ = "memref<?xvector<2xi32>>" if V2 else IVEC
    VA, VB, VC = "vector<4x4xi8>", "vector<2x4xi8>", "vector<2x2xi32>"
    SM = f"memref<{256 * W}xf32, #gpu.address_space<workgroup>>"
    head = [f"    gpu.func @{name}(%w0: {WQ}, %w1: {WQ}, %w2: {WQ}, %xq: {WQ}, %xds: {XVEC},",
            "                           %y0: memref<?xf32>, %y1: memref<?xf32>, %y2: memref<?xf32>,",
            "                           %bias0: memref<?xf32>, %bias1: memref<?xf32>, %bias2: memref<?xf32>,",
            "                           %res: memref<?xf32>, %N0: i32, %N1: i32, %N2: i32, %K: i32, %T: i32,",
            "                           %flags: i32)",
            "        kernel",
            f"        attributes {{known_block_size = array<i32: {32 * W}, 1, 1>,"]
    if params["minctasm"]:
        head.append(f"                    nvvm.minctasm = {params['minctasm']} : i32,")
    head.append("                    swz.grid = \"ceil((N0+N1+N2)/16), ceil(T/8), 1\"} {")
    e.emit(f"%acc = memref.get_global @acc_{name} : {SM}")
    mma_thread_ids(e)
    e.emit(f"%q2 = arith.divui %q, {c(2)} : index")      # the 16-byte vector of a chunk: 0, 0, 1, 1
    e.emit(f"%qpar = arith.remui %q, {c(2)} : index")    # its words 0-1 or 2-3; T = 1: the parity
    e.emit(f"%odd = arith.cmpi ne, %qpar, {c(0)} : index")
    e.emit("%par = arith.index_cast %qpar : index to i32")
    e.emit(f"%rhi = arith.cmpi uge, %q, {c(2)} : index")  # T = 1: this lane's row is g + 8
    for nm in ("N0", "N1", "N2", "K", "T"):
        e.emit(f"%{nm}i = arith.index_cast %{nm} : i32 to index")
    e.emit("%N01 = arith.addi %N0i, %N1i : index")
    e.emit("%Ntot = arith.addi %N01, %N2i : index")
    e.emit(f"%nb = arith.divui %Ki, {c(256)} : index")
    e.emit(f"%K32 = arith.divui %Ki, {c(32)} : index")
    e.emit(f"%K16 = arith.divui %Ki, {c(16)} : index")
    e.emit(f"%rowstride = arith.muli %nb, {c(9)} : index")
    e.emit(f"%t0 = arith.muli %by, {c(8)} : index")
    e.emit("%tleft = arith.subi %Ti, %t0 : index")
    e.emit(f"%tb = arith.minui %tleft, {c(8)} : index")
    e.emit(f"%one = arith.cmpi eq, %tb, {c(1)} : index")
    e.emit(f"%tlast = arith.subi %Ti, {c(1)} : index")
    e.emit(f"%row0 = arith.muli %bx, {c(16)} : index")
    # This lane's rows g and g + 8 of the workgroup's 16 (A rows; a row past the last reads
    # row0 again and is not written): each picks its output's weight and local row.
    rows = []
    for h in range(2):
        ng = e.add("%row0", "%g") if h == 0 else e.add(rows[0]["ng"], c(8))
        live = e.v(f"arith.cmpi ult, {ng}, %Ntot : index", "live")
        ngc = e.v(f"arith.select {live}, {ng}, %row0 : index", "ngc")
        rw = output_row(e, ngc, WQ, "%rowstride")
        rows.append(dict(ng=ng, w=rw["w"], rowbase=rw["rowbase"], qv=e.add(e.add(rw["rowbase"], c(1)), "%q2")))
    # In 8-byte units (v2), this thread's half of a 16-byte vector: 2 vi + q % 2.
    unit = (lambda vi: e.add(e.mul(vi, c(2)), "%qpar")) if V2 else (lambda vi: vi)
    # B's column g is token t0 + g (past the last: the last again, not written); with one
    # token every column is token t0, so every lane's C holds its rows' token-t0 sums.
    e.emit("%tg0 = arith.addi %t0, %g : index")
    e.emit("%tgc = arith.minui %tg0, %tlast : index")
    e.emit("%tokB = arith.select %one, %t0, %tgc : index")
    e.emit("%xqrow = arith.muli %tokB, %K16 : index")
    e.emit("%xqv = arith.addi %xqrow, %q2 : index")
    e.emit("%xdst0 = arith.muli %t0, %K32 : index")
    shs = [e.v(f"arith.addi {e.shl('%par', e.ci(3))}, {e.ci(16 * k)} : i32", "sh") if k else e.shl("%par", e.ci(3))
           for k in range(2)]
    zf = e.ci("0.0", "f32")
    z4 = e.ci("dense<0>", V4I)
    za, zb, zc = e.ci("dense<0>", VA), e.ci("dense<0>", VB), e.ci("dense<0>", VC)
    mask = e.ci(0x0F0F0F0F)

    def two_words(mem, vi):
        """This lane's 8 bytes of the 16-byte vector vi of mem: words 0-1 (q even) or 2-3."""
        if V2:
            v = e.v(f"memref.load {mem}[{unit(vi)}] : {WQ}", "ld")
            return [e.v(f"vector.extract {v}[{i}] : i32 from vector<2xi32>", "wd") for i in range(2)]
        v = e.v(f"memref.load {mem}[{vi}] : {IVEC}", "ld")
        ws = [e.v(f"vector.extract {v}[{i}] : i32 from {V4I}", "wd") for i in range(4)]
        return [e.v(f"arith.select %odd, {ws[i + 2]}, {ws[i]} : i32", "wd") for i in range(2)]

    def frag(ty, zero, words):
        """An mma operand from its 32-bit registers (4 int8 each, byte 0 first)."""
        v4 = z4
        for i, wd in enumerate(words):
            v4 = e.v(f"vector.insert {wd}, {v4} [{i}] : i32 into {V4I}", "vi")
        v16 = e.v(f"vector.bitcast {v4} : {V4I} to {V16B}", "vb")
        f = zero
        for i in range(len(words)):
            part = e.v(f"vector.shuffle {v16}, {v16} [{4 * i}, {4 * i + 1}, {4 * i + 2}, {4 * i + 3}] : {V16B}, {V16B}", "vs")
            f = e.v(f"vector.insert {part}, {f} [{i}] : vector<4xi8> into {ty}", "fr")
        return f

    def chunk(b, p):
        """Chunk p (qs bytes 32p .. 32p + 31) of block b (index) for rows g, g + 8: its low
        nibbles are sub-block 2p, its high ones 2p + 1. Thread (g, q) loads bytes 8q .. 8q + 7
        of each row (k slots 4q .. 4q + 3 and 16 + 4q .. 16 + 4q + 3 of the mma; B holds the
        same bytes of the activations). Returns the two mma results (C[h][j]: row g + 8h,
        column 2q + j)."""
        return chunk_mma(b, p, chunk_words(b, p))

    def twice(p, k=0):  # 2 p + k: p a Python int or an index value
        return c(2 * p + k) if isinstance(p, int) else (e.add(e.mul(p, c(2)), c(k)) if k else e.mul(p, c(2)))

    def chunk_words(b, p):
        """This thread's 8 bytes of chunk p of block b of rows g and g + 8 (2 words each)."""
        return [two_words(rw["w"], e.add(e.add(rw["qv"], e.mul(b, c(9))), twice(p))) for rw in rows]

    def chunk_mma(b, p, ws):
        lo = [[e.band(wd, mask) for wd in r] for r in ws]
        hi = [[e.band(e.shr(wd, e.ci(4)), mask) for wd in r] for r in ws]
        out = []
        for par, nib in enumerate((lo, hi)):
            a = frag(VA, za, [nib[0][0], nib[1][0], nib[0][1], nib[1][1]])
            sb = e.add(e.mul(b, c(8)), twice(p, par))
            xw = two_words("%xq", e.add("%xqv", e.mul(sb, c(2))))
            bf = frag(VB, zb, xw)
            out.append(e.v(f"nvgpu.mma.sync ({a}, {bf}, {zc}) {{mmaShape = [16, 8, 32]}} : ({VA}, {VB}, {VC}) -> {VC}", "mma"))
        return out

    def header_words(w, rowbase, b):
        """Block b's header of the row at rowbase: the words d | dmin, s0, s1, s2."""
        vi = e.add(rowbase, e.mul(b, c(9)))
        if V2:
            hs = [e.v(f"memref.load {w}[{e.add(e.mul(vi, c(2)), c(k)) if k else e.mul(vi, c(2))}] : {WQ}", "hd")
                  for k in range(2)]
            return [e.v(f"vector.extract {hs[i // 2]}[{i % 2}] : i32 from vector<2xi32>", "hw") for i in range(4)]
        hdr = e.v(f"memref.load {w}[{vi}] : {IVEC}", "hd")
        return [e.v(f"vector.extract {hdr}[{i}] : i32 from {V4I}", "hw") for i in range(4)]

    def header(w, rowbase, b):
        """(d, dmin as f32, s0, s1, s2) of block b's header."""
        h0, s0, s1, s2 = header_words(w, rowbase, b)
        return e.half(h0, False), e.half(h0, True), s0, s1, s2

    def contrib(scale, mins, cv, ds):
        """A sub-block's term for one (row, token), as matmul_q4_k_q8x's unit:
        d sc dx sum(q xq) - dmin m (dx sum xq)."""
        dx, s_lo, s_hi = [e.v(f"vector.extract {ds}[{i}] : f32 from vector<4xf32>", "dx") for i in range(3)]
        accf = e.v(f"arith.sitofp {cv} : i32 to f32", "af")
        return e.fsub(e.fmul(e.fmul(scale, dx), accf), e.fmul(mins, e.fadd(s_lo, s_hi)))

    # Each (row, token) keeps two chains, over the even and the odd sub-blocks of the warp's
    # blocks in order; the sum is (even + odd), then the warps' sums in a fixed tree. One
    # token: thread (g, q) keeps row g + 8 (q >= 2)'s chain of parity q % 2 (its C entry
    # picked from the two mma), decoding one scale a sub-block pair. More: each thread its
    # rows' and columns' 8 chains.
    e.emit("%wsel = arith.select %rhi, " + rows[1]["w"] + ", " + rows[0]["w"] + f" : {WQ}")
    e.emit("%rbsel = arith.select %rhi, " + rows[1]["rowbase"] + ", " + rows[0]["rowbase"] + " : index")
    e.emit("%fin:8 = scf.if %one -> (" + ", ".join(["f32"] * 8) + ") {")
    e.indent += 2
    def block_words(b):
        """The lane's header words (d | dmin, s0, s1, s2) and its chunks' words (p, row)."""
        return header_words("%wsel", "%rbsel", b) + [wd for p in range(4) for r in chunk_words(b, p) for wd in r]

    if PF:
        # The warp's first block loaded before the loop (a warp with none loads the last);
        # each iteration loads the next one's (past the last: this one again) first.
        e.emit(f"%nb1 = arith.subi %nb, {c(1)} : index")
        e.emit("%bfirst = arith.minui %warp, %nb1 : index")
        first = block_words("%bfirst")
        e.emit(f"%r1:21 = scf.for %b = %warp to %nb step {c(W)} iter_args(%a = {zf}, "
               + ", ".join(f"%pw{i} = {v}" for i, v in enumerate(first)) + ") -> (f32" + ", i32" * 20 + ") {")
        e.indent += 2
        bn = e.add("%b", c(W))
        bnin = e.v(f"arith.cmpi ult, {bn}, %nb : index", "bnin")
        nxt = block_words(e.v(f"arith.select {bnin}, {bn}, %b : index", "bnc"))
        cur = [f"%pw{i}" for i in range(20)]
        d, dmin = e.half(cur[0], False), e.half(cur[0], True)
        s0, s1, s2 = cur[1:4]
        words = [[cur[4 + 4 * p + 2 * h: 6 + 4 * p + 2 * h] for h in range(2)] for p in range(4)]
    else:
        e.emit(f"%r1 = scf.for %b = %warp to %nb step {c(W)} iter_args(%a = {zf}) -> (f32) {{")
        e.indent += 2
        d, dmin, s0, s1, s2 = header("%wsel", "%rbsel", "%b")
    acc = "%a"
    for p in range(4):
        clo, chi = chunk_mma("%b", p, words[p]) if PF else chunk("%b", p)
        x = [e.v(f"arith.select %odd, {e.v(f'vector.extract {chi}[{h}, 0] : i32 from {VC}', 'cv')}, "
                 f"{e.v(f'vector.extract {clo}[{h}, 0] : i32 from {VC}', 'cv')} : i32", "cv") for h in range(2)]
        cv = e.v(f"arith.select %rhi, {x[1]}, {x[0]} : i32", "cv")
        sb = e.add(e.add(e.mul("%b", c(8)), c(2 * p)), "%qpar")
        ds = e.v(f"memref.load %xds[{e.add('%xdst0', sb)}] : {XVEC}", "ds")
        scale, mins = q4k_scale_at(e, d, dmin, s0, s1, s2, p, shs[p & 1])
        acc = e.fadd(acc, contrib(scale, mins, cv, ds))
    if PF:
        e.emit(f"scf.yield {acc}, {', '.join(nxt)} : f32" + ", i32" * 20)
        r1 = "%r1#0"
    else:
        e.emit(f"scf.yield {acc} : f32")
        r1 = "%r1"
    e.indent -= 2
    e.emit("}")
    e.emit(f"scf.yield {r1}, " + ", ".join([zf] * 7) + " : " + ", ".join(["f32"] * 8))
    e.indent -= 2
    e.emit("} else {")
    e.indent += 2
    # Chains a[h][j][par]: row g + 8h, column (token) 2q + j, sub-block parity par.
    names = [f"%m{h}{j}{par}" for h in range(2) for j in range(2) for par in range(2)]
    e.emit("%r8:8 = scf.for %b = %warp to %nb step " + c(W) + " iter_args("
           + ", ".join(f"{nm} = {zf}" for nm in names) + ") -> (" + ", ".join(["f32"] * 8) + ") {")
    e.indent += 2
    hdrs = [header(rw["w"], rw["rowbase"], "%b") for rw in rows]
    toks = []
    for j in range(2):
        tj = e.add(e.add("%t0", e.mul("%q", c(2))), c(j))
        toks.append(e.mul(e.v(f"arith.minui {tj}, %tlast : index", "tj"), "%K32"))
    accs = list(names)
    if ROLLED:
        e.emit(f"%rp:8 = scf.for %p = {c(0)} to {c(4)} step {c(1)} iter_args("
               + ", ".join(f"{nm}p = {nm}" for nm in names) + ") -> (" + ", ".join(["f32"] * 8) + ") {")
        e.indent += 2
        accs = [f"{nm}p" for nm in names]
    for p in (["%p"] if ROLLED else range(4)):
        cs = chunk_mma("%b", p, chunk_words("%b", p))
        for par in range(2):
            sb = e.add(e.mul("%b", c(8)), twice(p, par))
            dss = [e.v(f"memref.load %xds[{e.add(toks[j], sb)}] : {XVEC}", "ds") for j in range(2)]
            if ROLLED:
                j8 = e.v(f"arith.index_cast {twice(p, par)} : index to i32", "j")
            else:
                sh = e.ci(8 * ((2 * p + par) & 3))
            for h in range(2):
                d, dmin, s0, s1, s2 = hdrs[h]
                scale, mins = (q4k_scale(e, d, dmin, s0, s1, s2, j8) if ROLLED
                               else q4k_scale_at(e, d, dmin, s0, s1, s2, p, sh))
                for j in range(2):
                    cv = e.v(f"vector.extract {cs[par]}[{h}, {j}] : i32 from {VC}", "cv")
                    i = 4 * h + 2 * j + par
                    accs[i] = e.fadd(accs[i], contrib(scale, mins, cv, dss[j]))
    if ROLLED:
        e.emit(f"scf.yield {', '.join(accs)} : {', '.join(['f32'] * 8)}")
        e.indent -= 2
        e.emit("}")
        accs = [f"%rp#{i}" for i in range(8)]
    e.emit(f"scf.yield {', '.join(accs)} : {', '.join(['f32'] * 8)}")
    e.indent -= 2
    e.emit("}")
    e.emit("scf.yield " + ", ".join(f"%r8#{i}" for i in range(8)) + " : " + ", ".join(["f32"] * 8))
    e.indent -= 2
    e.emit("}")
    # Chains to acc_<name>[warp][row 0..15][column 0..7][parity] (one token: each thread's
    # one chain at column 0; columns past it are never read for a written output).
    e.emit(f"%wb = arith.muli %warp, {c(256)} : index")
    e.emit("scf.if %one {")
    e.indent += 2
    rr = e.v(f"arith.select %rhi, {e.add('%g', c(8))}, %g : index", "r")
    slot = e.add(e.add("%wb", e.mul(rr, c(16))), "%qpar")
    e.emit(f"memref.store %fin#0, %acc[{slot}] : {SM}")
    e.indent -= 2
    e.emit("} else {")
    e.indent += 2
    for h in range(2):
        for j in range(2):
            for par in range(2):
                r_ = e.add("%g", c(8)) if h else "%g"
                col = e.add(e.mul("%q", c(2)), c(j))
                slot = e.add(e.add("%wb", e.add(e.mul(r_, c(16)), e.mul(col, c(2)))), c(par))
                e.emit(f"memref.store %fin#{4 * h + 2 * j + par}, %acc[{slot}] : {SM}")
    e.indent -= 2
    e.emit("}")
    e.emit("gpu.barrier")
    # Output o = row o / 8, token t0 + o % 8: sum_w (even_w + odd_w) by a pairwise tree over
    # w, whatever T is; then its output's bias and the residual.
    def part(o, w_):  # warp w_'s (even + odd) for output o
        base = e.add(e.mul(o, c(2)), c(256 * w_)) if w_ else e.mul(o, c(2))
        ev = e.v(f"memref.load %acc[{base}] : {SM}", "s")
        od = e.v(f"memref.load %acc[{e.add(base, c(1))}] : {SM}", "s")
        return e.fadd(ev, od)

    def store(total, ng, tg, wr):
        in0 = e.v(f"arith.cmpi ult, {ng}, %N0i : index", "in0")
        in1 = e.v(f"arith.cmpi ult, {ng}, %N01 : index", "in1")
        sel = {}
        for nm, a0, a1, a2, ty in (("y", "%y0", "%y1", "%y2", "memref<?xf32>"),
                                   ("bias", "%bias0", "%bias1", "%bias2", "memref<?xf32>"),
                                   ("Ni", "%N0i", "%N1i", "%N2i", "index"),
                                   ("nbase", c(0), "%N0i", "%N01", "index"),
                                   ("bflag", e.ci(1), e.ci(4), e.ci(8), "i32"),
                                   ("rflag", e.ci(2), e.ci(0), e.ci(0), "i32")):
            v12 = e.v(f"arith.select {in1}, {a1}, {a2} : {ty}", nm)
            sel[nm] = e.v(f"arith.select {in0}, {a0}, {v12} : {ty}", nm)
        e.emit(f"scf.if {wr} {{")
        e.indent += 2
        n = e.v(f"arith.subi {ng}, {sel['nbase']} : index", "n")
        yi = e.add(e.mul(tg, sel["Ni"]), n)
        flag = lambda f, nm: lambda: e.v(f"arith.cmpi ne, {e.band('%flags', sel[f])}, {e.ci(0)} : i32", nm)
        bias_residual_store(e, total, n, yi, flag("bflag", "hb"), flag("rflag", "hr"), sel["bias"], sel["y"])
        e.indent -= 2
        e.emit("}")
    tree_outputs(e, W, 128, "%Ntot", part, store)
    e.emit("gpu.return")
    return func_text(head, e)


def get_rows(fmt):
    f = FORMATS[fmt]
    e = Emitter(6)
    wty = "memref<?xf16>" if fmt == "f16" else "memref<?xi32>"
    out = []
    out.append(f"    gpu.func @get_rows_{fmt}(%w: {wty}, %tokens: memref<?xi32>, %out: memref<?xf32>, %K: i32) kernel")
    out.append(f"        attributes {{known_block_size = array<i32: 128, 1, 1>,")
    out.append(f"                    spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [128, 1, 1]>,")
    out.append(f"                    swz.grid = \"T, 1, 1\"}} {{")
    c = lambda v: e.ci(v, "index")
    e.emit("%tid = gpu.thread_id x")
    e.emit("%t = gpu.block_id x")
    e.emit("%Ki = arith.index_cast %K : i32 to index")
    e.emit("%tok = memref.load %tokens[%t] : memref<?xi32>")
    e.emit("%row = arith.index_cast %tok : i32 to index")
    e.emit("%orow = arith.muli %t, %Ki : index")
    if fmt == "f16":
        e.emit("%wrow = arith.muli %row, %Ki : index")
        e.emit(f"scf.for %k = %tid to %Ki step {c(128)} {{")
        e.emit("  %wi = arith.addi %wrow, %k : index")
        e.emit("  %h = memref.load %w[%wi] : memref<?xf16>")
        e.emit("  %v = arith.extf %h : f16 to f32")
        e.emit("  %oi = arith.addi %orow, %k : index")
        e.emit("  memref.store %v, %out[%oi] : memref<?xf32>")
        e.emit("}")
    else:
        e.emit(f"%nb = arith.divui %Ki, {c(f['qk'])} : index")
        e.emit(f"%units = arith.muli %nb, {c(f['units'])} : index")
        e.emit(f"%rowbytes = arith.muli %nb, {c(f['bs'])} : index")
        e.emit("%rowbase = arith.muli %row, %rowbytes : index")
        e.emit(f"scf.for %u = %tid to %units step {c(128)} {{")
        e.indent += 2
        e.emit(f"%b = arith.divui %u, {c(f['units'])} : index")
        e.emit(f"%q = arith.remui %u, {c(f['units'])} : index")
        e.emit(f"%boff = arith.muli %b, {c(f['bs'])} : index")
        e.emit("%blockbyte = arith.addi %rowbase, %boff : index")
        kbase, groups = dequant_unit(e, fmt, "%blockbyte", "%q")
        e.emit(f"%bk = arith.muli %b, {c(f['qk'])} : index")
        e.emit(f"%kb = arith.addi %bk, {kbase} : index")
        e.emit("%ok = arith.addi %orow, %kb : index")
        for scale, off, items in groups:
            for koff, qf in items:
                wv = e.fmul(scale, qf)
                if off is not None:
                    wv = e.fadd(wv, off)
                oi = e.add("%ok", c(koff)) if koff else "%ok"
                e.emit(f"memref.store {wv}, %out[{oi}] : memref<?xf32>")
        e.indent -= 2
        e.emit("}")
    e.emit("gpu.return")
    return func_text(out, e)


def module(fmt):
    return (header(fmt) + "module attributes {gpu.container_module} {\n"
            f"  gpu.module @swz_gemv_{fmt} attributes {{\n      {TARGET_ENV}}} {{\n"
            "    // matmul's 8-lane segment sums: [4 rows][8 tokens][4 segments] f32.\n"
            "    memref.global \"private\" @acc : memref<128xf32, #gpu.address_space<workgroup>>\n"
            "    // matmul's per-thread partial sums when the block has 2..8 tokens: [8 tokens][128 threads] f32.\n"
            "    memref.global \"private\" @slots : memref<1024xf32, #gpu.address_space<workgroup>>\n\n"
            + gemv(fmt) + get_rows(fmt) + "  }\n}\n")


# ---------------------------------------------------------------------------
# gemv_f16_mma.mlir: the F16 decode GEMV on the tensor cores (PTX only).
# mt: 16-row m-tiles a warp (a workgroup's rows: 16 mt); unroll: 32-weight k chunks a
# warp loads before it multiplies (its loads in flight together); warps: warps a workgroup,
# which split K (a workgroup's rows are read by all of them).
# The module holds one entry per workgroup shape: matmul_f16_mma (4 warps) for matrices of
# many rows, matmul_f16_mma_w16 (16 warps) for those whose few workgroups would leave the
# GPU short of loads in flight (Codegen.cpp's kernelKey picks by N and the target
# schedule's gemv.f16_mma_split_k_below_rows).
MMA_F16 = dict(mt=1, unroll=4, warps=4)
MMA_F16_W16 = dict(mt=1, unroll=2, warps=16)


def mma_thread_ids(e):
    """The tensor-core GEMVs' thread indices: %tid, %bx, %by, %warp, %lane and the mma
    fragment coordinates %g = lane / 4 (group: row g, g + 8; column g of B) and %q = lane % 4."""
    c = lambda v: e.ci(v, "index")
    e.emit("%tid = gpu.thread_id x")
    e.emit("%bx = gpu.block_id x")
    e.emit("%by = gpu.block_id y")
    e.emit(f"%warp = arith.divui %tid, {c(32)} : index")
    e.emit(f"%lane = arith.remui %tid, {c(32)} : index")
    e.emit(f"%g = arith.divui %lane, {c(4)} : index")
    e.emit(f"%q = arith.remui %lane, {c(4)} : index")


def tree_outputs(e, W, outs, rows, part, store):
    """The tensor-core GEMVs' last step: thread tid takes outputs o = tid + 32 W j < outs
    (row %row0 + o / 8, token t0 + o % 8), adds the W warps' partial sums part(o, w) (f32)
    by a pairwise tree, in that order whatever T is, and calls store(total, n, tg, wr): wr
    (i1) says whether row n exists (n < rows, an index value) and token tg too (tg < T),
    and whether the thread has an output at all (it reads output 0 otherwise)."""
    c = lambda v: e.ci(v, "index")
    for j in range((outs + 32 * W - 1) // (32 * W)):
        o = e.add("%tid", c(32 * W * j)) if j else "%tid"
        oin = None
        if 32 * W * (j + 1) > outs:  # some threads have no output left
            oin = e.v(f"arith.cmpi ult, {o}, {c(outs)} : index", "oin")
            o = e.v(f"arith.select {oin}, {o}, {c(0)} : index", "o")
        ps = [part(o, w) for w in range(W)]
        while len(ps) > 1:
            ps = [e.fadd(ps[i], ps[i + 1]) if i + 1 < len(ps) else ps[i] for i in range(0, len(ps), 2)]
        orow = e.v(f"arith.divui {o}, {c(8)} : index", "orow")
        otok = e.v(f"arith.remui {o}, {c(8)} : index", "otok")
        tg = e.add("%t0", otok)
        tin = e.v(f"arith.cmpi ult, {tg}, %Ti : index", "tin")
        n = e.add("%row0", orow)
        nin = e.v(f"arith.cmpi ult, {n}, {rows} : index", "nin")
        wr = e.v(f"arith.andi {tin}, {nin} : i1", "wr")
        if oin:
            wr = e.v(f"arith.andi {wr}, {oin} : i1", "wr")
        store(ps[0], n, tg, wr)


def gemv_f16_mma(name="matmul_f16_mma", params=None):
    """matmul_f16_mma: y[t, n] = sum_k x[t, k] W[n, k] by mma.sync.m16n8k16 (f16 x f16,
    f32 accumulation), the tokens of a block of 8 as the mma's 8 columns."""
    params = params or MMA_F16
    mt, U, W = params["mt"], params["unroll"], params["warps"]
    rows_wg = 16 * mt
    e = Emitter(6)
    c = lambda v: e.ci(v, "index")
    V8H, V8F = "vector<8xf16>", "vector<8xf32>"
    V42H, V22H, V22F = "vector<4x2xf16>", "vector<2x2xf16>", "vector<2x2xf32>"
    ACC = f"memref<{128 * mt * W}xf32, #gpu.address_space<workgroup>>"
    head = [f"    gpu.func @{name}(%w: " + IVEC + ", %x: " + XVEC + ", %y: memref<?xf32>,",
            "                             %bias: memref<?xf32>, %res: memref<?xf32>, %N: i32, %K: i32,",
            "                             %T: i32, %flags: i32)",
            "        kernel",
            f"        attributes {{known_block_size = array<i32: {32 * W}, 1, 1>,",
            f"                    swz.grid = \"ceil(N/{rows_wg}), ceil(T/8), 1\"}} {{"]
    e.emit(f"%acc = memref.get_global @acc_{name} : {ACC}")
    mma_thread_ids(e)
    e.emit("%Ni = arith.index_cast %N : i32 to index")
    e.emit("%Ki = arith.index_cast %K : i32 to index")
    e.emit("%Ti = arith.index_cast %T : i32 to index")
    e.emit(f"%nlast = arith.subi %Ni, {c(1)} : index")
    e.emit(f"%tlast = arith.subi %Ti, {c(1)} : index")
    e.emit(f"%K8 = arith.divui %Ki, {c(8)} : index")
    e.emit(f"%K4 = arith.divui %Ki, {c(4)} : index")
    e.emit(f"%k31 = arith.addi %Ki, {c(31)} : index")
    e.emit(f"%nch = arith.divui %k31, {c(32)} : index")
    e.emit(f"%q8 = arith.muli %q, {c(8)} : index")
    # The rows this thread loads: m-tile m's rows g and g + 8 (a row past the last reads
    # the last row again; its outputs are not written), as 16-byte-vector offsets.
    e.emit(f"%row0 = arith.muli %bx, {c(rows_wg)} : index")
    e.emit("%rowg = arith.addi %row0, %g : index")
    rowvec = []
    for m in range(mt):
        pair = []
        for h in range(2):
            off = 16 * m + 8 * h
            n = e.add("%rowg", c(off)) if off else "%rowg"
            nc = e.v(f"arith.minui {n}, %nlast : index", "nc")
            pair.append(e.mul(nc, "%K8"))
        rowvec.append(pair)
    # The token this thread feeds as column g (a token past the last reads the last one
    # again: its column's outputs are not written), in 16-byte vectors.
    e.emit(f"%t0 = arith.muli %by, {c(8)} : index")
    e.emit("%tok = arith.addi %t0, %g : index")
    e.emit("%tokc = arith.minui %tok, %tlast : index")
    e.emit("%xrow = arith.muli %tokc, %K4 : index")
    zf = e.ci("dense<0.0>", V22F)
    zh = e.ci("dense<0.0>", V8H)
    za = e.ci("dense<0.0>", V42H)
    zb = e.ci("dense<0.0>", V22H)
    # Warp w takes the chunks w, w + W, ... (k = 32 chunk + 8 q .. + 7 for this thread); the
    # loop's trip count is the workgroup's (uniform: mma.sync is warp-wide), a chunk past the
    # row multiplies zero activations with the row's first weights.
    accs = [f"%mma_acc{m}" for m in range(mt)]
    e.emit(f"%acc_r:{mt} = scf.for %c0 = {c(0)} to %nch step {c(W * U)} iter_args("
           + ", ".join(f"{a} = {zf}" for a in accs) + f") -> ({', '.join([V22F] * mt)}) {{")
    e.indent += 2
    chunks = []
    for r in range(U):
        ch = e.add("%c0", c(W * r)) if r else "%c0"
        ch = e.add(ch, "%warp")
        k = e.add(e.mul(ch, c(32)), "%q8")
        valid = e.v(f"arith.cmpi ult, {k}, %Ki : index", "valid")
        kc = e.v(f"arith.select {valid}, {k}, {c(0)} : index", "kc")
        kv = e.v(f"arith.divui {kc}, {c(8)} : index", "kv")
        ws = []
        for m in range(mt):
            pair = []
            for h in range(2):
                wi = e.add(rowvec[m][h], kv)
                ld = e.v(f"memref.load %w[{wi}] : {IVEC}", "wv")
                pair.append(e.v(f"vector.bitcast {ld} : vector<4xi32> to {V8H}", "wh"))
            ws.append(pair)
        xi = e.add("%xrow", e.v(f"arith.divui {kc}, {c(4)} : index", "k4"))
        x0 = e.v(f"memref.load %x[{xi}] : {XVEC}", "xv")
        x1 = e.v(f"memref.load %x[{e.add(xi, c(1))}] : {XVEC}", "xv")
        x8 = e.v(f"vector.shuffle {x0}, {x1} [0, 1, 2, 3, 4, 5, 6, 7] : vector<4xf32>, vector<4xf32>", "x8")
        chunks.append((valid, ws, x8))
    def pair(v, i):  # elements i, i + 1 of a vector<8xf16>: one f16x2 register
        return e.v(f"vector.shuffle {v}, {v} [{i}, {i + 1}] : {V8H}, {V8H}", "h2")

    def frag(ty, zero, regs):  # an mma operand from its f16x2 registers
        f = zero
        for r_, v in enumerate(regs):
            f = e.v(f"vector.insert {v}, {f} [{r_}] : vector<2xf16> into {ty}", "fr")
        return f
    acc = list(accs)
    for valid, ws, x8 in chunks:
        xh = e.v(f"arith.truncf {x8} : {V8F} to {V8H}", "xh")
        xh = e.v(f"arith.select {valid}, {xh}, {zh} : {V8H}", "xh")
        for s in range(2):
            # Registers (f16 pairs) of step s: weights / activations 4s, 4s+1 (k 2q, 2q+1 of
            # the mma) and 4s+2, 4s+3 (k 2q+8, 2q+9); A: row g, row g+8, row g, row g+8.
            b = frag(V22H, zb, [pair(xh, 4 * s), pair(xh, 4 * s + 2)])
            for m in range(mt):
                wa, wb = ws[m]
                a = frag(V42H, za, [pair(wa, 4 * s), pair(wb, 4 * s), pair(wa, 4 * s + 2), pair(wb, 4 * s + 2)])
                acc[m] = e.v(f"nvgpu.mma.sync ({a}, {b}, {acc[m]}) {{mmaShape = [16, 8, 16]}} : ({V42H}, {V22H}, {V22F}) -> {V22F}", "d")
    e.emit(f"scf.yield {', '.join(acc)} : {', '.join([V22F] * mt)}")
    e.indent -= 2
    e.emit("}")
    # The warps' partial sums to acc_<entry>[warp][m][row 0..15][token 0..7]: this thread holds
    # rows g, g + 8 and tokens 2q, 2q + 1 of each m-tile.
    e.emit(f"%wbase = arith.muli %warp, {c(128 * mt)} : index")
    e.emit(f"%g8 = arith.muli %g, {c(8)} : index")
    e.emit(f"%q2 = arith.muli %q, {c(2)} : index")
    e.emit("%gq = arith.addi %g8, %q2 : index")
    e.emit("%sbase = arith.addi %wbase, %gq : index")
    for m in range(mt):
        for i in range(2):
            for j in range(2):
                v = e.v(f"vector.extract %acc_r#{m}[{i}, {j}] : f32 from {V22F}", "p")
                off = 128 * m + 64 * i + j
                e.emit(f"memref.store {v}, %acc[{e.add('%sbase', c(off)) if off else '%sbase'}] : {ACC}")
    e.emit("gpu.barrier")
    # Thread tid writes outputs o = tid + 32 W j < 128 mt (row o / 8 of the workgroup's,
    # token o % 8): the W warps' sums in a fixed order (a pairwise tree), whatever T is,
    # then bias and residual.
    e.emit(f"%fb = arith.andi %flags, {e.ci(1)} : i32")
    e.emit(f"%hb = arith.cmpi ne, %fb, {e.ci(0)} : i32")
    e.emit(f"%fr = arith.andi %flags, {e.ci(2)} : i32")
    e.emit(f"%hr = arith.cmpi ne, %fr, {e.ci(0)} : i32")
    def store(total, n, tg, wr):
        e.emit(f"scf.if {wr} {{")
        e.indent += 2
        yi = e.add(e.mul(tg, "%Ni"), n)
        bias_residual_store(e, total, n, yi, lambda: "%hb", lambda: "%hr", "%bias", "%y")
        e.indent -= 2
        e.emit("}")
    tree_outputs(e, W, 128 * mt, "%Ni",
                 lambda o, w: e.v(f"memref.load %acc[{e.add(o, c(128 * mt * w)) if w else o}] : {ACC}", "s"), store)
    e.emit("gpu.return")
    return func_text(head, e)


def module_f16_mma(variant=False):
    """gemv_f16_mma.mlir; variant: matmul_f16_mma alone, with MMA_F16's parameters (tuning)."""
    kernels = [("matmul_f16_mma", MMA_F16)] + ([] if variant else [("matmul_f16_mma_w16", MMA_F16_W16)])
    mt, U, W = MMA_F16["mt"], MMA_F16["unroll"], MMA_F16["warps"]
    W16 = MMA_F16_W16["warps"]
    return f"""// Generated by codegen/kernels/gen_quant_kernels.py; edit that, then rerun it.
//
// The F16 decode GEMV on the tensor cores (PTX only; SPIR-V and K % 8 != 0 keep
// gemv_f16.mlir's matmul_f16): the contract of matmul_f16 (the same arguments and
// epilogue flags) with the weight as 16-byte vectors.
//
// matmul_f16_mma(w, x, y, bias, res, N, K, T, flags): y[t, n] = sum_k x[t, k] * W[n, k]
//   (+ bias[n] when flags & 1) (+ res[t, n] when flags & 2; res may be y itself).
//   w: the GGUF F16 tensor [N, K] (K contiguous) as memref<?xvector<4xi32>> (8 weights a
//   vector; K % 8 == 0, so every row starts on a vector); x: [T, K] f32 as
//   memref<?xvector<4xf32>>; y, res: [T, N] f32; bias: [N] f32.
//   Launch: block {32 * W} ({W} warps), grid (ceil(N / {16 * mt}), ceil(T / 8), 1): a workgroup
//   computes {16 * mt} rows ({mt} m-tile(s) of 16) for the tokens 8 block_id.y .. + 7.
//   mma.sync.m16n8k16 takes a 16 x 16 weight tile (A) and the tokens' activations
//   rounded to f16 (B, 16 x 8: column j is token 8 block_id.y + j; columns past T
//   repeat the last token and are not written), accumulating in f32. The order of the
//   16 weights inside one mma's k does not matter as long as A and B agree: thread
//   (g = lane / 4, q = lane % 4) loads 8 consecutive weights (one 16-byte load) of rows
//   g and g + 8 at k = 32 chunk + 8 q, and its B registers hold the same 8 positions of
//   x, so a 32-weight chunk is two mma.sync (weights 0-3 then 4-7 of each thread's
//   eight) with no shuffling. Warp w of the workgroup takes the chunks w, w + {W}, ...
//   ({U} in flight a thread: {2 * mt * U} 16-byte weight loads); the {W} warps' sums meet
//   in workgroup memory (acc_<entry>, [{W} warps][{mt} m-tile(s)][16 rows][8 tokens] f32) and
//   are added in a fixed order, so a token's output never depends on the other tokens of
//   the launch (the mma computes each column on its own; the interpreter test checks one
//   token against the same token among three, bitwise).
//""" + ("" if variant else f"""
// matmul_f16_mma_w16: the same with block {32 * W16} ({W16} warps splitting K, {MMA_F16_W16['unroll']} chunks in flight a
//   thread), grid (ceil(N / {16 * MMA_F16_W16['mt']}), ceil(T / 8), 1): for matrices of fewer rows than the
//   target schedule's gemv.f16_mma_split_k_below_rows (Codegen.cpp's kernelKey), whose
//   4-warp workgroups are too few to keep enough loads in flight (on the H200 the 7B
//   ffn_down 18944 -> 3584: 224 workgroups, 33% of HBM).
//""") + f"""
//   Rounding: each activation once to f16 (round to nearest even: relative 2^-11, an
//   |x| above 65504 becomes inf), products exact, sums in f32 (the tensor core's, then
//   the warps' adds).
module attributes {{gpu.container_module}} {{
  gpu.module @swz_gemv_f16_mma {{
""" + "".join(f"""    memref.global "private" @acc_{n} : memref<{128 * p['mt'] * p['warps']}xf32, #gpu.address_space<workgroup>>
""" for n, p in kernels) + "\n" + "".join(gemv_f16_mma(n, p) for n, p in kernels) + "  }\n}\n"


# ---------------------------------------------------------------------------
# attention_decode.mlir: flash decoding with warps over keys (PTX only).
DEC_ROWS = 8    # query rows per workgroup (as flash_attention_f16kv: rows i = t * G + g)
DEC_WARPS = 8   # warps per workgroup (4 or 8); warp w takes keys lo + w, lo + w + W, ...
DEC_UNROLL = 4  # keys per warp per iteration (their K/V loads in flight together)
DEC_HD = 128    # head_dim: 32 lanes x 4 features
DEC_MINCTASM = 0  # nvvm.minctasm (workgroups an SM the registers must allow), 0: none


def flash_decode():
    """flash_decode_f16kv_hd128: flash_attention_f16kv's decode contract, warps over keys."""
    e = Emitter(6)
    c = lambda v: e.ci(v, "index")
    R, W, U = DEC_ROWS, DEC_WARPS, DEC_UNROLL
    assert W in (4, 8), "the combine splits the 8 rows over W / 4 groups of 128 threads"
    SM = f"memref<{W * R}xf32, #gpu.address_space<workgroup>>"
    SO = f"memref<{W * R * DEC_HD}xf32, #gpu.address_space<workgroup>>"
    out = ["    gpu.func @flash_decode_f16kv_hd128(%q: memref<?xf32>, %k_cache: memref<?xf16>,",
           "                                     %v_cache: memref<?xf16>, %block_table: memref<?xi32>,",
           "                                     %out: memref<?xf32>, %o_part: memref<?xf32>,",
           "                                     %lse_part: memref<?xf32>, %count: memref<?xi32>,",
           "                                     %seqs: memref<?xi32>, %T: i32, %seq_tiles: i32,",
           "                                     %n_head: i32, %head_dim: i32, %max_splits: i32,",
           "                                     %scale: f32) kernel",
           f"        attributes {{known_block_size = array<i32: {32 * W}, 1, 1>,"] + \
          ([f"                    nvvm.minctasm = {DEC_MINCTASM} : i32,"] if DEC_MINCTASM else []) + \
          ["                    swz.grid = \"n_seq*seq_tiles, n_head_kv, n_split\"} {"]
    ninf = e.ci("0xFF800000", "f32")
    zero = e.ci("0.0", "f32")
    e.emit(f"%ms = memref.get_global @dec_m : {SM}")
    e.emit(f"%ls = memref.get_global @dec_l : {SM}")
    e.emit(f"%os = memref.get_global @dec_o : {SO}")
    e.emit("%lastf = memref.get_global @dec_last : memref<1xi32, #gpu.address_space<workgroup>>")
    e.emit("%wx = gpu.block_id x")
    e.emit("%kvh = gpu.block_id y")
    e.emit("%split = gpu.block_id z")
    e.emit("%n_kv = gpu.grid_dim y")
    e.emit("%tid = gpu.thread_id x")
    e.emit(f"%warp = arith.divui %tid, {c(32)} : index")
    e.emit(f"%lane = arith.remui %tid, {c(32)} : index")
    # Workgroup x = seq * seq_tiles + tile: row tile `tile` of sequence `seq`, whose
    # record seqs[4 seq ..] is {first row R0 of the batch, rows Ti, first position P0,
    # block table offset TB}.
    e.emit("%ST = arith.index_cast %seq_tiles : i32 to index")
    e.emit("%seq = arith.divui %wx, %ST : index")
    e.emit("%tile = arith.remui %wx, %ST : index")
    e.emit(f"%sb = arith.muli %seq, {c(4)} : index")
    for name, k in (("%R0", 0), ("%Ti", 1), ("%P0", 2), ("%TB", 3)):
        at = e.add("%sb", c(k)) if k else "%sb"
        e.emit(f"{name} = arith.index_cast {e.v(f'memref.load %seqs[{at}] : memref<?xi32>', 'sv')} : i32 to index")
    e.emit("%TT = arith.index_cast %T : i32 to index")
    e.emit("%NH = arith.index_cast %n_head : i32 to index")
    e.emit("%G = arith.divui %NH, %n_kv : index")
    e.emit("%rows = arith.muli %Ti, %G : index")
    e.emit("%ctx = arith.addi %P0, %Ti : index")
    # The sequence's own split (launch_bindings.cpp splitLet over its context, so a
    # sequence splits as it would alone): at most max_splits splits of a multiple of 32
    # keys, then only those that hold keys. Workgroups past them, or past its rows, idle.
    ceil = lambda a, b: e.v(f"arith.divui {e.add(a, e.v(f'arith.subi {b}, {c(1)} : index', 'bm'))}, {b} : index", "cd")
    e.emit("%MS = arith.index_cast %max_splits : i32 to index")
    e.emit(f"%nsm = arith.minui {ceil('%ctx', c(32))}, %MS : index")
    e.emit(f"%SL = arith.muli {ceil('%ctx', e.mul('%nsm', c(32)))}, {c(32)} : index")
    e.emit(f"%n_split = arith.divui {e.add('%ctx', e.v(f'arith.subi %SL, {c(1)} : index', 'bm'))}, %SL : index")
    e.emit(f"%row_in = arith.cmpi ult, {e.mul('%tile', c(R))}, %rows : index")
    e.emit("%split_in = arith.cmpi ult, %split, %n_split : index")
    e.emit("%active = arith.andi %row_in, %split_in : i1")
    e.emit("scf.if %active {")
    e.indent += 2
    e.emit("%lo = arith.muli %split, %SL : index")
    e.emit("%lo_sl = arith.addi %lo, %SL : index")
    e.emit("%hi = arith.minui %lo_sl, %ctx : index")
    e.emit(f"%d0 = arith.muli %lane, {c(4)} : index")
    # Per row r: validity, causal limit (key j visible iff j <= lim), output row base, q.
    valid, lim, obase, qv = [], [], [], []
    for r in range(R):
        i = e.add(e.mul("%tile", c(R)), c(r))
        ok = e.v(f"arith.cmpi ult, {i}, %rows : index", "ok")
        ic = e.v(f"arith.select {ok}, {i}, {c(0)} : index", "ic")
        t = e.v(f"arith.divui {ic}, %G : index", "t")
        g = e.v(f"arith.remui {ic}, %G : index", "g")
        h = e.add(e.mul("%kvh", "%G"), g)
        ob = e.mul(e.add(e.mul(e.add("%R0", t), "%NH"), h), c(DEC_HD))
        valid.append(ok)
        lim.append(e.add("%P0", t))
        obase.append(ob)
        qb = e.add(ob, "%d0")
        qv.append([e.fmul(e.v(f"memref.load %q[{e.add(qb, c(k)) if k else qb}] : memref<?xf32>", "qv"), "%scale")
                   for k in range(4)])
    # Keys of this warp: lo + warp + W * (U * it + u); iterations ceil((hi - lo - warp) / (W U)).
    start = e.add("%lo", "%warp")
    has = e.v(f"arith.cmpi ugt, %hi, {start} : index", "has")
    rem = e.v(f"arith.subi %hi, {start} : index", "rem")
    remc = e.v(f"arith.select {has}, {rem}, {c(0)} : index", "remc")
    nit = e.v(f"arith.divui {e.add(remc, c(W * U - 1))}, {c(W * U)} : index", "nit")
    state = [ninf] * R + [zero] * R + [zero] * (4 * R)  # m[r], l[r], acc[r][k]
    names = [f"%run_m{r}" for r in range(R)] + [f"%run_l{r}" for r in range(R)] + \
            [f"%run_a{r}_{k}" for r in range(R) for k in range(4)]
    types = ", ".join(["f32"] * len(state))
    iters = ", ".join(f"{n} = {v}" for n, v in zip(names, state))
    e.emit(f"%st:{len(state)} = scf.for %it = {c(0)} to {nit} step {c(1)} iter_args({iters}) -> ({types}) {{")
    e.indent += 2
    cur = list(names)
    keys = []
    for u in range(U):  # every load first: U keys' K and V rows in flight together
        j = e.add(start, e.mul(e.add(e.mul("%it", c(U)), c(u)), c(W)))
        inr = e.v(f"arith.cmpi ult, {j}, %hi : index", "inr")
        jc = e.v(f"arith.select {inr}, {j}, {start} : index", "jc")  # a valid key (not used)
        pg = e.add("%TB", e.v(f"arith.divui {jc}, {c(64)} : index", "pg"))
        page = e.idx(e.v(f"memref.load %block_table[{pg}] : memref<?xi32>", "page"))
        slot = e.v(f"arith.remui {jc}, {c(64)} : index", "slot")
        kb = e.add(e.mul(e.add(e.mul(e.add(e.mul(page, "%n_kv"), "%kvh"), c(64)), slot), c(DEC_HD)), "%d0")
        ks = [e.v(f"arith.extf {e.v(f'memref.load %k_cache[{e.add(kb, c(k)) if k else kb}] : memref<?xf16>', 'kh')} : f16 to f32", "k") for k in range(4)]
        vs = [e.v(f"arith.extf {e.v(f'memref.load %v_cache[{e.add(kb, c(k)) if k else kb}] : memref<?xf16>', 'vh')} : f16 to f32", "v") for k in range(4)]
        keys.append((j, inr, ks, vs))
    # Scores first, every (key, row) pair at once: no branch between them, so the rows'
    # and keys' butterfly sums are independent chains the scheduler interleaves (a row
    # update under its own scf.if serialised all U x R of them: 51 us at a 540-key 7B
    # context). A pair the row must not see (a row past the batch, a key past the
    # split, a later position) scores -inf.
    sc = [[None] * R for _ in range(U)]
    vis = [[None] * R for _ in range(U)]
    for u, (j, inr, ks, vs) in enumerate(keys):
        for r in range(R):
            le = e.v(f"arith.cmpi ule, {j}, {lim[r]} : index", "le")
            vis[u][r] = e.v(f"arith.andi {e.v(f'arith.andi {valid[r]}, {inr} : i1', 'vi')}, {le} : i1", "vis")
            part = e.fmul(qv[r][0], ks[0])
            for k in (1, 2, 3):
                part = e.fma(qv[r][k], ks[k], part)
            for off in (16, 8, 4, 2, 1):
                e.n += 1
                sh = f"%sh{e.n}"
                e.emit(f"{sh}:2 = gpu.shuffle xor {part}, {e.ci(off)}, {e.ci(32)} : f32")
                part = e.fadd(part, f"{sh}#0")
            sc[u][r] = part
    # Then each row's online softmax (Milakov & Gimelshein 2018) over the U keys in one
    # step: new max over the running one and the visible scores, the running sum and
    # output rescaled once (by 1 when the max stays, also when nothing was visible yet),
    # then the keys added in order.
    one = e.ci("1.0", "f32")
    for r in range(R):
        m, l = cur[r], cur[R + r]
        acc = [cur[2 * R + 4 * r + k] for k in range(4)]
        mx = m
        for u in range(U):
            masked = e.v(f"arith.select {vis[u][r]}, {sc[u][r]}, {ninf} : f32", "sm")
            mx = e.v(f"arith.maximumf {mx}, {masked} : f32", "mx")
        same = e.v(f"arith.cmpf oeq, {mx}, {m} : f32", "same")
        corr = e.v(f"arith.select {same}, {one}, {e.v(f'math.exp {e.fsub(m, mx)} : f32', 'ex')} : f32", "corr")
        ps = [e.v(f"arith.select {vis[u][r]}, {e.v(f'math.exp {e.fsub(sc[u][r], mx)} : f32', 'ex')}, {zero} : f32", "p")
              for u in range(U)]
        psum = ps[0]
        for p_ in ps[1:]:
            psum = e.fadd(psum, p_)
        cur[r], cur[R + r] = mx, e.fma(l, corr, psum)
        for k in range(4):
            a = e.fmul(acc[k], corr)
            for u in range(U):
                # Skipped, not added as 0 * v: a key the row must not see may hold a
                # non-finite V (a position this pass writes for a later row).
                a = e.v(f"arith.select {vis[u][r]}, {e.fma(ps[u], keys[u][3][k], a)}, {a} : f32", "a")
            cur[2 * R + 4 * r + k] = a
    e.emit(f"scf.yield {', '.join(cur)} : {types}")
    e.indent -= 2
    e.emit("}")
    # The warps' states meet in workgroup memory: m, l at [warp * 8 + r], acc at
    # [(warp * 8 + r) * 128 + d].
    e.emit(f"%lane0 = arith.cmpi eq, %lane, {c(0)} : index")
    for r in range(R):
        wr = e.add(e.mul("%warp", c(R)), c(r))
        e.emit(f"scf.if %lane0 {{")
        e.emit(f"  memref.store %st#{r}, %ms[{wr}] : {SM}")
        e.emit(f"  memref.store %st#{R + r}, %ls[{wr}] : {SM}")
        e.emit("}")
        ob = e.add(e.mul(wr, c(DEC_HD)), "%d0")
        for k in range(4):
            e.emit(f"memref.store %st#{2 * R + 4 * r + k}, %os[{e.add(ob, c(k)) if k else ob}] : {SO}")
    e.emit("gpu.barrier")
    # Thread d combines feature d of each row: M = max_w m_w, L = sum_w l_w e^(m_w - M),
    # O = sum_w o_w e^(m_w - M); one split: out = O / L; else o_part = O / L (0 with no
    # visible key) and lse_part = M + log L (-inf), as flash_attention_f16kv writes them.
    e.emit("%one_split = arith.cmpi eq, %n_split, " + c(1) + " : index")
    # With more than 128 threads, thread t combines feature t % 128 of the rows of
    # group t / 128 (R / (W / 4) rows a group).
    e.emit(f"%dd = arith.remui %tid, {c(DEC_HD)} : index")
    e.emit(f"%grp = arith.divui %tid, {c(DEC_HD)} : index")
    e.emit(f"%d_is0 = arith.cmpi eq, %dd, {c(0)} : index")
    e.emit(f"%t_is0 = arith.cmpi eq, %tid, {c(0)} : index")
    rows_per_grp = R * 4 // W
    mine = [e.v(f"arith.andi {valid[r]}, {e.v(f'arith.cmpi eq, %grp, {c(r // rows_per_grp)} : index', 'gr')} : i1", "mine")
            for r in range(R)]
    for r in range(R):
        e.emit(f"scf.if {mine[r]} {{")
        e.indent += 2
        ms = [e.v(f"memref.load %ms[{c(w * R + r)}] : {SM}", "mw") for w in range(W)]
        M = ms[0]
        for mw in ms[1:]:
            M = e.v(f"arith.maximumf {M}, {mw} : f32", "M")
        any_ = e.v(f"arith.cmpf ogt, {M}, {ninf} : f32", "any")
        Ms = e.v(f"arith.select {any_}, {M}, {zero} : f32", "Ms")  # no visible key: l = o = 0
        L, O = zero, zero
        for w in range(W):
            f = e.v(f"math.exp {e.fsub(ms[w], Ms)} : f32", "fw")
            lw = e.v(f"memref.load %ls[{c(w * R + r)}] : {SM}", "lw")
            ow = e.v(f"memref.load %os[{e.add(c((w * R + r) * DEC_HD), '%dd')}] : {SO}", "ow")
            L = e.fma(lw, f, L)
            O = e.fma(ow, f, O)
        pos = e.v(f"arith.cmpf ogt, {L}, {zero} : f32", "pos")
        Lc = e.v(f"arith.select {pos}, {L}, {e.ci('1.0', 'f32')} : f32", "Lc")
        o = e.v(f"arith.divf {O}, {Lc} : f32", "o")
        oi = e.add(obase[r], "%dd")
        e.emit("scf.if %one_split {")
        e.emit(f"  memref.store {o}, %out[{oi}] : memref<?xf32>")
        e.emit("} else {")
        e.indent += 2
        # o_part[s, t, h, :] / lse_part[s, t, h] (t a row of the batch): row
        # (s * T * n_head) + t * n_head + h.
        srow = e.mul("%split", e.mul("%TT", "%NH"))
        pi = e.add(e.mul(srow, c(DEC_HD)), oi)
        e.emit(f"memref.store {o}, %o_part[{pi}] : memref<?xf32>")
        e.emit("scf.if %d_is0 {")
        e.indent += 2
        lse = e.v(f"arith.select {pos}, {e.fadd(Ms, e.v(f'math.log {Lc} : f32', 'lg'))}, {ninf} : f32", "lse")
        li = e.add(srow, e.v(f"arith.divui {obase[r]}, {c(DEC_HD)} : index", "hr"))
        e.emit(f"memref.store {lse}, %lse_part[{li}] : memref<?xf32>")
        e.indent -= 2
        e.emit("}")
        e.indent -= 2
        e.emit("}")
        e.indent -= 2
        e.emit("}")
    # Split-K: the workgroup that finishes its (row tile, KV head) last merges the splits
    # (attention_split_reduce's sum, in this launch): every thread fences its partials,
    # thread 0 counts the workgroup in count[tile * n_kv + kvh] (atom.add; the last one
    # resets it to 0 for the next launch), and the last workgroup, after an acquiring
    # fence, writes out[t, h, :] = sum_s e^(lse_s - M) o_s / sum_s e^(lse_s - M).
    fence = 'llvm.inline_asm has_side_effects "fence.acq_rel.gpu;", "" : () -> ()'
    e.emit("%multi = arith.cmpi ugt, %n_split, " + c(1) + " : index")
    e.emit("scf.if %multi {")
    e.indent += 2
    e.emit(fence)
    e.emit("gpu.barrier")
    e.emit("scf.if %t_is0 {")
    e.indent += 2
    # The tile's count: by its first query row in the batch, R0 * G + 8 tile (the
    # sequences' rows are disjoint), < T * G.
    qrow = e.add(e.mul("%R0", "%G"), e.mul("%tile", c(R)))
    slot = e.add(e.mul(qrow, "%n_kv"), "%kvh")
    old = e.v(f"memref.atomic_rmw addi {e.ci(1)}, %count[{slot}] : (i32, memref<?xi32>) -> i32", "old")
    nsm1 = e.v(f"arith.index_cast {e.v(f'arith.subi %n_split, {c(1)} : index', 'nsm')} : index to i32", "nsm")
    last = e.v(f"arith.cmpi eq, {old}, {nsm1} : i32", "last")
    e.emit(f"memref.store {e.v(f'arith.extui {last} : i1 to i32', 'lasti')}, %lastf[{c(0)}] : memref<1xi32, #gpu.address_space<workgroup>>")
    e.emit(f"scf.if {last} {{")
    e.emit(f"  memref.store {e.ci(0)}, %count[{slot}] : memref<?xi32>")
    e.emit("}")
    e.indent -= 2
    e.emit("}")
    e.emit("gpu.barrier")
    amlast = e.v(f"arith.cmpi ne, {e.v(f'memref.load %lastf[{c(0)}] : memref<1xi32, #gpu.address_space<workgroup>>', 'lf')}, {e.ci(0)} : i32", "amlast")
    e.emit(f"scf.if {amlast} {{")
    e.indent += 2
    e.emit(fence)
    nrow = e.mul("%TT", "%NH")  # rows of one split in lse_part
    for r in range(R):
        e.emit(f"scf.if {mine[r]} {{")
        e.indent += 2
        hrow = e.v(f"arith.divui {obase[r]}, {c(DEC_HD)} : index", "hrow")
        # M = max_s lse_s (split 0 always sees key 0, so M is finite).
        e.emit(f"%M{r} = scf.for %s = {c(0)} to %n_split step {c(1)} iter_args(%mx = {ninf}) -> (f32) {{")
        e.indent += 2
        ls_ = e.v(f"memref.load %lse_part[{e.add(e.mul('%s', nrow), hrow)}] : memref<?xf32>", "ls")
        e.emit(f"scf.yield {e.v(f'arith.maximumf %mx, {ls_} : f32', 'mx')} : f32")
        e.indent -= 2
        e.emit("}")
        e.emit(f"%LO{r}:2 = scf.for %s = {c(0)} to %n_split step {c(1)} iter_args(%la = {zero}, %oa = {zero}) -> (f32, f32) {{")
        e.indent += 2
        srow = e.add(e.mul("%s", nrow), hrow)
        ls_ = e.v(f"memref.load %lse_part[{srow}] : memref<?xf32>", "ls")
        ws = e.v(f"math.exp {e.fsub(ls_, f'%M{r}')} : f32", "ws")
        os_ = e.v(f"memref.load %o_part[{e.add(e.mul(srow, c(DEC_HD)), '%dd')}] : memref<?xf32>", "op")
        e.emit(f"scf.yield {e.fadd('%la', ws)}, {e.fma(ws, os_, '%oa')} : f32, f32")
        e.indent -= 2
        e.emit("}")
        e.emit(f"memref.store {e.v(f'arith.divf %LO{r}#1, %LO{r}#0 : f32', 'ro')}, %out[{e.add(obase[r], '%dd')}] : memref<?xf32>")
        e.indent -= 2
        e.emit("}")
    e.indent -= 2
    e.emit("}")
    e.indent -= 2
    e.emit("}")
    e.indent -= 2
    e.emit("}")  # scf.if %active
    e.emit("gpu.return")
    return func_text(out, e)


def module_attention_decode():
    return ("""// Generated by codegen/kernels/gen_quant_kernels.py; edit that, then rerun it.
//
// Split-K ("flash decoding") paged attention for the decode rows of every sequence of a
// pass in one launch, PTX only, head_dim 128: per sequence, the attention of
// attention_f16kv.mlir's flash_attention_f16kv (see that file for the KV layout and the
// partials), with the work laid out for a few query rows instead of a tile of 32 keys in
// workgroup memory, and the splits merged in the same launch:
//
// flash_decode_f16kv_hd128(q, k_cache, v_cache, block_table, out, o_part, lse_part, count,
//   seqs, T, seq_tiles, n_head, head_dim, max_splits, scale):
//   grid (n_seq * seq_tiles, n_head_kv, n_split), block """ + str(32 * DEC_WARPS) + """ = """ + str(DEC_WARPS) + """ warps.
//   q, out: [T, n_head * head_dim] f32, the rows of all n_seq sequences; seqs: [n_seq, 4]
//   i32, sequence s's {first row r0, rows Ts, first position p0, offset of its block
//   table in block_table}: its rows are r0..r0+Ts-1 at positions p0..p0+Ts-1, each
//   seeing the keys up to its own position. seq_tiles >= ceil(max Ts * G / 8); n_split
//   >= every sequence's split count. Sequence s splits its ctx = p0 + Ts keys as it
//   would alone: nsm = min(ceil(ctx / 32), max_splits), split_len = ceil(ctx / (nsm 32))
//   32, ceil(ctx / split_len) splits (compiler/driver/launch_bindings.cpp splitLet);
//   workgroups past its splits or rows do nothing. Workgroup (seq * seq_tiles + tile,
//   kvh, s) owns 8 query rows i = t * G + g of sequence seq, one KV head (h = kvh * G +
//   g), and the keys [s split_len, min((s + 1) split_len, ctx)) of split s. Warp w
//   takes keys lo + w, lo + w + """ + str(DEC_WARPS) + """, ...; lane l holds features 4l..4l+3 of
//   each row's q (scaled) and of the key's K and V rows (f16, read straight from the
//   paged cache, """ + str(DEC_UNROLL) + """ keys' loads in flight a warp). Per """ + str(DEC_UNROLL) + """ keys, every (key, row) score
//   is a butterfly sum over the 32 lanes, all without branches (independent chains the
//   scheduler interleaves; -inf for a pair the row must not see: j > p0 + t, a key
//   past the split, a row past the batch), then each row's online softmax (running max
//   m, sum l, output acc; Milakov & Gimelshein 2018) takes the """ + str(DEC_UNROLL) + """ keys in one rescale.
//   The warps' (m, l, acc) meet in workgroup memory and thread t combines feature
//   t % 128 of the rows of group t / 128.
//   With one split it writes out; with more, each split writes o_part / lse_part as
//   flash_attention_f16kv does ([n_split, T, n_head] over the batch's T rows), and the
//   split that finishes last (an atomic count per row tile and KV head in `count`, [T *
//   n_head] i32, zero before the launch and zero again after it) merges them into out as
//   attention_split_reduce would: no second launch. Requires head_dim == 128.
module attributes {gpu.container_module} {
  gpu.module @swz_attention_decode {
    // 16-byte aligned: the NVPTX backend merges a thread's four consecutive f32 stores
    // into dec_o into one st.shared.v4 (misaligned, and a launch failure, at align 4).
    memref.global "private" @dec_o : memref<""" + str(DEC_WARPS * DEC_ROWS * DEC_HD) + """xf32, #gpu.address_space<workgroup>> {alignment = 16}
    memref.global "private" @dec_m : memref<""" + str(DEC_WARPS * DEC_ROWS) + """xf32, #gpu.address_space<workgroup>> {alignment = 16}
    memref.global "private" @dec_l : memref<""" + str(DEC_WARPS * DEC_ROWS) + """xf32, #gpu.address_space<workgroup>> {alignment = 16}
    memref.global "private" @dec_last : memref<1xi32, #gpu.address_space<workgroup>> {alignment = 16}

""" + flash_decode() + "  }\n}\n")



# ---------------------------------------------------------------------------------------
# gemm_skinny.mlir: the prefill GEMM for short prompt passes, dequantizing in its loads.
# ---------------------------------------------------------------------------------------

# Per type: bytes of a 256-weight stage of one row (a Q4_K / Q6_K super-block, eight Q8_0
# blocks), 16-byte chunks a row's stage window spans (the stage's bytes start on a 2-byte
# boundary only, except Q4_K's and Q8_0's: 144 = 9 x 16, 272 = 17 x 16, and K % 256 == 0),
# the window's row stride in workgroup memory
# (an odd number of 16-byte units: the 8 rows a warp reads sit in 8 different bank
# quadruples) and the pipeline depth (stages of the workgroup's 32 rows in flight; 48 KiB
# of static workgroup memory at most).
SKINNY = {
    "q4_k": dict(sb=144, chunks=9, stride=144, stages=8, aligned=True),
    "q6_k": dict(sb=210, chunks=14, stride=240, stages=6, aligned=False),
    "q8_0": dict(sb=272, chunks=17, stride=272, stages=4, aligned=True),
}
SKINNY_WARPS = 4   # a warp: one n8 tile (8 weight rows); a workgroup: 32 rows
SKINNY_MT = 4      # m-tiles of 16 tokens: T <= 64 (the schedule's gemm.skinny_max_rows)


def gemm_skinny(fmt):
    """gemm_skinny_<fmt>: y[T, N] = f16(x)[T, K] . f16(dequant(W))[N, K]^T (+ bias) for
    T <= 64, with every output's sum the same chain as dequant_<fmt>_f16 + gemm_f16's, so
    a prompt row's bits do not depend on which path its pass took."""
    p = SKINNY[fmt]
    S, SB, CW, STRIDE = p["stages"], p["sb"], p["chunks"], p["stride"]
    W, ROWS, MT = SKINNY_WARPS, 8 * SKINNY_WARPS, SKINNY_MT
    COLS = STRIDE // 2
    SMEM = f"memref<{S * ROWS}x{COLS}xf16, #gpu.address_space<workgroup>>"
    V22H, V42H, V22F, V2H = "vector<2x2xf16>", "vector<4x2xf16>", "vector<2x2xf32>", "vector<2xf16>"
    name = f"gemm_skinny_{fmt}"
    e = Emitter(6)
    c = lambda v: e.ci(v, "index")
    head = [f"    gpu.func @{name}(%x: memref<?xf32>, %w: memref<?xf16>, %y: memref<?xf32>, %bias: memref<?xf32>,",
            "                             %T: i32, %N: i32, %K: i32, %has_bias: i32)",
            "        kernel",
            f"        attributes {{known_block_size = array<i32: {32 * W}, 1, 1>,",
            f"                    swz.grid = \"ceil(N/{ROWS}), 1, 1\"}} {{"]
    e.emit(f"%sm = memref.get_global @skinny_{fmt} : {SMEM}")
    mma_thread_ids(e)
    e.emit("%Ni = arith.index_cast %N : i32 to index")
    e.emit("%Ki = arith.index_cast %K : i32 to index")
    e.emit("%Ti = arith.index_cast %T : i32 to index")
    e.emit(f"%nlast = arith.subi %Ni, {c(1)} : index")
    e.emit(f"%tlast = arith.subi %Ti, {c(1)} : index")
    # K % 256 == 0 (Q8_0 too: Codegen.cpp's kernelKey), so the stages are whole and the k16
    # steps are exactly gemm_f16's (its k tiles of 64, none zero-filled).
    e.emit(f"%nst = arith.divui %Ki, {c(256)} : index")
    if fmt == "q8_0":
        e.emit(f"%kb = arith.divui %Ki, {c(32)} : index")
        e.emit(f"%rowbytes = arith.muli %kb, {c(34)} : index")
    else:
        e.emit(f"%kb = arith.divui %Ki, {c(256)} : index")
        e.emit(f"%rowbytes = arith.muli %kb, {c(SB)} : index")
    e.emit(f"%n0 = arith.muli %bx, {c(ROWS)} : index")
    zf = e.ci("dense<0.0>", V22F)
    za = e.ci("dense<0.0>", V42H)
    zb = e.ci("dense<0.0>", V22H)
    z2 = e.ci("dense<0.0>", V2H)
    zx = e.ci("0.0", "f32")

    # Copy roles: thread tid moves 16-byte chunks tid + 128 i of a stage (row chunk / CW of
    # the workgroup's 32, chunk chunk % CW of that row's window). Rows past N copy nothing
    # (src-size 0: zero-filled) from a clamped in-bounds address.
    copies = []
    total = ROWS * CW
    for i in range((total + 32 * W - 1) // (32 * W)):
        ch = e.add("%tid", c(32 * W * i)) if i else "%tid"
        valid = None
        if 32 * W * (i + 1) > total:
            valid = e.v(f"arith.cmpi ult, {ch}, {c(total)} : index", "cv")
        row = e.v(f"arith.divui {ch}, {c(CW)} : index", "cr")
        col = e.v(f"arith.remui {ch}, {c(CW)} : index", "cc")
        n = e.add("%n0", row)
        nin = e.v(f"arith.cmpi ult, {n}, %Ni : index", "cn")
        nc = e.v(f"arith.minui {n}, %nlast : index", "cn")
        rs = e.mul(nc, "%rowbytes")
        cnt = e.v(f"arith.select {nin}, {c(8)}, {c(0)} : index", "cnt")
        copies.append((valid, row, e.mul(col, c(8)), rs, cnt))

    def window(rs, kt):
        """(aligned start of the stage's window in f16 units, the stage's offset in it in f16 units)."""
        start = e.add(rs, e.mul(kt, c(SB)))
        if p["aligned"]:
            return e.v(f"arith.divui {start}, {c(2)} : index", "ws"), None
        off = e.v(f"arith.remui {start}, {c(16)} : index", "wo")
        a = e.v(f"arith.subi {start}, {off} : index", "wa")
        return e.v(f"arith.divui {a}, {c(2)} : index", "ws"), e.v(f"arith.divui {off}, {c(2)} : index", "wo")

    def issue(kt):
        slot = e.v(f"arith.remui {kt}, {c(S)} : index", "slot")
        srow0 = e.mul(slot, c(ROWS))
        for valid, row, col8, rs, cnt in copies:
            if valid:
                e.emit(f"scf.if {valid} {{")
                e.indent += 2
            ws, _ = window(rs, kt)
            si = e.add(ws, col8)
            dr = e.add(srow0, row)
            e.v(f"nvgpu.device_async_copy %w[{si}], %sm[{dr}, {col8}], 8, {cnt} {{bypassL1}} : memref<?xf16> to {SMEM}", "cp")
            if valid:
                e.indent -= 2
                e.emit("}")

    # Prologue: stages 0 .. S-2, a group each (possibly empty).
    for s in range(S - 1):
        has = e.v(f"arith.cmpi ult, {c(s)}, %nst : index", "has")
        e.emit(f"scf.if {has} {{")
        e.indent += 2
        issue(c(s))
        e.indent -= 2
        e.emit("}")
        e.v("nvgpu.device_async_create_group {}", "grp")
    last_group = f"%grp{e.n}"

    # This thread's mma row: warp w's n8 tile, row g (B column g).
    e.emit(f"%wrow = arith.muli %warp, {c(8)} : index")
    e.emit("%mrow = arith.addi %wrow, %g : index")
    e.emit("%mn = arith.addi %n0, %mrow : index")
    e.emit("%mnc = arith.minui %mn, %nlast : index")
    e.emit("%mrs = arith.muli %mnc, %rowbytes : index")
    e.emit(f"%q2 = arith.muli %q, {c(2)} : index")
    # The x rows of m-tile m this thread feeds (A rows g and g + 8), clamped, with their
    # in-range flags, as element offsets t K.
    xrows = []
    for m in range(MT):
        pair = []
        for h in range(2):
            t = e.add("%g", c(16 * m + 8 * h)) if 16 * m + 8 * h else "%g"
            tin = e.v(f"arith.cmpi ult, {t}, %Ti : index", "tin")
            tc = e.v(f"arith.minui {t}, %tlast : index", "tc")
            pair.append((tin, e.mul(tc, "%Ki")))
        xrows.append(pair)
    def kloop(mt):
        """The K loop for a static number of m-tiles (1, 2 or 4): every k16 step of a stage
        in one basic block, so ptxas overlaps one step's loads and dequantization with the
        previous steps' mma.sync. Returns the accumulators' names."""

        accs = [f"%acc{mt}_{m}" for m in range(mt)]
        e.emit(f"%kres{mt}:{mt} = scf.for %kt = {c(0)} to %nst step {c(1)} iter_args("
               + ", ".join(f"{a} = {zf}" for a in accs) + f") -> ({', '.join([V22F] * mt)}) {{")
        e.indent += 2
        e.emit(f"nvgpu.device_async_wait {last_group} {{numGroups = {S - 2} : i32}}")
        e.emit("gpu.barrier")
        ktn = e.add("%kt", c(S - 1))
        has = e.v(f"arith.cmpi ult, {ktn}, %nst : index", "has")
        e.emit(f"scf.if {has} {{")
        e.indent += 2
        issue(ktn)
        e.indent -= 2
        e.emit("}")
        e.v("nvgpu.device_async_create_group {}", "grp")
        slot = e.v(f"arith.remui %kt, {c(S)} : index", "slot")
        srow = e.add(e.mul(slot, c(ROWS)), "%mrow")
        _, off = window("%mrs", "%kt")
        step0 = e.mul("%kt", c(16))

        def u16(byte, lane=False):
            """The little-endian 16-bit word at byte `byte` (even, a Python int) of this row's
            stage, plus 2q with `lane` (this thread's pair of B weights), zero-extended to i32."""
            col = c(byte // 2) if off is None else e.add(off, c(byte // 2))
            if lane:
                col = e.add(col, "%q")
            h = e.v(f"memref.load %sm[{srow}, {col}] : {SMEM}", "ld")
            b = e.v(f"arith.bitcast {h} : f16 to i16", "ld")
            return e.v(f"arith.extui {b} : i16 to i32", "ld")

        def f16at(byte):
            col = c(byte // 2) if off is None else e.add(off, c(byte // 2))
            h = e.v(f"memref.load %sm[{srow}, {col}] : {SMEM}", "ld")
            return e.v(f"arith.extf {h} : f16 to f32", "d")

        def byte(word, i, signed=False):
            if signed:  # bits 8i .. 8i+7 as a signed int8 in i32
                s = e.shl(word, e.ci(24 - 8 * i)) if i < 3 else word
                return e.sar(s, e.ci(24))
            return e.bits(word, 8 * i, 0xFF)

        def pair(h0, h1):
            v = e.v(f"vector.insert {h0}, {z2} [0] : f16 into {V2H}", "bp")
            return e.v(f"vector.insert {h1}, {v} [1] : f16 into {V2H}", "bp")

        acc = list(accs)

        def mma_step(j, b_regs):
            """k16 step j (a Python int) of this stage: B from the four f16 weights (k 2q, 2q+1,
            2q+8, 2q+9 of row g); A from x (rows g, g+8 of each live m-tile)."""
            st = e.add(step0, c(j)) if j else step0
            k0 = e.mul(st, c(16))
            b = e.v(f"vector.insert {pair(b_regs[0], b_regs[1])}, {zb} [0] : {V2H} into {V22H}", "bf")
            b = e.v(f"vector.insert {pair(b_regs[2], b_regs[3])}, {b} [1] : {V2H} into {V22H}", "bf")
            kq = e.add(k0, "%q2")
            for m in range(mt):
                regs = []
                for h in range(2):  # A registers: (row g, k), (row g + 8, k), (row g, k + 8), (row g + 8, k + 8)
                    for r in range(2):
                        tin, trow = xrows[m][r]
                        ok = tin
                        base = e.add(trow, e.add(kq, c(8 * h)) if h else kq)
                        vals = []
                        for jj in range(2):
                            xi = e.add(base, c(jj)) if jj else base
                            xv = e.v(f"memref.load %x[{xi}] : memref<?xf32>", "xv")
                            xv = e.v(f"arith.select {ok}, {xv}, {zx} : f32", "xv")
                            vals.append(e.v(f"arith.truncf {xv} : f32 to f16", "xh"))
                        regs.append(pair(*vals))
                a = za
                for i_, r_ in enumerate([regs[0], regs[1], regs[2], regs[3]]):
                    a = e.v(f"vector.insert {r_}, {a} [{i_}] : {V2H} into {V42H}", "af")
                d = e.v(f"nvgpu.mma.sync ({a}, {b}, {acc[m]}) {{mmaShape = [16, 8, 16]}} : ({V42H}, {V22H}, {V22F}) -> {V22F}", "d")
                acc[m] = d

        def h16(x):
            return e.v(f"arith.truncf {x} : f32 to f16", "wh")

        if fmt == "q4_k":
            # Element e of the super-block: group G = e / 64, l = e % 64, sub-block 2G + l / 32,
            # q = nibble l / 32 of qs[32G + l % 32]; x = (d * sc) * q - dmin * m (dequant_f16.mlir).
            d, dmin = f16at(0), f16at(2)
            sw = [u16(4 + 2 * i) for i in range(6)]
            sbyte = lambda i: byte(sw[i // 2], i % 2)
            def scale_min(s):
                if s < 4:
                    sc, mn = e.band(sbyte(s), e.ci(63)), e.band(sbyte(s + 4), e.ci(63))
                else:
                    sc = e.bor(e.band(sbyte(s + 4), e.ci(15)), e.shl(e.shr(sbyte(s - 4), e.ci(6)), e.ci(4)))
                    mn = e.bor(e.shr(sbyte(s + 4), e.ci(4)), e.shl(e.shr(sbyte(s), e.ci(6)), e.ci(4)))
                scf_ = e.v(f"arith.uitofp {sc} : i32 to f32", "sc")
                mnf = e.v(f"arith.uitofp {mn} : i32 to f32", "mn")
                return e.fmul(d, scf_), e.fmul(dmin, mnf)
            for G in range(4):
                lo, hi = scale_min(2 * G), scale_min(2 * G + 1)
                steps = {}
                for h in range(2):
                    v1, v2 = u16(16 + 32 * G + 16 * h, True), u16(16 + 32 * G + 16 * h + 8, True)
                    for nib, (d1, m1) in ((0, lo), (1, hi)):
                        ws = []
                        for v in (v1, v2):
                            for bi in range(2):
                                q = e.bits(v, 8 * bi + 4 * nib, 15)
                                qf = e.v(f"arith.uitofp {q} : i32 to f32", "qf")
                                ws.append(h16(e.fsub(e.fmul(d1, qf), m1)))
                        steps[4 * G + 2 * nib + h] = ws
                for j in sorted(steps):
                    mma_step(j, steps[j])
        elif fmt == "q6_k":
            # Element e: h = e / 128, r = e % 128, p = r / 32, l = r % 32; q = (nibble p / 2 of
            # ql[64h + l + 32(p % 2)]) | (bits 2p, 2p+1 of qh[32h + l]) << 4; x = d * scales[8h +
            # l / 16 + 2p] * (q - 32) (dequant_f16.mlir).
            d = f16at(208)
            for h2 in range(2):
                steps = {}
                for s in range(2):
                    vh = [u16(128 + 32 * h2 + 16 * s + 8 * i, True) for i in range(2)]
                    vl = [[u16(64 * h2 + 32 * pp + 16 * s + 8 * i, True) for i in range(2)] for pp in range(2)]
                    for p_ in range(4):
                        sword = u16(192 + 8 * h2 + 2 * p_)
                        sc = byte(sword, s, signed=True)
                        ds = e.fmul(d, e.v(f"arith.sitofp {sc} : i32 to f32", "sc"))
                        ws = []
                        for i in range(2):
                            for bi in range(2):
                                ql = e.bits(vl[p_ % 2][i], 8 * bi + 4 * (p_ // 2), 15)
                                qh = e.bits(vh[i], 8 * bi + 2 * p_, 3)
                                q = e.bor(ql, e.shl(qh, e.ci(4)))
                                qm = e.v(f"arith.subi {q}, {e.ci(32)} : i32", "qm")
                                qf = e.v(f"arith.sitofp {qm} : i32 to f32", "qf")
                                ws.append(h16(e.fmul(ds, qf)))
                        steps[8 * h2 + 2 * p_ + s] = ws
                for j in sorted(steps):
                    mma_step(j, steps[j])
        else:  # q8_0: eight blocks of 34 bytes: d f16 | qs[32] int8; x = q * d
            for blk in range(8):
                d = f16at(34 * blk)
                for s in range(2):
                    ws = []
                    for i in range(2):
                        v = u16(34 * blk + 2 + 16 * s + 8 * i, True)
                        for bi in range(2):
                            q = byte(v, bi, signed=True)
                            qf = e.v(f"arith.sitofp {q} : i32 to f32", "qf")
                            ws.append(h16(e.fmul(qf, d)))
                    mma_step(2 * blk + s, ws)
        e.emit(f"scf.yield {', '.join(acc)} : {', '.join([V22F] * mt)}")
        e.indent -= 2
        e.emit("}")
        return [f"%kres{mt}#{m}" for m in range(mt)]

    # One loop per m-tile count (a uniform branch on T outside the loop): T <= 16, <= 32, <= 64.
    e.emit(f"%mt1 = arith.cmpi ule, %Ti, {c(16)} : index")
    e.emit(f"%mt2 = arith.cmpi ule, %Ti, {c(32)} : index")
    V4 = ", ".join([V22F] * MT)

    def yield_loop(mt):
        e.emit(f"scf.yield {', '.join(kloop(mt) + [zf] * (MT - mt))} : {V4}")

    def choose(name, levels, last):
        """`name` = the loop of the first level whose condition holds, else `last`'s."""
        (cond, mt), rest = levels[0], levels[1:]
        e.emit(f"{name}:{MT} = scf.if {cond} -> ({V4}) {{")
        e.indent += 2
        yield_loop(mt)
        e.indent -= 2
        e.emit("} else {")
        e.indent += 2
        if rest:
            choose("%res24", rest, last)
            e.emit(f"scf.yield {', '.join(f'%res24#{m}' for m in range(MT))} : {V4}")
        else:
            yield_loop(last)
        e.indent -= 2
        e.emit("}")

    choose("%res", [("%mt1", 1), ("%mt2", 2)], 4)
    e.emit(f"nvgpu.device_async_wait {last_group} {{numGroups = 0 : i32}}")
    # Epilogue as gemm_f16's: y[t, n] = acc + (bias[n] or 0.0), rows t < T and n < N only.
    e.emit(f"%use_bias = arith.cmpi ne, %has_bias, {e.ci(0)} : i32")
    for j in range(2):
        n = e.add("%n0", e.add("%wrow", e.add("%q2", c(j)) if j else "%q2"))
        nin = e.v(f"arith.cmpi ult, {n}, %Ni : index", "nin")
        nc = e.v(f"arith.minui {n}, %nlast : index", "nc")
        bv = f"%bv{e.n + 1}"
        e.n += 1
        e.emit(f"{bv} = scf.if %use_bias -> (f32) {{")
        e.emit(f"  %bl{e.n} = memref.load %bias[{nc}] : memref<?xf32>")
        e.emit(f"  scf.yield %bl{e.n} : f32")
        e.emit("} else {")
        e.emit(f"  scf.yield {zx} : f32")
        e.emit("}")
        for m in range(MT):
            for i in range(2):
                t = e.add("%g", c(16 * m + 8 * i)) if 16 * m + 8 * i else "%g"
                tin = e.v(f"arith.cmpi ult, {t}, %Ti : index", "tin")
                ok = e.v(f"arith.andi {tin}, {nin} : i1", "ok")
                v = e.v(f"vector.extract %res#{m}[{i}, {j}] : f32 from {V22F}", "v")
                e.emit(f"scf.if {ok} {{")
                e.indent += 2
                sv = e.fadd(v, bv)
                yi = e.add(e.mul(t, "%Ni"), n)
                e.emit(f"memref.store {sv}, %y[{yi}] : memref<?xf32>")
                e.indent -= 2
                e.emit("}")
    e.emit("gpu.return")
    return func_text(head, e)


def module_skinny():
    out = ["// Generated by codegen/kernels/gen_quant_kernels.py; edit that, then rerun it.",
           "//",
           "// The skinny prefill GEMM (PTX only): for prompt passes of few rows (at most 64; the",
           "// target schedule's gemm.skinny_max_rows picks), y[T, N] = f16(x) . f16(dequant(W))^T",
           "// (+ bias) straight from the GGUF blocks, instead of dequant_<type>_f16 writing the",
           "// whole f16 weight and gemm_f16 reading it back (7B: 15 GB each way a pass).",
           "//",
           "// gemm_skinny_<type>(x, w, y, bias, T, N, K, has_bias): x [T, K] f32 (rounded to f16",
           "//   here, as convert_f32_f16 does), w the GGUF tensor's bytes as memref<?xf16>, y [T, N]",
           "//   f32, bias [N] f32 (read only when has_bias != 0).",
           f"//   Launch: block {32 * SKINNY_WARPS}, grid (ceil(N / {8 * SKINNY_WARPS}), 1, 1): warp w of workgroup b",
           f"//   owns weight rows {8 * SKINNY_WARPS}b + 8w .. + 7 (one n8 tile) for every token (up to",
           f"//   {SKINNY_MT} m-tiles of 16), over the whole of K.",
           "//   Loads: the workgroup's rows move through workgroup memory 256 weights (a stage) at",
           "//   a time, a multi-stage cp.async ring (16-byte chunks of each row's stage window,",
           "//   zero-filled past N); each thread dequantizes the 4 weights of its mma B fragment",
           "//   per k16 step (row g, k 2q, 2q+1, 2q+8, 2q+9) with dequant_f16.mlir's f32",
           "//   arithmetic, rounded to f16; A comes from x rows g, g + 8 of each m-tile.",
           "//   Bits: each output is one mma.sync.m16n8k16 accumulator over the k16 steps in",
           "//   ascending order from zero, with the same f16 operands, steps and final bias add",
           "//   as gemm_f16 (K % 256 == 0 for every type: no zero-filled k tail): the tensor core computes an",
           "//   element from its own row, column and accumulator, so the result is bitwise",
           "//   dequant_<type>_f16 + gemm_f16's, whichever path a pass takes (checked on the",
           "//   H200 by swz-backend-compare's batch invariance: prompt rows alone vs together).",
           "module attributes {gpu.container_module} {",
           "  gpu.module @swz_gemm_skinny {"]
    for fmt, p in SKINNY.items():
        rows = p["stages"] * 8 * SKINNY_WARPS
        out.append(f"    memref.global \"private\" @skinny_{fmt} : memref<{rows}x{p['stride'] // 2}xf16, "
                   "#gpu.address_space<workgroup>> {alignment = 16 : i64}")
    out.append("")
    for fmt in SKINNY:
        out.append(gemm_skinny(fmt))
    out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


def main():
    args = sys.argv[1:]
    if "--variant" in args:
        # Tuning: gemv_q8x.mlir with one type's Q8X parameters replaced, written to --out
        # (e.g. --variant q4_k:unroll=2,wpr=2 --out /tmp/v.mlir); the checked-in
        # files are not touched.
        # (f16: gemv_f16_mma.mlir with MMA_F16's parameters replaced, e.g. f16:mt=1;
        # attn: attention_decode.mlir with DEC_WARPS / DEC_UNROLL / DEC_MINCTASM, e.g.
        # attn:warps=4,unroll=2)
        fmt, _, kv = args[args.index("--variant") + 1].partition(":")
        for item in kv.split(",") if kv else []:
            k, _, v = item.partition("=")
            if fmt == "attn":
                if k not in ("warps", "unroll", "minctasm"):
                    raise SystemExit(f"--variant attn: unknown parameter {k!r} (warps, unroll, minctasm)")
                globals()["DEC_" + k.upper()] = int(v)
            else:
                (MMA_F16 if fmt == "f16" else MMA_Q4K if fmt == "q4k_mma" else Q8X[fmt])[k] = int(v)
        text = module_f16_mma(variant=True) if fmt == "f16" else module_attention_decode() if fmt == "attn" \
            else module_q8x()
        with open(args[args.index("--out") + 1], "w") as fh:
            fh.write(text)
        return 0
    check = "--check" in args
    stale = []
    files = [(f"gemv_{fmt}.mlir", module(fmt)) for fmt in FORMATS]
    files.append(("gemv_q8x.mlir", module_q8x()))
    files.append(("gemv_f16_mma.mlir", module_f16_mma()))
    files.append(("attention_decode.mlir", module_attention_decode()))
    files.append(("gemm_skinny.mlir", module_skinny()))
    for name, text in files:
        path = os.path.join(HERE, name)
        if check:
            try:
                with open(path) as fh:
                    if fh.read() != text:
                        stale.append(path)
            except OSError:
                stale.append(path)
        else:
            with open(path, "w") as fh:
                fh.write(text)
    if stale:
        print("stale (rerun codegen/kernels/gen_quant_kernels.py):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
