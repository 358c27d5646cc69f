"""The table of bench/gpu_speed.sh: reads the logs of `run time` in OUT, writes
OUT/speed.json and prints a Markdown table.

    python3 gpu_speed_table.py OUT PACKAGE_DIR COMMIT MODEL...
    python3 gpu_speed_table.py --ncu NCU.csv [MARKER]  (the top-kernel table of `run ncu`)

Rows: per model pp512, tg128, pp8192, edit256 (prompt lookup on and off: decode tok/s,
acceptance) and aggregate decode at 1..32 sequences (tok/s
medians of both engines, their ratio), tg128 with launch graphs off (ours only), and
each row's roofline fraction: a decode row's weight bytes per token (every tensor but
the token embedding, which decode gathers one row of; the embedding when it is also the
LM head) over the measured copy bandwidth; a prefill row's FLOPs (2 x matmul weights
per token, LM head for the last token only, plus causal attention) over the measured
f16 tensor-core peak.
"""
import json
import os
import statistics
import subprocess
import sys


def last_json(path):
    try:
        with open(path) as f:
            lines = [l for l in f.read().splitlines() if l.startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except OSError:
        return None


def model_costs(gguf_path):
    """(weight bytes read per decoded token, matmul weight elements per prompt token,
    attention FLOPs per token per context position)."""
    import gguf  # the carried wheel

    r = gguf.GGUFReader(gguf_path)
    tensors = {t.name: t for t in r.tensors}
    tied = "output.weight" not in tensors
    decode_bytes = 0
    prefill_elems = 0
    for name, t in tensors.items():
        if name == "token_embd.weight":
            if tied:
                decode_bytes += int(t.n_bytes)
            continue
        decode_bytes += int(t.n_bytes)
        if len(t.shape) == 2 and name != "output.weight":
            prefill_elems += int(t.n_elements)
    arch = str(bytes(r.fields["general.architecture"].parts[-1]), "utf-8")

    def kv(key):
        f = r.fields[f"{arch}.{key}"]
        return int(f.parts[-1][0])

    n_layer, n_head = kv("block_count"), kv("attention.head_count")
    head_dim = kv("attention.key_length") if f"{arch}.attention.key_length" in r.fields else kv("embedding_length") // n_head
    # QK^T and PV: 2 x 2 x head_dim FLOPs per head per (token, earlier position).
    attn_per_pos = 4 * n_layer * n_head * head_dim
    return decode_bytes, prefill_elems, attn_per_pos


def ncu_table(path, marker=None):
    """Per kernel and grid over the profiled launches, per decoded token: launches, time
    and share, DRAM read bandwidth, DRAM throughput (% of peak), registers, achieved
    occupancy. `marker`: a substring of the name of a kernel that runs once a token
    (launches of it with consecutive ids count once: llama.cpp's two get_rows); only the
    launches from the first marker to the last count, as (markers - 1) tokens. None: all
    the launches are one token."""
    import collections
    import csv

    with open(path) as f:
        rows = list(csv.reader(l for l in f if l.startswith('"')))
    if not rows:
        print(f"no ncu rows in {path}")
        return
    h = rows[0]
    ki, ii, mi, vi = h.index("Kernel Name"), h.index("ID"), h.index("Metric Name"), h.index("Metric Value")
    gi = h.index("Grid Size") if "Grid Size" in h else None
    per = collections.defaultdict(dict)  # launch id -> metric -> value
    meta = {}  # launch id -> (kernel, grid)
    for r in rows[1:]:
        lid = int(r[ii])
        meta[lid] = (r[ki].split("(")[0][:48], r[gi] if gi is not None else "")
        try:
            per[lid][r[mi]] = float(r[vi].replace(",", ""))
        except ValueError:
            pass
    ids = sorted(meta)
    lo, hi, tokens = ids[0], ids[-1] + 1, 1
    if marker:
        starts = [i for i in ids if marker in meta[i][0] and not (i - 1 in meta and marker in meta[i - 1][0])]
        if len(starts) >= 2:
            lo, hi, tokens = starts[0], starts[-1], len(starts) - 1
    agg = collections.defaultdict(lambda: collections.defaultdict(float))
    for lid in ids:
        if not lo <= lid < hi:
            continue
        m = per[lid]
        a = agg[meta[lid]]
        a["n"] += 1
        a["ns"] += m.get("gpu__time_duration.sum", 0)
        a["bytes"] += m.get("dram__bytes_read.sum", 0)
        a["dram_pct"] += m.get("dram__throughput.avg.pct_of_peak_sustained_elapsed", 0)
        a["occ"] += m.get("sm__warps_active.avg.pct_of_peak_sustained_active", 0)
        a["regs"] = m.get("launch__registers_per_thread", 0)
    total = sum(a["ns"] for a in agg.values())
    n_all = sum(int(a["n"]) for a in agg.values())
    print(f"{path}: {n_all} launches over {tokens} token(s): "
          f"{n_all / tokens:.0f} launches and {total / 1e3 / tokens:.1f} us of kernel time a token")
    print("| kernel | grid | launches a token | us a token | share | mean us | DRAM read GB/s | DRAM throughput | registers | occupancy |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (k, g), a in sorted(agg.items(), key=lambda kv: -kv[1]["ns"]):
        n = a["n"]
        print(f"| {k} | {g} | {n / tokens:.1f} | {a['ns'] / 1e3 / tokens:.1f} | {100 * a['ns'] / total:.1f}% | "
              f"{a['ns'] / n / 1e3:.2f} | {a['bytes'] / a['ns']:.0f} | {a['dram_pct'] / n:.0f}% | "
              f"{int(a['regs'])} | {a['occ'] / n:.0f}% |")


def edit256(out, m, spec):
    """edit256 decode tok/s, medians over the repetitions, as each engine reports them:
    swizzle-rt run's "generated: N tokens in T ms" and llama-lookup's "decoded N tokens in
    T seconds" (both from the first generated token to the last), plus drafted/accepted
    counts and whether our output is the same with speculation on and off. None when no
    repetition of ours ran."""
    import glob
    import re

    def ours(v):
        runs = []
        for log in sorted(glob.glob(os.path.join(out, f"swz-{m}-edit256-{v}-*.log"))):
            t = open(log).read()
            g = re.search(r"generated: (\d+) tokens in ([\d.]+) ms", t)
            d = re.search(r"drafted (\d+), accepted (\d+)", t)
            if g and float(g.group(2)) > 0:
                runs.append((int(g.group(1)) * 1e3 / float(g.group(2)), int(g.group(1)), d and (int(d.group(1)), int(d.group(2))),
                             open(log[:-4] + ".out").read()))
        return runs

    def theirs(d):
        runs = []
        for log in sorted(glob.glob(os.path.join(out, f"llama-{m}-edit256-d{d}-*.log"))):
            t = open(log).read() + open(log[:-4] + ".out").read()
            g = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", t)
            a = re.search(r"n_drafted\s+=\s+(\d+)", t), re.search(r"n_accept\s+=\s+(\d+)", t)
            if g and float(g.group(2)) > 0:
                runs.append((int(g.group(1)) / float(g.group(2)), int(g.group(1)), a[0] and a[1] and (int(a[0].group(1)), int(a[1].group(1)))))
        return runs

    mine = ours("spec" if spec else "no-spec")
    if not mine:
        return None
    peer = theirs(16 if spec else 0)
    r = {"swizzle": statistics.median(x[0] for x in mine), "llama_cpp": statistics.median(x[0] for x in peer) if peer else None,
         "swizzle_tokens": mine[0][1], "llama_cpp_tokens": peer[0][1] if peer else None}
    if spec:
        plain = ours("no-spec")
        r["swizzle_same_output_as_plain"] = bool(plain) and all(x[3] == plain[0][3] for x in mine)
        if mine[0][2]:
            r["swizzle_drafted_accepted"] = list(mine[0][2])
        if peer and peer[0][2]:
            r["llama_cpp_drafted_accepted"] = list(peer[0][2])
    return r


def main():
    if sys.argv[1] == "--ncu":
        ncu_table(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
        return
    out, pkgdir, commit, models = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    peaks = last_json(os.path.join(out, "peaks.json")) or {}
    bw, peak = peaks.get("hbm_gbs"), peaks.get("f16_tflops")
    try:
        machine = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True).stdout.strip()
    except OSError:
        machine = peaks.get("device", "?")
    rows = []
    for m in models:
        gguf_path = os.path.join(pkgdir, "models", m + ".gguf")
        if not os.path.exists(gguf_path):
            continue
        dbytes, pelems, attn = model_costs(gguf_path)

        def decode_roof(tok_s):
            return dbytes * tok_s / (bw * 1e9) if tok_s and bw else None

        def prefill_roof(tok_s, n):
            flops = 2 * pelems + attn * n / 2  # per token, causal: n/2 earlier positions on average
            return flops * tok_s / (peak * 1e12) if tok_s and peak else None

        swz = last_json(os.path.join(out, f"swz-{m}-pp512-tg128.log")) or {}
        nog = last_json(os.path.join(out, f"swz-{m}-tg128-nographs.log")) or {}
        s8k = last_json(os.path.join(out, f"swz-{m}-pp8192.log")) or {}
        lb = {}
        for f in (f"llama-{m}-pp512-tg128.json", f"llama-{m}-pp8192.json"):
            try:
                for t in json.load(open(os.path.join(out, f))):
                    key = f"pp{t['n_prompt']}" if t["n_gen"] == 0 else f"tg{t['n_gen']}"
                    lb[key] = statistics.median(t["samples_ts"])
            except (OSError, ValueError, KeyError):
                pass
        batched = {}  # sequences -> the median over llama-batched-bench's runs
        try:
            runs = {}
            for line in open(os.path.join(out, f"llama-{m}-batched.jsonl")):
                if line.startswith("{"):
                    j = json.loads(line)
                    runs.setdefault(j["pl"], []).append(j["speed_tg"])
            batched = {pl: statistics.median(v) for pl, v in runs.items()}
        except OSError:
            pass

        def row(test, ours, theirs, roof):
            rows.append({"model": m, "test": test, "swizzle": ours, "llama_cpp": theirs,
                         "ratio": ours / theirs if ours and theirs else None,
                         "swizzle_roofline": roof(ours), "llama_cpp_roofline": roof(theirs)})

        row("pp512", swz.get("pp_tok_s"), lb.get("pp512"), lambda v: prefill_roof(v, 512))
        row("tg128", swz.get("tg_tok_s"), lb.get("tg128"), decode_roof)
        row("tg128 (launch graphs off)", nog.get("tg_tok_s"), None, decode_roof)
        row("pp8192", s8k.get("pp_tok_s"), lb.get("pp8192"), lambda v: prefill_roof(v, 8192))
        # Warm TTFT after a one-token edit at the end of a 32k prompt, in milliseconds
        # (lower is better: the ratio is llama.cpp's over ours). Both: 1 token prefilled
        # after 32,767 cached ones (ours until 2026-12-03: 64 after 32,704).
        ttft = last_json(os.path.join(out, f"swz-{m}-ttft32k.log")) or {}
        ours_ms = 1e3 * statistics.median(ttft["pp_seconds"]) if ttft.get("pp_seconds") else None
        theirs_ms = None
        try:
            t = json.load(open(os.path.join(out, f"llama-{m}-ttft32k.json")))[0]
            theirs_ms = 1e3 / statistics.median(t["samples_ts"]) * t["n_prompt"]
        except (OSError, ValueError, KeyError, IndexError):
            pass
        if ours_ms or theirs_ms:
            rows.append({"model": m, "test": "warm TTFT ms, 32k prompt, one-token edit at the end",
                         "swizzle": ours_ms, "llama_cpp": theirs_ms,
                         "ratio": theirs_ms / ours_ms if ours_ms and theirs_ms else None,
                         "swizzle_roofline": None, "llama_cpp_roofline": None})
        for spec, test in ((True, "edit256, prompt lookup"), (False, "edit256, plain")):
            e = edit256(out, m, spec)
            if e:
                rows.append({"model": m, "test": test, **e,
                             "ratio": e["swizzle"] / e["llama_cpp"] if e["swizzle"] and e["llama_cpp"] else None,
                             "swizzle_roofline": decode_roof(e["swizzle"]), "llama_cpp_roofline": decode_roof(e["llama_cpp"])})
        for s in (1, 4, 8, 16, 32):
            b = last_json(os.path.join(out, f"swz-{m}-batch{s}.log")) or {}
            # Aggregate decode: S sequences share each weight read.
            row(f"decode x{s} (512+128)", b.get("batch_tg_tok_s"), batched.get(s),
                lambda v, s=s: decode_roof(v / s) if v else None)
    result = {"machine": machine, "commit": commit, "peaks": peaks, "rows": rows}
    with open(os.path.join(out, "speed.json"), "w") as f:
        json.dump(result, f, indent=1)

    def fmt(v, pct=False):
        if v is None:
            return "-"
        return f"{100 * v:.0f}%" if pct else (f"{v:,.0f}" if v >= 100 else f"{v:.2f}")

    print(f"\n{machine}, commit {commit}; peaks: copy {fmt(bw)} GB/s, f16 tensor cores {fmt(peak)} TFLOP/s")
    print("| model | test | swizzle tok/s | llama.cpp tok/s | ratio | swizzle roofline | llama.cpp roofline |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        test = r["test"]
        if "swizzle_drafted_accepted" in r or "llama_cpp_drafted_accepted" in r:
            acc = lambda k: "{1}/{0} accepted".format(*r[k]) if k in r else "-"
            test += (f" (ours {acc('swizzle_drafted_accepted')}, output = plain's: "
                     f"{'yes' if r.get('swizzle_same_output_as_plain') else 'NO'}; llama.cpp {acc('llama_cpp_drafted_accepted')})")
        print(f"| {r['model']} | {test} | {fmt(r['swizzle'])} | {fmt(r['llama_cpp'])} | "
              f"{fmt(r['ratio'])} | {fmt(r['swizzle_roofline'], True)} | {fmt(r['llama_cpp_roofline'], True)} |")


if __name__ == "__main__":
    main()
