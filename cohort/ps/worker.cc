#include "cohort/ps/worker.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

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
  links_.resize(size_t(o_.num_servers));
  if (o_.compression.enabled()) {
    for (int i = 0; i < o_.num_servers; ++i)
      links_[size_t(i)].encoder = std::make_unique<PushEncoder>(o_.compression, o_.rank, i);
  }
  area_ = make_area();
  offering_ = area_ != nullptr;
  std::vector<int64_t> next(size_t(o_.num_servers));
  on_every_server([&](int i) {
    next[size_t(i)] = links_[size_t(i)].skip_until =
        connect(i, 0, "", std::chrono::steady_clock::now() + o_.timeout);
  });
  if (area_) area_->unlink();  // mapped by the servers that can: nothing left in /dev/shm
  offering_ = false;
  check_start(next);
  start_step_ = pushed_steps_ = *std::min_element(next.begin(), next.end());
}

void PsWorker::check_start(const std::vector<int64_t>& next) const {
  const auto [lo, hi] = std::minmax_element(next.begin(), next.end());
  // BSP with backup workers applies steps without a worker that starts late: it joins there.
  const bool may_join_late =
      o_.rejoin || (o_.consistency.mode == Mode::kBsp && o_.consistency.backup_workers > 0);
  COHORT_CHECK_ARG(*hi == 0 || may_join_late, server_name(int(hi - next.begin())),
                   " expects worker ", o_.rank, "'s push of step ", *hi,
                   " (it resumed from a checkpoint, or this rank already trained there), but this "
                   "worker starts at step 0; a worker restarted alone rejoins with "
                   "COHORT_WORKER_RESTARTS set (the launcher does it); a restarted job needs a "
                   "fresh run directory");
  // One push apart at most (a worker that died between its pushes to two servers); more means
  // a server lost its state. A resumed asynchronous job: each server saved on its own schedule;
  // the worker pushes from the smallest and pulls from a server that holds a step already.
  const bool async_resume = o_.resumed && o_.consistency.mode != Mode::kBsp;
  COHORT_CHECK_ARG(*hi - *lo <= 1 || async_resume, "worker ", o_.rank,
                   " cannot rejoin: ", server_name(int(lo - next.begin())),
                   " expects its push of step ", *lo, " but ", server_name(int(hi - next.begin())),
                   " of step ", *hi, " (a server restarted without its checkpoint?)");
}

std::string PsWorker::server_name(int i) const {
  return str("parameter server ", i);
}

int64_t PsWorker::connect(int i, int64_t after, const std::string& why,
                          std::chrono::steady_clock::time_point deadline) {
  Link& l = links_[size_t(i)];
  if (l.client) l.client->close();
  auto backoff = Millis(5);
  int64_t generation = o_.store->add(generation_key(i), 0);
  while (generation <= after) {  // none yet, or only the one that went away
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Timeout(why.empty()
                        ? str(server_name(i), " did not publish its address (", generation_key(i),
                              ") within ", o_.timeout.count(), " ms; is it running?")
                        : str(server_name(i), " went away (", why,
                              ") and no restarted server published its address within ",
                              o_.timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, Millis(100));
    generation = o_.store->add(generation_key(i), 0);
  }
  const auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
  auto [host, port] =
      split_address(o_.store->get_string(server_key(i, generation), std::max(left, Millis(1))), i);
  auto client = std::make_unique<net::service::Client>(
      net::service::ClientOptions{.host = host,
                                  .port = port,
                                  .secret = o_.secret,
                                  .secret_policy = o_.secret_policy,
                                  .name = server_name(i),
                                  .connect_timeout = o_.timeout,
                                  .timeout = o_.timeout});
  {
    std::lock_guard<std::mutex> lock(clients_mu_);  // abandon() closes what it finds here
    l.client = std::move(client);
    if (said_bye_) l.client->close();  // abandoned meanwhile: the hello below fails at once
  }
  l.generation = generation;
  Hello hello{o_.rank, o_.num_workers, o_.total_steps, layout_, codec_spec(o_.compression)};
  if (offering_) hello.shared = area_->offer();  // a server restarted later gets no offer
  const HelloReply h = decode_hello_reply(l.client->request(encode_hello(hello)),
                                          server_name(i) + "'s answer to hello");
  COHORT_CHECK_ARG(!h.shared || offering_, server_name(i),
                   " says it mapped a shared area, but worker ", o_.rank, " offered none");
  l.shared = h.shared != 0;
  l.checkpoints = h.checkpoints != 0;
  return h.next_step;
}

int PsWorker::shared_links() const {
  return int(std::count_if(links_.begin(), links_.end(), [](const Link& l) { return l.shared; }));
}

float* PsWorker::grads_buffer() const {
  return area_ ? area_->grads() : nullptr;
}

float* PsWorker::values_buffer() const {
  return area_ ? area_->values() : nullptr;
}

std::unique_ptr<SharedArea> PsWorker::make_area() const {
  if (!o_.shared_memory || o_.compression.enabled()) return nullptr;
  try {
    return SharedArea::create(layout_.total, o_.rank);
  } catch (const IoError& e) {
    log::warn("ps", "worker ", o_.rank, ": pushes go through the socket: no shared area (",
              e.what(), ")");
    return nullptr;
  }
}

template <typename F>
auto PsWorker::with_recovery(int i, int64_t step, F f) {
  Link& l = links_[size_t(i)];
  int64_t resumed = -1;
  for (;;) {
    std::string why;
    try {
      if (resumed >= 0) replay(i, resumed, step);
      return f();
    } catch (const IoError& e) {  // the connection broke
      if (!l.checkpoints || said_bye_) throw;
      why = e.what();
    }
    log::warn("ps", "worker ", o_.rank, ": ", why, "; waiting up to ", o_.timeout.count(),
              " ms for ", server_name(i), " to restart");
    resumed = l.skip_until = reconnect(i, why);
    const int64_t kept_from = l.kept.empty() ? step : l.kept.front().first;
    COHORT_CHECK_IO(resumed >= std::min(kept_from, step), server_name(i),
                    " restarted from its checkpoint at step ", resumed, ", but worker ", o_.rank,
                    " kept its pushes from step ", kept_from, " on only: steps ", resumed, "..",
                    kept_from - 1, " are lost");
    log::info("ps", "worker ", o_.rank, ": ", server_name(i), " restarted at step ", resumed,
              "; replaying ", std::max<int64_t>(0, step - resumed), " kept pushes");
  }
}

int64_t PsWorker::reconnect(int i, std::string why) {
  const auto deadline = std::chrono::steady_clock::now() + o_.timeout;
  for (;;) {
    try {
      return connect(i, links_[size_t(i)].generation, why, deadline);
    } catch (const IoError& e) {  // the restarted one failed too: wait for the next
      why = e.what();
    }
  }
}

void PsWorker::replay(int i, int64_t from, int64_t to) {
  Link& l = links_[size_t(i)];
  const KeyRange r = ranges_[size_t(i)];
  std::vector<float> discard(size_t(r.size()));
  for (const auto& [step, push] : l.kept) {
    if (step < from || step >= to) continue;
    decode_push_reply(l.client->request(push), discard.data(), r.size(),
                      str(server_name(i), "'s answer to the replayed push of step ", step));
  }
}

PsWorker::~PsWorker() {
  bye();
}

template <typename F>
void PsWorker::on_every_server(F f) {
  if (links_.size() == 1) return f(0);  // no other thread needed
  if (!threads_) threads_ = std::make_unique<ServerThreads>(links_.size());
  threads_->run(std::function<void(int)>(std::ref(f)));
}

TransferStats PsWorker::pull(float* flat) {
  const Bytes q = encode_simple(MsgKind::kPull, o_.rank);
  on_every_server([&](int i) {
    const KeyRange r = ranges_[size_t(i)];
    bytes_to_floats(links_[size_t(i)].client->request(q), flat + r.begin, r.size(),
                    str(server_name(i), "'s answer to a pull"));
  });
  TransferStats s;
  s.bytes_sent = q.size() * links_.size();
  s.bytes_received = uint64_t(layout_.total) * sizeof(float);
  return s;
}

Bytes PsWorker::frame(int i, int64_t step, const float* grads) {
  Link& l = links_[size_t(i)];
  const KeyRange r = ranges_[size_t(i)];
  if (!l.encoder) {  // as before compression: the values, copied once into the request
    l.sent = uint64_t(r.size()) * sizeof(float);
    return encode_push(o_.rank, step, r, grads + r.begin);
  }
  const auto t0 = std::chrono::steady_clock::now();
  Bytes push = l.encoder->encode(step, r, {grads + r.begin, size_t(r.size())});
  l.encode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  l.sent = l.encoder->message_bytes(size_t(r.size()));
  return push;
}

PushReply PsWorker::push_to(int i, int64_t step, const float* grads, float* values) {
  Link& l = links_[size_t(i)];
  const KeyRange r = ranges_[size_t(i)];
  const std::string what = str(server_name(i), "'s answer to the push of step ", step);
  // Encoded only when it is sent (a compressed push moves the error-feedback residual: a push
  // the server already holds must leave it alone), and once: a retry resends the same bytes.
  Bytes push;
  l.sent = 0;
  l.encode_s = 0;
  bool pushed_shared = false;
  const PushReply reply = with_recovery(i, step, [&] {
    if (step < l.skip_until) {  // the server holds this push already (it restarted from a
      // checkpoint that has it, or this worker rejoins): take the values only
      const Bytes q = encode_simple(MsgKind::kPull, o_.rank);
      bytes_to_floats(l.client->request(q), values + r.begin, r.size(), what);
      return PushReply{.durable = l.skip_until};
    }
    if ((pushed_shared = shared(i))) return push_shared(i, step, grads, values, what);
    if (push.empty()) push = frame(i, step, grads);
    return decode_push_reply(l.client->request(push), values + r.begin, r.size(), what);
  });
  // A replay goes through the socket: keep the whole frame (the one copy the area saved).
  if (l.checkpoints && pushed_shared) push = encode_push(o_.rank, step, r, grads + r.begin);
  if (l.checkpoints && !push.empty()) l.kept.emplace_back(step, std::move(push));
  while (!l.kept.empty() && l.kept.front().first < reply.durable) l.kept.pop_front();
  return reply;
}

PushReply PsWorker::push_shared(int i, int64_t step, const float* grads, float* values,
                                const std::string& what) {
  Link& l = links_[size_t(i)];
  const KeyRange r = ranges_[size_t(i)];
  float* slot = area_->grads() + r.begin;
  if (grads + r.begin != slot) std::memcpy(slot, grads + r.begin, size_t(r.size()) * sizeof(float));
  l.sent = uint64_t(r.size()) * sizeof(float);
  const Bytes q = encode_shared_push(o_.rank, step, r);
  return decode_push_reply(l.client->request(q), values + r.begin, r.size(), what,
                           area_->values() + r.begin);
}

TransferStats PsWorker::push_pull(int64_t step, const float* grads, float* values) {
  std::vector<PushReply> replies(links_.size());
  on_every_server([&](int i) { replies[size_t(i)] = push_to(i, step, grads, values); });
  pushed_steps_ = step + 1;
  return collect(replies);
}

void PsWorker::start_push(int i, int64_t step, const float* grads, float* values) {
  if (!lanes_) {
    lanes_ = std::make_unique<PushLanes>(links_.size());
    started_.assign(links_.size(), false);
    lane_replies_.resize(links_.size());
  }
  COHORT_CHECK_ARG(!started_.at(size_t(i)), server_name(i), ": worker ", o_.rank,
                   " started its push of step ", step, " twice");
  started_[size_t(i)] = true;
  // The lane writes lane_replies_[i] and values[range i]; wait_all() hands them back.
  lanes_->post(size_t(i), [this, i, step, grads, values] {
    lane_replies_[size_t(i)] = push_to(i, step, grads, values);
  });
}

TransferStats PsWorker::finish_push_pull(int64_t step) {
  COHORT_CHECK_ARG(lanes_ != nullptr, "worker ", o_.rank, ": finish_push_pull of step ", step,
                   " but no push was started");
  const std::vector<bool> started =
      std::exchange(started_, std::vector<bool>(links_.size(), false));
  auto answered = lanes_->wait_all();  // every started push has ended, also when refusing below
  for (size_t i = 0; i < started.size(); ++i)
    COHORT_CHECK_ARG(started[i], "worker ", o_.rank, ": finish_push_pull of step ", step, " but ",
                     server_name(int(i)), "'s push was not started");
  pushed_steps_ = step + 1;
  TransferStats s = collect(lane_replies_);
  s.answered = std::move(answered);
  return s;
}

TransferStats PsWorker::collect(const std::vector<PushReply>& replies) const {
  TransferStats s;
  for (const PushReply& p : replies) {
    s.reply.version = std::max(s.reply.version, p.version);
    s.reply.staleness = std::max(s.reply.staleness, p.staleness);
    s.reply.lead = std::max(s.reply.lead, p.lead);
    s.reply.dropped |= p.dropped;
    s.reply.held_s = std::max(s.reply.held_s, p.held_s);
  }
  for (const Link& l : links_) {
    s.bytes_sent += l.sent;
    s.encode_s += l.encode_s;
  }
  s.bytes_received = uint64_t(layout_.total) * sizeof(float);
  if (o_.compression.enabled()) s.raw_bytes = s.bytes_received;  // the f32 gradient's bytes
  return s;
}

void PsWorker::abandon() noexcept {
  said_bye_ = true;  // nothing more to say; a lane's failing push no longer reconnects
  {
    std::lock_guard<std::mutex> lock(clients_mu_);
    for (Link& l : links_)
      if (l.client) l.client->close();  // a lane's request fails now instead of waiting
  }
  if (lanes_) lanes_->drain();
}

void PsWorker::bye() noexcept {
  if (said_bye_) return;
  if (lanes_) lanes_->drain();  // the goodbye goes after the pushes, on the same connections
  const Bytes q = encode_simple(MsgKind::kBye, o_.rank);
  for (size_t i = 0; i < links_.size(); ++i) {
    try {
      Link& l = links_[i];
      if (!l.client) continue;
      with_recovery(int(i), pushed_steps_, [&] { return l.client->request(q); });
      l.client->close();
    } catch (const std::exception& e) {
      log::warn("ps", "worker ", o_.rank, ": goodbye to parameter server ", i,
                " failed: ", e.what());
    }
  }
  said_bye_ = true;
}

TransferStats PsWorker::finish(float* flat) {
  const Bytes bye = encode_bye(o_.rank, /*wants_final=*/true);
  on_every_server([&](int i) {
    with_recovery(i, pushed_steps_, [&] { return links_[size_t(i)].client->request(bye); });
  });
  said_bye_ = true;
  on_every_server([&](int i) { wait_final(i, flat); });
  for (Link& l : links_) l.client->close();
  TransferStats s;
  s.bytes_sent = 2 * bye.size() * links_.size();
  s.bytes_received = uint64_t(layout_.total) * sizeof(float);
  return s;
}

// Asks server i for the final values until every worker said bye; gives up when the job
// shows no progress (no update, no newly finished worker) for the timeout.
void PsWorker::wait_final(int i, float* flat) {
  using Clock = std::chrono::steady_clock;
  const Bytes q = encode_simple(MsgKind::kFinal, o_.rank);
  const KeyRange r = ranges_[size_t(i)];
  const std::string what = str(server_name(i), "'s answer to the final pull");
  int64_t seen = -1;
  auto moved = Clock::now();
  for (auto pause = std::chrono::milliseconds(1);; pause = std::min(2 * pause, Millis(50))) {
    FinalState f =
        decode_final(links_[size_t(i)].client->request(q), flat + r.begin, r.size(), what);
    if (f.done) return;
    if (f.progress + f.finished != seen) {
      seen = f.progress + f.finished;
      moved = Clock::now();
    }
    if (Clock::now() - moved > o_.timeout) {
      throw Timeout(str(server_name(i), ": waiting for the final parameters, ", f.finished, " of ",
                        f.workers, " workers finished and the job made no progress for ",
                        o_.timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace cohort::ps
