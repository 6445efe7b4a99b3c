// netdelay: holds every packet of one netfilter queue for a fixed time, then lets it go. The
// emulated cluster (scripts/cluster.sh) runs one per host namespace, fed by an iptables
// `NFQUEUE` rule on the host's OUTPUT to its uplink, where the kernel has no netem: a one-way
// latency added to everything the host sends to other hosts.
//
//   netdelay --queue=N --delay-us=D [--ready=FILE]
//
// Packets leave in arrival order (the delay is the same for all, so a batch verdict accepts
// every packet up to the oldest one due). Only the packet's metadata is copied to user space.
// The rule is added with --queue-bypass, so packets pass undelayed if this program is not
// running. Writes FILE (if given) once the queue is bound, and exits 0 on SIGTERM or SIGINT.
//
// Built by scripts/cluster.sh with g++ against libnetfilter-queue (Debian:
// libnetfilter-queue-dev): the well-kept library for the kernel's nfnetlink queue protocol.
#include <arpa/inet.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <string>

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

struct Held {
  uint32_t id;
  int64_t due_ns;
};

struct State {
  std::deque<Held> held;
  int64_t delay_ns = 0;
};

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int OnPacket(nfq_q_handle*, nfgenmsg*, nfq_data* nfa, void* data) {
  auto* state = static_cast<State*>(data);
  const nfqnl_msg_packet_hdr* hdr = nfq_get_msg_packet_hdr(nfa);
  if (hdr != nullptr) state->held.push_back({ntohl(hdr->packet_id), NowNs() + state->delay_ns});
  return 0;
}

bool ParseFlag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

int Fail(const char* what) {
  std::fprintf(stderr, "netdelay: %s: %s\n", what, std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  long queue = -1, delay_us = -1;
  std::string ready, value;
  for (int i = 1; i < argc; ++i) {
    char* end = nullptr;
    if (ParseFlag(argv[i], "--queue", &value)) {
      queue = std::strtol(value.c_str(), &end, 10);
      if (*end != '\0' || queue < 0 || queue > 65535) queue = -2;
    } else if (ParseFlag(argv[i], "--delay-us", &value)) {
      delay_us = std::strtol(value.c_str(), &end, 10);
      if (*end != '\0' || delay_us < 0 || delay_us > 10'000'000) delay_us = -2;
    } else if (!ParseFlag(argv[i], "--ready", &ready)) {
      std::fprintf(stderr, "netdelay: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (queue < 0 || delay_us < 0) {
    std::fprintf(
        stderr, "usage: netdelay --queue=N (0..65535) --delay-us=D (0..10000000) [--ready=FILE]\n");
    return 2;
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  // Timers wake within a microsecond of the deadline instead of the default 50 us slack.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

  State state;
  state.delay_ns = delay_us * 1000;
  nfq_handle* h = nfq_open();
  if (h == nullptr) return Fail("nfq_open");
  nfq_q_handle* qh = nfq_create_queue(h, static_cast<uint16_t>(queue), &OnPacket, &state);
  if (qh == nullptr) return Fail("nfq_create_queue (is another program bound to the queue?)");
  if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0) return Fail("nfq_set_mode");
  // Room for a few seconds of held packets at 10 Gbit/s of full-size frames.
  nfq_set_queue_maxlen(qh, 1 << 20);
  const int fd = nfq_fd(h);
  const int buffer_bytes = 16 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof(buffer_bytes));
  if (!ready.empty()) {
    FILE* f = std::fopen(ready.c_str(), "w");
    if (f == nullptr) return Fail(ready.c_str());
    std::fclose(f);
  }

  alignas(8) char buf[65536];
  while (!g_stop) {
    const int64_t now = NowNs();
    // Accept everything due: ids rise in arrival order, so one batch verdict covers them.
    uint32_t last_due = 0;
    bool any_due = false;
    while (!state.held.empty() && state.held.front().due_ns <= now) {
      last_due = state.held.front().id;
      any_due = true;
      state.held.pop_front();
    }
    if (any_due) nfq_set_verdict_batch(qh, last_due, NF_ACCEPT);
    timespec timeout{0, 200'000'000};  // wake at least every 200 ms to see a signal
    if (!state.held.empty()) {
      const int64_t wait = std::max<int64_t>(0, state.held.front().due_ns - NowNs());
      timeout = {static_cast<time_t>(wait / 1'000'000'000),
                 static_cast<long>(wait % 1'000'000'000)};
    }
    pollfd p{fd, POLLIN, 0};
    const int r = ppoll(&p, 1, &timeout, nullptr);
    if (r < 0 && errno != EINTR) return Fail("ppoll");
    if (r > 0) {
      // Drain what is queued without blocking.
      for (;;) {
        const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n <= 0) {
          if (n < 0 && errno == ENOBUFS) {
            // The socket overflowed: the kernel dropped notifications (and the packets with
            // them, as a full link would). Keep going.
            continue;
          }
          break;
        }
        nfq_handle_packet(h, buf, static_cast<int>(n));
      }
    }
  }
  // Release what is still held, so that no connection stalls until its retransmission.
  if (!state.held.empty()) nfq_set_verdict_batch(qh, state.held.back().id, NF_ACCEPT);
  nfq_destroy_queue(qh);
  nfq_close(h);
  return 0;
}
