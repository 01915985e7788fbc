#pragma once
// The Prometheus text exposition format (version 0.0.4) of a JobView, served at /metrics:
// counters and gauges per rank (label rank="R") and a step-time histogram. Names and meanings
// are listed in docs/monitoring.md ("Prometheus").
#include <string>

#include "cohort/monitor/job_view.h"

namespace cohort::monitor {

std::string prometheus_text(const JobView& view);

}  // namespace cohort::monitor
