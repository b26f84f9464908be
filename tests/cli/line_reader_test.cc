// cli/line_reader.h over a real pipe: lines as `enqueue --stdin` takes them,
// and a line over the limit reported once the limit is passed, unread beyond.
#include "cli/line_reader.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace partq::cli {
namespace {

using Result = LineReader::Result;

// A pipe whose read end carries `input` (written from a thread: it may be
// larger than the pipe's buffer) and is then closed.
class Input {
 public:
  explicit Input(std::string input) {
    // The reader may close its end with input left: the writer gets EPIPE.
    signal(SIGPIPE, SIG_IGN);
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    read_ = fds[0];
    writer_ = std::thread([fd = fds[1], input = std::move(input)] {
      size_t off = 0;
      while (off < input.size()) {
        const ssize_t n = write(fd, input.data() + off, input.size() - off);
        if (n <= 0) break;  // the reader closed its end
        off += static_cast<size_t>(n);
      }
      close(fd);
    });
  }
  ~Input() {
    close(read_);
    writer_.join();
  }
  int fd() const { return read_; }

 private:
  int read_ = -1;
  std::thread writer_;
};

std::vector<std::string> AllLines(const std::string& input, size_t max = 1 << 20) {
  Input in(input);
  LineReader r(in.fd());
  std::vector<std::string> out;
  std::string line;
  Result got;
  while ((got = r.Next(max, &line)) == Result::kLine) out.push_back(line);
  EXPECT_EQ(got, Result::kEnd);
  EXPECT_EQ(r.Next(max, &line), Result::kEnd);  // and stays there
  return out;
}

TEST(LineReaderTest, LinesEndAtNewlinesTheLastMayNot) {
  EXPECT_EQ(AllLines("a\nbb\n"), (std::vector<std::string>{"a", "bb"}));
  EXPECT_EQ(AllLines("a\n\nc"), (std::vector<std::string>{"a", "", "c"}));
  EXPECT_EQ(AllLines("x\r\n\n"), (std::vector<std::string>{"x\r", ""}));
  EXPECT_EQ(AllLines(""), std::vector<std::string>{});
  EXPECT_EQ(AllLines("\n"), std::vector<std::string>{""});
  // Lines across the reader's 64 KiB buffer.
  const std::string big(200000, 'b');
  EXPECT_EQ(AllLines("s\n" + big + "\nt\n"), (std::vector<std::string>{"s", big, "t"}));
}

TEST(LineReaderTest, ALineOverTheLimitIsReportedOnceItPassesIt) {
  EXPECT_EQ(AllLines("1234\n12345\n", 5), (std::vector<std::string>{"1234", "12345"}));
  // 50 MB without a newline behind a short line: the second read stops at
  // the limit, keeping the limit's bytes, and leaves the rest in the pipe.
  Input in("ok\n" + std::string(50 << 20, 'z') + "\nafter\n");
  LineReader r(in.fd());
  std::string line;
  ASSERT_EQ(r.Next(1000, &line), Result::kLine);
  EXPECT_EQ(line, "ok");
  ASSERT_EQ(r.Next(1000, &line), Result::kTooLong);
  EXPECT_EQ(line, std::string(1000, 'z'));
  EXPECT_LE(line.capacity(), 64u << 10);
}

TEST(LineReaderTest, AReadErrorIsReported) {
  LineReader r(-1);
  std::string line;
  EXPECT_EQ(r.Next(10, &line), Result::kError);
}

}  // namespace
}  // namespace partq::cli
