#include "distributed/single_communicator.h"

#include <deque>
#include <map>
#include <utility>

#include "core/status.h"
#include "distributed/comm_state.h"

namespace cavs::distributed {

namespace {

using core::Tensor;

// Messages sent to oneself and not yet received, per tag, oldest first.
using Mailbox = std::map<int, std::deque<Tensor>>;

// A Recv that completes when a message with its tag is in the mailbox.
class RecvWork final : public Work {
 public:
  RecvWork(std::shared_ptr<internal::CommState> state, std::string what,
           std::shared_ptr<Mailbox> mailbox, Tensor buf, int tag)
      : Work(std::move(state), std::move(what)),
        mailbox_(std::move(mailbox)),
        buf_(std::move(buf)),
        tag_(tag) {}
  ~RecvWork() override { BreakOnAbandon(); }  // as every backend: the order is lost

 protected:
  absl::StatusOr<bool> Poll() override {
    auto it = mailbox_->find(tag_);
    if (it == mailbox_->end() || it->second.empty()) return false;
    Tensor message = std::move(it->second.front());
    it->second.pop_front();
    if (message.numel() != buf_.numel() || message.dtype() != buf_.dtype()) {
      return absl::InvalidArgumentError(
          absl::StrCat("message of ", message.DebugString(), " does not fit ", buf_.DebugString()));
    }
    CAVS_RETURN_IF_ERROR(buf_.CopyFrom(message));
    return true;
  }

 private:
  std::shared_ptr<Mailbox> mailbox_;
  Tensor buf_;
  int tag_;
};

class SingleCommunicator final : public Communicator {
 public:
  explicit SingleCommunicator(std::shared_ptr<internal::CommState> state)
      : Communicator(std::move(state)), mailbox_(std::make_shared<Mailbox>()) {}

 protected:
  WorkOr DoAllReduce(Tensor, std::string what) override { return Done(std::move(what)); }
  WorkOr DoReduce(Tensor, int, std::string what) override { return Done(std::move(what)); }
  WorkOr DoReduceScatter(Tensor send, Tensor recv, std::string what) override {
    return Copy(send, recv, std::move(what));
  }
  WorkOr DoAllGather(Tensor send, Tensor recv, std::string what) override {
    return Copy(send, recv, std::move(what));
  }
  WorkOr DoAllGatherV(Tensor send, Tensor recv, std::vector<int64_t>, std::string what) override {
    return Copy(send, recv, std::move(what));
  }
  WorkOr DoGatherV(Tensor send, Tensor recv, std::vector<int64_t>, int, std::string what) override {
    return Copy(send, recv, std::move(what));
  }
  WorkOr DoBroadcast(Tensor, int, std::string what) override { return Done(std::move(what)); }
  WorkOr DoSend(Tensor buf, int, int tag, std::string what) override {
    CAVS_ASSIGN_OR_RETURN(Tensor copy, buf.CopyTo(buf.device()));  // buf may change after Send
    (*mailbox_)[tag].push_back(std::move(copy));
    return Done(std::move(what));
  }
  WorkOr DoRecv(Tensor buf, int, int tag, std::string what) override {
    return std::unique_ptr<Work>(
        new RecvWork(shared_state(), std::move(what), mailbox_, std::move(buf), tag));
  }
  WorkOr DoBarrier(std::string what) override { return Done(std::move(what)); }
  absl::StatusOr<std::unique_ptr<Communicator>> DoDuplicate() override {
    return std::unique_ptr<Communicator>(new SingleCommunicator(shared_state()));
  }
  absl::StatusOr<std::unique_ptr<Communicator>> DoSplit(
      int color, int, std::shared_ptr<internal::CommState> state) override {
    if (color < 0) return std::unique_ptr<Communicator>();
    return std::unique_ptr<Communicator>(new SingleCommunicator(std::move(state)));
  }
  absl::StatusOr<int64_t> DoHostKey() override { return 0; }

 private:
  WorkOr Done(std::string what) { return internal::MakeDoneWork(shared_state(), std::move(what)); }
  WorkOr Copy(const Tensor& send, Tensor recv, std::string what) {
    CAVS_RETURN_IF_ERROR(recv.CopyFrom(send));
    return Done(std::move(what));
  }

  std::shared_ptr<Mailbox> mailbox_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> MakeSingleCommunicator(const CommOptions& options) {
  auto state = std::make_shared<internal::CommState>("single", 0, 1, options, core::Device::Cpu());
  return std::unique_ptr<Communicator>(new SingleCommunicator(std::move(state)));
}

void RegisterSingleCommunicator() { RegisterCommunicatorBackend("single", MakeSingleCommunicator); }

}  // namespace cavs::distributed
