#include "base/utf8.h"

#include <string>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace partq {
namespace {

TEST(IsValidUtf8, AcceptsTextOfEveryLength) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("gr\xc3\xbc\xc3\x9f"));    // two-byte sequences
  EXPECT_TRUE(IsValidUtf8("\xe2\x82\xac"));          // U+20AC, three bytes
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x98\x80"));      // U+1F600, four bytes
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));      // U+10FFFF, the last one
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));  // NUL is a character
}

TEST(IsValidUtf8, RefusesWhatIsNotUtf8) {
  EXPECT_FALSE(IsValidUtf8("\xff"));              // never a lead byte
  EXPECT_FALSE(IsValidUtf8("\x80"));              // a lone continuation
  EXPECT_FALSE(IsValidUtf8("\xc3"));              // truncated at the end
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // truncated at the end
  EXPECT_FALSE(IsValidUtf8("\xc3(x"));            // bad continuation
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));      // overlong, three bytes
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // a surrogate (U+D800)
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
}

TEST(Utf8, AcceptsWellFormedText) {
  for (const std::string& s :
       {std::string(), std::string("plain ascii, longer than eight bytes"),
        std::string("\0nul\0", 5), std::string("\xC2\x80"), std::string("\xDF\xBF"),
        std::string("\xE0\xA0\x80"), std::string("\xED\x9F\xBF"),          // U+D7FF
        std::string("\xEE\x80\x80"), std::string("\xEF\xBF\xBF"),          // U+E000, U+FFFF
        std::string("\xF0\x90\x80\x80"), std::string("\xF4\x8F\xBF\xBF"),  // U+10000, U+10FFFF
        std::string("12345678\xC3\xA9"), std::string("\xE2\x82\xAC after the euro sign")}) {
    EXPECT_TRUE(IsValidUtf8(s)) << absl::CHexEscape(s);
  }
}

TEST(Utf8, RejectsOverlongSurrogatesOutOfRangeAndTruncated) {
  for (const std::string& s : {
           std::string("\x80"),              // a continuation byte alone
           std::string("\xC0\xAF"),          // overlong '/'
           std::string("\xC1\xBF"),          // overlong
           std::string("\xE0\x9F\xBF"),      // overlong 3-byte
           std::string("\xF0\x8F\xBF\xBF"),  // overlong 4-byte
           std::string("\xED\xA0\x80"),      // U+D800, a surrogate
           std::string("\xED\xBF\xBF"),      // U+DFFF
           std::string("\xF4\x90\x80\x80"),  // U+110000
           std::string("\xF5\x80\x80\x80"),  // F5..FF never appear
           std::string("\xFF"),              //
           std::string("\xC3"),              // truncated at the end
           std::string("\xE2\x82"),          //
           std::string("abcdefgh\xE2\x82"),  // after the 8-byte fast path
           std::string("\xC3\x28"),          // a second byte that is not a continuation
           std::string("\xE2\x28\xA1"),      //
           std::string("\xF0\x90\x28\xBC"),  //
       }) {
    EXPECT_FALSE(IsValidUtf8(s)) << absl::CHexEscape(s);
  }
}

TEST(PrintableUtf8, EscapesControlCharactersAndBrokenSequencesKeepsTheRest) {
  EXPECT_EQ(PrintableUtf8("plain \"text\" \\ \xC3\xA9\xF0\x9F\x98\x80"),
            "plain \"text\" \\ \xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(PrintableUtf8(std::string("a\0b\n\x7f", 5)), "a\\x00b\\x0a\\x7f");
  EXPECT_EQ(PrintableUtf8("\xff\xC3(\xE2\x82"), "\\xff\\xc3(\\xe2\\x82");
  EXPECT_EQ(PrintableUtf8("\xED\xA0\x80"), "\\xed\\xa0\\x80");  // a surrogate
}

// U+202E (RIGHT-TO-LEFT OVERRIDE) shows "exe.txt" as "txt.exe"; C1 controls
// drive some terminals; every such invisible control is spelled out.
TEST(PrintableUtf8, EscapesBidiAndC1ControlsAsCodePoints) {
  EXPECT_EQ(PrintableUtf8("invoice\xE2\x80\xAEtxt.exe"), "invoice\\u202etxt.exe");
  EXPECT_EQ(PrintableUtf8("a\xC2\x9B"
                          "31mred"),
            "a\\u009b31mred");
  for (char32_t c : {0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A, 0x202E, 0x2066, 0x2069}) {
    EXPECT_TRUE(IsInvisibleControl(c)) << c;
  }
  for (char32_t c : {0x7F, 0xA0, 0xE9, 0x2027, 0x202F, 0x2065, 0x206A, 0x1F600}) {
    EXPECT_FALSE(IsInvisibleControl(c)) << c;
  }
  // Text around them, and other scripts, stay as they are.
  EXPECT_EQ(PrintableUtf8("\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xE2\x81\xA6x\xE2\x81\xA9"),
            "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \\u2066x\\u2069");
  // Lines kept when asked: for messages of several lines.
  EXPECT_EQ(PrintableUtf8Lines("one\n\ttwo\x1b[2J\xE2\x80\xAE"), "one\n\ttwo\\x1b[2J\\u202e");
}

TEST(EscapeInvisibleControls, KeepsTheJsonValue) {
  EXPECT_EQ(EscapeInvisibleControls("{\"e\": \"a\xE2\x80\xAE"
                                    "b \xC3\xA9\"}"),
            "{\"e\": \"a\\u202eb \xC3\xA9\"}");
  EXPECT_EQ(EscapeInvisibleControls("[1, \"\\n\"]"), "[1, \"\\n\"]");
}

// A long value is cut in a message, at a character boundary, with its length.
TEST(Quoted, CutsLongValuesNotingTheirLength) {
  EXPECT_EQ(Quoted("q;--"), "\"q;--\"");
  EXPECT_EQ(Quoted(std::string(kMaxQuotedBytes, 'a')),
            "\"" + std::string(kMaxQuotedBytes, 'a') + "\"");
  EXPECT_EQ(Quoted(std::string(100000, 'a')),
            "\"" + std::string(kMaxQuotedBytes, 'a') + "\"... (100000 bytes)");
  // 63 a's and an e-acute (2 bytes) crossing the cut: the e-acute goes whole.
  EXPECT_EQ(Quoted(std::string(kMaxQuotedBytes - 1, 'a') + "\xC3\xA9zz"),
            "\"" + std::string(kMaxQuotedBytes - 1, 'a') + "\"... (67 bytes)");
  EXPECT_EQ(Quoted("k\xff\n"), "\"k\\xff\\x0a\"");
}

}  // namespace
}  // namespace partq
