// The dashboard as the launcher runs it: records streamed by StreamSinks (what workers use)
// over the service channel reach /api/state and /metrics; strangers are refused; the token is
// enforced where it is required.
#include "cohort/monitor/dashboard.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <thread>

#include "cohort/core/error.h"
#include "cohort/metrics/stream_sink.h"
#include "tests/monitor/prometheus_parse.h"

namespace {

using cohort::metrics::StreamSink;
using cohort::monitor::Dashboard;
using cohort::net::Secret;
using Json = nlohmann::json;

StreamSink sink_for(const Dashboard& d, const Secret& secret, int rank) {
  const std::string a = d.stream_address();
  const size_t colon = a.rfind(':');
  return StreamSink({.host = a.substr(0, colon),
                     .port = uint16_t(std::stoi(a.substr(colon + 1))),
                     .secret = secret,
                     .rank = rank,
                     .connect_timeout = std::chrono::seconds(5)});
}

// GET path; the body, or "" with *status set to the HTTP status.
std::string get(const Dashboard& d, const std::string& path, int* status = nullptr,
                const httplib::Headers& headers = {}) {
  httplib::Client c("127.0.0.1", d.port());
  auto res = c.Get(path, headers);
  if (status) *status = res ? res->status : -1;
  return res && res->status == 200 ? res->body : "";
}

// Polls /api/state until `ready` holds (records travel asynchronously), at most 10 s.
Json wait_state(const Dashboard& d, const std::function<bool(const Json&)>& ready) {
  Json s;
  for (int i = 0; i < 200; ++i) {
    s = Json::parse(get(d, "/api/state"));
    if (ready(s)) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return s;
}

Json step(int rank, int64_t step, double sps) {
  return Json{{"event", "step"}, {"rank", rank},         {"step", step},
              {"loss", 0.25},    {"samples_per_s", sps}, {"samples", step * 32},
              {"steps", 1},      {"backward_ms", 3.0},   {"bytes_sent", 4096}};
}

TEST(Dashboard, StreamedRecordsReachTheStateAndMetrics) {
  Secret secret = Secret::generate();
  Dashboard d({.secret = secret, .workers = 2});
  StreamSink r0 = sink_for(d, secret, 0), r1 = sink_for(d, secret, 1);
  ASSERT_TRUE(r0.connected() && r1.connected());
  r0.write(step(0, 7, 1234.5));
  r1.write(step(1, 7, 1200.25));
  Json s = wait_state(d, [](const Json& s) {
    return s["ranks"].size() == 2 && s["ranks"][0]["step"] == 7 && s["ranks"][1]["step"] == 7;
  });
  ASSERT_EQ(s["ranks"].size(), 2u) << s.dump();
  EXPECT_EQ(s["ranks"][0]["samples_per_s"], 1234.5);
  EXPECT_EQ(s["ranks"][1]["samples_per_s"], 1200.25);
  EXPECT_EQ(s["bytes_sent"], 8192);
  auto parsed = cohort::testing::parse_prometheus(get(d, "/metrics"));
  ASSERT_EQ(parsed.status, 0) << parsed.output;
  EXPECT_NE(parsed.output.find("cohort_samples_total{rank=1} 224.0"), std::string::npos)
      << parsed.output;
  EXPECT_NE(get(d, "/").find("cohort dashboard"), std::string::npos);
  EXPECT_FALSE(get(d, "/chart.js").empty());
}

TEST(Dashboard, AStreamWithTheWrongSecretIsRefusedAndShowsNothing) {
  Secret secret = Secret::generate();
  Dashboard d({.secret = secret, .workers = 1});
  StreamSink stranger = sink_for(d, Secret::generate(), 0);
  EXPECT_FALSE(stranger.connected());
  stranger.write(step(0, 1, 99));  // dropped, no throw
  Json s = Json::parse(get(d, "/api/state"));
  EXPECT_EQ(s["ranks"][0]["step"], 0);
  EXPECT_EQ(s["state"], "starting");
}

TEST(Dashboard, TheTokenIsRequiredWhereItIsAsked) {
  Secret secret = Secret::generate();
  Dashboard d({.secret = secret, .workers = 1, .require_token = true});
  const std::string token = secret.derive("dashboard").to_hex();
  int status = 0;
  get(d, "/api/state", &status);
  EXPECT_EQ(status, 401);
  get(d, "/metrics?token=00" + token.substr(2), &status);  // one byte off
  EXPECT_EQ(status, 401);
  get(d, "/metrics?token=" + secret.to_hex(), &status);  // the job secret is not the token
  EXPECT_EQ(status, 401);
  get(d, "/metrics?token=xyz", &status);
  EXPECT_EQ(status, 401);
  EXPECT_FALSE(get(d, "/api/state?token=" + token).empty());
  EXPECT_FALSE(get(d, "/metrics", nullptr, {{"Authorization", "Bearer " + token}}).empty());
  // The printed address carries the token, never the job secret.
  EXPECT_NE(d.url().find("?token=" + token), std::string::npos);
  EXPECT_EQ(d.url().find(secret.to_hex()), std::string::npos);
}

TEST(Dashboard, ServesNumbersWithoutChartJs) {
  Dashboard d({.secret = Secret::generate(), .workers = 1, .chart_js = "/nonexistent/chart.js"});
  EXPECT_EQ(get(d, "/chart.js"), "window.Chart = undefined;");
  EXPECT_FALSE(get(d, "/").empty());
}

TEST(Dashboard, NeedsASecret) {
  EXPECT_THROW(Dashboard d({.workers = 1}), cohort::InvalidArgument);
}

}  // namespace
