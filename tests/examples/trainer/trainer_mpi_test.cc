// cavs-train's loop under mpirun (2 and 4 ranks): for every builder, N ranks on the same global
// batches end with the parameters of one process (within 1e-5 relative) and its dev accuracy
// (up to near ties: tests/examples/trainer/near_ties.h), with uneven and empty per-rank slices;
// every rank ends bit-identical to the others; a strategy file; the trace; resume at the same world
// size is bit-identical and another world size is refused.
//
// Each rank runs the single-process reference itself (a "single" communicator), so the
// comparison happens in one place. Optimizer SGD: Adagrad's step is about lr * sign(g) for tiny
// gradients, so rounding differences between a summed and a mean loss can flip it.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/builders.h"
#include "examples/trainer/trainer.h"
#include "gtest/gtest.h"
#include "tests/examples/trainer/near_ties.h"
#include "tests/testing/temp_dir.h"

namespace cavs::trainer {
namespace {

std::unique_ptr<distributed::Communicator> Comm(const std::string& kind) {
  absl::StatusOr<std::unique_ptr<distributed::Communicator>> c =
      distributed::MakeCommunicator(kind, {absl::Seconds(20)});
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

// 23 training trees in batches of 7: slices of 4/3 (2 ranks) or 2/2/2/1 (4 ranks), and a last
// batch of 2 trees that leaves ranks 2 and 3 of 4 without samples.
TrainerConfig Small() {
  TrainerConfig c;
  c.hidden = 8;
  c.embed = 8;
  c.max_train = 23;
  c.max_dev = 30;
  c.batch = 7;
  c.epochs = 2;
  c.optimizer = "sgd";
  c.lr = 0.2;
  return c;
}

// Trains `c` on `comm`; with `epoch_params`, keeps the parameters at the end of each epoch, those
// its dev pass evaluated.
std::unique_ptr<Trainer> RunWith(const TrainerConfig& c, distributed::Communicator* comm,
                                 std::vector<scheduler::ParamValues>* epoch_params = nullptr) {
  TrainOptions o;
  o.comm = comm;
  Trainer* self = nullptr;
  const int64_t steps_per_epoch = (c.max_train + c.batch - 1) / c.batch;
  if (epoch_params != nullptr) {
    o.after_step = [&](int64_t steps) {
      if (steps % steps_per_epoch != 0) return;
      absl::StatusOr<scheduler::ParamValues> p = testing::Snapshot(c, self->data(), self->store());
      EXPECT_TRUE(p.ok()) << p.status();
      if (p.ok()) epoch_params->push_back(std::move(*p));
    };
  }
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c, o);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return nullptr;
  self = t->get();
  absl::Status s = (*t)->Run();
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? std::move(*t) : nullptr;
}

// A new empty directory every rank uses: `name` in rank 0's temporary folder, which rank 0
// removes when it exits (tests/testing/temp_dir.h), also after a failed test.
std::string SharedDir(distributed::Communicator& comm, const std::string& name) {
  std::string dir = comm.rank() == 0 ? cavs::tests::FreshTempDir(name) : "";
  core::Tensor size = core::Tensor::Host(core::Shape{1}, core::DType::kInt64);
  size.data<int64_t>()[0] = static_cast<int64_t>(dir.size());
  EXPECT_TRUE(comm.Broadcast(size, 0).ok());
  core::Tensor bytes =
      core::Tensor::Host(core::Shape{size.data<int64_t>()[0]}, core::DType::kInt64);
  for (size_t i = 0; i < dir.size(); ++i) bytes.data<int64_t>()[i] = dir[i];
  EXPECT_TRUE(comm.Broadcast(bytes, 0).ok());
  dir.resize(static_cast<size_t>(size.data<int64_t>()[0]));
  for (size_t i = 0; i < dir.size(); ++i) dir[i] = static_cast<char>(bytes.data<int64_t>()[i]);
  EXPECT_TRUE(comm.Barrier().ok());
  return dir;
}

// |a - b| / max(|b|, 1e-3) over every element of every parameter.
double MaxRelativeDifference(const Trainer& a, const Trainer& b) {
  const auto& pa = a.store().parameters();
  const auto& pb = b.store().parameters();
  if (pa.size() != pb.size()) return 1e30;
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    std::vector<float> va = pa[i]->value.ToVector(), vb = pb[i]->value.ToVector();
    if (va.size() != vb.size()) return 1e30;
    for (size_t k = 0; k < va.size(); ++k) {
      worst = std::max(worst, std::fabs(double{va[k]} - vb[k]) / std::max(std::fabs(vb[k]), 1e-3f));
    }
  }
  return worst;
}

// True if every rank holds the same parameter bits as rank 0.
bool SameBitsOnEveryRank(distributed::Communicator& comm, const Trainer& t) {
  std::string bytes;
  for (const auto& p : t.store().parameters()) {
    std::vector<float> v = p->value.ToVector();
    bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  }
  core::Tensor mine = core::Tensor::Host(core::Shape{1}, core::DType::kInt64);
  core::Tensor all = core::Tensor::Host(core::Shape{comm.world_size()}, core::DType::kInt64);
  mine.data<int64_t>()[0] = static_cast<int64_t>(core::HashName(bytes));
  if (!comm.AllGather(mine, all).ok()) return false;
  for (int r = 0; r < comm.world_size(); ++r) {
    if (all.data<int64_t>()[r] != all.data<int64_t>()[0]) return false;
  }
  return true;
}

class MatchesOneProcess : public ::testing::TestWithParam<std::string> {};

TEST_P(MatchesOneProcess, ParametersAndCurve) {
  auto mpi = Comm("mpi");
  auto single = Comm("single");
  ASSERT_TRUE(mpi && single);
  TrainerConfig c = Small();
  c.strategy = GetParam();
  std::vector<scheduler::ParamValues> dist_params, one_params;
  std::unique_ptr<Trainer> dist = RunWith(c, mpi.get(), &dist_params);
  std::unique_ptr<Trainer> one = RunWith(c, single.get(), &one_params);
  ASSERT_TRUE(dist && one);
  ASSERT_NE(dist->synchronizer(), nullptr);
  EXPECT_EQ(dist->synchronizer()->strategy().name, GetParam());
  EXPECT_EQ(one->synchronizer(), nullptr);
  // The ranks' gradients are the one process's float32 sums grouped otherwise (each rank's
  // rows, then the reduction over ranks): the parameters stay within the engine's rounding of
  // each other (testing::kEvalRoundoff, tests/scheduler/engine_test.cc's kTolerance), and so
  // do the mean losses, means of positive terms.
  EXPECT_LE(MaxRelativeDifference(*dist, *one), testing::kEvalRoundoff);
  EXPECT_TRUE(SameBitsOnEveryRank(*mpi, *dist));
  ASSERT_EQ(dist->curve().size(), 2u);
  ASSERT_EQ(dist_params.size(), 2u);
  ASSERT_EQ(one_params.size(), 2u);
  const std::vector<scheduler::Graph>& dev = one->data().dev;
  int64_t labelled = 0, roots = 0;
  for (const scheduler::Graph& g : dev) {
    for (int32_t label : g.labels) labelled += label >= 0;
    for (int32_t root : g.Roots()) roots += !g.labels.empty() && g.labels[root] >= 0;
  }
  for (int e = 0; e < 2; ++e) {
    const EpochRecord &d = dist->curve()[e], &o = one->curve()[e];
    EXPECT_NEAR(d.train_loss, o.train_loss, testing::kEvalRoundoff * o.train_loss);
    EXPECT_NEAR(d.dev_loss, o.dev_loss, testing::kEvalRoundoff * o.dev_loss);
    // Predictions may differ where the two parameter sets' dev logits are near a tie.
    absl::StatusOr<std::vector<std::vector<float>>> a =
        testing::ReferenceLogits(c, one->data(), one_params[e], dev);
    absl::StatusOr<std::vector<std::vector<float>>> b =
        testing::ReferenceLogits(c, one->data(), dist_params[e], dev);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    const testing::NearTies ties = testing::CountNearTies(dev, *a, *b);
    EXPECT_LE(std::fabs(d.dev_all_acc - o.dev_all_acc) * labelled, ties.all + 1e-6)
        << "epoch " << e;
    EXPECT_LE(std::fabs(d.dev_root_acc - o.dev_root_acc) * roots, ties.roots + 1e-6)
        << "epoch " << e;
  }
  // The last step's batch (2 trees) leaves ranks 2 and 3 of 4 with nothing.
  const distributed::StepStats& s = dist->last_step_stats();
  EXPECT_GT(s.global_count, 0);
  if (mpi->rank() >= 2) EXPECT_EQ(s.local_count, 0);
  if (mpi->rank() < 2) EXPECT_GT(s.local_count, 0);
}

INSTANTIATE_TEST_SUITE_P(Builders, MatchesOneProcess,
                         ::testing::Values("allreduce", "ps", "ps-lb", "partitioned-ps", "hybrid"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Each rank's slices planned ahead on 2 threads (PlanQueue) train to the same bits as planned
// inside each step, empty slices included.
TEST(TrainerMpiTest, PlanningAheadGivesTheSameParameters) {
  auto mpi = Comm("mpi");
  ASSERT_TRUE(mpi);
  TrainerConfig c = Small();
  c.strategy = "hybrid";
  c.plan_threads = 0;
  std::unique_ptr<Trainer> inline_plans = RunWith(c, mpi.get());
  c.plan_threads = 2;
  std::unique_ptr<Trainer> queued = RunWith(c, mpi.get());
  ASSERT_TRUE(inline_plans && queued);
  EXPECT_EQ(MaxRelativeDifference(*inline_plans, *queued), 0.0);
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(inline_plans->curve()[e].train_loss, queued->curve()[e].train_loss);
  }
}

// --sync-overlap=false starts every unit after backward: the same collectives in the same
// order, so the same bits as with the overlap, for a bucketed and a PS strategy.
TEST(TrainerMpiTest, WithoutOverlapGivesTheSameParameters) {
  auto mpi = Comm("mpi");
  ASSERT_TRUE(mpi);
  for (const char* strategy : {"hybrid", "ps"}) {
    TrainerConfig c = Small();
    c.strategy = strategy;
    std::unique_ptr<Trainer> overlapped = RunWith(c, mpi.get());
    c.sync_overlap = false;
    std::unique_ptr<Trainer> after = RunWith(c, mpi.get());
    ASSERT_TRUE(overlapped && after) << strategy;
    EXPECT_EQ(MaxRelativeDifference(*overlapped, *after), 0.0) << strategy;
    EXPECT_EQ(overlapped->curve().back().train_loss, after->curve().back().train_loss) << strategy;
  }
}

// Batches of one tree: every step, all ranks but one join with zero samples.
TEST(TrainerMpiTest, RanksWithoutSamplesEveryStep) {
  auto mpi = Comm("mpi");
  auto single = Comm("single");
  ASSERT_TRUE(mpi && single);
  TrainerConfig c = Small();
  c.max_train = 6;
  c.batch = 1;
  c.epochs = 1;
  c.strategy = "hybrid";
  std::unique_ptr<Trainer> dist = RunWith(c, mpi.get());
  std::unique_ptr<Trainer> one = RunWith(c, single.get());
  ASSERT_TRUE(dist && one);
  EXPECT_LE(MaxRelativeDifference(*dist, *one), 1e-5);
  EXPECT_EQ(dist->last_step_stats().local_count > 0, mpi->rank() == 0);
}

TEST(TrainerMpiTest, StrategyFile) {
  auto mpi = Comm("mpi");
  ASSERT_TRUE(mpi);
  std::string dir = SharedDir(*mpi, "strategy");
  TrainerConfig c = Small();
  c.epochs = 1;
  // Built for this model by a throw-away trainer's store, written by each rank.
  auto single = Comm("single");
  std::unique_ptr<Trainer> probe = RunWith(c, single.get());
  ASSERT_TRUE(probe);
  distributed::BuildOptions bo;
  bo.bucket_bytes = 256;  // several buckets
  absl::StatusOr<distributed::Strategy> s =
      distributed::BuildStrategy("hybrid", probe->store(), mpi->world_size(), bo);
  ASSERT_TRUE(s.ok()) << s.status();
  s->name = "from-file";
  c.strategy_file = absl::StrCat(dir, "/strategy.rank", mpi->rank(), ".txt");
  // Rank 1's file starts with a UTF-8 byte order mark, as some editors write: skipped.
  std::ofstream(c.strategy_file) << (mpi->rank() == 1 ? "\xEF\xBB\xBF" : "")
                                 << distributed::SerializeStrategy(*s);
  std::unique_ptr<Trainer> dist = RunWith(c, mpi.get());
  ASSERT_TRUE(dist);
  EXPECT_EQ(dist->synchronizer()->strategy(), *s);
  EXPECT_GT(dist->synchronizer()->num_units(), 2);
}

TEST(TrainerMpiTest, TraceHasEveryPhase) {
  auto mpi = Comm("mpi");
  ASSERT_TRUE(mpi);
  std::string dir = SharedDir(*mpi, "trace");
  TrainerConfig c = Small();
  c.epochs = 1;
  c.trace = dir + "/run.json";
  c.checkpoint_dir = dir + "/ckpt";
  std::unique_ptr<Trainer> dist = RunWith(c, mpi.get());
  ASSERT_TRUE(dist);
  std::ifstream file(TracePath(c.trace, mpi->rank()));
  std::stringstream text;
  text << file.rdbuf();
  const std::string json = text.str();
  ASSERT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u) << json.substr(0, 100);
  for (const char* phase : {"\"data\"", "\"forward+backward\"", "\"gradient sync\"",
                            "\"optimizer\"", "\"eval\"", "\"rounds\":", "\"bytes_sent\":"}) {
    EXPECT_NE(json.find(phase), std::string::npos) << phase;
  }
  EXPECT_NE(json.find(absl::StrCat("\"pid\":", mpi->rank())), std::string::npos);
  // Rank 0 alone writes checkpoints.
  EXPECT_EQ(json.find("\"checkpoint\"") != std::string::npos, mpi->rank() == 0);
  // 4 steps (23 trees in batches of 7), 4 spans each, one eval (dev) and one for the test set.
  EXPECT_GE(dist->trace().num_spans(), 4 * 4 + 2);
}

TEST(TrainerMpiTest, ResumeAtTheSameWorldSizeIsBitIdentical) {
  auto mpi = Comm("mpi");
  ASSERT_TRUE(mpi);
  std::string dir = SharedDir(*mpi, "resume");
  TrainerConfig c = Small();
  c.strategy = "partitioned-ps";
  c.checkpoint_dir = dir + "/straight";
  std::unique_ptr<Trainer> straight = RunWith(c, mpi.get());
  c.checkpoint_dir = dir + "/resumed";
  c.epochs = 1;
  std::unique_ptr<Trainer> first = RunWith(c, mpi.get());
  c.epochs = 2;
  c.resume = true;
  std::unique_ptr<Trainer> second = RunWith(c, mpi.get());
  ASSERT_TRUE(straight && first && second);
  EXPECT_EQ(second->epochs_done(), 2);
  EXPECT_EQ(MaxRelativeDifference(*second, *straight), 0.0);
}

// Ranks started with other flags fail before step 1, each naming the first setting that
// differs; --epochs included, which no parameter shows (the rank with fewer epochs used to
// finish and exit 0 while the others waited for it until --comm-timeout).
TEST(TrainerMpiTest, RanksWithOtherSettingsFailNamingTheFirst) {
  auto mpi = Comm("mpi");
  ASSERT_TRUE(mpi);
  const int last = mpi->world_size() - 1;
  const bool odd = mpi->rank() == last;
  TrainOptions o;
  o.comm = mpi.get();
  TrainerConfig c = Small();
  c.epochs = odd ? 3 : 2;
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(t.status().message().find(absl::StrCat("ranks disagree on --epochs: rank ", last,
                                                   " differs from rank 0 (rank ", mpi->rank(),
                                                   " has epochs=", c.epochs, ";")),
            std::string::npos)
      << t.status();
  // Two differences: every rank names the first in the settings' order, --lr before --epochs.
  c.lr = odd ? 0.1 : 0.2;
  t = Trainer::Create(c, o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(absl::StrCat("ranks disagree on --lr: rank ", last)),
            std::string::npos)
      << t.status();
  // --strategy=auto's counts: the search's collectives follow them.
  c = Small();
  c.strategy = "auto";
  c.auto_profile_steps = odd ? 2 : 3;
  t = Trainer::Create(c, o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(
                absl::StrCat("ranks disagree on --auto-profile-steps: rank ", last)),
            std::string::npos)
      << t.status();
  // Other training data (the same size): the data's fingerprint, naming --train.
  c = Small();
  c.max_train = 22;
  std::string dir = SharedDir(*mpi, "otherdata");
  std::vector<std::string> lines;
  std::ifstream in(DefaultDataDir() + "/train.txt");
  for (std::string line; lines.size() < 22 && std::getline(in, line);) lines.push_back(line);
  if (odd) std::swap(lines[0], lines[1]);
  c.train_path = absl::StrCat(dir, "/train.rank", mpi->rank(), ".txt");
  std::ofstream out(c.train_path);
  for (const std::string& line : lines) out << line << "\n";
  out.close();
  c.dev_path = DefaultDataDir() + "/dev.txt";
  t = Trainer::Create(c, o);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("ranks disagree on the training data (--train"),
            std::string::npos)
      << t.status();
  // The same flags still train.
  EXPECT_TRUE(RunWith(Small(), mpi.get()) != nullptr);
}

TEST(TrainerMpiTest, ResumeAtAnotherWorldSizeIsRefused) {
  auto mpi = Comm("mpi");
  ASSERT_TRUE(mpi);
  std::string dir = SharedDir(*mpi, "worldsize");
  TrainerConfig c = Small();
  c.epochs = 1;
  c.checkpoint_dir = dir;
  auto single = Comm("single");
  if (mpi->rank() == 0) ASSERT_TRUE(RunWith(c, single.get()));  // written by 1 rank
  ASSERT_TRUE(mpi->Barrier().ok());
  c.resume = true;
  TrainOptions o;
  o.comm = mpi.get();
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(c, o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(t.status().message().find(
                absl::StrCat("written by a run of 1 rank(s), this run has ", mpi->world_size())),
            std::string::npos)
      << t.status();
}

}  // namespace
}  // namespace cavs::trainer
