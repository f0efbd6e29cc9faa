"""The Triton kernels compiled for CUDA against guidewire's torch paths, on the same random inputs.

Run on a machine with a GPU (CI has none; the tests run the kernels through Triton's
interpreter). For each kernel and shape: the Triton result on CUDA equals the torch path's on
CUDA (bitmask application and tree masks exactly; softmax within float tolerance; sampling and
speculative verification token for token with the same uniforms). Prints one line per case and
a count of cases checked and failed; exits non-zero on a failure.

    python bench/cuda_parity.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from guidewire.kernels import (apply_token_bitmask_inplace, masked_softmax, sample_masked,  # noqa: E402
                               speculative_accept_batch, tree_attention_mask, triton_available)
from bench_kernels import random_bitmask, speculative_inputs  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() or not triton_available():
        print("no CUDA device with Triton: nothing to check")
        return 2
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(0)
    cases, failed = [], []

    def check(name: str, ok: bool, detail: str = "") -> None:
        cases.append(name)
        if not ok:
            failed.append(f"{name}: {detail}")
        print(("ok   " if ok else "FAIL ") + name + (f"  {detail}" if detail else ""), flush=True)

    for batch, vocab in ((1, 49152), (8, 32000), (4, 262144), (3, 1000)):
        for density in (0.01, 0.5, 0.99):
            logits = torch.randn(batch, vocab, generator=gen).to(dev)
            bm = random_bitmask(batch, vocab, density, dev, gen)
            a = apply_token_bitmask_inplace(logits.clone(), bm, backend="triton")
            b = apply_token_bitmask_inplace(logits.clone(), bm, backend="torch")
            check(f"bitmask b={batch} V={vocab} d={density}", torch.equal(a, b))
            for t in (1.0, 0.7):
                sa = masked_softmax(logits, bm, t, backend="triton")
                sb = masked_softmax(logits, bm, t, backend="torch")
                err = float((sa - sb).abs().max())
                check(f"softmax b={batch} V={vocab} d={density} T={t}", err < 1e-5, f"max abs err {err:.2e}")
            u = torch.rand(batch, generator=gen).to(dev)
            xa = sample_masked(logits, bm, 0.8, u, backend="triton")
            xb = sample_masked(logits, bm, 0.8, u, backend="torch")
            # a uniform within float error of a CDF step may land on either side: count, do not fail
            same = int((xa == xb).sum())
            check(f"sample b={batch} V={vocab} d={density}", same >= batch - max(1, batch // 8),
                  f"{same}/{batch} equal")
    for batch, vocab, k in ((1, 49152, 4), (8, 32000, 6), (2, 262144, 3)):
        p, q, x, u, r = speculative_inputs(batch, k, vocab, dev, gen)
        for qq, label in ((q, "q"), (None, "no-q")):
            na, ta = speculative_accept_batch(p, x, qq, u, r, backend="triton")
            nb, tb = speculative_accept_batch(p, x, qq, u, r, backend="torch")
            check(f"speculative b={batch} V={vocab} k={k} {label}", torch.equal(na, nb) and torch.equal(ta, tb),
                  f"accepted {na.tolist()} vs {nb.tolist()}")
    for n in (1, 7, 64, 300):
        parents = [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
        ma = tree_attention_mask(parents, 17, device=dev, backend="triton")
        mb = tree_attention_mask(parents, 17, device=dev, backend="torch")
        check(f"tree mask n={n}", torch.equal(ma, mb))
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cases": len(cases),
              "failed": failed}
    print(json.dumps(report, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
