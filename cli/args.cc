#include "cli/args.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/utf8.h"

namespace partq::cli {

absl::StatusOr<Args> Args::Parse(const std::vector<std::string>& argv,
                                 const std::set<std::string>& value_flags,
                                 const std::set<std::string>& bool_flags) {
  Args args;
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (only_positional || a.size() < 3 || !absl::StartsWith(a, "--")) {
      if (a == "--") {
        only_positional = true;
        continue;
      }
      if (!only_positional && absl::StartsWith(a, "-") && a != "-") {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown option ", Quoted(a),
                         " (options are spelled --name; a value that starts with - goes after --, "
                         "as in: -- ",
                         a, ")"));
      }
      args.positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (bool_flags.count(name)) {
      if (value && *value != "true" && *value != "false") {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
      if (!value || *value == "true") args.values_[name] = "true";
      continue;
    }
    if (!value_flags.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name));
    }
    if (!value) {
      if (i + 1 >= argv.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      // `--handler --concurrency 4` forgot the handler; taking
      // "--concurrency" as its value would hide that. A value that really
      // starts with "--" can be written --name=--value.
      const std::string& next = argv[i + 1];
      if (next.size() > 2 && absl::StartsWith(next, "--")) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value (got the option ", next, "; write --", name,
                         "=VALUE if the value starts with --)"));
      }
      value = argv[++i];
    }
    args.values_[name] = *value;
    args.all_values_[name].push_back(*value);
  }
  return args;
}

std::vector<std::string> Args::GetAll(const std::string& flag) const {
  auto it = all_values_.find(flag);
  return it == all_values_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<std::string> Args::Get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::GetOr(const std::string& flag, const std::string& def) const {
  return Get(flag).value_or(def);
}

absl::StatusOr<int64_t> Args::Int(const std::string& flag, int64_t def, int64_t min,
                                  int64_t max) const {
  auto v = Get(flag);
  if (!v) return def;
  int64_t out;
  if (!absl::SimpleAtoi(*v, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", Quoted(*v), " is not a whole number"));
  }
  if (out < min || out > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be between ", min, " and ", max, " (got ", out, ")"));
  }
  return out;
}

absl::StatusOr<double> Args::Double(const std::string& flag, double def, double min,
                                    double max) const {
  auto v = Get(flag);
  if (!v) return def;
  double out;
  if (!absl::SimpleAtod(*v, &out) || !(out >= min && out <= max)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be a number between ", min, " and ", max));
  }
  return out;
}

absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& text) {
  absl::Duration d;
  double seconds;
  // A bare number is seconds; one too large for a Duration (1e308) saturates
  // to infinity, which is refused below like "inf".
  const bool number = absl::SimpleAtod(text, &seconds) && std::isfinite(seconds);
  if (number) d = absl::Seconds(seconds);
  // Days ("7d"), which Go's syntax lacks and retentions are written in.
  double days;
  const bool in_days =
      !number && absl::EndsWith(text, "d") &&
      absl::SimpleAtod(absl::string_view(text).substr(0, text.size() - 1), &days) &&
      std::isfinite(days) && std::abs(days) < 1e6;
  if (in_days) d = absl::Hours(24 * days);
  if (text.empty() || (!number && !in_days && !absl::ParseDuration(text, &d)) ||
      d == absl::InfiniteDuration() || d == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(text),
                     " is not a duration (a number and a unit, ms, s, m, h or d: 250ms, 5s, 1m30s, "
                     "2h, 7d; a bare number is seconds)"));
  }
  return d;
}

absl::StatusOr<absl::Duration> Args::Duration(const std::string& flag, absl::Duration def,
                                              absl::Duration min, absl::Duration max) const {
  auto v = Get(flag);
  if (!v) return def;
  auto d = ParseDurationFlag(*v);
  if (!d.ok())
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", d.status().message()));
  if (*d < min || *d > max) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be between ",
                                                   absl::FormatDuration(min), " and ",
                                                   absl::FormatDuration(max)));
  }
  return *d;
}

}  // namespace partq::cli
