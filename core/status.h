// One error model for every library: Status / Result<T>, propagated upward; only cli/ turns
// them into messages and exit codes.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace gp {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad user input: flags, config, schedule text, plan JSON
  kNotFound,         // missing file or name
  kParseError,       // a file exists but cannot be parsed
  kUnsupported,      // a feature or operator graphpipe does not implement
  kInfeasible,       // no plan/schedule meets the limits (memory, devices, batch)
  kNumerical,        // NaN/Inf or a numerical check that failed
  kIoError,          // reading/writing failed
  kInternal,         // a bug in graphpipe
  kTimeout,          // a wait ran past its limit
  kAborted,          // stopped because another worker failed first (a secondary error)
};

char const* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  std::string const& message() const { return message_; }
  // "<code>: <message>", e.g. for logs.
  std::string to_string() const;
  // Prefix the message with context ("loading model.onnx: ...").
  Status with_context(std::string const& context) const {
    if (is_ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
inline Status not_found(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
inline Status parse_error(std::string msg) { return {StatusCode::kParseError, std::move(msg)}; }
inline Status unsupported(std::string msg) { return {StatusCode::kUnsupported, std::move(msg)}; }
inline Status infeasible(std::string msg) { return {StatusCode::kInfeasible, std::move(msg)}; }
inline Status numerical_error(std::string msg) { return {StatusCode::kNumerical, std::move(msg)}; }
inline Status io_error(std::string msg) { return {StatusCode::kIoError, std::move(msg)}; }
inline Status internal_error(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
inline Status timeout_error(std::string msg) { return {StatusCode::kTimeout, std::move(msg)}; }
inline Status aborted_error(std::string msg) { return {StatusCode::kAborted, std::move(msg)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).is_ok()); }  // NOLINT

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(v_); }

  T& value() & {
    assert(is_ok());
    return std::get<T>(v_);
  }
  T const& value() const& {
    assert(is_ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(is_ok());
    return std::get<T>(std::move(v_));
  }
  T& operator*() & { return value(); }
  T const& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  T const* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

namespace detail {
inline Status to_status(Status const& s) { return s; }
template <typename T>
Status to_status(Result<T> const& r) {
  return r.status();
}
}  // namespace detail

}  // namespace gp

#define GP_CONCAT_INNER_(a, b) a##b
#define GP_CONCAT_(a, b) GP_CONCAT_INNER_(a, b)

// Return the Status (or the error of a Result) from the enclosing function if it is not ok.
#define RETURN_IF_ERROR(expr)                                  \
  do {                                                         \
    ::gp::Status gp_status_ = ::gp::detail::to_status((expr)); \
    if (!gp_status_.is_ok()) return gp_status_;                \
  } while (0)

// ASSIGN_OR_RETURN(auto x, compute()); — x is the value, or the error is returned.
#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL_(GP_CONCAT_(gp_result_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.is_ok()) return tmp.status();       \
  lhs = std::move(tmp).value()
