"""Tail stats of a MaskBench run restricted to the files of another run (like-for-like)."""
import json, sys, os
import numpy as np
def per_file(run, engine):
    recs = [json.loads(l) for l in open(os.path.join(run, "results.jsonl"))]
    recs = [r for r in recs if r["engine"] == engine]
    s = np.load(os.path.join(run, "samples", f"tbm_us_{engine}.npy"))
    out, at = {}, 0
    for r in recs:
        c = (r.get("tbm_us") or {}).get("count", 0)
        out[os.path.basename(r["file"])] = (s[at:at + c], r.get("ttfm_ms"), r["status"])
        at += c
    assert at == s.size, (at, s.size)
    return out
big, small = sys.argv[1], sys.argv[2]
files = {os.path.basename(json.loads(l)["file"]) for l in open(os.path.join(small, "results.jsonl"))}
for run in (big, small):
    res = {}
    for eng in ("guidewire", "llguidance"):
        pf = per_file(run, eng)
        g = np.concatenate([pf[f][0] for f in files if f in pf])
        tt = np.array([pf[f][1] for f in files if f in pf and pf[f][1] is not None])
        res[eng] = (g, tt, sum(pf[f][2] == "pass" for f in files if f in pf))
    g, l = res["guidewire"][0], res["llguidance"][0]
    lp99 = np.percentile(l, 99)
    print(f"{run}: files {len(files)} masks {g.size}/{l.size} p50 {np.percentile(g,50):.1f} ({np.percentile(l,50):.1f}) "
          f"p99 {np.percentile(g,99):.1f} ({lp99:.1f}) ratio {np.percentile(g,99)/lp99:.2f}x  >3x {100*(g>3*lp99).mean():.2f}% "
          f">20ms {(g>20000).sum()} max {g.max()/1e3:.1f} ms  TTFM p50 {np.median(res['guidewire'][1]):.2f} ({np.median(res['llguidance'][1]):.2f})  "
          f"pass {res['guidewire'][2]} ({res['llguidance'][2]})")
