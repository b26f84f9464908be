// The console's pure pieces: escaping, forms, secrets, listen addresses, rates.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "console/auth.h"
#include "console/console.h"
#include "console/escape.h"
#include "console/poller.h"
#include "gtest/gtest.h"

namespace partq::console {
namespace {

TEST(HtmlEscape, EscapesMarkupAndQuotes) {
  EXPECT_EQ(HtmlEscape("<script>a&b\"c'</script>"),
            "&lt;script&gt;a&amp;b&quot;c&#39;&lt;/script&gt;");
  EXPECT_EQ(HtmlEscape("plain"), "plain");
}

TEST(PayloadPreview, ShowsEveryByteThatIsNotPrintableTextEscaped) {
  EXPECT_EQ(PayloadPreview("<script>x</script>", 18), "<script>x</script>");
  EXPECT_EQ(PayloadPreview(std::string("a\x00"
                                       "b\n\x7f\xff",
                                       6),
                           6),
            "a\\x00b\\x0a\\x7f\\xff");
  EXPECT_EQ(PayloadPreview("caf\xc3\xa9", 5), "caf\xc3\xa9") << "UTF-8 stays";
  // A backslash is escaped, so a typed "\x00" cannot pass for a NUL byte.
  EXPECT_EQ(PayloadPreview("\\x00", 4), "\\\\x00");
  EXPECT_NE(PayloadPreview("\\x00", 4), PayloadPreview(std::string(1, '\0'), 1));
  // A head cut inside a UTF-8 sequence, then the size of the whole.
  EXPECT_EQ(PayloadPreview("ab\xc3", 300), "ab\\xc3\xe2\x80\xa6 (300 bytes)");
}

// The page shows runs (issue 49: a payload's every backslash showed doubled):
// text as it is, escaped bytes marked apart, and the size when cut.
TEST(PayloadRuns, TextAsItIsAndEscapedBytesApart) {
  auto runs = [](absl::string_view head, int64_t total) {
    std::vector<std::pair<int, std::string>> out;
    for (const PreviewRun& r : PayloadRuns(head, total)) out.emplace_back(r.kind, r.text);
    return out;
  };
  using V = std::vector<std::pair<int, std::string>>;
  EXPECT_EQ(runs("C:\\new\\x00", 10), (V{{PreviewRun::kText, "C:\\new\\x00"}}));
  EXPECT_EQ(runs(std::string("a\0\x01" "b\\\n\x7f\xff", 8), 8),
            (V{{PreviewRun::kText, "a"},
               {PreviewRun::kBytes, "\\x00\\x01"},
               {PreviewRun::kText, "b\\"},
               {PreviewRun::kBytes, "\\x0a\\x7f\\xff"}}));
  EXPECT_EQ(runs("caf\xc3\xa9 \xe2\x82\xac", 9), (V{{PreviewRun::kText, "caf\xc3\xa9 \xe2\x82\xac"}}));
  // Bidi and C1 controls show as their codes (U+202E would show the rest backwards).
  EXPECT_EQ(runs("invoice\xe2\x80\xaetxt.exe\xc2\x85", 19),
            (V{{PreviewRun::kText, "invoice"},
               {PreviewRun::kBytes, "\\u202e"},
               {PreviewRun::kText, "txt.exe"},
               {PreviewRun::kBytes, "\\u0085"}}));
  // Overlong and surrogate forms are not text.
  EXPECT_EQ(runs("\xc0\xaf\xed\xa0\x80", 5),
            (V{{PreviewRun::kBytes, "\\xc0\\xaf\\xed\\xa0\\x80"}}));
  EXPECT_EQ(runs("ab\xc3", 300), (V{{PreviewRun::kText, "ab"},
                                    {PreviewRun::kBytes, "\\xc3"},
                                    {PreviewRun::kMore, "\xe2\x80\xa6 (300 bytes)"}}));
  EXPECT_TRUE(runs("", 0).empty());
}

TEST(ParseForm, DecodesPlusAndPercentAndKeepsTheFirstValue) {
  auto f = ParseForm("token=a+b%2Fc%3d&csrf=x&csrf=y&bad=%zz&empty");
  EXPECT_EQ(f["token"], "a b/c=");
  EXPECT_EQ(f["csrf"], "x");
  EXPECT_EQ(f["bad"], "%zz");
  EXPECT_EQ(f["empty"], "");
}

TEST(Secrets, RandomTokensDifferAndCompareOnlyWhenEqual) {
  const std::string a = RandomToken(), b = RandomToken();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(SameSecret(a, a));
  EXPECT_FALSE(SameSecret(a, b));
  EXPECT_FALSE(SameSecret(a, a.substr(0, 63)));
  EXPECT_FALSE(SameSecret("", a));
}

// As ssh refuses a key others can read (issue 49: a world-readable token
// file was taken silently). A group may read it (Kubernetes' fsGroup).
TEST(ReadTokenFile, RefusesAFileOtherUsersCanRead) {
  char dir[] = "/tmp/partq-token-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/token";
  {
    std::ofstream out(path);
    out << "0123456789abcdef0123\n";
  }
  for (mode_t mode : {0644, 0604, 0606, 0601}) {
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    absl::StatusOr<std::string> t = ReadTokenFile(path);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << std::oct << mode;
    EXPECT_NE(t.status().message().find("other users"), absl::string_view::npos) << t.status();
    EXPECT_NE(t.status().message().find("chmod o-rwx"), absl::string_view::npos) << t.status();
  }
  for (mode_t mode : {0600, 0640, 0400, 0440}) {
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
    absl::StatusOr<std::string> t = ReadTokenFile(path);
    ASSERT_TRUE(t.ok()) << std::oct << mode << ": " << t.status();
    EXPECT_EQ(*t, "0123456789abcdef0123");
  }
  unlink(path.c_str());
  rmdir(dir);
}

TEST(CheckListenAddress, RefusesOtherMachinesWithoutAToken) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "::1"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
    EXPECT_TRUE(CheckListenAddress(host, false).ok()) << host;
  }
  for (const char* host : {"", "0.0.0.0", "*", "10.0.0.5", "192.168.1.1", "example.com"}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
    absl::Status st = CheckListenAddress(host, false);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << host;
    EXPECT_NE(st.message().find("--token-file"), absl::string_view::npos) << st;
    EXPECT_TRUE(CheckListenAddress(host, true).ok()) << host;
  }
}

TEST(PartRanges, JoinsRuns) {
  EXPECT_EQ(PartRanges({5, 0, 1, 2, 7, 8}), "0-2, 5, 7-8");
  EXPECT_EQ(PartRanges({}), "");
}

TEST(Rates, BacklogRateOverTheWindow) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  std::deque<Sample> s = {{t0, 100},
                          {t0 + absl::Seconds(30), 70},
                          {t0 + absl::Seconds(60), 40},
                          {t0 + absl::Seconds(90), 10}};
  EXPECT_DOUBLE_EQ(*BacklogRate(s, absl::Minutes(5)), -1.0);
  EXPECT_DOUBLE_EQ(*BacklogRate(s, absl::Seconds(30)), -1.0);
  s.push_back({t0 + absl::Seconds(120), 70});
  EXPECT_DOUBLE_EQ(*BacklogRate(s, absl::Seconds(30)), 2.0) << "the last 30 s only";
  EXPECT_FALSE(BacklogRate({{t0, 1}}, absl::Minutes(1)).has_value());
}

}  // namespace
}  // namespace partq::console
