// The allreduce synchronizer (AllReduceSync, distributed/strategy.h): dense gradients of one
// group fused into a bucket and summed with one allreduce.
//
//   file      allreduce group=G compressor=none|fp16 [topology=flat|hierarchical]
//             (topology= written only where hierarchical)
//   checks    a dense gradient; one compressor and one topology per group
//   units     one bucket per group (UnitKind::kBucket), keyed by its earliest-created parameter
//   running   pack the gradients into a flat float32 buffer (as float16, pre-scaled by 1/global
//             count, with fp16), then flat: one allreduce on the communicator every flat bucket
//             shares (they start in the same order on every rank); hierarchical: a reduce to the
//             host's leader, an allreduce among the leaders and a broadcast in the host, on the
//             bucket's own host-local and leader communicators; divide by the global count, unpack
//   cost      flat: allreduce(all ranks, B); hierarchical: a reduce in every host side by side ->
//             allreduce(one leader per host, B) -> a broadcast in every host; B the bucket's
//             bytes, halved for fp16
//
// Thread-safety: an immutable singleton.
#pragma once

#include "distributed/kinds/kind.h"

namespace cavs::distributed::kinds {

const SyncKind& AllReduceKind();

}  // namespace cavs::distributed::kinds
