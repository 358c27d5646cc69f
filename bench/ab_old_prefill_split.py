# Makes <pkg>-ab.swz beside each sm_* package given: the same package with the prefill
# attention split rule of be18d1f (launch_bindings.cpp prefillNSplit: one split while a
# pass's rows are a quarter of its context, else splits for ~264 workgroups), which made a
# prompt row's splits depend on its pass. For gpu_speed.sh's A/B rows (the -ab package is
# what `time` interleaves with the shipped one):
#   SWZ_SPEED_PEER=0 SWZ_SPEED_ONLY=... bench/gpu_speed.sh prepare build
#   python3 bench/ab_old_prefill_split.py build/gpu-speed/models/*-sm_90.swz
# then there: SWZ_SPEED_ROWS=ab SWZ_SPEED_AB_ARGS="--pp 512 --tg 1 --reps 3;..."
#   bench/gpu_speed.sh run build time MODELS (bench/RESULTS.md, eighteenth session).
import json, shutil, sys, os
for pkg in sys.argv[1:]:
    ab = pkg[:-4] + "-ab.swz"
    shutil.rmtree(ab, ignore_errors=True); shutil.copytree(pkg, ab)
    m = json.load(open(os.path.join(ab, "manifest.json")))
    n = 0
    for op in m["graph"]["ops"]:
        if op.get("op") != "attention": continue
        nkv, nh = op["n_head_kv"], op["n_head"]
        G = nh // nkv; perkv = (264 + nkv - 1) // nkv
        for l in op.get("launches", []):
            if l.get("phase") == "prefill" and "split_len" in l.get("let", {}):
                l["let"] = {"n_split_max": f"max(1, min(min(min(ceil(ctx/64), 16), ceil({perkv}/ceil(T*{G}/64))), ceil(ctx/T/4)))",
                            "split_len": "ceil(ctx/n_split_max/64)*64", "n_split": "ceil(ctx/split_len)"}
                n += 1
    json.dump(m, open(os.path.join(ab, "manifest.json"), "w"))
    open(os.path.join(ab, "AB_SOURCE"), "w").write("old prefill split rule (be18d1f), manifest edited\n")
    print(ab, n, "records")
