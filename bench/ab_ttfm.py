"""Paired A/B of time to first mask: two long-lived workers (an old tree, this one) compile the
same MaskBench schemas cold and compute the first mask, alternating which goes first, after 15
warm-up schemas; prints TTFM p50/p90 per tree and the median paired new/old ratio.

    git worktree add /tmp/base <commit>   (build its extension: python setup.py build_ext --inplace)
    python bench/ab_ttfm.py /tmp/base smollm2 200
    python bench/ab_ttfm.py /tmp/base gemma3 175 LIST   (LIST: one schema path per line, in that order)
"""
import json, os, random, subprocess, sys, glob
import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = r'''
import json, sys, time
from guidewire.grammar import compile_json_schema
from guidewire.maskbench.data import load_case, load_tokenizer
from guidewire.core.bitmask import allocate_token_bitmask
b = load_tokenizer(sys.argv[1]); bm = allocate_token_bitmask(1, len(b.vocab))
print("ready", flush=True)
for line in sys.stdin:
    try:
        case = load_case(line.strip())
        t = time.perf_counter(); g = compile_json_schema(case.schema, b.vocab); g.matcher().fill_bitmask(bm, 0)
        print(json.dumps((time.perf_counter() - t) * 1e3), flush=True)
    except Exception as e:
        print("null", flush=True)
'''
base, tok, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def start(root):
    env = dict(os.environ, PYTHONPATH=root, HF_HUB_OFFLINE="1", GUIDEWIRE_NUM_THREADS="1")
    p = subprocess.Popen([sys.executable, "-c", W, tok], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=root)
    assert p.stdout.readline().strip() == "ready"
    return p
old, new = start(base), start(HERE)
files = sorted(glob.glob(os.path.join(os.environ.get("MASKBENCH_DATA", os.path.join(HERE, "..", "shared", "data", "maskbench")), "*.json"))); random.Random(13).shuffle(files)
if len(sys.argv) > 4:   # a chosen list: the warm-up still takes 15 random schemas
    chosen = [os.path.realpath(line.strip()) for line in open(sys.argv[4]) if line.strip()]
    taken = set(chosen)
    files = [f for f in files if os.path.realpath(f) not in taken][:15] + chosen
def ask(p, f):
    p.stdin.write(f + "\n"); p.stdin.flush(); return json.loads(p.stdout.readline())
for f in files[:15]: ask(old, f); ask(new, f)   # warm-up
pairs, names = [], []
for i, f in enumerate(files[15:15 + n]):
    a, b = (ask(old, f), ask(new, f)) if i % 2 == 0 else tuple(reversed((ask(new, f), ask(old, f))))
    if a is not None and b is not None: pairs.append((a, b)); names.append(os.path.basename(f))
a = np.array(pairs)
print(f"{tok} n {len(a)} TTFM p50 old {np.median(a[:,0]):.1f} new {np.median(a[:,1]):.1f} ms; p90 {np.percentile(a[:,0],90):.1f} / {np.percentile(a[:,1],90):.1f}; median paired new/old {np.median(a[:,1]/a[:,0]):.3f}")
slow = a[:, 0] >= np.percentile(a[:, 0], 90)   # the slowest tenth of the old tree's schemas
print(f"slowest tenth: {int(slow.sum())} schemas, total old {a[slow, 0].sum():.0f} new {a[slow, 1].sum():.0f} ms, "
      f"median paired new/old {np.median(a[slow, 1] / a[slow, 0]):.3f}; all: total old {a[:, 0].sum():.0f} new {a[:, 1].sum():.0f} ms")
worst = sorted(range(len(a)), key=lambda k: a[k, 0] - a[k, 1])[:5]
print("largest slowdowns (old -> new ms):", ", ".join(f"{names[k]} {a[k, 0]:.0f} -> {a[k, 1]:.0f}" for k in worst))
