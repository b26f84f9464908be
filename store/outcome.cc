#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "store/store.h"

namespace partq {
namespace {
// Type URL of the payload (absl::Status::SetPayload).
constexpr absl::string_view kOutcomeUnknownUrl = "partq/outcome-unknown";
}  // namespace

absl::Status MarkOutcomeUnknown(absl::Status status) {
  status.SetPayload(kOutcomeUnknownUrl, absl::Cord("1"));
  return status;
}

bool OutcomeUnknown(const absl::Status& status) {
  return status.GetPayload(kOutcomeUnknownUrl).has_value();
}

}  // namespace partq
