// The parameter-server synchronizer (ParameterServerSync, distributed/strategy.h): each row
// shard of a gradient, dense or row-sparse, is reduced to its server, which sends the sum back.
//
//   file      ps placement=S0,S1,.. [rows=0,R1,..,R] staleness=K [route=collective|direct]; a
//             server is a rank or hH.L, the L-th rank of host H (resolved against the ranks'
//             hosts before it runs); route= written only where it is direct
//   checks    servers within world_size; shards that tile the rows; staleness 0 to run
//   units     one per shard, in row order: UnitKind::kPsShard (dense gradient) or
//             kPsSparseShard (row-sparse), keyed by the parameter
//   running   dense: reduce the shard's rows, in place in the gradient, to the server, then
//             broadcast the server's sum, each in pieces of Communicator::PieceBytes() all
//             under way at once (eager on Open MPI's TCP: no handshake); row-sparse: allgather the
//             shard's row counts, gather rows and values to the server, which sums duplicates and
//             broadcasts the number of unique rows, then the rows and values in pieces of whole
//             rows. On the direct route every reduce is each rank's send to the server, which
//             adds the arrivals in rank order, and every broadcast the server's send to each
//             rank (PsRoute). Each shard has its own duplicate communicator.
//   cost      dense: reduce(all -> s, S) -> broadcast(s -> all, S), S the shard's bytes;
//             row-sparse: allgather(counts) -> gather(all -> s, f T (8 + 4 cols)) ->
//             broadcast(s, 8) -> broadcast(s, f U(W) (8 + 4 cols)), f the shard's fraction of the
//             rows, T the touched rows, U the union over the W ranks; on the direct route the
//             reduce and broadcasts linear
//
// Thread-safety: an immutable singleton.
#pragma once

#include "distributed/kinds/kind.h"

namespace cavs::distributed::kinds {

const SyncKind& ParameterServerKind();

}  // namespace cavs::distributed::kinds
