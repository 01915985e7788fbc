#pragma once
// Reads Prometheus text exposition back with the reference parser (python3-prometheus-client,
// installed by scripts/install-deps.sh): the proof that /metrics is what a Prometheus server
// accepts. Returns "name{label=value,...} value" per sample, sorted, or the parser's error.
#include <cstdio>
#include <string>

#include "tests/support/files.h"

namespace cohort::testing {

struct ParsedMetrics {
  int status = -1;     // 0: parsed
  std::string output;  // one line per sample, or the error
};

inline ParsedMetrics parse_prometheus(const std::string& text) {
  TempDir t;
  const std::string in = t.file("metrics.txt");
  write_bytes(in, text);
  const std::string cmd =
      "/usr/bin/python3 -c '"
      "import sys\n"
      "from prometheus_client.parser import text_string_to_metric_families as parse\n"
      "out = []\n"
      "for f in parse(open(sys.argv[1]).read()):\n"
      "    for s in f.samples:\n"
      "        labels = \",\".join(k + \"=\" + v for k, v in sorted(s.labels.items()))\n"
      "        out.append(\"%s{%s} %r\" % (s.name, labels, s.value))\n"
      "print(\"\\n\".join(sorted(out)))\n"
      "' " +
      in + " 2>&1";
  ParsedMetrics r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  r.status = pclose(p);
  return r;
}

}  // namespace cohort::testing
