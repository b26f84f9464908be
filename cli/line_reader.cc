#include "cli/line_reader.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace partq::cli {

bool LineReader::Fill() {
  if (eof_ || error_) return false;
  for (;;) {
    const ssize_t n = read(fd_, buf_, sizeof buf_);
    if (n > 0) {
      pos_ = 0;
      end_ = static_cast<size_t>(n);
      return true;
    }
    if (n == 0) {
      eof_ = true;
      return false;
    }
    if (errno != EINTR) {
      error_ = true;
      return false;
    }
  }
}

LineReader::Result LineReader::Next(size_t max, std::string* line) {
  line->clear();
  bool any = false;  // a byte of this line was read (a last line may lack its '\n')
  for (;;) {
    if (pos_ == end_ && !Fill()) {
      if (error_) return Result::kError;
      return any ? Result::kLine : Result::kEnd;
    }
    any = true;
    const char* start = buf_ + pos_;
    const size_t avail = end_ - pos_;
    const void* nl = std::memchr(start, '\n', avail);
    const size_t take = nl ? static_cast<size_t>(static_cast<const char*>(nl) - start) : avail;
    if (line->size() + take > max) {
      // Keep nothing past the limit; the caller stops at this line.
      line->append(start, max - line->size());
      pos_ += take;
      return Result::kTooLong;
    }
    line->append(start, take);
    pos_ += take;
    if (nl) {
      ++pos_;  // the '\n'
      return Result::kLine;
    }
  }
}

}  // namespace partq::cli
