// The project's exception type: every failure carries where it was raised and, for compiler
// errors, the log, so that main() can print one clear message.
#pragma once
#include <stdexcept>
#include <string>

namespace fusetune {

class Error : public std::runtime_error {
 public:
  Error(const std::string& what, const char* file, int line, std::string log = {})
      : std::runtime_error(what), file_(file), line_(line), log_(std::move(log)) {}
  const char* file() const { return file_; }
  int line() const { return line_; }
  const std::string& log() const { return log_; }

 private:
  const char* file_;
  int line_;
  std::string log_;
};

// A user-facing failure (bad option, unsupported op, missing file): printed without location.
class UserError : public Error {
 public:
  using Error::Error;
};

// A user-facing failure whose one-line message a helper process has already printed: main()
// exits with status 2 and adds nothing.
class ReportedError : public UserError {
 public:
  using UserError::UserError;
};

}  // namespace fusetune

#define FT_THROW(msg) throw ::fusetune::Error((msg), __FILE__, __LINE__)
#define FT_USER_ERROR(msg) throw ::fusetune::UserError((msg), __FILE__, __LINE__)
#define FT_CHECK(cond, msg) \
  do {                      \
    if (!(cond)) FT_THROW(std::string("check failed: ") + #cond + ": " + (msg)); \
  } while (0)
