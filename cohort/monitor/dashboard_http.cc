#include "cohort/monitor/dashboard_http.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/core/logging.h"
#include "cohort/monitor/dashboard_page.h"

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

}  // namespace

class DashboardHttp::Impl {
 public:
  Impl(DashboardHttpOptions o, std::map<std::string, HttpRoute> routes)
      : options_(std::move(o)), routes_(std::move(routes)) {
    net::check_secret(options_.secret, net::SecretPolicy::kRequired, "dashboard");
    chart_js_ = read_chart_js(options_.chart_js);
    token_required_ = options_.require_token || !net::is_loopback_host(options_.bind);
    token_ = options_.secret.derive("dashboard");
    start();
  }
  ~Impl() { stop(); }

  void stop() {
    if (!thread_.joinable()) return;
    http_.stop();
    thread_.join();
  }

  uint16_t port() const { return port_; }
  std::string url() const {
    std::string host = options_.bind == "0.0.0.0" ? "127.0.0.1"
                       : options_.bind == "::"    ? "::1"
                                                  : options_.bind;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";  // IPv6
    std::string u = "http://" + host + ":" + std::to_string(port_) + "/";
    return token_required_ ? u + "?token=" + token_.to_hex() : u;
  }

 private:
  // The token is a key derived from the secret (Secret::derive), never the secret itself,
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

  void add_routes() {
    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
      res.status = 401;
      res.set_content(
          "cohort dashboard: this address needs the dashboard token as ?token=HEX "
          "(the printed address carries it)\n",
          "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    });
    http_.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(dashboard_page(), "text/html; charset=utf-8");
    });
    http_.Get("/chart.js", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(chart_js_, "application/javascript");
    });
    for (const auto& [path, route] : routes_) {
      http_.Get(path, [&route](const httplib::Request& req, httplib::Response& res) {
        HttpReply r = route(req.params);
        res.status = r.status;
        res.set_header("Cache-Control", "no-store");
        res.set_content(r.body, r.content_type);
      });
    }
  }

  void start() {
    add_routes();
    int port = options_.port == 0
                   ? http_.bind_to_any_port(options_.bind)
                   : (http_.bind_to_port(options_.bind, options_.port) ? int(options_.port) : -1);
    COHORT_CHECK_IO(port > 0, "dashboard: cannot listen on ", options_.bind, ":", options_.port,
                    " (in use? pick another with ", options_.port_flag, ")");
    port_ = uint16_t(port);
    thread_ = std::thread([this] {
      http_.listen_after_bind();
      listen_returned_ = true;
    });
    // httplib 0.11's stop() is a no-op until the listener runs, so a server destroyed at once
    // (the launch fails) would join a thread that never ends: wait for it to run.
    for (int i = 0; i < 5000 && !http_.is_running() && !listen_returned_; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  DashboardHttpOptions options_;
  std::map<std::string, HttpRoute> routes_;
  std::string chart_js_;
  bool token_required_ = false;
  net::Secret token_;  // what a request must carry when token_required_
  httplib::Server http_;
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};
  uint16_t port_ = 0;
};

DashboardHttp::DashboardHttp(DashboardHttpOptions options, std::map<std::string, HttpRoute> routes)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(routes))) {}

DashboardHttp::~DashboardHttp() = default;

void DashboardHttp::stop() {
  impl_->stop();
}
std::string DashboardHttp::url() const {
  return impl_->url();
}
uint16_t DashboardHttp::port() const {
  return impl_->port();
}

}  // namespace cohort::monitor
