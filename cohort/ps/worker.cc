#include "cohort/ps/worker.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "cohort/core/logging.h"

namespace cohort::ps {

using detail::str;

namespace {

std::pair<std::string, uint16_t> split_address(const std::string& a, int index) {
  const size_t colon = a.rfind(':');
  const std::string port = colon == std::string::npos ? "" : a.substr(colon + 1);
  unsigned value = 0;
  auto [end, err] = std::from_chars(port.data(), port.data() + port.size(), value);
  COHORT_CHECK_IO(colon != std::string::npos && colon > 0 && err == std::errc() &&
                      end == port.data() + port.size() && value > 0 && value <= 65535,
                  "parameter server ", index, " published a malformed address '", a,
                  "' (expected HOST:PORT)");
  return {a.substr(0, colon), uint16_t(value)};
}

}  // namespace

// One thread per server 1..n-1, parked between jobs. run() hands every thread the same job,
// runs job(0) on the caller's thread, and returns once every thread has finished it.
class PsWorker::ServerThreads {
 public:
  explicit ServerThreads(size_t n) : errors_(n) {
    for (size_t i = 1; i < n; ++i) threads_.emplace_back([this, i] { loop(i); });
  }
  ~ServerThreads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  ServerThreads(const ServerThreads&) = delete;
  ServerThreads& operator=(const ServerThreads&) = delete;

  // Rethrows the error of the lowest server index that failed.
  void run(const std::function<void(int)>& job) {
    std::lock_guard<std::mutex> one_job(run_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& e : errors_) e = nullptr;
      job_ = &job;
      left_ = threads_.size();
      ++generation_;
    }
    start_.notify_all();
    std::exception_ptr first;
    try {
      job(0);
    } catch (...) {
      first = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return left_ == 0; });
    job_ = nullptr;
    for (size_t i = 1; i < errors_.size() && !first; ++i) first = errors_[i];
    lock.unlock();
    if (first) std::rethrow_exception(first);
  }

 private:
  void loop(size_t i) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        job = job_;
      }
      std::exception_ptr error;
      try {
        (*job)(int(i));
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu_);
      errors_[i] = error;
      if (--left_ == 0) done_.notify_one();
    }
  }

  std::mutex run_mu_;  // one job at a time; taken before mu_
  std::mutex mu_;      // guards everything below
  std::condition_variable start_, done_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;  // bumped per job: a thread runs each generation once
  size_t left_ = 0;          // threads still running the current job
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;  // by server; [0] unused (the caller's own)
  std::vector<std::thread> threads_;
};

PsWorker::PsWorker(WorkerOptions options, Layout layout)
    : o_(std::move(options)), layout_(std::move(layout)) {
  COHORT_CHECK_ARG(o_.store != nullptr, "parameter server worker: no rendezvous store");
  ranges_ = partition_keys(layout_.total, o_.num_servers);
  for (int i = 0; i < o_.num_servers; ++i) {
    std::string address;
    try {
      address = o_.store->get_string(server_key(i), o_.timeout);
    } catch (const Timeout& e) {
      throw Timeout(str("parameter server ", i, " did not publish its address (", server_key(i),
                        ") within ", o_.timeout.count(), " ms; is it running? (", e.what(), ")"));
    }
    auto [host, port] = split_address(address, i);
    clients_.push_back(std::make_unique<comm::service::Client>(
        comm::service::ClientOptions{.host = host,
                                     .port = port,
                                     .secret = o_.secret,
                                     .secret_policy = o_.secret_policy,
                                     .name = str("parameter server ", i),
                                     .connect_timeout = o_.timeout,
                                     .timeout = o_.timeout}));
  }
  const Bytes hello = encode_hello({o_.rank, o_.num_workers, o_.total_steps, layout_});
  on_every_server([&](int i) { clients_[size_t(i)]->request(hello); });
}

PsWorker::~PsWorker() {
  bye();
}

template <typename F>
void PsWorker::on_every_server(F f) {
  if (clients_.size() == 1) return f(0);  // no other thread needed
  if (!threads_) threads_ = std::make_unique<ServerThreads>(clients_.size());
  threads_->run(std::function<void(int)>(std::ref(f)));
}

TransferStats PsWorker::pull(float* flat) {
  const Bytes q = encode_simple(MsgKind::kPull, o_.rank);
  on_every_server([&](int i) {
    const KeyRange r = ranges_[size_t(i)];
    bytes_to_floats(clients_[size_t(i)]->request(q), flat + r.begin, r.size(),
                    str("parameter server ", i, "'s answer to a pull"));
  });
  TransferStats s;
  s.bytes_sent = q.size() * clients_.size();
  s.bytes_received = uint64_t(layout_.total) * sizeof(float);
  return s;
}

TransferStats PsWorker::push_pull(int64_t step, const float* grads, float* values) {
  std::vector<PushReply> replies(clients_.size());
  on_every_server([&](int i) {
    const KeyRange r = ranges_[size_t(i)];
    const Bytes push = encode_push(o_.rank, step, r, grads + r.begin);
    replies[size_t(i)] =
        decode_push_reply(clients_[size_t(i)]->request(push), values + r.begin, r.size(),
                          str("parameter server ", i, "'s answer to the push of step ", step));
  });
  TransferStats s;
  for (const PushReply& p : replies) {
    s.reply.version = std::max(s.reply.version, p.version);
    s.reply.staleness = std::max(s.reply.staleness, p.staleness);
    s.reply.lead = std::max(s.reply.lead, p.lead);
    s.reply.dropped |= p.dropped;
    s.reply.held_s = std::max(s.reply.held_s, p.held_s);
  }
  s.bytes_sent = uint64_t(layout_.total) * sizeof(float);
  s.bytes_received = s.bytes_sent;
  return s;
}

void PsWorker::abandon() noexcept {
  said_bye_ = true;  // nothing more to say
  for (auto& c : clients_) c->close();
}

void PsWorker::bye() noexcept {
  if (said_bye_) return;
  said_bye_ = true;
  const Bytes q = encode_simple(MsgKind::kBye, o_.rank);
  for (size_t i = 0; i < clients_.size(); ++i) {
    try {
      clients_[i]->request(q);
      clients_[i]->close();
    } catch (const std::exception& e) {
      log::warn("ps", "worker ", o_.rank, ": goodbye to parameter server ", i,
                " failed: ", e.what());
    }
  }
}

}  // namespace cohort::ps
