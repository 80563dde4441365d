"""tests/evalset.py OUT N SEED [CTX_MAX] [COMP_MAX] [CHOICES]: an evaluation set in llm.c's format, as its
hellaswag.py writes one (docs/model.md): a header of 256 int32 (magic 20240522, version 1, the example count, the
longest example in uint16s), then per example the uint16s 65535, its length in bytes, its index, the label, the
number of completions, the context's length and tokens, and each completion's length and tokens. N examples of
random GPT-2 tokens from random.Random(SEED): contexts of 2..CTX_MAX tokens (default 12), completions of
1..COMP_MAX (default 6), each example with a number of completions drawn from CHOICES (a comma list, default 4;
one value draws nothing). The tests that evaluate write their sets with it."""
import random
import struct
import sys


def main():
    out, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ctx_max = int(sys.argv[4]) if len(sys.argv) > 4 else 12
    comp_max = int(sys.argv[5]) if len(sys.argv) > 5 else 6
    choices = [int(c) for c in (sys.argv[6] if len(sys.argv) > 6 else "4").split(",")]
    r = random.Random(seed)
    stream, longest = [], 0
    for i in range(n):
        k = r.choice(choices) if len(choices) > 1 else choices[0]
        ex = [65535, 0, i, r.randrange(k), k]
        ctx = [r.randrange(50257) for _ in range(r.randint(2, ctx_max))]
        ex += [len(ctx)] + ctx
        for _ in range(k):
            c = [r.randrange(50257) for _ in range(r.randint(1, comp_max))]
            ex += [len(c)] + c
        ex[1] = 2 * len(ex)
        longest = max(longest, ex[1])
        stream += ex
    with open(out, "wb") as f:
        f.write(struct.pack("<256i", 20240522, 1, n, longest, *([0] * 252)))
        f.write(struct.pack("<%dH" % len(stream), *stream))


if __name__ == "__main__":
    main()
