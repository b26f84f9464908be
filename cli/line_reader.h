// Lines of a file descriptor (`partq enqueue --stdin`) in bounded memory: a
// line longer than the caller's limit is reported as soon as the limit is
// passed, without reading the rest of it (a 400 MB line, or an endless one,
// costs no more than the limit).
#ifndef PARTQ_CLI_LINE_READER_H_
#define PARTQ_CLI_LINE_READER_H_

#include <cstddef>
#include <string>

namespace partq::cli {

class LineReader {
 public:
  enum class Result {
    kLine,     // the next line, without its '\n' (the last line may lack one)
    kTooLong,  // the next line has more than `max` bytes; the rest of it is left unread
    kEnd,      // no more input
    kError,    // read(2) failed: errno says why
  };

  explicit LineReader(int fd) : fd_(fd) {}
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Reads the next line into `*line` (replacing it): at most `max` bytes of
  // it are kept. A '\r' before the '\n' stays in the line.
  Result Next(size_t max, std::string* line);

 private:
  bool Fill();  // more bytes into buf_; false at the end or on an error

  int fd_;
  bool eof_ = false;
  bool error_ = false;
  char buf_[64 * 1024];
  size_t pos_ = 0, end_ = 0;
};

}  // namespace partq::cli

#endif  // PARTQ_CLI_LINE_READER_H_
