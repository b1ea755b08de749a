// The one error hierarchy of Luminal. Everything the library throws derives from
// luminal::Error. Messages name the op, the shapes and the offending value, and -- for
// mistakes made while building a graph -- the user's call site.
#pragma once

#include <stdexcept>
#include <string>

namespace luminal {

/// Base of every exception Luminal throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Shapes that cannot work together (broadcast, matmul inner dims, reshape counts, axes).
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// A dtype an op does not accept (a float where a boolean is needed, mixed dtypes, ...).
class DTypeError : public Error {
 public:
  using Error::Error;
};

/// Compilation failed: a budget could not produce a program, or a backend's JIT failed
/// (the message carries the compiler's log).
class CompileError : public Error {
 public:
  using Error::Error;
};

/// A bad call of a Callable (unknown or missing input, wrong rank, dim, dtype or byte
/// count, a dim outside its range) or a device failure. The Callable stays usable.
class RuntimeError : public Error {
 public:
  using Error::Error;
};

/// A call stopped before its end because its CallOptions::cancel token was cancelled.
/// Its outputs hold unspecified values; the Callable stays usable.
class CancelledError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

/// A call stopped before its end because its CallOptions::deadline passed. Its outputs
/// hold unspecified values; the Callable stays usable.
class DeadlineExceededError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

/// A bug in Luminal itself: an invariant that should never break did.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace luminal
