#include "cohort/monitor/dashboard.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/monitor/dashboard_page.h"
#include "cohort/monitor/prometheus.h"
#include "cohort/net/service/server.h"

namespace cohort::monitor {
namespace {

// Debian's Chart.js, served at /chart.js so that the page needs no network. Without it the
// page still shows every number, and says the charts are missing.
std::string read_chart_js(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    log::warn("monitor", "dashboard: cannot read Chart.js at ", path,
              " (install libjs-chart.js); the page will show numbers without charts");
    return "window.Chart = undefined;";
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A stream message: {"rank": R, "record": {...}}.
void ingest_message(JobView& view, const net::service::Bytes& payload) {
  Json m = Json::parse(payload.begin(), payload.end(), nullptr, /*allow_exceptions=*/false);
  if (!m.is_object() || !m.contains("rank") || !m["rank"].is_number_integer()) {
    view.ingest(-1, Json());  // counted as malformed
    return;
  }
  view.ingest(m["rank"].get<int>(), m.value("record", Json()));
}

}  // namespace

class Dashboard::Impl {
 public:
  Impl(const DashboardOptions& o, JobView& view)
      : options_(o), view_(view), chart_js_(read_chart_js(o.chart_js)) {
    net::check_secret(o.secret, net::SecretPolicy::kRequired, "dashboard");
    token_required_ = o.require_token || !net::is_loopback_host(o.bind);
    token_ = o.secret.derive("dashboard");
    start_stream();
    start_http();
  }
  ~Impl() { stop(); }

  void stop() {
    if (http_thread_.joinable()) {
      http_.stop();
      http_thread_.join();
    }
    if (stream_) stream_->stop();
  }

  uint16_t port() const { return port_; }
  std::string stream_address() const { return stream_->address(); }
  std::string url() const {
    std::string host = options_.bind == "0.0.0.0" ? "127.0.0.1"
                       : options_.bind == "::"    ? "::1"
                                                  : options_.bind;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";  // IPv6
    std::string u = "http://" + host + ":" + std::to_string(port_) + "/";
    return token_required_ ? u + "?token=" + token_.to_hex() : u;
  }

 private:
  void start_stream() {
    net::service::Handlers h;
    h.on_message = [this](const net::service::Peer& peer, net::service::Bytes payload) {
      try {
        ingest_message(view_, payload);
      } catch (const std::exception& e) {  // a record of an unexpected shape: keep the peer
        log::warn("monitor", "dashboard: a record from ", peer.address, " was not understood (",
                  e.what(), ")");
        view_.ingest(-1, Json());
      }
    };
    stream_ = std::make_unique<net::service::Server>(
        net::service::ServerOptions{
            .host = options_.bind, .port = 0, .secret = options_.secret, .name = "metrics stream"},
        std::move(h));
  }

  // The token is a key derived from the job secret (Secret::derive), never the secret itself,
  // compared in constant time.
  bool authorized(const httplib::Request& req) const {
    if (!token_required_) return true;
    std::string given = req.get_param_value("token");
    const std::string auth = req.get_header_value("Authorization");
    if (given.empty() && auth.rfind("Bearer ", 0) == 0) given = auth.substr(7);
    try {
      return !given.empty() && net::Secret::from_hex(given, "dashboard token") == token_;
    } catch (const Error&) {  // not hex, or too short
      return false;
    }
  }

  void start_http() {
    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
      res.status = 401;
      res.set_content("cohort dashboard: this address needs the job secret as ?token=HEX\n",
                      "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    });
    http_.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(dashboard_page(), "text/html; charset=utf-8");
    });
    http_.Get("/chart.js", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(chart_js_, "application/javascript");
    });
    http_.Get("/api/state", [this](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-store");
      res.set_content(view_.snapshot().dump(), "application/json");
    });
    http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(prometheus_text(view_), "text/plain; version=0.0.4; charset=utf-8");
    });
    int port = options_.port == 0
                   ? http_.bind_to_any_port(options_.bind)
                   : (http_.bind_to_port(options_.bind, options_.port) ? int(options_.port) : -1);
    COHORT_CHECK_IO(port > 0, "dashboard: cannot listen on ", options_.bind, ":", options_.port,
                    " (in use? pick another with --dashboard PORT)");
    port_ = uint16_t(port);
    http_thread_ = std::thread([this] {
      http_.listen_after_bind();
      listen_returned_ = true;
    });
    // httplib 0.11's stop() is a no-op until the listener runs, so a Dashboard destroyed at
    // once (the launch fails) would join a thread that never ends: wait for it to run.
    for (int i = 0; i < 5000 && !http_.is_running() && !listen_returned_; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  DashboardOptions options_;
  JobView& view_;
  std::string chart_js_;
  bool token_required_ = false;
  net::Secret token_;  // what a request must carry when token_required_
  std::unique_ptr<net::service::Server> stream_;
  httplib::Server http_;
  std::thread http_thread_;
  std::atomic<bool> listen_returned_{false};
  uint16_t port_ = 0;
};

Dashboard::Dashboard(DashboardOptions options)
    : view_(std::make_unique<JobView>(JobViewOptions{.workers = options.workers})),
      impl_(std::make_unique<Impl>(options, *view_)) {}

Dashboard::~Dashboard() = default;

void Dashboard::stop() {
  impl_->stop();
}
std::string Dashboard::url() const {
  return impl_->url();
}
uint16_t Dashboard::port() const {
  return impl_->port();
}
std::string Dashboard::stream_address() const {
  return impl_->stream_address();
}

}  // namespace cohort::monitor
