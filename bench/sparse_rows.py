#!/usr/bin/env python3
"""The rows an embedding's gradient touches a step, counted on a dataset: a profile's sparse line.

A model profile's row-sparse parameter (docs/distributed.md, "The model profile") says how many
rows one rank's step touches (touched=), how many the union of k ranks' batches of the same step
holds (union=k:U,...) and where in the table both fall (spread=R:T:U,...). cavs-train
--profile-out measures them on the ranks it runs on; this counts them for any number of ranks
from the data alone, for hand-written profiles (data/sim/*.profile) that project past what one
machine runs:

  bench/sparse_rows.py --format=sst --rows=21701 --batch=25 ../shared/data/sst/train.txt

The vocabulary is built as the trainer builds it (examples/data/vocabulary.cc, FromCounts):
id 0 "<unk>", then the words by descending count, ties by byte order, over every file given
(--vocab-files adds files whose words take ids but are not trained on). A step deals each rank
--batch samples of a shuffled epoch (--seed), as the trainer does; the counts are the means over
--steps steps. Spread points are at the profiler's edges (distributed/model_profile.cc,
SpreadEdges): rows / 2^k for k = 1..12 and the eighths; U is the union of the largest --ranks.

--past=K checks how the cost model carries a spread past the ranks it was profiled at
(ParamProfile::UnionIn, distributed/model_profile.cc): from the counts at K ranks alone it
predicts the union's fraction at the largest --ranks in each of --shards even row ranges, held
at K's spread and by the per-segment power law the model uses, and prints both beside the count.
"""

import argparse
import collections
import math
import random
import re
import sys

SST_LEAF = re.compile(r"\((\d+) ([^()\s]+)\)")


def read_samples(path, fmt):
    """Each sample's tokens: an SST tree's leaves, or a text line's words."""
    samples = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            if fmt == "sst":
                words = [w for _, w in SST_LEAF.findall(line)]
                if not words:
                    sys.exit(f"{path}:{line_no}: no (label word) leaf in the tree")
            else:
                words = line.split()
            samples.append(words)
    return samples


def spread_edges(rows):
    edges = {rows >> k for k in range(1, 13)} | {rows * i // 8 for i in range(1, 8)}
    return sorted(e for e in edges if 0 < e < rows)


def union_fractions_past(rows, edges, t, u_k, k, touched_f, union_f, ranks):
    """The union's fraction of rows [0, edge) at `ranks` > k at each of the edges, as
    UnionSharePast in distributed/model_profile.cc computes it (the two are kept alike)."""
    whole = math.log(u_k / t) / math.log(k) if t > 0 and u_k > t else 0.0
    grow = ranks / k
    seg, lo, pt, pu = [], 0, 0.0, 0.0
    for hi, a, b in zip(list(edges) + [rows], list(touched_f) + [1.0], list(union_f) + [1.0]):
        tb, ub = t * (a - pt), u_k * (b - pu)
        s = (math.log(ub / tb) / math.log(k) if ub > tb else 0.0) if tb > 0 else whole
        seg.append(min(hi - lo, ub * grow ** s))
        lo, pt, pu = hi, a, b
    total = sum(seg)
    return [sum(seg[:e + 1]) / total for e in range(len(edges))]


def fraction_below(rows, edges, fractions, row):
    """A spread's fraction of rows [0, row), linear between its points."""
    r0, f0 = 0, 0.0
    for e, f in zip(list(edges) + [rows], list(fractions) + [1.0]):
        if row <= e:
            return f0 + (f - f0) * (row - r0) / (e - r0)
        r0, f0 = e, f
    return 1.0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("train", nargs="+", help="the files trained on")
    p.add_argument("--format", choices=["sst", "text"], default="sst")
    p.add_argument("--vocab-files", nargs="*", default=[], help="more files the vocabulary holds")
    p.add_argument("--rows", type=int, default=0, help="the table's rows (default: the vocabulary)")
    p.add_argument("--batch", type=int, required=True, help="samples per rank per step")
    p.add_argument("--ranks", default="2,4,8,16,32,64,128", help="the union's points")
    p.add_argument("--steps", type=int, default=200, help="steps averaged over")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--past", type=int, default=0,
                   help="also predict the largest --ranks' spread from this many ranks' counts")
    p.add_argument("--shards", type=int, default=8, help="even row ranges --past compares")
    a = p.parse_args()

    train = [s for path in a.train for s in read_samples(path, a.format)]
    counts = collections.Counter(w for s in train for w in s)
    for path in a.vocab_files:
        counts.update(w for s in read_samples(path, a.format) for w in s)
    words = sorted((w for w in counts if w != "<unk>"),
                   key=lambda w: (-counts[w], w.encode("utf-8")))
    ids = {w: i + 1 for i, w in enumerate(words)}
    ids["<unk>"] = 0  # a text's own unknown-word token is the vocabulary's id 0
    rows = a.rows or len(ids) + 1
    if rows < len(ids) + 1:
        sys.exit(f"--rows={rows} is fewer than the vocabulary's {len(ids) + 1} words")
    ranks = sorted(int(k) for k in a.ranks.split(","))
    if not ranks or ranks[0] < 2:
        sys.exit("--ranks: numbers of ranks of at least 2")
    top = ranks[-1]
    per_step = top * a.batch
    if per_step > len(train):
        sys.exit(f"{top} ranks x {a.batch} samples is more than the {len(train)} samples")

    if a.past and (a.past not in ranks or a.past == top):
        sys.exit(f"--past={a.past}: one of --ranks other than the largest, {top}")
    rng = random.Random(a.seed)
    order = []
    edges = spread_edges(rows)
    touched = 0.0
    unions = collections.defaultdict(float)
    touched_below = [0.0] * len(edges)
    union_below = [0.0] * len(edges)
    past_below = [0.0] * len(edges)  # the union of --past ranks' rows below each edge
    shard_union = [0.0] * a.shards   # the largest --ranks' union's fraction in each range
    for _ in range(a.steps):
        if len(order) < per_step:  # a new epoch
            order = list(range(len(train)))
            rng.shuffle(order)
        step, order = order[:per_step], order[per_step:]
        rank_rows = [{ids[w] for i in step[r * a.batch:(r + 1) * a.batch] for w in train[i]}
                     for r in range(top)]
        touched += sum(len(s) for s in rank_rows) / top
        for k in ranks:
            # The ranks' groups of k: the mean union over top / k of them.
            groups = [set().union(*rank_rows[g:g + k]) for g in range(0, top - k + 1, k)]
            unions[k] += sum(len(u) for u in groups) / len(groups)
        union = set().union(*rank_rows)
        for e, edge in enumerate(edges):
            touched_below[e] += sum(sum(1 for r in s if r < edge) for s in rank_rows) / top
            union_below[e] += sum(1 for r in union if r < edge)
        if a.past:
            groups = [set().union(*rank_rows[g:g + a.past]) for g in range(0, top - a.past + 1,
                                                                            a.past)]
            for e, edge in enumerate(edges):
                past_below[e] += sum(sum(1 for r in u if r < edge) for u in groups) / len(groups)
            cut = [rows * i // a.shards for i in range(a.shards + 1)]
            for i in range(a.shards):
                shard_union[i] += sum(1 for r in union if cut[i] <= r < cut[i + 1]) / len(union)
    n = a.steps
    t = touched / n
    spread = [(edge, touched_below[e] / n / t, union_below[e] / n / (unions[top] / n))
              for e, edge in enumerate(edges)]
    print(f"# {len(train)} samples, vocabulary {len(ids) + 1}, table {rows} rows, "
          f"{a.batch} a rank, {n} steps (seed {a.seed})")
    print(f"shape={rows},D grad=sparse touched={t:.0f} union="
          + ",".join(f"{k}:{unions[k] / n:.0f}" for k in ranks)
          + " spread=" + ",".join(f"{r}:{ti:.4f}:{ui:.4f}" for r, ti, ui in spread))
    if a.past:
        k, u_k = a.past, unions[a.past] / n
        touched_f = [touched_below[e] / n / t for e in range(len(edges))]
        past_f = [past_below[e] / n / u_k for e in range(len(edges))]
        model_f = union_fractions_past(rows, edges, t, u_k, k, touched_f, past_f, top)
        cut = [rows * i // a.shards for i in range(a.shards + 1)]
        print(f"# the union's fraction at {top} ranks in {a.shards} even row ranges: counted, "
              f"held at {k} ranks' spread, and carried past {k} by segment (the cost model's)")
        print("rows              counted     held  by segment")
        err_held = err_model = 0.0
        for i in range(a.shards):
            held = (fraction_below(rows, edges, past_f, cut[i + 1])
                    - fraction_below(rows, edges, past_f, cut[i]))
            seg = (fraction_below(rows, edges, model_f, cut[i + 1])
                   - fraction_below(rows, edges, model_f, cut[i]))
            counted = shard_union[i] / n
            err_held = max(err_held, abs(held - counted))
            err_model = max(err_model, abs(seg - counted))
            print(f"[{cut[i]}, {cut[i + 1]}){'':<{max(0, 14 - len(str(cut[i])) - len(str(cut[i + 1])))}}"
                  f"{counted:8.4f} {held:8.4f} {seg:11.4f}")
        print(f"largest difference from the count: held {err_held:.4f}, by segment {err_model:.4f}")


if __name__ == "__main__":
    main()
