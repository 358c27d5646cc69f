#!/usr/bin/env python3
"""SIMT interpreter of GPU kernels in generic-form MLIR, for checking PTX-only kernels
(nvgpu ldmatrix / mma.sync / cp.async) on a CPU against the numeric cases of
test/gpu/cases.h.

What it runs: the op subset our kernels use after swz-materialize-swizzle (and
swz-dynamic-smem: gpu.dynamic_shared_memory, whose window is modelled as bytes at shared
address 16 so a tile aligned beyond 16 bytes exercises the kernel's round-up, and
memref.view of f16/f32 tiles into it, bounds-checked against the kernel's
swz.dynamic_smem), printed with
--mlir-print-op-generic (arith, math, scf.for/if, memref load/store/get_global, vector
extract/insert/shuffle/shape_cast/bitcast, gpu ids/barrier/shuffle, nvgpu ldmatrix/mma.sync (m16n8k16 f16, m16n8k32 s8)/device_async_copy, and
the dp4a inline assembly of gemv_q8x.mlir). i32 values wrap to 32 bits; memrefs of
vector<4xf32> / vector<4xi32> are rows of 4 lanes.
One workgroup at a time; its threads (the kernel's known_block_size, which the case's
launch must equal) run in lockstep as numpy arrays of lanes, with
a mask for divergent scf.if / scf.for. Warp operations follow the PTX ISA fragment
layouts: ldmatrix (.x1/.x2/.x4, .trans): lanes 8m..8m+7 address the rows of matrix m,
thread t receives row t/4, columns 2(t%4), 2(t%4)+1; mma.sync.m16n8k16 (f16 -> f32):
A a0..a7 = (g, 2q+j), (g+8, 2q+j), (g, 2q+8+j), (g+8, 2q+8+j), B (2q+j, g), (2q+8+j, g),
C/D (g, 2q+j), (g+8, 2q+j) with g = lane/4, q = lane%4; cp.async src-size < 16 bytes
zero-fills. Out-of-range global or shared accesses raise.

What it does not model: timing, memory races (lockstep execution is stricter than
barriers, so a missing gpu.barrier is not caught), f32 rounding of the tensor-core
accumulation (done in float64 here). It checks indexing, masking, fragment plumbing and
the algorithm; the H200 run (test/gpu/run_gpu_check.sh) checks the hardware."""
import re, sys
import numpy as np

OP_RE = re.compile(r'^(?:(%[\w]+)(?::(\d+))? = )?"([\w.]+)"\((.*?)\)(.*)$')

class Op:
    __slots__ = ("res", "nres", "name", "operands", "rest", "regions", "types")

class Block:
    def __init__(self, args, ops):
        self.args, self.ops = args, ops

def parse(lines):
    pos = [0]
    def parse_block_list():
        # we are after a line ending with '({' ; parse until '})' possibly with '}, {' separators
        regions = []
        cur_blocks = []
        cur_args, cur_ops = [], []
        while True:
            line = lines[pos[0]].strip(); pos[0] += 1
            if line.startswith('^bb'):
                if cur_ops or cur_args:
                    cur_blocks.append(Block(cur_args, cur_ops)); cur_ops = []
                m = re.match(r'\^bb\d+\((.*)\):', line)
                cur_args = [a.split(':')[0].strip() for a in split_top(m.group(1))] if m else []
                continue
            if line.startswith('}, {'):
                cur_blocks.append(Block(cur_args, cur_ops)); regions.append(cur_blocks)
                cur_blocks, cur_args, cur_ops = [], [], []
                continue
            if line.startswith('})'):
                cur_blocks.append(Block(cur_args, cur_ops)); regions.append(cur_blocks)
                return regions, line
            cur_ops.append(parse_op(line))
    def parse_op(line):
        m = OP_RE.match(line)
        if not m:
            raise ValueError("cannot parse: " + line)
        op = Op()
        op.res, op.nres, op.name = m.group(1), int(m.group(2) or (1 if m.group(1) else 0)), m.group(3)
        op.operands = [x.strip() for x in m.group(4).split(',')] if m.group(4).strip() else []
        op.rest = m.group(5)
        op.regions = []
        if op.rest.rstrip().endswith('({'):
            op.regions, tail = parse_block_list()
            op.rest = op.rest + tail
        return op
    ops = []
    while pos[0] < len(lines):
        line = lines[pos[0]].strip(); pos[0] += 1
        if not line or line.startswith('//') or line.startswith('#'):
            continue
        ops.append(parse_op(line))
    return ops

def split_top(s):
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch in '<([{': depth += 1
        if ch in '>)]}': depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur); cur = ''
        else:
            cur += ch
    if cur.strip(): out.append(cur)
    return out

def find_funcs(ops, acc):
    for op in ops:
        if op.name == 'gpu.func':
            m = re.search(r'sym_name = "(\w+)"', op.rest)
            acc[m.group(1)] = op
        for r in op.regions:
            for b in r:
                find_funcs(b.ops, acc)
    return acc

def find_globals(ops, acc):
    for op in ops:
        if op.name == 'memref.global':
            m = re.search(r'sym_name = "(\w+)".*type = memref<(\d+)x?(\d*)x(f16|f32|i32)', op.rest)
            acc[m.group(1)] = (tuple(int(x) for x in (m.group(2), m.group(3)) if x), m.group(4))
        for r in op.regions:
            for b in r:
                find_globals(b.ops, acc)
    return acc

NL = 128
PRED_I = {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater, 5: np.greater_equal,
          6: np.less, 7: np.less_equal, 8: np.greater, 9: np.greater_equal}
PRED_F = {1: np.equal, 2: np.greater, 3: np.greater_equal, 4: np.less, 5: np.less_equal, 6: np.not_equal}

def rtype(rest):
    """The (first) result type of a generic op: '... : (i32, i32) -> i32' gives 'i32'."""
    return rest.rsplit('->', 1)[-1].strip().strip('()').split(',')[0].strip()

def ftype(rest):
    t = rest.split('->')[-1]
    if 'f16' in t: return np.float16
    return np.float32

class Machine:
    """Runs gpu.funcs over a grid. buffers: name -> flat numpy array (global memory);
    smem_defs: workgroup memref.global name -> (shape, 'f16' | 'f32' | 'i32')."""

    def __init__(self, buffers, smem_defs, dims=None):
        self.buf = buffers
        self.smem_defs = smem_defs
        self.dims = dims or {}  # global buffer name -> its memref sizes (2-D: row-major)

    # Shared address of the dynamic window: 16-byte aligned only, as on the GPU.
    DYN_BASE = 16

    def run(self, fn, args, grid):
        entry = fn.regions[0][0]
        m = re.search(r'swz.dynamic_smem = "(\d+)"', fn.rest)
        self.dyn_bytes = int(m.group(1)) if m else 0
        for bz in range(grid[2]):
            for by in range(grid[1]):
                for bx in range(grid[0]):
                    self.smem = {k: np.zeros(s, dtype={'f16': np.float16, 'f32': np.float32, 'i32': np.int64}[t])
                                 for k, (s, t) in self.smem_defs.items() if not k.startswith('<dynamic')}
                    self.bid, self.grid = (bx, by, bz), grid
                    env = {}
                    for a, v in zip(entry.args, args):
                        env[a] = v
                    self.exec_block(entry, env, np.ones(NL, bool))

    def exec_block(self, block, env, mask):
        for op in block.ops:
            r = self.exec_op(op, env, mask)
            if op.name in ('scf.yield', 'gpu.return'):
                return r
        return None

    def v(self, env, name):
        if '#' in name:
            base, i = name.split('#')
            return env[base][int(i)]
        return env[name]

    def exec_op(self, op, env, mask):
        n = op.name; rest = op.rest
        ins = [self.v(env, x) for x in op.operands] if n not in ('scf.for',) else None
        res = None
        if n == 'arith.constant':
            m = re.search(r'value = (dense<([^>]*)>|[-+\w.]+)(?: : (\w+))?', rest)
            iv = re.search(r'vector<([\dx]+)x(i8|i32)>', rest)
            if m.group(2) is not None and iv:  # integer vectors (held as int64 lanes)
                dims = tuple(int(d) for d in iv.group(1).split('x'))
                res = np.full((NL,) + dims, int(m.group(2)), dtype=np.int64)
            elif m.group(2) is not None and re.search(r'vector<\d+x(f16|f32)>', rest):
                shape = re.search(r'vector<(\d+)x(f16|f32)>', rest)
                dt = np.float16 if shape.group(2) == 'f16' else np.float32
                res = np.full((NL, int(shape.group(1))), float(m.group(2)), dtype=dt)
            elif m.group(2) is not None:
                shape = re.search(r'vector<(\d+)x(\d+)x(f16|f32)>', rest)
                dt = np.float16 if shape.group(3) == 'f16' else np.float32
                res = np.full((NL, int(shape.group(1)), int(shape.group(2))), float(m.group(2)), dtype=dt)
            else:
                val, ty = m.group(1), m.group(3)
                if ty in ('f32', 'f16'):
                    f = np.uint32(int(val, 16)).view(np.float32) if val.startswith('0x') else np.float32(float(val))
                    res = np.full(NL, f, dtype=np.float32 if ty == 'f32' else np.float16)
                elif ty == 'i1':
                    res = np.full(NL, val == 'true')
                else:
                    res = np.full(NL, int(val), dtype=np.int64)
        elif n in ('arith.addi', 'arith.addf'): res = ins[0] + ins[1]
        elif n in ('arith.subi', 'arith.subf'): res = ins[0] - ins[1]
        elif n in ('arith.muli', 'arith.mulf'): res = ins[0] * ins[1]
        elif n == 'arith.ori': res = ins[0] | ins[1]
        elif n == 'arith.shli': res = ins[0] << ins[1]
        elif n == 'arith.shrsi': res = ins[0] >> ins[1]
        elif n == 'arith.trunci': res = ins[0] & ((1 << int(rtype(rest)[1:])) - 1)
        elif n == 'arith.bitcast':
            src, dst = re.search(r': \((\w+)\) -> (\w+)', rest).groups()
            if src in ('f16', 'f32'):  # float bits as an unsigned integer (int64 lanes)
                res = ins[0].astype({'f16': np.float16, 'f32': np.float32}[src]).view(
                    {'f16': np.uint16, 'f32': np.uint32}[src]).astype(np.int64)
                src = None
            u = {'i16': np.uint16, 'i32': np.uint32, None: None}[src]
            if src is not None:
                res = (ins[0] & ((1 << int(src[1:])) - 1)).astype(u).view({'f16': np.float16, 'f32': np.float32}[dst])
        elif n == 'arith.sitofp': res = ins[0].astype(np.float32)
        elif n == 'arith.uitofp': res = (ins[0] & 0xFFFFFFFF).astype(np.float32)
        elif n == 'arith.extui':  # zero-extends the source width (int8 buffers load signed)
            src = re.search(r': \((\w+)\) ->', rest).group(1)
            res = ins[0].astype(np.int64) & ((1 << int(src[1:])) - 1)
        elif n == 'arith.negf': res = -ins[0]
        elif n == 'math.rsqrt':
            with np.errstate(all='ignore'): res = (1.0 / np.sqrt(ins[0])).astype(ins[0].dtype)
        elif n == 'arith.fptosi': res = np.trunc(ins[0]).astype(np.int64)
        elif n == 'math.absf': res = np.abs(ins[0])
        elif n == 'math.roundeven': res = np.rint(ins[0])
        elif n == 'llvm.inline_asm':
            asm = re.search(r'asm_string = "([^"]*)"', rest).group(1)
            m = re.match(r'dp4a\.([us])32\.s32 ', asm)
            if asm == 'fence.acq_rel.gpu;':  # workgroups run one after another here
                m = None
            elif not m:
                raise NotImplementedError('inline asm: ' + asm)
            if m:
                a = (ins[0] & 0xFFFFFFFF).astype(np.uint32).view(np.uint8 if m.group(1) == 'u' else np.int8)
                b = (ins[1] & 0xFFFFFFFF).astype(np.uint32).view(np.int8)
                res = (a.reshape(NL, 4).astype(np.int64) * b.reshape(NL, 4).astype(np.int64)).sum(axis=1) + ins[2]
        elif n == 'memref.atomic_rmw':
            # kind 1 = addi (arith::AtomicRMWKind); the active lanes one after another.
            assert re.search(r'kind = 1 :', rest), 'memref.atomic_rmw: only addi'
            arr, flat = self.addr(ins[1], ins[2:], mask)
            res = np.zeros(NL, dtype=np.int64)
            for lane in np.nonzero(mask)[0]:
                res[lane] = arr[flat[lane]]
                arr[flat[lane]] = arr[flat[lane]] + ins[0][lane]
        elif n == 'arith.divf':
            with np.errstate(all='ignore'): res = ins[0] / ins[1]
        elif n == 'arith.divui': res = ins[0] // np.where(ins[1] == 0, 1, ins[1])
        elif n == 'arith.remui': res = ins[0] % np.where(ins[1] == 0, 1, ins[1])
        elif n == 'arith.andi': res = ins[0] & ins[1]
        elif n == 'arith.xori': res = ins[0] ^ ins[1]
        elif n == 'arith.shrui':
            res = ((ins[0] & 0xFFFFFFFF) if rtype(rest) == 'i32' else ins[0]) >> ins[1]
        elif n == 'arith.minui': res = np.minimum(ins[0], ins[1])
        elif n == 'arith.maximumf': res = np.maximum(ins[0], ins[1])
        elif n == 'arith.index_cast': res = ins[0].astype(np.int64)
        elif n == 'arith.truncf':
            res = ins[0].astype(np.float16)
        elif n == 'arith.extf': res = ins[0].astype(np.float32)
        elif n == 'arith.select' and isinstance(ins[1], (str, np.ndarray)) and (
                isinstance(ins[1], str) or ins[1].dtype.kind == 'U'):
            # memref operands (global buffer names): a per-lane choice of buffer
            res = np.where(ins[0], np.broadcast_to(np.asarray(ins[1]), (NL,)), np.broadcast_to(np.asarray(ins[2]), (NL,)))
        elif n == 'arith.select':
            c = ins[0]
            if ins[1].ndim > 1: c = c.reshape((NL,) + (1,) * (ins[1].ndim - 1))
            res = np.where(c, ins[1], ins[2]).astype(ins[1].dtype)
        elif n == 'arith.cmpi':
            p = int(re.search(r'predicate = (\d+)', rest).group(1)); res = PRED_I[p](ins[0], ins[1])
        elif n == 'arith.cmpf':
            p = int(re.search(r'predicate = (\d+)', rest).group(1)); res = PRED_F[p](ins[0], ins[1])
        elif n == 'math.exp':
            with np.errstate(all='ignore'): res = np.exp(ins[0]).astype(ins[0].dtype)
        elif n == 'math.log':
            with np.errstate(all='ignore'): res = np.log(ins[0]).astype(ins[0].dtype)
        elif n == 'math.fma': res = (ins[0] * ins[1] + ins[2]).astype(ins[0].dtype)
        elif n == 'gpu.block_id':
            d = 'xyz'.index(re.search(r'dim (\w)', rest).group(1)); res = np.full(NL, self.bid[d], dtype=np.int64)
        elif n == 'gpu.grid_dim':
            d = 'xyz'.index(re.search(r'dim (\w)', rest).group(1)); res = np.full(NL, self.grid[d], dtype=np.int64)
        elif n == 'gpu.thread_id':
            res = np.arange(NL, dtype=np.int64)
        elif n == 'gpu.barrier': pass
        elif n == 'memref.get_global':
            res = ('smem', re.search(r'name = @(\w+)', rest).group(1))
        elif n == 'gpu.dynamic_shared_memory':
            assert self.dyn_bytes > 0, 'gpu.dynamic_shared_memory in a kernel without swz.dynamic_smem'
            self.dyn = np.zeros(self.dyn_bytes, dtype=np.uint8)  # the workgroup's window
            res = ('dyn',)
        elif n == 'memref.extract_aligned_pointer_as_index' and ins[0] == ('dyn',):
            res = np.full(NL, self.DYN_BASE, dtype=np.int64)
        elif n == 'memref.view':
            # A typed tile at a byte shift of the dynamic window: a numpy view of its bytes,
            # so tiles that overlap alias (and a view past the window raises).
            assert ins[0] == ('dyn',), 'memref.view of something other than the dynamic window'
            shift = ins[1][mask] if mask.any() else ins[1][:1]
            assert (shift == shift[0]).all(), 'memref.view with a per-lane shift'
            off = int(shift[0])
            m = re.search(r'-> memref<(\d+)x?(\d*)x(f16|f32)', rest)
            shape = tuple(int(x) for x in (m.group(1), m.group(2)) if x)
            dt = {'f16': np.float16, 'f32': np.float32}[m.group(3)]
            nbytes = int(np.prod(shape)) * np.dtype(dt).itemsize
            assert 0 <= off and off + nbytes <= self.dyn_bytes, \
                f'memref.view of {nbytes} bytes at {off} outside the {self.dyn_bytes}-byte window'
            assert (self.DYN_BASE + off) % np.dtype(dt).itemsize == 0
            name = f'<dynamic+{off}>'
            self.smem[name] = self.dyn[off:off + nbytes].view(dt).reshape(shape)
            self.smem_defs[name] = (shape, m.group(3))
            res = ('smem', name)
        elif n in ('memref.load', 'memref.store') and isinstance(ins[0 if n == 'memref.load' else 1], np.ndarray) \
                and ins[0 if n == 'memref.load' else 1].dtype.kind == 'U':
            # a buffer chosen per lane (arith.select of memrefs): one access per buffer
            k = 0 if n == 'memref.load' else 1
            refs = ins[k]
            for name in np.unique(refs[mask]):
                sub = mask & (refs == name)
                op_ins = list(ins); op_ins[k] = str(name)
                r = self.access(n, op_ins, sub)
                if n == 'memref.load':
                    res = r if res is None else np.where(sub.reshape((NL,) + (1,) * (r.ndim - 1)), r, res)
            if n == 'memref.load' and res is None:
                res = np.zeros(NL, dtype=np.float32)
        elif n in ('memref.load', 'memref.store'):
            res = self.access(n, ins, mask)
        elif n == 'vector.extract':
            p = [int(x) for x in re.search(r'static_position = array<i64: ([\d, ]+)>', rest).group(1).split(',')]
            res = ins[0][(slice(None),) + tuple(p)]
            if res.ndim > 1: res = res.copy()
        elif n == 'vector.insert':
            p = [int(x) for x in re.search(r'static_position = array<i64: ([\d, ]+)>', rest).group(1).split(',')]
            res = ins[1].copy(); res[(slice(None),) + tuple(p)] = ins[0]
        elif n == 'vector.shuffle':
            # (lanes, a) and (lanes, b): the result picks from their concatenation
            idx = [int(x) for x in re.search(r'mask = (?:array<i64: )?\[?([\d, ]+)', rest).group(1).split(',')]
            res = np.concatenate([ins[0], ins[1].astype(ins[0].dtype)], axis=1)[:, idx]
        elif n == 'vector.shape_cast':
            dims = [int(d) for d in re.search(r'vector<([\dx]+)x(?:f16|f32|i32)>', rtype(rest)).group(1).split('x')]
            res = ins[0].reshape((NL,) + tuple(dims))
        elif n == 'vector.bitcast' and 'vector<16xi8>' in rtype(rest):
            # vector<4xi32> to vector<16xi8>: little-endian bytes, signed (int64 lanes)
            res = np.ascontiguousarray((ins[0] & 0xFFFFFFFF).astype(np.uint32)).view(np.int8).reshape(NL, 16).astype(np.int64)
        elif n == 'vector.bitcast':
            # vector<4xi32> (held as int64 lanes) to vector<8xf16>: little-endian halves
            assert 'vector<8xf16>' in rtype(rest), rest
            res = np.ascontiguousarray((ins[0] & 0xFFFFFFFF).astype(np.uint32)).view(np.float16).reshape(NL, 8)
        elif n == 'gpu.shuffle':
            # shfl.sync with a full mask: every lane of a warp that shuffles must take part
            # (warps may differ: a loop or branch that is uniform within each warp).
            w = mask.reshape(-1, 32)
            assert (w.all(axis=1) | ~w.any(axis=1)).all(), 'gpu.shuffle in a partly active warp'
            x, off = ins[0], ins[1]
            lane = np.arange(NL); src = (lane & ~31) | ((lane & 31) ^ off)
            res = [x[src], np.ones(NL, bool)]
        elif n == 'nvgpu.ldmatrix':
            res = self.ldmatrix(ins[0], ins[1], ins[2], rest, mask)
        elif n == 'nvgpu.mma.sync':
            res = self.mma(ins[0], ins[1], ins[2], mask)
        elif n == 'memref.dim':
            ref, axis = ins
            res = np.full(NL, self.dims[ref][int(axis[0])], dtype=np.int64)
        elif n == 'nvgpu.device_async_copy':
            dst, di0, di1, src = ins[:4]
            nel = ins[-1]
            sidx = ins[4:-1]  # the source index (1-D or a 2-D row-major global memref)
            si = sidx[0] if len(sidx) == 1 else sidx[0] * self.dims[src][1] + sidx[1]
            arr, _ = self.addr(dst, [di0, di1], mask)
            s_arr = self.buf[src]
            for l in np.nonzero(mask)[0]:
                d0 = self.flat2(dst, di0[l], di1[l])
                k = int(nel[l])
                chunk = np.zeros(8, dtype=arr.dtype)
                if k:
                    assert 0 <= si[l] and si[l] + 8 <= len(s_arr), ("cp.async OOB", si[l])
                    chunk[:k] = s_arr[si[l]:si[l] + k]
                arr[d0:d0 + 8] = chunk
            res = None
        elif n in ('nvgpu.device_async_create_group', 'nvgpu.device_async_wait'): res = None
        elif n == 'scf.yield' or n == 'gpu.return':
            return ins
        elif n == 'scf.if':
            c = ins[0]
            t = e_ = None
            if (mask & c).any():
                t = self.exec_block(op.regions[0][0], env, mask & c)
            has_else = len(op.regions) > 1 and op.regions[1] and op.regions[1][0].ops
            if has_else and (mask & ~c).any():
                e_ = self.exec_block(op.regions[1][0], env, mask & ~c)
            if op.nres:
                outs = []
                for i in range(op.nres):
                    a = t[i] if t is not None else e_[i]
                    b = e_[i] if e_ is not None else a
                    cc = c.reshape((NL,) + (1,) * (np.ndim(a) - 1)) if np.ndim(a) > 1 else c
                    outs.append(np.where(cc, a, b))
                res = outs
        elif n == 'scf.for':
            lb, ub, st = [self.v(env, x) for x in op.operands[:3]]
            inits = [self.v(env, x) for x in op.operands[3:]]
            body = op.regions[0][0]
            iv = lb.copy(); vals = [x.copy() for x in inits]
            while True:
                act = mask & (iv < ub)
                if not act.any(): break
                benv = dict(env); benv[body.args[0]] = iv
                for a, x in zip(body.args[1:], vals): benv[a] = x
                y = self.exec_block(body, benv, act)
                for i in range(len(vals)):
                    c = act.reshape((NL,) + (1,) * (vals[i].ndim - 1))
                    vals[i] = np.where(c, y[i], vals[i]).astype(vals[i].dtype)
                iv = np.where(act, iv + st, iv)
            res = vals if op.nres else None
        else:
            raise NotImplementedError(n)
        if n.startswith('arith.') and isinstance(res, np.ndarray) and res.dtype == np.int64 and rtype(rest) == 'i32':
            res = ((res + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
        if op.res:
            if op.nres > 1 or n in ('scf.for', 'scf.if') or isinstance(res, list):
                env[op.res] = res if isinstance(res, list) else [res]
                if op.nres == 1 and n not in ('scf.for', 'scf.if'):
                    env[op.res] = res[0] if isinstance(res, list) else res
                elif op.nres == 1:
                    env[op.res] = res[0]
            else:
                env[op.res] = res
        return None

    def access(self, n, ins, mask):
        """memref.load (returns the lanes' values) or memref.store on one named buffer."""
        if n == 'memref.load':
            arr, flat = self.addr(ins[0], ins[1:], mask)
            r = arr[np.where(mask, flat, 0)]
            return r.astype(np.int64) if arr.dtype == np.int32 else r
        val, ref, idx = ins[0], ins[1], ins[2:]
        arr, flat = self.addr(ref, idx, mask)
        arr[flat[mask]] = val[mask]
        return None

    def flat2(self, ref, i0, i1):
        shape = self.smem_defs[ref[1]][0]
        return int(i0) * shape[1] + int(i1)

    def addr(self, ref, idx, mask):
        if isinstance(ref, tuple):
            arr = self.smem[ref[1]]
            shape = self.smem_defs[ref[1]][0]
            if len(idx) == 2:
                flat = idx[0] * shape[1] + idx[1]
                if mask.any():
                    assert (idx[1][mask] < shape[1]).all() and (idx[0][mask] < shape[0]).all(), "smem OOB"
            else:
                flat = idx[0]
            arr = arr.reshape(-1)
        else:
            arr = self.buf[ref]; flat = idx[0]
            if len(idx) == 2:  # a 2-D global memref, row-major
                rows, cols = self.dims[ref]
                if mask.any():
                    assert (idx[1][mask] < cols).all() and (idx[0][mask] < rows).all(), ("global OOB", ref)
                flat = idx[0] * cols + idx[1]
        if mask.any():
            fm = flat[mask]
            assert (fm >= 0).all() and (fm < len(arr)).all(), ("OOB", ref if not isinstance(ref, tuple) else ref[1], fm.min(), fm.max(), len(arr))
        return arr, flat

    def ldmatrix(self, ref, i0, i1, rest, mask):
        assert mask.all(), "ldmatrix in divergent code"
        ntiles = int(re.search(r'numTiles = (\d+)', rest).group(1))
        trans = 'transpose = true' in rest
        arr = self.smem[ref[1]].reshape(-1)
        cols = self.smem_defs[ref[1]][0][1]
        base = (i0 * cols + i1).reshape(-1, 32)                  # [warp][lane]
        rows = base[:, :8 * ntiles].reshape(-1, ntiles, 8)      # lanes 8m..8m+7: rows of matrix m
        assert (rows >= 0).all() and (rows + 8 <= arr.size).all(), "ldmatrix OOB"
        M = arr[rows[..., None] + np.arange(8)]                 # [warp][m][row][col]
        if trans:
            M = M.swapaxes(-1, -2)
        t = np.arange(32)
        out = M[:, :, t // 4, :][..., (2 * (t % 4))[:, None] + np.arange(2)[None, :]]
        # out: [warp][m][t][t'][j] -> take t' == t
        out = out[:, :, t, t, :]                                 # [warp][m][t][j]
        return out.transpose(0, 2, 1, 3).reshape(NL, ntiles, 2).astype(np.float16)

    def mma(self, a, b, c, mask):
        # mma.sync is warp-wide: a warp takes part whole or not at all (warps may differ:
        # a loop whose trip count is uniform within each warp); the lanes of warps not
        # taking part compute on whatever they hold, and their results are not used.
        w = mask.reshape(-1, 32)
        assert (w.all(axis=1) | ~w.any(axis=1)).all(), "mma.sync in a partly active warp"
        W = NL // 32
        if a.shape[1:] == (4, 4):  # m16n8k32, s8 x s8 -> s32 (exact; int64 lanes)
            a, b, c = (x.reshape(W, 32, *x.shape[1:]).astype(np.int64) for x in (a, b, c))
            t = np.arange(32); g, q = t // 4, t % 4
            A = np.zeros((W, 16, 32), np.int64); B = np.zeros((W, 32, 8), np.int64); C = np.zeros((W, 16, 8), np.int64)
            for k in range(4):  # a0: (g, 4q + i), a1: (g + 8, 4q + i), a2: (g, 16 + 4q + i), a3: (g + 8, ..)
                for i in range(4):
                    A[:, g + 8 * (k % 2), 4 * q + i + 16 * (k // 2)] = a[:, :, k, i]
            for k in range(2):  # b0: (4q + i, g), b1: (16 + 4q + i, g); C as for f16
                for i in range(4):
                    B[:, 4 * q + i + 16 * k, g] = b[:, :, k, i]
                for j in range(2):
                    C[:, g + 8 * k, 2 * q + j] = c[:, :, k, j]
            D = A @ B + C
            out = np.zeros((W, 32, 2, 2), np.int64)
            for i in range(2):
                for j in range(2):
                    out[:, :, i, j] = D[:, g + 8 * i, 2 * q + j]
            return out.reshape(NL, 2, 2)
        a, b, c = (x.reshape(W, 32, *x.shape[1:]).astype(np.float64) for x in (a, b, c))
        t = np.arange(32); g, q = t // 4, t % 4
        A = np.zeros((W, 16, 16)); B = np.zeros((W, 16, 8)); C = np.zeros((W, 16, 8))
        for k in range(4):
            for j in range(2):
                A[:, g + 8 * (k % 2), 2 * q + j + 8 * (k // 2)] = a[:, :, k, j]
        for k in range(2):
            for j in range(2):
                B[:, 2 * q + j + 8 * k, g] = b[:, :, k, j]
                C[:, g + 8 * k, 2 * q + j] = c[:, :, k, j]
        D = A @ B + C
        out = np.zeros((W, 32, 2, 2))
        for i in range(2):
            for j in range(2):
                out[:, :, i, j] = D[:, g + 8 * i, 2 * q + j]
        return out.reshape(NL, 2, 2).astype(np.float32)


def run_case_dir(ir_path, case_dir):
    """Runs the case written by `swz-case-io dump` in case_dir (meta.txt, buf<i>.bin) on
    the kernel in ir_path and writes out<i>.bin (the final buffer contents)."""
    ops = parse(open(ir_path).read().splitlines())
    funcs, smem = find_funcs(ops, {}), find_globals(ops, {})
    meta = open(case_dir + '/meta.txt').read().split('\n')
    _module, entry = meta[0].split()
    grid = tuple(int(x) for x in meta[1].split())
    fn = funcs[entry]
    # Threads per workgroup: the kernel's known_block_size (x only).
    globals()['NL'] = int(re.search(r'known_block_size = array<i32: (\d+), 1, 1>', fn.rest).group(1))
    types = [t.strip() for t in split_top(re.search(r'function_type = \((.*?)\) ->', fn.rest).group(1))]
    bufs, args, elem, dims = {}, [], {}, {}
    for line in meta[2:]:
        p = line.split()
        if not p:
            continue
        if p[0] == 'block':
            # The case's launch must be the kernel's: a case runner launching another
            # block size would fail on the GPU only.
            assert (int(p[1]), int(p[2]), int(p[3])) == (NL, 1, 1), \
                f'{entry}: the case launches block {p[1:]}, the kernel is built for {NL} threads'
            continue
        if p[0] == 'buffer':
            elem[int(p[1])] = int(p[2])
            dims['buf' + p[1]] = [int(x) for x in p[3:]]
        elif p[1] == 'm':
            args.append('buf' + p[2])
        elif p[1] == 'i':
            args.append(np.full(NL, int(p[2]), dtype=np.int64))
        else:
            args.append(np.full(NL, np.float32(float(p[2])), dtype=np.float32))
    for b, e in elem.items():
        raw = open(f'{case_dir}/buf{b}.bin', 'rb').read()
        bufs['buf%d' % b] = np.frombuffer(raw, dtype={1: np.int8, 2: np.float16, 4: np.float32, 16: np.float32}[e]).copy()
    for a, t in zip(args, types):
        if not isinstance(a, str):
            continue
        if 'vector<4xf16>' in t:  # 8-byte elements: rows of 4 halves
            bufs[a] = bufs[a].view(np.float16).reshape(-1, 4)
        elif 'vector<4x' in t:  # 16-byte elements: rows of 4 lanes
            bufs[a] = bufs[a].view(np.int32 if 'vector<4xi32>' in t else np.float32).reshape(-1, 4)
        elif 'vector<2xi32>' in t:  # 8-byte elements: rows of 2
            bufs[a] = bufs[a].view(np.int32).reshape(-1, 2)
        elif 'xi32' in t:
            bufs[a] = bufs[a].view(np.int32)
    with np.errstate(all='ignore'):
        Machine(bufs, smem, dims).run(fn, args, grid)
    for b in elem:
        open(f'{case_dir}/out{b}.bin', 'wb').write(bufs['buf%d' % b].tobytes())


if __name__ == '__main__':
    if len(sys.argv) < 3:
        sys.exit('usage: simt_interp.py KERNEL_GENERIC_IR CASE_DIR...')
    for d in sys.argv[2:]:
        run_case_dir(sys.argv[1], d)
