"""Tuning constants of the token-table build (thresholds that pick a path, never change a result).

Every path a threshold chooses between computes the same table; the tests force each one
(monkeypatching this module) and compare it with the slow walk. Read them as
``tuning.NAME`` so that a patch here reaches every module.
"""

MAX_TRACKED_BOUNDARIES = 2
MIN_LOOP_BYTES = 3      # a state with this many self-loop bytes gets precomputed run ends
MIN_REUSED_BYTES = 2    # reuse a hub's table for at least this many first bytes
MIN_INHERITED_TOKENS = 32  # inherit at least this many tokens from a hub or from START
MEET_STEPS = 6             # bytes a walk is compared with the walk from START (see _start_meets)
CHAIN_MIN_TOKENS = 256  # try a counter chain (see _counter_chain) for at least this many candidates
SMALL_WALK = 32         # below this many running tokens the walk finishes in pure Python
SMALL_WALK_TOKENS = 256  # ... and so it does for up to this many tokens with at most
SMALL_WALK_BYTES = 512   # ... this many bytes left in all (a numpy step costs about as much as
                         # walking 100 short tokens in Python, and a walk takes one per byte)
SMALL_GROUP = 96        # up to this many walked tokens are grouped in pure Python
SMALL_TABLE = 96        # ... and walked and grouped in one pass, when their walk is small too
TRIE_NODES = 4096      # a trie walk of a table (see tabletrie) visits at most this many nodes, else the
                        # vectorised build runs instead (a counter chain walks whole subtrees)
TRIE_SLICED_NODES = 1 << 20  # ... and a walk with the state's UTF-8 slice taken out this many (its members
                        # are skipped: what is left is what the vectorised build would walk too)
TRIE_THIN_FRONT = 64     # a trie walk's frontier of at most this many subtrees ...
TRIE_AHEAD_NODES = 2048  # ... holding at most this many nodes has its rows made ahead, down the subtrees
                         # (long tokens along a counter: a round of the walk per byte layer otherwise)
TRIE_REF_ROWS = 32       # lexer rows a table's reference walks may have made (a shadow's product is lazily built)
TRIE_UNBUILT_REFS = 1    # a non-base table's walk meets hubs whose tables are not built only if at most this many
                        # (else it meets built tables only: each hub met is a table its first mask builds)
FEW_TOKENS = 96         # a state with at most this many live tokens skips every shortcut (one pass)
DEAD_CUT_RATIO = 4      # candidates are cut by second byte when at least 1 in this many die there
DEAD_DROP_RATIO = 4     # walked tokens are compacted before grouping when under 1 in this many live
DENSE_KEY_SPACE = 1 << 12   # group keys below this are made dense with a lookup table, not a sort
DENSE_KEY_RATIO = 4         # ... and so are keys whose space is at most this many times their number
FEW_KEYS = 32               # up to this many keys are made dense in plain Python
SUM_ROWS_TOKENS = 64        # group rows are summed (bincount) from this many tokens per group on
SLICE_MIN_TOKENS = 256    # take a UTF-8 slice out of the walk for at least this many candidates
SLICE_MIN_NON_ASCII = 2048  # ... of which at least this many hold a non-ASCII character (on a vocabulary
                            # with few, such as SmolLM2's 830, the slice's checks cost more than the
                            # walk they save: paired A/B p99 1.3-1.8x with slices, 0.7x without)
UTF8_PRODUCT_STATES = 64  # give up a character-step check where one byte range reaches more lexer states
SLICE_LONG_LEFT = 64      # a trie walk's slice chain stops where at most this many longer members are left
SLICE_MAX_CHARS = 48      # follow a chain of character steps this far (longer tokens are walked)
EAGER_LEXER_STATES = 16384  # compile determinises a lexer up front when it has at most this many states
EAGER_LEXER_WORK = 24_000_000  # ... and takes at most this many work units (core.limits.Fuel's) to build:
                              # a count, not a clock, so how far it gets is the same on every machine
BUILD_AHEAD_LAYERS = 64    # a compiled walk builds the rows its stopped tokens reach next this many bytes ahead
BUILD_AHEAD_IDLE = 4       # ... following a token no further than this many bytes through rows built already
MIRROR_ALL_ROWS = EAGER_LEXER_STATES  # a complete lexer of at most this many states is mirrored whole
                          # (rows copied at once, no more checks; with 2048 instead, paired MaskBench
                          # p99 against the whole copy was 1.03x, with this 1.00x); larger ones copy
                          # rows as walks reach them
