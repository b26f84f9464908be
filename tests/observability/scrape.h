// Reading metrics back in tests: from a registry, or from a scraped page.
#ifndef PARTQ_TESTS_OBSERVABILITY_SCRAPE_H_
#define PARTQ_TESTS_OBSERVABILITY_SCRAPE_H_

#include <map>
#include <optional>
#include <string>

#include "prometheus/registry.h"

namespace partq::testing {

// The value of `name` (a counter or gauge, summed over its series; for a
// histogram, `name` may end in _count or _sum), or nullopt when absent.
// With `labels`, only the series that carry all of them count.
std::optional<double> MetricValue(const prometheus::Registry& registry, const std::string& name,
                                  const std::map<std::string, std::string>& labels = {});

// Samples of a Prometheus text page, by metric name with labels as printed
// ("partq_items_acked_total{queue=\"q\"}"); values of series of one name summed
// under the bare name too.
std::map<std::string, double> ParseSamples(const std::string& page);

// GET http://127.0.0.1:port/path; returns the status code (or -1 when the
// connection fails) and the body.
int HttpGet(int port, const std::string& path, std::string* body);

// A TCP port that was free a moment ago.
int FreePort();

// The full path of `name` in $PATH, or "" (promtool, for `check metrics`).
std::string FindInPath(const std::string& name);

}  // namespace partq::testing

#endif  // PARTQ_TESTS_OBSERVABILITY_SCRAPE_H_
