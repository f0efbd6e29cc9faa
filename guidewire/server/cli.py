"""The ``guidewire serve`` subcommand (FastAPI + uvicorn)."""

from __future__ import annotations

import argparse
import sys


def add_serve_parser(sub) -> argparse.ArgumentParser:
    """Register ``serve`` on the ``guidewire`` command's subparsers."""
    p = sub.add_parser("serve", help="OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions)")
    p.add_argument("--model", default=None, help="smollm2 (default), gemma3, a model dir or a .gguf file")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-batch", type=int, default=16, help="sequences decoded together (default 16)")
    p.add_argument("--max-queue", type=int, default=64, help="waiting requests before 429 (default 64)")
    p.add_argument("--time-limit", type=float, default=300.0, help="seconds per request (default 300)")
    p.add_argument("--max-tokens", type=int, default=1024, help="default chat max_tokens (default 1024)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--device", default=None, help="where the model runs: cpu, cuda, cuda:N "
                   "(default $GUIDEWIRE_DEVICE, else cpu)")
    p.add_argument("--no-gc-freeze", action="store_true",
                   help="do not freeze the warmed-up heap out of CPython's full GC collections (nor collect "
                        "and freeze again whenever decoding goes idle: see guidewire.core.collector)")
    p.add_argument("--heap-reserve-mb", type=int, default=128,
                   help="free memory kept faulted in at the top of the C heap, topped up whenever decoding "
                        "goes idle, so masks do not fault new pages in (default 128; 0: none; glibc only)")
    return p


def warm_up_and_freeze(vocab, collector=None) -> int:
    """Compile the built-in JSON grammar and a JSON schema, and ask a mask of each (per-vocabulary
    indexes, the lazily imported compilers), warm the monitors' jedi back end, then
    ``gc.collect(); gc.freeze()`` (as ``collector``'s first collection when one is given, an
    :class:`~guidewire.core.collector.IdleCollector`): the objects a long-lived server holds from
    start-up leave CPython's full collections, which otherwise traverse them (~350k objects,
    ~200 ms) inside whichever mask allocates (``bench/bench_gc_pauses.py``). Returns the number of
    frozen objects."""
    import gc

    from ..core.bitmask import allocate_token_bitmask
    from ..core.errors import GuidewireError
    from ..grammar import builtin_grammar, compile_json_schema, compile_lark

    for g in (compile_lark(builtin_grammar("json"), vocab),
              compile_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}}, vocab)):
        g.matcher().fill_bitmask(allocate_token_bitmask(1, vocab.vocab_size), 0)
    del g
    try:  # the monitors' in-process jedi: builtins and typing stubs loaded (and frozen) now
        from ..monitors import warm_up_backend

        warm_up_backend("jedi")
    except GuidewireError as exc:  # no jedi installed (the monitors extra), or it failed: said, not fatal
        print(f"guidewire: monitors not warmed up: {exc}", file=sys.stderr)
    if collector is not None:   # its first collection is a full one, then the freeze: the idle
        collector.collect()     # hook's later ones start from this frozen set, not from scratch
    else:
        gc.collect()
        gc.freeze()
    return gc.get_freeze_count()


def idle_housekeeping(collector, reserve):
    """The scheduler's ``on_idle`` hook, or None with neither part: collect what the last requests
    left and freeze the survivors (``collector``, a :class:`~guidewire.core.collector.IdleCollector`:
    full collections happen here, not inside a mask), then top ``reserve`` up (a
    :class:`~guidewire.core.heap.HeapReserve`; after the collection, which frees memory)."""
    if collector is None and reserve is None:
        return None

    def housekeeping() -> None:
        if collector is not None:
            collector.collect()
        if reserve is not None:
            reserve.top_up()

    return housekeeping


def run_serve(args) -> int:
    """Load the model and serve until interrupted."""
    for flag, v in (("--port", args.port), ("--max-batch", args.max_batch), ("--max-queue", args.max_queue),
                    ("--max-tokens", args.max_tokens)):
        if v < (0 if flag == "--port" else 1) or (flag == "--port" and v > 65535):
            raise ValueError(f"{flag} out of range: {v}")
    if args.time_limit <= 0:
        raise ValueError(f"--time-limit must be > 0, got {args.time_limit}")
    if not 0 <= args.heap_reserve_mb < 256:
        raise ValueError(f"--heap-reserve-mb must be in 0..255, got {args.heap_reserve_mb}")
    import uvicorn

    from ..core.collector import IdleCollector
    from ..core.heap import HeapReserve, keep_heap_mapped, one_arena
    from ..runtime.loading import load_model
    from .app import create_app

    reserve = HeapReserve(args.heap_reserve_mb << 20) if args.heap_reserve_mb else None
    collector = None if args.no_gc_freeze else IdleCollector()
    one_arena()     # before any thread starts: every thread allocates where the reserve is
    lm = load_model(args.model, num_threads=args.threads, device=args.device)
    app = create_app(lm, max_batch=args.max_batch, max_queue=args.max_queue, time_limit=args.time_limit,
                     default_max_tokens=args.max_tokens, on_idle=idle_housekeeping(collector, reserve))
    if collector is not None:
        warm_up_and_freeze(lm.vocab, collector)
    keep_heap_mapped()      # after loading (its temporaries go back): masks stop faulting freed pages in again
    if reserve is not None:
        reserve.top_up()    # and the top of the heap is faulted in ahead (see guidewire.core.heap)
    print(f"guidewire: serving {lm.name} on http://{args.host}:{args.port}/v1", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
