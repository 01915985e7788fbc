#include "cohort/monitor/dashboard.h"

#include "cohort/core/logging.h"
#include "cohort/monitor/dashboard_http.h"
#include "cohort/monitor/prometheus.h"
#include "cohort/net/service/server.h"

namespace cohort::monitor {
namespace {

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
  Impl(const DashboardOptions& o, JobView& view) : view_(view) {
    net::check_secret(o.secret, net::SecretPolicy::kRequired, "dashboard");
    start_stream(o);
    http_ = std::make_unique<DashboardHttp>(
        DashboardHttpOptions{.bind = o.bind,
                             .port = o.port,
                             .secret = o.secret,
                             .chart_js = o.chart_js,
                             .require_token = o.require_token},
        std::map<std::string, HttpRoute>{
            {"/api/state",
             [this](const HttpParams&) { return HttpReply{.body = view_.snapshot().dump()}; }},
            {"/metrics", [this](const HttpParams&) {
               return HttpReply{.body = prometheus_text(view_),
                                .content_type = "text/plain; version=0.0.4; charset=utf-8"};
             }}});
  }
  ~Impl() { stop(); }

  void stop() {
    if (http_) http_->stop();
    if (stream_) stream_->stop();
  }

  uint16_t port() const { return http_->port(); }
  std::string stream_address() const { return stream_->address(); }
  std::string url() const { return http_->url(); }

 private:
  void start_stream(const DashboardOptions& o) {
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
            .host = o.bind, .port = 0, .secret = o.secret, .name = "metrics stream"},
        std::move(h));
  }

  JobView& view_;
  std::unique_ptr<net::service::Server> stream_;
  std::unique_ptr<DashboardHttp> http_;
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
