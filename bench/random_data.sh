#!/bin/sh
# bench/random_data.sh DIR: the benchmarks' data set, random tokens in llm.c's shard format (a 256 int32 header:
# magic 20240520, version 1, count; then uint16 tokens): DIR/train_000.bin (40M tokens) and DIR/val_000.bin
# (1.1M), made once (kept while their sizes are right). Used by bench/bench.sh and bench/tune.sh.
mkdir -p "$1"
python3 - "$1" <<'PY'
import sys, os, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(1337)
for name, n in (("train_000.bin", 40_000_000), ("val_000.bin", 1_100_000)):
    p = os.path.join(d, name)
    if os.path.exists(p) and os.path.getsize(p) == 1024 + 2 * n: continue
    h = np.zeros(256, dtype=np.int32); h[0], h[1], h[2] = 20240520, 1, n
    with open(p, "wb") as f:
        f.write(h.tobytes()); f.write(rng.integers(0, 50257, n, dtype=np.uint16).tobytes())
PY
