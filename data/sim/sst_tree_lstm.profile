# SST binary Tree-LSTM (vertex/models.h, BinaryTreeLstm: a 21,701 x 300 row-sparse embedding,
# W [300, 750], U [300, 750], b [750], out_W [150, 5], out_b [5]), Adagrad, 25 trees per rank
# per step, one CPU thread per rank on the shared 2-core Xeon.
#
# Measured: forward + backward 22.7 ms and the optimizer 1.4 ms (bench/RESULTS.md,
# "Distributed", the plain step); the distinct tokens of one rank's step (289 on average), the
# union over k ranks' batches of a step and where in the table both fall (the vocabulary sorted
# by frequency: the first 678 rows hold half of a rank's rows), counted on the SST train split
# with its dev split's words in the vocabulary (the table is the full SST's 21,701 words):
#   bench/sparse_rows.py --format=sst --batch=25 --steps=200 --rows=21701 \
#     --vocab-files ../shared/data/sst/dev.txt -- ../shared/data/sst/train.txt
# Estimated (to be replaced by a measured profile): the split of the 22.7 ms into forward and
# backward, and the ready offsets. On the CPU the output layer's gradient is final before the
# backward rounds, W, U and b after them (the lazy weight-gradient GEMMs), the embedding's last.
version 1
name sst-tree-lstm-cpu
batch_per_rank 25
forward_ms 9.1
backward_ms 13.6
optimizer_ms 1.4
param embedding shape=21701,300 grad=sparse touched=289 union=2:513,4:900,8:1552,16:2623,32:4319,64:6888,128:10582 spread=5:0.0139:0.0004,10:0.0312:0.0009,21:0.0679:0.0019,42:0.1262:0.0039,84:0.2040:0.0078,169:0.2964:0.0159,339:0.4010:0.0319,678:0.5045:0.0640,1356:0.6108:0.1279,2712:0.7211:0.2521,5425:0.8292:0.4622,8137:0.8867:0.6178,10850:0.9225:0.7297,13563:0.9471:0.8155,16275:0.9715:0.9006,18988:0.9957:0.9849 ready_ms=13.6
param W shape=300,750 ready_ms=12.6
param U shape=300,750 ready_ms=12.2
param b shape=750 ready_ms=12.2
param out_W shape=150,5 ready_ms=0.2
param out_b shape=5 ready_ms=0.2
