// Command-line parsing for `partq`: positional arguments and --flags declared
// per command. Parsing never exits; errors are InvalidArgument with a message
// naming the flag.
#ifndef PARTQ_CLI_ARGS_H_
#define PARTQ_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace partq::cli {

class Args {
 public:
  // `value_flags` take a value (--name V or --name=V); `bool_flags` do not.
  static absl::StatusOr<Args> Parse(const std::vector<std::string>& argv,
                                    const std::set<std::string>& value_flags,
                                    const std::set<std::string>& bool_flags);

  const std::vector<std::string>& positional() const { return positional_; }
  bool Has(const std::string& flag) const { return values_.count(flag) > 0; }
  std::optional<std::string> Get(const std::string& flag) const;
  std::string GetOr(const std::string& flag, const std::string& def) const;
  // Every value a repeatable flag was given, in order (Get: the last one).
  std::vector<std::string> GetAll(const std::string& flag) const;

  // Typed getters: the default when absent, InvalidArgument when malformed or
  // outside [min, max].
  absl::StatusOr<int64_t> Int(const std::string& flag, int64_t def, int64_t min, int64_t max) const;
  absl::StatusOr<double> Double(const std::string& flag, double def, double min, double max) const;
  // Durations like 250ms, 5s, 1m30s, 2h (Go syntax), or days as 7d; a bare number is
  // seconds.
  absl::StatusOr<absl::Duration> Duration(const std::string& flag, absl::Duration def,
                                          absl::Duration min, absl::Duration max) const;

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> all_values_;
};

// Parses a duration as Args::Duration does; InvalidArgument if malformed.
absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& text);

}  // namespace partq::cli

#endif  // PARTQ_CLI_ARGS_H_
