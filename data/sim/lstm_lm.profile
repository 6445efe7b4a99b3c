# LSTM language model (vertex/models.h, Lstm with embed 512, hidden 512 and a 10,000-word
# vocabulary: a 10,000 x 512 row-sparse input embedding and a dense 512 x 10,000 output layer),
# 64 sentences per rank per step on an H100.
#
# Estimated (to be replaced by a measured profile): bench/RESULTS.md measured forward + backward
# of this LSTM with a 16-class output at 4.34 ms per 64 PTB sentences on the H100; the
# 10,000-word output adds about 43 GFLOP a step (1,408 tokens x 512 x 10,000 x 2 x 3), about
# 1.2 ms more. On a GPU the gradients are reported after the batch (docs/distributed.md), so no
# ready_ms: every gradient is ready at the end of backward.
# Measured: the distinct words of one rank's step (515) and the union over k ranks, counted on
# ../shared/data/ptb/valid.txt in batches of 64 sentences (its vocabulary is only 6,022 words,
# so the points stop at 16 ranks and the power law continues them).
version 1
name lstm-lm-h100
batch_per_rank 64
forward_ms 2.0
backward_ms 3.6
optimizer_ms 0.4
param embedding shape=10000,512 grad=sparse touched=515 union=2:867,4:1422,8:2240,16:3383
param W shape=512,2048
param U shape=512,2048
param b shape=2048
param out_W shape=512,10000
param out_b shape=10000
