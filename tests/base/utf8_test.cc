#include "base/utf8.h"

#include <string>

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

}  // namespace
}  // namespace partq
