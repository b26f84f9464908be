// Where a connection string keeps its passwords (pg/dsn.h): the spans, the
// mask written over a command line, and the redaction of libpq's messages.
#include "pg/dsn.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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
  // Other keys that contain the word are not passwords; passfile names a file.
  EXPECT_EQ(MaskDsnPasswords("passfile=/p user=password"), "passfile=/p user=password");
  // The client key's passphrase is a secret to libpq too.
  EXPECT_EQ(MaskDsnPasswords("host=db sslkey=/k sslpassword=k3y"),
            "host=db sslkey=/k sslpassword=xxx");
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

// libpq percent-decodes a URI's query keys: `%70assword` is its password.
TEST(DsnTest, PercentEncodedUriKeysAreMaskedAsLibpqReadsThem) {
  EXPECT_EQ(MaskDsnPasswords("postgresql://db/app?%70assword=s3cret"),
            "postgresql://db/app?%70assword=xxxxxx");
  EXPECT_EQ(
      MaskDsnPasswords("postgresql://db/app?user=u&%70%61%73%73word=s%33cret&sslmode=require"),
      "postgresql://db/app?user=u&%70%61%73%73word=xxxxxxxx&sslmode=require");
  EXPECT_EQ(MaskDsnPasswords("postgres://db/app?ssl%70assword=k3y&sslkey=/k"),
            "postgres://db/app?ssl%70assword=xxx&sslkey=/k");
  EXPECT_EQ(MaskDsnPasswords("postgresql://%75:pw@db/app?passfile=/p"),
            "postgresql://%75:xx@db/app?passfile=/p");
  // libpq refuses a URI after spaces, quoting it whole: masked all the same.
  EXPECT_EQ(MaskDsnPasswords("  postgresql://u:s3cret@db/app"), "  postgresql://u:xxxxxx@db/app");
  // Not a key libpq knows, encoded or not: left alone (libpq refuses the string).
  EXPECT_EQ(MaskDsnPasswords("postgresql://db/app?%70asswort=s3cret"),
            "postgresql://db/app?%70asswort=s3cret");
  // key=value words are not percent-decoded: libpq refuses `%70assword` there.
  EXPECT_EQ(MaskDsnPasswords("host=db %70assword=s3cret"), "host=db %70assword=s3cret");
}

// Whatever libpq reads from a masked string as a secret is x's only, over
// every spelling combined with every form.
TEST(DsnTest, LibpqReadsNoSecretFromAMaskedString) {
  const std::vector<std::string> keys = {"password",     "sslpassword",   "%70assword",
                                         "%70%61ssword", "ssl%70assword", "%50ASSWORD"};
  const std::vector<std::string> values = {"s3cret", "s%33cret", "a%2Fb", "%E2%80%AE"};
  int parsed = 0;
  for (const std::string& key : keys) {
    for (const std::string& value : values) {
      for (const std::string& dsn :
           {absl::StrCat("postgresql://u:pw", value, "@db/app?", key, "=", value),
            absl::StrCat("postgres://db/app?sslmode=disable&", key, "=", value, "&user=u"),
            absl::StrCat("host=db ", key, "=", value, " dbname=app"),
            absl::StrCat("host=db ", key, " = '", value, " x\\'y' user=u")}) {
        const std::string masked = MaskDsnPasswords(dsn);
        ASSERT_EQ(masked.size(), dsn.size());
        const auto secrets = DsnSecretValues(masked);
        if (!secrets) continue;  // libpq refuses it: it reads nothing from it either
        ++parsed;
        for (const std::string& s : *secrets) {
          EXPECT_EQ(s.find_first_not_of('x'), std::string::npos) << dsn << " -> " << masked;
        }
      }
    }
  }
  EXPECT_GE(parsed, 40);  // most combinations are valid: the loop checked something
}

TEST(DsnTest, LibpqMessagesLoseThePasswordsTheyQuote) {
  EXPECT_EQ(RedactDsnPasswords("invalid percent-encoded token: \"s3cret%zz\"",
                               "postgresql://db/app?%70assword=s3cret%zz"),
            "invalid percent-encoded token: \"xxxxx\"");
  EXPECT_EQ(RedactDsnPasswords(
                "missing \"=\" after \"postgresql://u:s3cret@h/db\" in connection info string",
                " postgresql://u:s3cret@h/db"),
            "missing \"=\" after \"postgresql://u:xxxxx@h/db\" in connection info string");
  // The decoded value too (libpq quotes values it has decoded, e.g. a database name).
  EXPECT_EQ(RedactDsnPasswords("database \"s3cret\" does not exist",
                               "postgresql://db/s3cret?%70assword=s%33cret"),
            "database \"xxxxx\" does not exist");
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
