# Profile the masks over 20 ms on given schemas (cProfile per mask; profiles of the slow ones summed).
# GUIDEWIRE_NUM_THREADS=1 HF_HUB_OFFLINE=1 python bench/results/h18_stop47/slow_mask_profile.py smollm2 FILES...
"""Profile the masks over a threshold on given schemas: cProfile each slow mask (re-run in a fresh
process state is not possible, so profile every mask and keep only profiles of the slow ones)."""
import cProfile, pstats, io, json, sys, time, gc, os
import numpy as np
from guidewire.grammar import compile_json_schema
from guidewire.maskbench.data import load_case, load_tokenizer, tokenize_instances
tokn = sys.argv[1]; files = sys.argv[2:]
b = load_tokenizer(tokn)
gc.collect(); gc.freeze()
agg = pstats.Stats if False else None
total = None
slow = []
for path in files:
    case = load_case(path)
    t0=time.perf_counter(); g = compile_json_schema(case.schema, b.vocab); ct=time.perf_counter()-t0
    buf = np.zeros((1, g.words), dtype=np.int32)
    n=0
    for inst in tokenize_instances(case, b):
        toks = inst["tokens"]
        if not toks: continue
        m = g.matcher()
        for i,tok in enumerate(toks):
            pr = cProfile.Profile()
            t0 = time.perf_counter_ns()
            pr.enable()
            m.fill_bitmask(buf, 0)
            pr.disable()
            dt = (time.perf_counter_ns() - t0) / 1e6
            if dt > 20:
                slow.append((dt, os.path.basename(path), i))
                if dt > float(os.environ.get('SHOW_MS', '1e9')):
                    ss=io.StringIO(); st=pstats.Stats(pr, stream=ss); st.sort_stats('cumulative').print_stats(25)
                    print('=== mask', dt, os.path.basename(path), i); print(ss.getvalue()[-6000:])
                if total is None: total = pstats.Stats(pr)
                else: total.add(pr)
            if not (buf[0, tok >> 5] >> (tok & 31)) & 1 or not m.advance(tok):
                break
    print(os.path.basename(path), f"compile {ct*1e3:.0f} ms", sum(1 for s in slow if s[1]==os.path.basename(path)), flush=True)
slow.sort(reverse=True)
print(len(slow), "slow masks; top:", slow[:10])
if total:
    s=io.StringIO(); total.stream=s; total.sort_stats('tottime').print_stats(35); print(s.getvalue())
    s=io.StringIO(); total.stream=s; total.sort_stats('cumulative').print_stats(45); print(s.getvalue())
