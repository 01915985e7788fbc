#pragma once
// The dashboard's web server, shared by the live dashboard (dashboard.h: a running job) and the
// dashboard of past runs (runs_dashboard.h: `cohort dashboard RUN_DIR...`), so that both serve
// the same page under the same rules:
//
//   GET /          the page (dashboard_page.h)
//   GET /chart.js  Debian's Chart.js (libjs-chart.js), so that the page needs no network
//   GET <route>    the caller's routes (/api/state, /metrics)
//
// It binds loopback unless `bind` names another address. Off loopback (or with require_token)
// every request must carry the dashboard token, a key derived from the secret
// (Secret::derive("dashboard")), as `?token=HEX` or `Authorization: Bearer HEX`; anything else
// is answered 401. The printed address carries the token, never the secret.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "cohort/net/secret.h"

namespace cohort::monitor {

struct DashboardHttpOptions {
  std::string bind = "127.0.0.1";  // non-loopback needs the token
  uint16_t port = 0;               // 0: the OS picks one
  net::Secret secret;              // required: the token derives from it
  std::string chart_js = "/usr/share/javascript/chart.js/chart.min.js";  // libjs-chart.js
  bool require_token = false;                  // also on loopback (always off it)
  std::string port_flag = "--dashboard PORT";  // named when the port cannot be bound
};

// What a route answers.
struct HttpReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};
// A request's query parameters (?run=a&run=b keeps both).
using HttpParams = std::multimap<std::string, std::string>;
using HttpRoute = std::function<HttpReply(const HttpParams&)>;

class DashboardHttp {
 public:
  // Binds and starts serving. InvalidArgument for a missing secret; IoError naming the address
  // when the port cannot be bound.
  DashboardHttp(DashboardHttpOptions options, std::map<std::string, HttpRoute> routes);
  ~DashboardHttp();  // stop()
  DashboardHttp(const DashboardHttp&) = delete;
  DashboardHttp& operator=(const DashboardHttp&) = delete;

  // Stops serving; idempotent.
  void stop();
  // The page's address, e.g. "http://127.0.0.1:41234/" (with "?token=..." when required).
  std::string url() const;
  uint16_t port() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cohort::monitor
