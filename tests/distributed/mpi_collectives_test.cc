// Every MPI collective against values computed from the ranks (run under mpirun -np 2 and 4).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/communicator.h"
#include "distributed/half.h"
#include "tests/distributed/mpi_test_util.h"

namespace cavs::distributed {
namespace {

using core::DType;
using core::Tensor;
using testing::World;

bool Contains(const absl::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

template <typename T>
Tensor Filled(int64_t n, DType dtype, T (*value)(int64_t)) {
  Tensor t = Tensor::Host({n}, dtype);
  T* p = static_cast<T*>(t.raw_data());
  for (int64_t i = 0; i < n; ++i) p[i] = value(i);
  return t;
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  const T* p = static_cast<const T*>(t.raw_data());
  return std::vector<T>(p, p + t.numel());
}

class MpiCollectivesTest : public ::testing::Test {
 protected:
  Communicator& comm_ = World();
  const int r_ = World().rank();
  const int w_ = World().world_size();
};

TEST_F(MpiCollectivesTest, WorldIsTheLaunchersWorld) {
  EXPECT_EQ(comm_.backend(), "mpi");
  EXPECT_GE(w_, 2);
  EXPECT_TRUE(LaunchedByMpi());
  absl::StatusOr<std::unique_ptr<Communicator>> automatic = MakeCommunicator("auto");
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ((*automatic)->backend(), "mpi");
  EXPECT_EQ((*automatic)->rank(), r_);
}

TEST_F(MpiCollectivesTest, AllReduceSumsEveryDType) {
  const int64_t n = 1000;
  Tensor f = Tensor::Host({n});
  Tensor i64 = Tensor::Host({n}, DType::kInt64);
  Tensor i32 = Tensor::Host({n}, DType::kInt32);
  Tensor f16 = Tensor::Host({n}, DType::kFloat16);
  Tensor bf16 = Tensor::Host({n}, DType::kBFloat16);
  for (int64_t i = 0; i < n; ++i) {
    f.data<float>()[i] = r_ + 0.5f * i;
    i64.data<int64_t>()[i] = (r_ + 1) * 1000000000000LL + i;
    i32.data<int32_t>()[i] = (r_ + 1) * 1000 - static_cast<int32_t>(i);
    static_cast<uint16_t*>(f16.raw_data())[i] = FloatToHalf(0.25f * r_ + (i % 100));
    static_cast<uint16_t*>(bf16.raw_data())[i] = FloatToBFloat16(static_cast<float>(r_ + i % 7));
  }
  for (Tensor* t : {&f, &i64, &i32, &f16, &bf16}) ASSERT_TRUE(comm_.AllReduce(*t).ok());
  const int64_t rank_sum = w_ * (w_ - 1) / 2;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(f.data<float>()[i], rank_sum + 0.5f * i * w_) << i;
    ASSERT_EQ(i64.data<int64_t>()[i], (rank_sum + w_) * 1000000000000LL + w_ * i) << i;
    ASSERT_EQ(i32.data<int32_t>()[i], (rank_sum + w_) * 1000 - w_ * i) << i;
    ASSERT_EQ(HalfToFloat(static_cast<uint16_t*>(f16.raw_data())[i]),
              0.25f * rank_sum + w_ * (i % 100))
        << i;
    ASSERT_EQ(BFloat16ToFloat(static_cast<uint16_t*>(bf16.raw_data())[i]),
              static_cast<float>(rank_sum + w_ * (i % 7)))
        << i;
  }
}

TEST_F(MpiCollectivesTest, ReduceToEveryRoot) {
  for (int root = 0; root < w_; ++root) {
    Tensor t = Tensor::FromVector({1.0f * (r_ + 1), 2.0f}, {2});
    ASSERT_TRUE(comm_.Reduce(t, root).ok());
    if (r_ == root) {
      EXPECT_EQ(t.ToVector(), std::vector<float>({w_ * (w_ + 1) / 2.0f, 2.0f * w_}));
    } else {
      EXPECT_EQ(t.ToVector(), std::vector<float>({1.0f * (r_ + 1), 2.0f}));  // only read
    }
  }
}

TEST_F(MpiCollectivesTest, ReduceScatterGivesEachRankItsBlockOfTheSum) {
  const int64_t n = 3;
  Tensor send = Tensor::Host({w_ * n});
  for (int64_t j = 0; j < w_ * n; ++j) send.data<float>()[j] = 100.0f * r_ + j;
  Tensor recv = Tensor::Host({n});
  ASSERT_TRUE(comm_.ReduceScatter(send, recv).ok());
  for (int64_t k = 0; k < n; ++k) {
    EXPECT_EQ(recv.data<float>()[k], 100.0f * w_ * (w_ - 1) / 2 + w_ * (r_ * n + k)) << k;
  }
}

TEST_F(MpiCollectivesTest, AllGatherPlacesRankBlocksInOrder) {
  Tensor send = Tensor::Host({2}, DType::kInt64);
  send.data<int64_t>()[0] = 10 * r_;
  send.data<int64_t>()[1] = 10 * r_ + 1;
  Tensor recv = Tensor::Host({2 * w_}, DType::kInt64);
  ASSERT_TRUE(comm_.AllGather(send, recv).ok());
  for (int q = 0; q < w_; ++q) {
    EXPECT_EQ(recv.data<int64_t>()[2 * q], 10 * q);
    EXPECT_EQ(recv.data<int64_t>()[2 * q + 1], 10 * q + 1);
  }
}

// Rank q sends q % 3 rows of [q, q + 0.5, q + 0.25]: ranks 0 and 3 send nothing.
Tensor UnevenRows(int q) {
  const int64_t rows = q % 3;
  Tensor t = Tensor::Host({rows, 3});
  for (int64_t i = 0; i < rows; ++i) {
    t.data<float>()[3 * i] = q + 10.0f * i;
    t.data<float>()[3 * i + 1] = q + 0.5f;
    t.data<float>()[3 * i + 2] = q + 0.25f;
  }
  return t;
}

std::vector<float> ExpectedUneven(int w) {
  std::vector<float> want;
  for (int q = 0; q < w; ++q) {
    const std::vector<float> rows = UnevenRows(q).ToVector();
    want.insert(want.end(), rows.begin(), rows.end());
  }
  return want;
}

TEST_F(MpiCollectivesTest, AllGatherVWithUnevenAndEmptyRanks) {
  std::vector<int64_t> counts;
  for (int q = 0; q < w_; ++q) counts.push_back(q % 3);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  Tensor recv = Tensor::Host({total, 3});
  ASSERT_TRUE(comm_.AllGatherV(UnevenRows(r_), recv, counts).ok());
  EXPECT_EQ(recv.ToVector(), ExpectedUneven(w_));

  absl::StatusOr<Gathered> gathered = comm_.AllGatherV(UnevenRows(r_));
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_EQ(gathered->counts, counts);
  EXPECT_EQ(gathered->data.shape(), core::Shape({total, 3}));
  EXPECT_EQ(gathered->data.ToVector(), ExpectedUneven(w_));

  // A rank sending nothing may use any trailing shape; the others' width wins.
  Tensor odd = r_ % 3 == 0 ? Tensor::Host({0}) : UnevenRows(r_);
  gathered = comm_.AllGatherV(odd);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_EQ(gathered->data.ToVector(), ExpectedUneven(w_));
}

TEST_F(MpiCollectivesTest, AllGatherVRejectsDifferentWidthsOnEveryRank) {
  Tensor send = Tensor::Host({1, r_ == 1 ? 4 : 3});
  absl::StatusOr<Gathered> gathered = comm_.AllGatherV(send);
  EXPECT_EQ(gathered.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(gathered.status(), "rank 1 sends slices of 4 elements"))
      << gathered.status();
  EXPECT_TRUE(comm_.health().ok());
}

TEST_F(MpiCollectivesTest, GatherVToEveryRoot) {
  std::vector<int64_t> counts;
  for (int q = 0; q < w_; ++q) counts.push_back(q % 3);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  for (int root = 0; root < w_; ++root) {
    Tensor recv = r_ == root ? Tensor::Host({total, 3}) : Tensor();
    ASSERT_TRUE(comm_.GatherV(UnevenRows(r_), recv, counts, root).ok());
    if (r_ == root) {
      EXPECT_EQ(recv.ToVector(), ExpectedUneven(w_));
    }
  }
}

TEST_F(MpiCollectivesTest, BroadcastFromEveryRoot) {
  for (int root = 0; root < w_; ++root) {
    Tensor t = Tensor::FromVector({1.0f * r_, -1.0f * r_, 7.0f}, {3});
    ASSERT_TRUE(comm_.Broadcast(t, root).ok());
    EXPECT_EQ(t.ToVector(), std::vector<float>({1.0f * root, -1.0f * root, 7.0f}));
  }
}

TEST_F(MpiCollectivesTest, SendAndRecvAroundARing) {
  const int next = (r_ + 1) % w_, prev = (r_ + w_ - 1) % w_;
  Tensor in = Tensor::Host({4}, DType::kInt64);
  absl::StatusOr<std::unique_ptr<Work>> recv = comm_.StartRecv(in, prev, 9);
  ASSERT_TRUE(recv.ok()) << recv.status();
  Tensor out = Tensor::Host({4}, DType::kInt64);
  for (int i = 0; i < 4; ++i) out.data<int64_t>()[i] = 100 * r_ + i;
  ASSERT_TRUE(comm_.Send(out, next, 9).ok());
  ASSERT_TRUE((*recv)->Wait().ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(in.data<int64_t>()[i], 100 * prev + i);
  ASSERT_TRUE(comm_.Barrier().ok());
}

TEST_F(MpiCollectivesTest, DuplicatesKeepTheirOwnOrder) {
  absl::StatusOr<std::unique_ptr<Communicator>> a = comm_.Duplicate();
  absl::StatusOr<std::unique_ptr<Communicator>> b = comm_.Duplicate();
  ASSERT_TRUE(a.ok() && b.ok());
  Tensor ta = Tensor::FromVector({1.0f}, {1});
  Tensor tb = Tensor::FromVector({10.0f}, {1});
  // Odd ranks start the two allreduces in the opposite order: fine on two communicators.
  std::vector<std::unique_ptr<Work>> works;
  for (int k = 0; k < 2; ++k) {
    const bool first_a = (k == 0) == (r_ % 2 == 0);
    absl::StatusOr<std::unique_ptr<Work>> w =
        first_a ? (*a)->StartAllReduce(ta) : (*b)->StartAllReduce(tb);
    ASSERT_TRUE(w.ok());
    works.push_back(*std::move(w));
  }
  for (auto& w : works) ASSERT_TRUE(w->Wait().ok());
  EXPECT_EQ(ta.ToVector(), std::vector<float>({1.0f * w_}));
  EXPECT_EQ(tb.ToVector(), std::vector<float>({10.0f * w_}));
}

TEST_F(MpiCollectivesTest, NonblockingAllReduceCompletesUnderPolling) {
  const int64_t n = 1 << 20;
  Tensor t = Tensor::Host({n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = 1.0f;
  absl::StatusOr<std::unique_ptr<Work>> work = comm_.StartAllReduce(t);
  ASSERT_TRUE(work.ok());
  int polls = 0;
  while (true) {
    absl::StatusOr<bool> done = (*work)->Test();
    ASSERT_TRUE(done.ok()) << done.status();
    if (*done) break;
    ++polls;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  EXPECT_TRUE((*work)->done());
  EXPECT_EQ(t.data<float>()[0], 1.0f * w_);
  EXPECT_EQ(t.data<float>()[n - 1], 1.0f * w_);
}

TEST_F(MpiCollectivesTest, TrafficFollowsTheFlatModel) {
  std::unique_ptr<Communicator> comm = testing::FreshComm(absl::Seconds(10));
  ASSERT_TRUE(comm->AllReduce(Tensor::Host({1000})).ok());
  EXPECT_EQ(comm->stats().bytes_sent, 2 * (w_ - 1) * 4000 / w_);
  ASSERT_TRUE(comm->Broadcast(Tensor::Host({10}), 0).ok());
  const int64_t after = 2 * (w_ - 1) * 4000 / w_ + (r_ == 0 ? (w_ - 1) * 40 : 0);
  EXPECT_EQ(comm->stats().bytes_sent, after);
  EXPECT_EQ(comm->stats().operations, 2);
}

TEST_F(MpiCollectivesTest, DeviceBuffersAreStagedThroughHostMemory) {
  if (!testing::UseHostMemoryDevice()) GTEST_SKIP() << "a real CUDA backend is linked";
  absl::StatusOr<Tensor> t =
      Tensor::FromVector({1.0f * r_, 2.0f}, {2}).CopyTo(core::Device::Cuda(0));
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(comm_.AllReduce(*t).ok());
  EXPECT_EQ(t->ToVector(), std::vector<float>({w_ * (w_ - 1) / 2.0f, 2.0f * w_}));
  absl::StatusOr<Tensor> b = Tensor::FromVector({1.0f * r_}, {1}).CopyTo(core::Device::Cuda(0));
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(comm_.Broadcast(*b, w_ - 1).ok());
  EXPECT_EQ(b->ToVector(), std::vector<float>({1.0f * (w_ - 1)}));
  absl::StatusOr<Tensor> rows = UnevenRows(r_).CopyTo(core::Device::Cuda(0));
  ASSERT_TRUE(rows.ok());
  absl::StatusOr<Gathered> gathered = comm_.AllGatherV(*rows);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_EQ(gathered->data.ToVector(), ExpectedUneven(w_));
}

TEST_F(MpiCollectivesTest, ARankThatSkipsTheCollectiveIsADeadlineNotAHang) {
  std::unique_ptr<Communicator> comm = testing::FreshComm(absl::Seconds(1));
  Tensor t = Tensor::FromVector({1.0f}, {1});
  if (r_ == w_ - 1) {
    // Late by more than the others' timeout; its allreduce still matches the ones they left
    // posted, so it completes.
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    EXPECT_TRUE(comm->AllReduce(t).ok());
  } else {
    const absl::Time start = absl::Now();
    absl::Status s = comm->AllReduce(t);
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_TRUE(Contains(s, "allreduce #1 float32[1]")) << s;
    EXPECT_TRUE(Contains(s, absl::StrCat("on rank ", r_, " of ", w_))) << s;
    EXPECT_GE(took, absl::Seconds(1));
    EXPECT_LT(took, absl::Seconds(4));
    absl::Status later = comm->Barrier();
    EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition) << later;
  }
  ASSERT_TRUE(World().Barrier().ok());  // the world communicator is unaffected
}

// Split: even and odd ranks, ordered by descending rank; a rank with a negative color gets no
// communicator. Sums within each part, and the parent's traffic counts the part's bytes.
TEST_F(MpiCollectivesTest, SplitMakesIndependentGroups) {
  const int color = r_ == w_ - 1 && w_ > 2 ? -1 : r_ % 2;
  const int64_t bytes_before = comm_.stats().bytes_sent;
  absl::StatusOr<std::unique_ptr<Communicator>> part = comm_.Split(color, -r_, "parity");
  ASSERT_TRUE(part.ok()) << part.status();
  if (color < 0) {
    EXPECT_EQ(*part, nullptr);
  } else {
    ASSERT_NE(*part, nullptr);
    std::vector<int> members;
    for (int q = w_ - 1; q >= 0; --q) {
      if (q % 2 == color && !(q == w_ - 1 && w_ > 2)) members.push_back(q);
    }
    EXPECT_EQ((*part)->world_size(), static_cast<int>(members.size()));
    EXPECT_EQ(members[(*part)->rank()], r_);
    Tensor t = Tensor::FromVector({static_cast<float>(r_ + 1)}, {1});
    ASSERT_TRUE((*part)->AllReduce(t).ok());
    float want = 0;
    for (int q : members) want += static_cast<float>(q + 1);
    EXPECT_EQ(t.ToVector()[0], want);
    if (members.size() > 1) EXPECT_GT(comm_.stats().bytes_sent, bytes_before);
  }
  ASSERT_TRUE(World().Barrier().ok());
}

// The hosts found agree with the launcher's placement (Open MPI's local rank and size: one host
// under a plain mpirun, several on the emulated cluster). Declared hosts follow ranks_per_host.
TEST_F(MpiCollectivesTest, TopologyAsLaunchedAndDeclaredHosts) {
  absl::StatusOr<Topology> t = comm_.DiscoverTopology();
  ASSERT_TRUE(t.ok()) << t.status();
  const char* local_rank = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (local_rank != nullptr && local_size != nullptr) {
    EXPECT_EQ(t->LocalRank(r_), std::atoi(local_rank)) << t->Describe();
    EXPECT_EQ(t->RanksOn(t->host_of_rank[r_]).size(), static_cast<size_t>(std::atoi(local_size)))
        << t->Describe();
  }
  absl::StatusOr<std::unique_ptr<Communicator>> two =
      MakeCommunicator("mpi", {.timeout = absl::Seconds(10), .ranks_per_host = 2});
  ASSERT_TRUE(two.ok()) << two.status();
  absl::StatusOr<Topology> declared = (*two)->DiscoverTopology();
  ASSERT_TRUE(declared.ok()) << declared.status();
  EXPECT_EQ(declared->num_hosts(), (w_ + 1) / 2);
  EXPECT_EQ(declared->host_of_rank[r_], r_ / 2);
  EXPECT_EQ(declared->LocalRank(r_), r_ % 2);
  ASSERT_TRUE(World().Barrier().ok());
}

// A sub-communicator's timeout names its own rank and the rank in the job, and breaks the
// parent too.
TEST_F(MpiCollectivesTest, ASplitTimeoutNamesBothRanksAndBreaksTheParent) {
  std::unique_ptr<Communicator> comm = testing::FreshComm(absl::Seconds(1));
  absl::StatusOr<std::unique_ptr<Communicator>> part = comm->Split(0, w_ - r_, "reversed");
  ASSERT_TRUE(part.ok()) << part.status();
  Tensor t = Tensor::FromVector({1.0f}, {1});
  if (r_ == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    EXPECT_TRUE((*part)->AllReduce(t).ok());
  } else {
    absl::Status s = (*part)->AllReduce(t);
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_TRUE(Contains(s, "mpi reversed allreduce")) << s;
    EXPECT_TRUE(Contains(s, absl::StrCat("on rank ", w_ - 1 - r_, " of ", w_, " (rank ", r_, " of ",
                                         w_, " in the job)")))
        << s;
    EXPECT_EQ(comm->Barrier().code(), absl::StatusCode::kFailedPrecondition);
  }
  ASSERT_TRUE(World().Barrier().ok());
}

TEST_F(MpiCollectivesTest, NcclFailsCleanlyWithoutAGpu) {
  absl::StatusOr<std::unique_ptr<Communicator>> nccl = MakeCommunicator("nccl", {absl::Seconds(5)});
  if (nccl.ok()) GTEST_SKIP() << "NCCL works here";
  EXPECT_FALSE(nccl.status().message().empty());
  ASSERT_TRUE(World().Barrier().ok());
}

}  // namespace
}  // namespace cavs::distributed
