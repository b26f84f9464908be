#include "schedule/cron.h"

#include <array>
#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace partq {
namespace {

struct FieldSpec {
  const char* name;
  int min;
  int max;
  const char* const* names;  // names[i] stands for min + i; nullptr: none
  int name_count;
};

constexpr const char* kMonthNames[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                       "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr const char* kDayNames[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

// Day of week takes 0-7: cron has always let 7 be Sunday too.
constexpr std::array<FieldSpec, 5> kFields = {{
    {"minute", 0, 59, nullptr, 0},
    {"hour", 0, 23, nullptr, 0},
    {"day-of-month", 1, 31, nullptr, 0},
    {"month", 1, 12, kMonthNames, 12},
    {"day-of-week", 0, 7, kDayNames, 7},
}};

absl::Status FieldError(int index, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("cron field ", index + 1, " (", kFields[index].name, "): ", what));
}

// One value: a number in range or (month, weekday) a three-letter name.
absl::StatusOr<int> ParseValue(int index, absl::string_view text) {
  const FieldSpec& f = kFields[index];
  if (text.empty()) return FieldError(index, "a value is missing");
  if (absl::ascii_isdigit(static_cast<unsigned char>(text[0]))) {
    int v = 0;
    // Bounded length: SimpleAtoi would accept "00000000007", which is fine,
    // but a value that overflows must not wrap into range.
    if (text.size() > 4 || !absl::SimpleAtoi(text, &v)) {
      return FieldError(index, absl::StrCat("\"", text, "\" is not a number"));
    }
    if (v < f.min || v > f.max) {
      return FieldError(index, absl::StrCat(v, " is out of range ", f.min, "-", f.max));
    }
    return v;
  }
  const std::string upper = absl::AsciiStrToUpper(text);
  for (int i = 0; i < f.name_count; ++i) {
    if (upper == f.names[i]) return f.min + i;
  }
  if (f.names == nullptr) {
    return FieldError(index, absl::StrCat("\"", text, "\" is not a number"));
  }
  return FieldError(index, absl::StrCat("unknown name \"", text, "\" (use ", f.names[0], "..",
                                        f.names[f.name_count - 1], " or numbers)"));
}

// Sets the bits of one field (`bits[v - 0]` for each value v it selects).
// Returns whether it starts with `*` (cron's rule for the two day fields).
absl::StatusOr<bool> ParseField(int index, absl::string_view text, std::vector<bool>* bits) {
  const FieldSpec& f = kFields[index];
  bits->assign(f.max + 1, false);
  if (text.empty()) return FieldError(index, "empty");
  for (absl::string_view element : absl::StrSplit(text, ',')) {
    if (element.empty())
      return FieldError(index, "empty list element in \"" + std::string(text) + "\"");
    absl::string_view range = element;
    int step = 1;
    if (size_t slash = element.find('/'); slash != absl::string_view::npos) {
      range = element.substr(0, slash);
      absl::string_view s = element.substr(slash + 1);
      if (s.empty() || s.size() > 4 || !absl::SimpleAtoi(s, &step) || step < 1 ||
          step > f.max - f.min + 1) {
        return FieldError(
            index, absl::StrCat("step \"", s, "\" must be a number from 1 to ", f.max - f.min + 1));
      }
    }
    int lo = 0, hi = 0;
    if (range == "*") {
      lo = f.min;
      hi = f.max;
    } else if (size_t dash = range.find('-'); dash != absl::string_view::npos) {
      auto a = ParseValue(index, range.substr(0, dash));
      if (!a.ok()) return a.status();
      auto b = ParseValue(index, range.substr(dash + 1));
      if (!b.ok()) return b.status();
      lo = *a;
      hi = *b;
      if (lo > hi) {
        return FieldError(index, absl::StrCat("range \"", range, "\" runs backwards"));
      }
    } else {
      auto a = ParseValue(index, range);
      if (!a.ok()) return a.status();
      lo = *a;
      // "N/S" is "N-max/S", as Vixie cron and cronie read it; a plain N is N.
      hi = range.size() == element.size() ? lo : f.max;
    }
    for (int v = lo; v <= hi; v += step) (*bits)[v] = true;
  }
  return text[0] == '*';
}

absl::string_view Macro(absl::string_view text) {
  static constexpr std::pair<const char*, const char*> kMacros[] = {
      {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
      {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
      {"@hourly", "0 * * * *"},
  };
  for (const auto& [name, expr] : kMacros) {
    if (absl::EqualsIgnoreCase(text, name)) return expr;
  }
  return {};
}

}  // namespace

absl::StatusOr<CronExpr> CronExpr::Parse(absl::string_view text) {
  absl::string_view body = absl::StripAsciiWhitespace(text);
  if (!body.empty() && body[0] == '@') {
    absl::string_view expanded = Macro(body);
    if (expanded.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown cron macro \"", body,
                       "\" (use @yearly, @annually, @monthly, @weekly, @daily, @midnight or "
                       "@hourly)"));
    }
    auto parsed = Parse(expanded);
    if (parsed.ok()) parsed->text_ = std::string(body);
    return parsed;
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(body, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (fields.size() != 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("cron expression \"", body, "\" has ", fields.size(),
                     fields.size() == 1 ? " field" : " fields",
                     "; partq takes 5: minute hour day-of-month month day-of-week",
                     fields.size() == 6 ? " (no seconds or year field)" : ""));
  }
  CronExpr e;
  e.text_ = std::string(body);
  bool star[5];
  std::vector<bool> bits;
  for (int i = 0; i < 5; ++i) {
    auto s = ParseField(i, fields[i], &bits);
    if (!s.ok()) return s.status();
    star[i] = *s;
    for (int v = 0; v < static_cast<int>(bits.size()); ++v) {
      if (!bits[v]) continue;
      switch (i) {
        case 0:
          e.minutes_.set(v);
          break;
        case 1:
          e.hours_.set(v);
          break;
        case 2:
          e.days_.set(v);
          break;
        case 3:
          e.months_.set(v);
          break;
        case 4:
          e.weekdays_.set(v % 7);
          break;
      }
    }
  }
  e.day_or_ = !star[2] && !star[4];
  e.wildcard_ = star[0] || star[1];
  return e;
}

bool CronExpr::DayMatches(absl::CivilDay d) const {
  const bool dom = days_.test(d.day());
  // absl counts from Monday (0) to Sunday (6), cron from Sunday (0).
  const bool dow = weekdays_.test((static_cast<int>(absl::GetWeekday(d)) + 1) % 7);
  return day_or_ ? (dom || dow) : (dom && dow);
}

bool CronExpr::Matches(absl::CivilMinute m) const {
  return months_.test(m.month()) && DayMatches(absl::CivilDay(m)) && hours_.test(m.hour()) &&
         minutes_.test(m.minute());
}

absl::CivilMinute CronExpr::NextAfter(absl::CivilMinute m, int years) const {
  // Skips whole months, days and hours that cannot match, so a search costs
  // at most a few thousand steps even for an expression that never fires.
  const int64_t last_year = m.year() + years;
  absl::CivilMinute c = m + 1;
  while (c.year() <= last_year) {
    if (!months_.test(c.month())) {
      c = absl::CivilMinute(absl::CivilMonth(c) + 1);
    } else if (!DayMatches(absl::CivilDay(c))) {
      c = absl::CivilMinute(absl::CivilDay(c) + 1);
    } else if (!hours_.test(c.hour())) {
      c = absl::CivilMinute(absl::CivilHour(c) + 1);
    } else if (!minutes_.test(c.minute())) {
      c += 1;
    } else {
      return c;
    }
  }
  return absl::CivilMinute(10000, 1, 1, 0, 0);
}

}  // namespace partq
