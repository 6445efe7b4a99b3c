# SST binary Tree-LSTM (vertex/models.h, BinaryTreeLstm: a 21,701 x 300 row-sparse embedding,
# W [300, 750], U [300, 750], b [750], out_W [150, 5], out_b [5]), Adagrad, 25 trees per rank
# per step, one CPU thread per rank on the shared 2-core Xeon.
#
# Measured: forward + backward 22.7 ms and the optimizer 1.4 ms (bench/RESULTS.md,
# "Distributed", the plain step); the distinct tokens of one rank's step (287 on average) and
# the union over k ranks' consecutive batches, counted on ../shared/data/sst/train.txt.
# Estimated (to be replaced by a measured profile): the split of the 22.7 ms into forward and
# backward, and the ready offsets. On the CPU the output layer's gradient is final before the
# backward rounds, W, U and b after them (the lazy weight-gradient GEMMs), the embedding's last.
version 1
name sst-tree-lstm-cpu
batch_per_rank 25
forward_ms 9.1
backward_ms 13.6
optimizer_ms 1.4
param embedding shape=21701,300 grad=sparse touched=287 union=2:509,4:891,8:1547,16:2602,32:4297,64:6828,128:10461 ready_ms=13.6
param W shape=300,750 ready_ms=12.6
param U shape=300,750 ready_ms=12.2
param b shape=750 ready_ms=12.2
param out_W shape=150,5 ready_ms=0.2
param out_b shape=5 ready_ms=0.2
