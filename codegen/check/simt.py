#!/usr/bin/env python3
"""simt.py: runs a tensor-core kernel's MLIR on the CPU, thread by thread, to check its
indexing, pipeline stages, swizzle and edge handling where no GPU is available.

Input: the kernel after swz-materialize-swizzle, printed in generic form
(swizzle-opt K.mlir -swz-materialize-swizzle -mlir-print-op-generic). The interpreter
executes the ops these kernels use (arith, scf, memref, vector, gpu ids/barrier,
nvgpu.device_async_copy / ldmatrix / mma.sync) for every thread of a block in lockstep:
each thread is a generator that stops at gpu.barrier and at the warp-collective
ldmatrix and mma.sync, whose results are formed from all 32 lanes as the PTX ISA
defines them (PTX ISA 8.5, "Warp-level matrix load instruction: ldmatrix" and
"Matrix fragments for mma.m16n8k16 with floating point type": lane t = 4 g + c holds
A[g][2c..2c+1], A[g+8][2c..], A[g][2c+8..], A[g+8][2c+8..]; B[2c..2c+1][g],
B[2c+8..][g]; C[g][2c..], C[g+8][2c..]; ldmatrix gives lane t row t/4, elements
2(t%4), 2(t%4)+1 of each 8x8 matrix, whose row addresses lanes 8i..8i+7 supply).
cp.async copies at once (src-size < cp-size zero-fills); shared memory starts as NaN.

  simt.py GENERIC.mlir gemm_f16 T N K [--bias]

Compares y with a float64 reference of the same f16 inputs (|err| <= (K+1) 2^-23
sum|x w|, the bound of codegen/check/cases_gemm.cpp); exit 0 if all within, 1 if not.
"""
import re, sys
import numpy as np

OPRE = re.compile(r'^\s*(?:(%[\w]+)(?::(\d+))? = )?"([\w.]+)"\(([^)]*)\)(.*)$')

class Op:
    def __init__(s, res, nres, name, operands, rest):
        s.res, s.nres, s.name, s.operands, s.rest = res, nres, name, operands, rest
        s.regions = []

class Block:
    def __init__(s):
        s.args, s.ops = [], []

def parse(lines):
    root = Block()
    stack = [(None, root)]  # (op, current block)
    for line in lines:
        t = line.strip()
        if not t or t.startswith('//'):
            continue
        if t.startswith('^bb'):
            args = re.findall(r'(%[\w]+):', t)
            stack[-1][1].args = args
            continue
        if t.startswith('}, {'):
            op = stack[-1][0]
            b = Block(); op.regions.append(b)
            stack[-1] = (op, b)
            continue
        if t.startswith('})'):
            stack.pop()
            continue
        m = OPRE.match(line)
        if not m:
            if t == '}':
                continue
            raise SystemExit('cannot parse: ' + line)
        res, nres, name, ops, rest = m.groups()
        operands = [o.strip() for o in ops.split(',') if o.strip()]
        op = Op(res, int(nres) if nres else (1 if res else 0), name, operands, rest)
        stack[-1][1].ops.append(op)
        if rest.rstrip().endswith('({'):
            b = Block(); op.regions.append(b)
            stack.append((op, b))
    return root

def attr(op, key):
    m = re.search(key + r' = ([^,}>]+)', op.rest)
    return m.group(1).strip() if m else None

CMP = {0: lambda a, b: a == b, 1: lambda a, b: a != b, 2: lambda a, b: a < b, 3: lambda a, b: a <= b,
       4: lambda a, b: a > b, 5: lambda a, b: a >= b, 6: lambda a, b: a < b, 7: lambda a, b: a <= b,
       8: lambda a, b: a > b, 9: lambda a, b: a >= b}

class Mem:
    def __init__(s, arr):
        s.a = arr

def run_block(block, env, ctx, args=()):
    for n, v in zip(block.args, args):
        env[n] = v
    for op in block.ops:
        r = yield from run_op(op, env, ctx)
        if op.name == 'scf.yield':
            return r
        if op.nres == 1:
            env[op.res] = r
        elif op.nres > 1:
            for i, v in enumerate(r):
                env['%s#%d' % (op.res, i)] = v
    return None

def val(env, o):
    return env[o]

def run_op(op, env, ctx):
    n = op.name
    a = [val(env, o) for o in op.operands] if n not in ('scf.for',) else None
    if n == 'arith.constant':
        v = attr(op, 'value')
        if 'dense<' in op.rest:
            shape = re.search(r': vector<([\dx]+)x(f\d+)>', op.rest)
            dims = [int(x) for x in shape.group(1).split('x')]
            dt = np.float16 if shape.group(2) == 'f16' else np.float32
            fv = float(re.search(r'dense<([^>]+)>', op.rest).group(1))
            return np.full(dims, fv, dtype=dt)
        if 'f32' in v or 'f16' in v or 'e+' in v or 'e-' in v:
            return np.float32(float(v.split(':')[0]))
        return int(v.split(':')[0])
    if n == 'arith.addi': return a[0] + a[1]
    if n == 'arith.subi': return a[0] - a[1]
    if n == 'arith.muli': return a[0] * a[1]
    if n == 'arith.divui': return a[0] // a[1]
    if n == 'arith.remui': return a[0] % a[1]
    if n == 'arith.minui': return min(a[0], a[1])
    if n == 'arith.andi': return a[0] & a[1] if not isinstance(a[0], bool) else (a[0] and a[1])
    if n == 'arith.ori': return a[0] | a[1]
    if n == 'arith.xori': return a[0] ^ a[1]
    if n == 'arith.shrui': return a[0] >> a[1]
    if n == 'arith.shli': return a[0] << a[1]
    if n == 'arith.index_cast': return int(a[0])
    if n == 'arith.select': return a[1] if a[0] else a[2]
    if n == 'arith.cmpi':
        assert a[0] >= 0 and a[1] >= 0 or int(attr(op, 'predicate').split(':')[0]) in (0, 1)
        return bool(CMP[int(attr(op, 'predicate').split(':')[0])](a[0], a[1]))
    if n == 'arith.addf': return np.float32(np.float32(a[0]) + np.float32(a[1]))
    if n == 'arith.mulf': return np.float32(np.float32(a[0]) * np.float32(a[1]))
    if n == 'arith.extui':
        return int(a[0]) & (0xFF if '(i8)' in op.rest else 0xFFFF)
    if n == 'arith.sitofp':
        v = int(a[0])
        if '(i8)' in op.rest and v > 127: v -= 256
        return np.float32(v)
    if n == 'arith.uitofp': return np.float32(int(a[0]))
    if n == 'arith.bitcast':
        return np.array([a[0]], dtype=np.uint16).view(np.float16)[0]
    if n == 'arith.extf': return np.float32(a[0])
    if n == 'arith.truncf': return np.float16(a[0])
    if n == 'gpu.thread_id': return ctx['tid']
    if n == 'gpu.block_id': return ctx['bx'] if 'dim x' in op.rest else ctx['by']
    if n == 'memref.get_global': return ctx['globals'][re.search(r'name = @(\w+)', op.rest).group(1)]
    if n == 'memref.dim': return a[0].a.shape[a[1]]
    if n == 'memref.load':
        return a[0].a[tuple(a[1:])]
    if n == 'memref.store':
        a[1].a[tuple(a[2:])] = a[0]
        return None
    if n == 'vector.store':
        v, m, r, c = a
        m.a[r, c:c + len(v)] = v
        return None
    if n == 'vector.extract':
        pos = [int(x) for x in re.search(r'static_position = array<i64: ([\d, ]+)>', op.rest).group(1).split(',')]
        v = a[0]
        for p in pos: v = v[p]
        return v.copy() if isinstance(v, np.ndarray) else v
    if n == 'vector.insert':
        pos = [int(x) for x in re.search(r'static_position = array<i64: ([\d, ]+)>', op.rest).group(1).split(',')]
        v = a[1].copy()
        v[tuple(pos)] = a[0]
        return v
    if n == 'nvgpu.device_async_copy':
        seg = [int(x) for x in re.search(r'operandSegmentSizes = array<i32: ([\d, ]+)>', op.rest).group(1).split(',')]
        dst, dr, dc, src, sr, sc = a[0], a[1], a[2], a[3], a[4], a[5]
        cnt = int(attr(op, 'dstElements').split(':')[0])
        srcn = a[6] if seg[4] else cnt
        data = np.zeros(cnt, dtype=dst.a.dtype)
        if srcn:
            data[:srcn] = src.a[sr, sc:sc + srcn]
        dst.a[dr, dc:dc + cnt] = data
        return 'token'
    if n in ('nvgpu.device_async_create_group',):
        return 'group'
    if n == 'nvgpu.device_async_wait':
        return None
    if n == 'gpu.barrier':
        yield ('bar',)
        return None
    if n == 'nvgpu.ldmatrix':
        assert 'transpose = false' in op.rest
        nt = int(attr(op, 'numTiles').split(':')[0])
        r = yield ('ldm', a[0], a[1], a[2], nt)
        return r
    if n == 'nvgpu.mma.sync':
        r = yield ('mma', a[0], a[1], a[2])
        return r
    if n == 'scf.yield':
        return [val(env, o) for o in op.operands]
    if n == 'scf.if':
        c = val(env, op.operands[0])
        reg = op.regions[0] if c else (op.regions[1] if len(op.regions) > 1 else None)
        if reg is None or not reg.ops:
            return None
        r = yield from run_block(reg, env, ctx)
        if op.nres == 1: return r[0]
        return r
    if n == 'scf.for':
        ops = [val(env, o) for o in op.operands]
        lb, ub, st, inits = ops[0], ops[1], ops[2], ops[3:]
        cur = list(inits)
        i = lb
        while i < ub:
            r = yield from run_block(op.regions[0], env, ctx, [i] + cur)
            cur = r if r else []
            i += st
        if op.nres == 1: return cur[0]
        return cur
    if n == 'gpu.return':
        return None
    raise SystemExit('unknown op ' + n)

def run_kernel(func, globals_spec, args, grid, block):
    body = func.regions[0]
    for by in range(grid[1]):
        for bx in range(grid[0]):
            gl = {k: Mem(np.full(shape, np.float16(np.nan), dtype=dt)) for k, (shape, dt) in globals_spec.items()}
            gens, sends = [], []
            for tid in range(block):
                ctx = {'tid': tid, 'bx': bx, 'by': by, 'globals': gl}
                env = {}
                gens.append(run_block(body, env, ctx, args))
                sends.append(None)
            alive = True
            while alive:
                reqs = []
                for t, g in enumerate(gens):
                    try:
                        reqs.append(g.send(sends[t]))
                    except StopIteration:
                        reqs.append(('done',))
                kinds = set(r[0] for r in reqs)
                assert len(kinds) == 1, kinds
                k = kinds.pop()
                if k == 'done':
                    alive = False
                    break
                sends = [None] * block
                if k == 'bar':
                    continue
                for w in range(block // 32):
                    lanes = reqs[32 * w:32 * w + 32]
                    if k == 'ldm':
                        nt = lanes[0][4]
                        for t in range(32):
                            out = np.zeros((nt, 2), dtype=np.float16)
                            for i in range(nt):
                                m, r, c = lanes[8 * i + t // 4][1:4]
                                out[i] = m.a[r, c + 2 * (t % 4): c + 2 * (t % 4) + 2]
                            sends[32 * w + t] = out
                    else:
                        A = np.zeros((16, 16)); B = np.zeros((16, 8)); C = np.zeros((16, 8))
                        for t in range(32):
                            g, c = t // 4, t % 4
                            fa, fb, fc = lanes[t][1:4]
                            A[g, 2 * c:2 * c + 2] = fa[0]; A[g + 8, 2 * c:2 * c + 2] = fa[1]
                            A[g, 2 * c + 8:2 * c + 10] = fa[2]; A[g + 8, 2 * c + 8:2 * c + 10] = fa[3]
                            B[2 * c:2 * c + 2, g] = fb[0]; B[2 * c + 8:2 * c + 10, g] = fb[1]
                            C[g, 2 * c:2 * c + 2] = fc[0]; C[g + 8, 2 * c:2 * c + 2] = fc[1]
                        D = (A @ B + C).astype(np.float32)
                        for t in range(32):
                            g, c = t // 4, t % 4
                            sends[32 * w + t] = np.array([D[g, 2 * c:2 * c + 2], D[g + 8, 2 * c:2 * c + 2]], dtype=np.float32)

def load(path):
    lines = open(path).read().split('\n')
    root = parse(lines)
    funcs = []
    def walk(b):
        for op in b.ops:
            if op.name == 'gpu.func':
                funcs.append(op)
            for r in op.regions:
                walk(r)
    walk(root)
    return funcs[0]

def main():
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument('mlir')
    p.add_argument('kernel', choices=['gemm_f16'])
    p.add_argument('T', type=int)
    p.add_argument('N', type=int)
    p.add_argument('K', type=int)
    p.add_argument('--bias', action='store_true')
    o = p.parse_args()
    T, N, K = o.T, o.N, o.K
    func = load(o.mlir)
    rng = np.random.default_rng(T * 1000003 + N * 1009 + K)
    x = rng.uniform(-1, 1, (T, K)).astype(np.float16)
    y = np.full((T, N), np.nan, dtype=np.float32)
    bias = rng.uniform(-1, 1, N).astype(np.float32)
    gs = {'gemm_x': ((192, 64), np.float16), 'gemm_w': ((192, 64), np.float16)}
    w = rng.uniform(-1, 1, (N, K)).astype(np.float16)
    wref = w.astype(np.float64)
    args = [Mem(x), Mem(w), Mem(y), Mem(bias), 1 if o.bias else 0]
    run_kernel(func, gs, args, ((N + 63) // 64, (T + 63) // 64), 128)
    xd = x.astype(np.float64)
    ref = xd @ wref.T + (bias.astype(np.float64) if o.bias else 0)
    bound = (K + 1) * 2.0 ** -23 * (np.abs(xd) @ np.abs(wref).T + (np.abs(bias) if o.bias else 0)) + 1e-30
    err = np.abs(y.astype(np.float64) - ref)
    bad = int((~(err <= bound)).sum())
    print('%s T=%d N=%d K=%d%s: max |err| %.3g, %d of %d outside (K+1) 2^-23 sum|x w|'
          % (o.kernel, T, N, K, ' +bias' if o.bias else '', np.nanmax(err), bad, T * N))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
