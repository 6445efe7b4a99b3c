#include "distributed/communicator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distributed/single_communicator.h"

namespace cavs::distributed {
namespace {

using core::DType;
using core::Tensor;

bool Contains(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

std::unique_ptr<Communicator> Single(absl::Duration timeout = absl::Seconds(5)) {
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator("single", {timeout});
  EXPECT_TRUE(comm.ok()) << comm.status();
  return *std::move(comm);
}

Tensor Int64s(const std::vector<int64_t>& v) {
  Tensor t = Tensor::Host({static_cast<int64_t>(v.size())}, DType::kInt64);
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

std::vector<int64_t> Int64Vector(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

TEST(MakeCommunicatorTest, SingleAndAutoOutsideALauncher) {
  std::unique_ptr<Communicator> comm = Single();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->world_size(), 1);
  EXPECT_EQ(comm->backend(), "single");
  EXPECT_TRUE(comm->buffer_device().is_cpu());
  EXPECT_EQ(comm->PieceBytes(), 0);  // the backend's own: whole
  absl::StatusOr<std::unique_ptr<Communicator>> pieced =
      MakeCommunicator("single", {.piece_bytes = 1000});
  ASSERT_TRUE(pieced.ok()) << pieced.status();
  EXPECT_EQ((*pieced)->PieceBytes(), 1000);
  if (!LaunchedByMpi()) {
    absl::StatusOr<std::unique_ptr<Communicator>> automatic = MakeCommunicator("auto");
    ASSERT_TRUE(automatic.ok()) << automatic.status();
    EXPECT_EQ((*automatic)->backend(), "single");
  }
}

TEST(MakeCommunicatorTest, RejectsUnknownKindsAndTimeouts) {
  absl::StatusOr<std::unique_ptr<Communicator>> bad = MakeCommunicator("gloo");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.status(), "'gloo'")) << bad.status();
  EXPECT_TRUE(Contains(bad.status(), "auto, single, mpi or nccl")) << bad.status();
  bad = MakeCommunicator("single", {absl::ZeroDuration()});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MakeCommunicatorTest, BackendsMissingFromTheBuildAreAClearError) {
#if defined(CAVS_WITH_MPI)
  GTEST_SKIP() << "this build has MPI";
#else
  absl::StatusOr<std::unique_ptr<Communicator>> mpi = MakeCommunicator("mpi");
  EXPECT_EQ(mpi.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(mpi.status(), "-DCAVS_WITH_MPI=ON")) << mpi.status();
  absl::StatusOr<std::unique_ptr<Communicator>> nccl = MakeCommunicator("nccl");
  EXPECT_EQ(nccl.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(nccl.status(), "-DCAVS_WITH_NCCL=ON")) << nccl.status();
#endif
}

TEST(SingleCommunicatorTest, ReductionsAndBroadcastKeepTheBuffer) {
  std::unique_ptr<Communicator> comm = Single();
  Tensor f = Tensor::FromVector({1.5f, -2.0f, 3.0f}, {3});
  Tensor i = Int64s({7, -8});
  ASSERT_TRUE(comm->AllReduce(f).ok());
  ASSERT_TRUE(comm->AllReduce(i).ok());
  ASSERT_TRUE(comm->Reduce(f, 0).ok());
  ASSERT_TRUE(comm->Broadcast(i, 0).ok());
  EXPECT_EQ(f.ToVector(), std::vector<float>({1.5f, -2.0f, 3.0f}));
  EXPECT_EQ(Int64Vector(i), std::vector<int64_t>({7, -8}));
  ASSERT_TRUE(comm->Barrier().ok());
}

TEST(SingleCommunicatorTest, GathersCopySendIntoRecv) {
  std::unique_ptr<Communicator> comm = Single();
  Tensor send = Tensor::FromVector({1, 2, 3, 4}, {2, 2});
  Tensor recv = Tensor::Host({2, 2});
  ASSERT_TRUE(comm->AllGather(send, recv).ok());
  EXPECT_EQ(recv.ToVector(), send.ToVector());
  Tensor scattered = Tensor::Host({4});
  ASSERT_TRUE(comm->ReduceScatter(send, scattered).ok());
  EXPECT_EQ(scattered.ToVector(), send.ToVector());
  Tensor v = Tensor::Host({2, 2});
  ASSERT_TRUE(comm->AllGatherV(send, v, {2}).ok());
  EXPECT_EQ(v.ToVector(), send.ToVector());
  Tensor g = Tensor::Host({2, 2});
  ASSERT_TRUE(comm->GatherV(send, g, {2}, 0).ok());
  EXPECT_EQ(g.ToVector(), send.ToVector());
  absl::StatusOr<Gathered> gathered = comm->AllGatherV(Int64s({5, 6, 7}));
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_EQ(gathered->counts, std::vector<int64_t>({3}));
  EXPECT_EQ(Int64Vector(gathered->data), std::vector<int64_t>({5, 6, 7}));
}

TEST(SingleCommunicatorTest, MessagesToSelfArriveInOrderPerTag) {
  std::unique_ptr<Communicator> comm = Single();
  Tensor a = Tensor::FromVector({1, 2}, {2});
  ASSERT_TRUE(comm->Send(a, 0, 3).ok());
  ASSERT_TRUE(comm->Send(Tensor::FromVector({9, 9}, {2}), 0, 4).ok());
  ASSERT_TRUE(comm->Send(Tensor::FromVector({5, 6}, {2}), 0, 3).ok());
  a.data<float>()[0] = 100;  // a Send copies: later changes do not travel
  Tensor got = Tensor::Host({2});
  ASSERT_TRUE(comm->Recv(got, 0, 3).ok());
  EXPECT_EQ(got.ToVector(), std::vector<float>({1, 2}));
  ASSERT_TRUE(comm->Recv(got, 0, 3).ok());
  EXPECT_EQ(got.ToVector(), std::vector<float>({5, 6}));
  ASSERT_TRUE(comm->Recv(got, 0, 4).ok());
  EXPECT_EQ(got.ToVector(), std::vector<float>({9, 9}));
}

TEST(SingleCommunicatorTest, AStuckOperationTimesOutAndBreaksTheCommunicatorAndDuplicates) {
  std::unique_ptr<Communicator> comm = Single(absl::Milliseconds(50));
  absl::StatusOr<std::unique_ptr<Communicator>> dup = comm->Duplicate();
  ASSERT_TRUE(dup.ok()) << dup.status();
  const absl::Time start = absl::Now();
  absl::Status s = comm->Recv(Tensor::Host({1}), 0, 1);  // nobody sends
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_TRUE(Contains(s, "recv #0")) << s;
  EXPECT_TRUE(Contains(s, "from rank 0 (tag 1)")) << s;
  EXPECT_TRUE(Contains(s, "on rank 0 of 1")) << s;
  absl::Status later = (*dup)->AllReduce(Tensor::Host({1}));
  EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition) << later;
  EXPECT_TRUE(Contains(later, "unusable")) << later;
  EXPECT_TRUE(Contains(later, "recv #0")) << later;
  EXPECT_FALSE(comm->health().ok());
}

TEST(SingleCommunicatorTest, AbandoningAWorkInFlightBreaksTheCommunicator) {
  std::unique_ptr<Communicator> comm = Single();
  {
    absl::StatusOr<std::unique_ptr<Work>> recv = comm->StartRecv(Tensor::Host({1}), 0, 2);
    ASSERT_TRUE(recv.ok());
    absl::StatusOr<bool> done = (*recv)->Test();
    ASSERT_TRUE(done.ok());
    EXPECT_FALSE(*done);
  }
  absl::Status s = comm->Barrier();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "abandoned")) << s;
}

TEST(SingleCommunicatorTest, ArgumentErrorsNameTheProblem) {
  std::unique_ptr<Communicator> comm = Single();
  absl::Status s = comm->AllReduce(Tensor());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "undefined")) << s;
  s = comm->AllGather(Tensor::Host({3}), Tensor::Host({4}));
  EXPECT_TRUE(Contains(s, "world size 1")) << s;
  s = comm->AllGather(Tensor::Host({3}), Tensor::Host({3}, DType::kInt64));
  EXPECT_TRUE(Contains(s, "float32")) << s;
  s = comm->Broadcast(Tensor::Host({3}), 1);
  EXPECT_TRUE(Contains(s, "root 1 is out of range")) << s;
  s = comm->Send(Tensor::Host({3}), 0, 40000);
  EXPECT_TRUE(Contains(s, "tag 40000")) << s;
  s = comm->AllGatherV(Tensor::Host({3, 2}), Tensor::Host({3, 2}), {2});
  EXPECT_TRUE(Contains(s, "counts[0] is 2")) << s;
  s = comm->AllGatherV(Tensor::Host({3, 2}), Tensor::Host({4, 2}), {3});
  EXPECT_TRUE(Contains(s, "does not hold 3 slices of 2 elements")) << s;
  s = comm->ReduceScatter(Tensor::Host({3}), Tensor::Host({2}));
  EXPECT_TRUE(Contains(s, "reduce_scatter")) << s;
  EXPECT_TRUE(comm->health().ok());  // argument errors do not break the communicator
}

TEST(SingleCommunicatorTest, SplitAndTopologyOfOneRank) {
  std::unique_ptr<Communicator> comm = *MakeCommunicator("single");
  absl::StatusOr<std::unique_ptr<Communicator>> part = comm->Split(3, 0, "part");
  ASSERT_TRUE(part.ok()) << part.status();
  ASSERT_NE(*part, nullptr);
  EXPECT_EQ((*part)->world_size(), 1);
  EXPECT_EQ((*part)->backend(), "single part");
  absl::StatusOr<std::unique_ptr<Communicator>> none = comm->Split(-1, 0, "none");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, nullptr);
  absl::StatusOr<Topology> t = comm->DiscoverTopology();
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host_of_rank, std::vector<int>({0}));
  EXPECT_EQ(t->Describe(), "1 host x 1 rank");
  EXPECT_EQ((Topology{{0, 0, 1, 2, 2}}).Describe(), "3 hosts (ranks per host 2, 1, 2)");
  EXPECT_EQ((Topology{{0, 0, 1, 1}}).Describe(), "2 hosts x 2 ranks");
  EXPECT_EQ((Topology{{0, 0, 1, 1}}).RanksOn(1), std::vector<int>({2, 3}));
  EXPECT_EQ((Topology{{0, 0, 1, 1}}).LocalRank(3), 1);
  std::unique_ptr<Communicator> bad = *MakeCommunicator("single", {.ranks_per_host = -1});
  EXPECT_EQ(bad->DiscoverTopology().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SingleCommunicatorTest, CountsOperationsAndNoTrafficForOneRank) {
  std::unique_ptr<Communicator> comm = Single();
  ASSERT_TRUE(comm->AllReduce(Tensor::Host({100})).ok());
  ASSERT_TRUE(comm->Broadcast(Tensor::Host({100}), 0).ok());
  EXPECT_EQ(comm->stats().operations, 2);
  EXPECT_EQ(comm->stats().bytes_sent, 0);
  EXPECT_EQ(comm->stats().bytes_received, 0);
}

TEST(SlicesTest, FirstDimensionSlices) {
  EXPECT_EQ(NumSlices(core::Shape({})), 1);
  EXPECT_EQ(SliceElements(core::Shape({})), 1);
  EXPECT_EQ(NumSlices(core::Shape({7})), 7);
  EXPECT_EQ(SliceElements(core::Shape({7})), 1);
  EXPECT_EQ(NumSlices(core::Shape({3, 4, 5})), 3);
  EXPECT_EQ(SliceElements(core::Shape({3, 4, 5})), 20);
  EXPECT_EQ(SliceElements(core::Shape({0, 4})), 4);
}

}  // namespace
}  // namespace cavs::distributed
