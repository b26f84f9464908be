// The process_* metrics every Prometheus client library exports (CPU time,
// memory, file descriptors, start time), which prometheus-cpp 1.0 does not:
// dashboards and alerts on any exporter expect them. Linux only (/proc).
#ifndef PARTQ_CLI_PROCESS_METRICS_H_
#define PARTQ_CLI_PROCESS_METRICS_H_

#include <vector>

#include "prometheus/metric_family.h"

namespace partq::cli {

// Read at each call (a scrape): process_cpu_seconds_total,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_start_time_seconds, process_open_fds, process_max_fds. A value
// that cannot be read is left out, not reported as 0.
std::vector<prometheus::MetricFamily> ProcessMetrics();

}  // namespace partq::cli

#endif  // PARTQ_CLI_PROCESS_METRICS_H_
