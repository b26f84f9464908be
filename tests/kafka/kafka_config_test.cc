// librdkafka properties from a file (bridge/kafka_config.h): the format, the
// errors that name the file and line but never the line's text, and the
// secrets whose values are never shown.
#include "bridge/kafka_config.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace partq {
namespace {

using Props = std::map<std::string, std::string>;

TEST(KafkaPropertiesTest, KeyValueLinesCommentsAndBlankLines) {
  auto p = ParseKafkaProperties(
      "# SASL over TLS\n"
      "security.protocol=SASL_SSL\n"
      "\n"
      "  sasl.mechanism = SCRAM-SHA-512  \r\n"
      "sasl.password=a=b#c\n"
      "   # indented comment\n"
      "sasl.username=svc",
      "f");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, (Props{{"security.protocol", "SASL_SSL"},
                       {"sasl.mechanism", "SCRAM-SHA-512"},
                       {"sasl.password", "a=b#c"},
                       {"sasl.username", "svc"}}));
  EXPECT_EQ(*ParseKafkaProperties("", "f"), Props{});
  EXPECT_EQ(*ParseKafkaProperties("k=\n", "f"), (Props{{"k", ""}}));
}

TEST(KafkaPropertiesTest, ABadLineIsNamedByFileAndNumberWithoutItsText) {
  auto p = ParseKafkaProperties("a=1\n# c\nsasl.password s3cret\n", "--kafka-config-file /k");
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(p.status()));
  EXPECT_TRUE(
      absl::StartsWith(p.status().message(), "--kafka-config-file /k line 3: expected key=value"))
      << p.status();
  EXPECT_FALSE(absl::StrContains(p.status().message(), "s3cret")) << p.status();
  // An empty key, and a key given twice.
  p = ParseKafkaProperties("=s3cret\n", "f");
  EXPECT_TRUE(absl::StartsWith(p.status().message(), "f line 1: expected key=value")) << p.status();
  EXPECT_FALSE(absl::StrContains(p.status().message(), "s3cret"));
  p = ParseKafkaProperties("sasl.password=one\nx=y\nsasl.password=s3cret\n", "f");
  EXPECT_EQ(p.status().message(), "f line 3: sasl.password is set already on line 1");
}

TEST(KafkaPropertiesTest, AFileIsReadOrItsPathNamed) {
  char path[] = "/tmp/partq-kafka-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "client.id=c\nsasl.password=s3cret\n";
  auto p = ReadKafkaPropertiesFile(path, "--kafka-config-file");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, (Props{{"client.id", "c"}, {"sasl.password", "s3cret"}}));
  std::ofstream(path) << "client.id=c\nnot a property\n";
  p = ReadKafkaPropertiesFile(path, "--kafka-config-file");
  EXPECT_TRUE(absl::StartsWith(p.status().message(),
                               std::string("--kafka-config-file ") + path + " line 2:"))
      << p.status();
  std::remove(path);
  p = ReadKafkaPropertiesFile(path, "--kafka-config-file");
  EXPECT_EQ(p.status().message(), std::string("--kafka-config-file: cannot read ") + path);
}

TEST(KafkaPropertiesTest, ASecretRefusedByLibrdkafkaIsNotShown) {
  EXPECT_TRUE(IsSecretKafkaProperty("sasl.password"));
  EXPECT_TRUE(IsSecretKafkaProperty("ssl.key.password"));
  EXPECT_TRUE(IsSecretKafkaProperty("sasl.oauthbearer.client.secret"));
  EXPECT_FALSE(IsSecretKafkaProperty("ssl.key.location"));
  EXPECT_FALSE(IsSecretKafkaProperty("sasl.username"));
  const std::string secret =
      KafkaPropertyError("sasl.password", "s3cret", "Invalid value \"s3cret\"");
  EXPECT_FALSE(absl::StrContains(secret, "s3cret")) << secret;
  EXPECT_TRUE(absl::StartsWith(secret, "kafka config sasl.password: librdkafka refused")) << secret;
  EXPECT_EQ(KafkaPropertyError("acks", "x", "Invalid value"), "kafka config acks=x: Invalid value");
  // A key librdkafka does not know (a secret's, mistyped): its value is not shown.
  const std::string typo = KafkaPropertyError("sasl.pasword", "TYPO1",
                                              "No such configuration property: \"sasl.pasword\"");
  EXPECT_FALSE(absl::StrContains(typo, "TYPO1")) << typo;
  EXPECT_TRUE(absl::StartsWith(typo, "kafka config sasl.pasword: No such configuration property"))
      << typo;
}

}  // namespace
}  // namespace partq
