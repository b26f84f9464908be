// Where a connection string keeps its passwords (pg/dsn.h): the spans, the
// mask written over a command line, and the redaction of libpq's messages.
#include "pg/dsn.h"

#include <string>

#include "gtest/gtest.h"

namespace partq {
namespace {

TEST(DsnTest, KeyValuePasswordsAreMaskedInPlace) {
  EXPECT_EQ(MaskDsnPasswords("host=db password=s3cret dbname=app"),
            "host=db password=xxxxxx dbname=app");
  EXPECT_EQ(MaskDsnPasswords("password = 's3 cr\\'et' host=db"), "password = 'xxxxxxxxx' host=db");
  EXPECT_EQ(MaskDsnPasswords("host=db password=a\\ b"), "host=db password=xxxx");
  // Two of them (libpq takes the last): both hidden.
  EXPECT_EQ(MaskDsnPasswords("password=one password=two"), "password=xxx password=xxx");
  // Other keys that contain the word are not passwords.
  EXPECT_EQ(MaskDsnPasswords("passfile=/p user=password"), "passfile=/p user=password");
  // A malformed word does not stop the scan.
  EXPECT_EQ(MaskDsnPasswords("host password=s3cret"), "host password=xxxxxx");
  // Unterminated quote: to the end.
  EXPECT_EQ(MaskDsnPasswords("password='s3cret"), "password='xxxxxx");
  EXPECT_EQ(MaskDsnPasswords("host=db dbname=app"), "host=db dbname=app");
  EXPECT_EQ(MaskDsnPasswords(""), "");
  EXPECT_EQ(MaskDsnPasswords("password="), "password=");
}

TEST(DsnTest, UriPasswordsAreMaskedInPlace) {
  EXPECT_EQ(MaskDsnPasswords("postgresql://app:s3cret@db:5432/app"),
            "postgresql://app:xxxxxx@db:5432/app");
  EXPECT_EQ(
      MaskDsnPasswords("postgres://app:s%40cret@h1:1,h2:2/app?target_session_attrs=read-write"),
      "postgres://app:xxxxxxxx@h1:1,h2:2/app?target_session_attrs=read-write");
  EXPECT_EQ(MaskDsnPasswords("postgresql://db/app?user=u&password=s3cret&sslmode=require"),
            "postgresql://db/app?user=u&password=xxxxxx&sslmode=require");
  EXPECT_EQ(MaskDsnPasswords("postgresql://app:pw@db/app?password=s3cret"),
            "postgresql://app:xx@db/app?password=xxxxxx");
  // No password: nothing changes (a user alone, an '@' after the path).
  EXPECT_EQ(MaskDsnPasswords("postgresql://app@db/app"), "postgresql://app@db/app");
  EXPECT_EQ(MaskDsnPasswords("postgresql://db:5432/a@b"), "postgresql://db:5432/a@b");
  EXPECT_EQ(MaskDsnPasswords("postgresql://"), "postgresql://");
}

TEST(DsnTest, LibpqMessagesLoseThePasswordsTheyQuote) {
  // What libpq 15 says of these (psql shows the same words).
  EXPECT_EQ(RedactDsnPasswords("invalid percent-encoded token: \"s3cret%zz\"",
                               "postgresql://u:s3cret%zz@127.0.0.1:1/db"),
            "invalid percent-encoded token: \"xxxxx\"");
  EXPECT_EQ(RedactDsnPasswords("end of string reached when looking for matching \"]\" in IPv6 host "
                               "address in URI: \"postgresql://u:s3cret@[::1/db\"",
                               "postgresql://u:s3cret@[::1/db"),
            "end of string reached when looking for matching \"]\" in IPv6 host address in URI: "
            "\"postgresql://u:xxxxx@[::1/db\"");
  // Outside quotes the words are libpq's own, and left alone.
  EXPECT_EQ(RedactDsnPasswords("connection to server at \"db\" failed: a", "host=db password=a"),
            "connection to server at \"db\" failed: a");
  EXPECT_EQ(RedactDsnPasswords("no password here \"x\"", "host=db"), "no password here \"x\"");
  // An unterminated quote runs to the end.
  EXPECT_EQ(RedactDsnPasswords("bad \"s3cret", "password=s3cret"), "bad \"xxxxx");
}

}  // namespace
}  // namespace partq
