// The high-level ops of Luminal: free functions that build graph nodes. Each one is a
// composition of the primitive ops (docs/design.md), written once in lib/graph/ops_*.cpp.
// docs/ops.md states each op's exact semantics (dtype rules, broadcasting, edge cases).
//
// Conventions shared by every op:
//  * Binary elementwise ops broadcast like NumPy and accept a float/int/bool scalar in
//    place of either tensor (an `Operand`).
//  * Dtypes promote like PyTorch: bool < i32 < floating; a scalar only promotes the
//    category (i32 tensor + 0.5f -> f32). f16/bf16 inputs are computed in f32 and the
//    result is cast back once.
//  * The trailing Loc parameter (luminal/source_location.hpp, like std::source_location) is
//    filled in at the caller's line, so a mistake throws ShapeError/DTypeError
//    "[op] ... (at your_file.cpp:42)".
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "luminal/dim.hpp"
#include "luminal/dtype.hpp"
#include "luminal/source_location.hpp"
#include "luminal/tensor.hpp"

namespace luminal {

/// One axis or a list of axes; negative axes count from the end. A default-constructed
/// (or empty) Axes means "every axis".
class Axes {
 public:
  Axes() = default;
  Axes(int axis) : axes_{axis} {}  // NOLINT(google-explicit-constructor)
  Axes(std::initializer_list<int> axes) : axes_(axes) {}
  Axes(std::vector<int> axes) : axes_(std::move(axes)) {}  // NOLINT(google-explicit-constructor)

  const std::vector<int>& list() const { return axes_; }
  bool all() const { return axes_.empty(); }

 private:
  std::vector<int> axes_;
};

/// A tensor or an arithmetic scalar, as accepted by the binary elementwise ops and the
/// operators. Remembers where it was written so operators can report the call site.
class Operand {
 public:
  enum class Kind : uint8_t { tensor, boolean, integer, floating };

  Operand(const Tensor& t, Loc loc = Loc::current())  // NOLINT
      : tensor_(t), kind_(Kind::tensor), loc_(loc) {}
  template <class S>
  requires std::is_arithmetic_v<S> Operand(
      S value, Loc loc = Loc::current())  // NOLINT
      : value_(static_cast<double>(value)),
        kind_(std::is_same_v<S, bool> ? Kind::boolean
              : std::is_integral_v<S> ? Kind::integer
                                      : Kind::floating),
        loc_(loc) {}

  bool is_tensor() const { return kind_ == Kind::tensor; }
  const Tensor& tensor() const { return tensor_; }
  double value() const { return value_; }
  Kind kind() const { return kind_; }
  const Loc& loc() const { return loc_; }

 private:
  Tensor tensor_;
  double value_ = 0;
  Kind kind_;
  Loc loc_;
};

// Dim's min/max are hidden friends, visible only through ADL; declaring them here too
// lets the qualified form `lm::min(B, 16)` find them beside the reductions below.
Dim min(const Dim& a, const Dim& b);
Dim max(const Dim& a, const Dim& b);

// ------------------------------------------------------------------ unary elementwise
Tensor neg(const Tensor& x, Loc loc = Loc::current());
Tensor abs(const Tensor& x, Loc loc = Loc::current());
Tensor exp(const Tensor& x, Loc loc = Loc::current());
Tensor exp2(const Tensor& x, Loc loc = Loc::current());
Tensor log(const Tensor& x, Loc loc = Loc::current());
Tensor log2(const Tensor& x, Loc loc = Loc::current());
Tensor sqrt(const Tensor& x, Loc loc = Loc::current());
Tensor rsqrt(const Tensor& x, Loc loc = Loc::current());
Tensor recip(const Tensor& x, Loc loc = Loc::current());
Tensor sin(const Tensor& x, Loc loc = Loc::current());
Tensor cos(const Tensor& x, Loc loc = Loc::current());
Tensor tanh(const Tensor& x, Loc loc = Loc::current());
Tensor sigmoid(const Tensor& x, Loc loc = Loc::current());
Tensor relu(const Tensor& x, Loc loc = Loc::current());
Tensor square(const Tensor& x, Loc loc = Loc::current());
Tensor sign(const Tensor& x, Loc loc = Loc::current());
Tensor silu(const Tensor& x, Loc loc = Loc::current());
/// tanh approximation: = torch gelu(approximate="tanh").
Tensor gelu(const Tensor& x, Loc loc = Loc::current());
/// exact: 0.5 x (1 + erf(x / sqrt 2)) = torch gelu().
Tensor gelu_erf(const Tensor& x, Loc loc = Loc::current());
/// Elementwise error function (rational approximation, |error| < 2e-7).
Tensor erf(const Tensor& x, Loc loc = Loc::current());
Tensor clamp(const Tensor& x, const Operand& lo, const Operand& hi, Loc loc = Loc::current());
Tensor logical_not(const Tensor& x, Loc loc = Loc::current());

// ------------------------------------------------------------------ binary elementwise
Tensor add(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor sub(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor mul(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor div(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor pow(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor maximum(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor minimum(const Operand& a, const Operand& b, Loc loc = Loc::current());
/// = torch.remainder: the result has the sign of the divisor.
Tensor mod(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor less(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor greater(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor less_equal(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor greater_equal(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor equal(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor not_equal(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor logical_and(const Operand& a, const Operand& b, Loc loc = Loc::current());
Tensor logical_or(const Operand& a, const Operand& b, Loc loc = Loc::current());
/// cond must be boolean; a and b promote like a binary op; all three broadcast.
Tensor where(const Tensor& cond, const Operand& a, const Operand& b, Loc loc = Loc::current());

Tensor operator+(const Operand& a, const Operand& b);
Tensor operator-(const Operand& a, const Operand& b);
Tensor operator*(const Operand& a, const Operand& b);
Tensor operator/(const Operand& a, const Operand& b);
Tensor operator-(const Operand& x);
Tensor& operator+=(Tensor& a, const Operand& b);
Tensor& operator-=(Tensor& a, const Operand& b);
Tensor& operator*=(Tensor& a, const Operand& b);
Tensor& operator/=(Tensor& a, const Operand& b);

// ------------------------------------------------------------------ reductions
Tensor sum(const Tensor& x, const Axes& axes = Axes(), bool keepdim = false, Loc loc = Loc::current());
Tensor mean(const Tensor& x, const Axes& axes = Axes(), bool keepdim = false, Loc loc = Loc::current());
Tensor max(const Tensor& x, const Axes& axes = Axes(), bool keepdim = false, Loc loc = Loc::current());
Tensor min(const Tensor& x, const Axes& axes = Axes(), bool keepdim = false, Loc loc = Loc::current());
Tensor prod(const Tensor& x, const Axes& axes = Axes(), bool keepdim = false, Loc loc = Loc::current());
Tensor var(const Tensor& x, const Axes& axes = Axes(), bool keepdim = false, bool unbiased = true,
           Loc loc = Loc::current());
/// i32 index of the first maximum along `axis`.
Tensor argmax(const Tensor& x, int axis, bool keepdim = false, Loc loc = Loc::current());
Tensor argmin(const Tensor& x, int axis, bool keepdim = false, Loc loc = Loc::current());
Tensor cumsum(const Tensor& x, int axis, Loc loc = Loc::current());

// ------------------------------------------------------------------ linear algebra
/// NumPy matmul: batched, broadcasting batch dims, 1-D operands promoted and removed.
Tensor matmul(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
/// x @ w^T + b with w [out, in] (= torch linear); b may be a null Tensor.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor(), Loc loc = Loc::current());

// ------------------------------------------------------------------ network
Tensor softmax(const Tensor& x, int axis = -1, Loc loc = Loc::current());
Tensor log_softmax(const Tensor& x, int axis = -1, Loc loc = Loc::current());
/// Over the last axis; weight and bias may be null Tensors.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps = 1e-5f,
                  Loc loc = Loc::current());
/// x * rsqrt(mean(x^2, -1) + eps) * weight; weight may be a null Tensor.
Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps = 1e-6f, Loc loc = Loc::current());
Tensor embedding(const Tensor& table, const Tensor& ids, Loc loc = Loc::current());
Tensor rope(const Tensor& x, const Tensor& positions, float theta = 10000.f, Loc loc = Loc::current());
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = false,
                                    Loc loc = Loc::current());
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b = Tensor(), int stride = 1, int padding = 0,
              int dilation = 1, int groups = 1, Loc loc = Loc::current());
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = Tensor(),
              std::array<int, 2> stride = {1, 1}, std::array<int, 2> padding = {0, 0},
              std::array<int, 2> dilation = {1, 1}, int groups = 1, Loc loc = Loc::current());
/// stride {0, 0} means stride = kernel; padding is filled with -inf.
Tensor max_pool2d(const Tensor& x, std::array<int, 2> kernel, std::array<int, 2> stride = {0, 0},
                  std::array<int, 2> padding = {0, 0}, Loc loc = Loc::current());
/// count_include_pad = true, as torch.
Tensor avg_pool2d(const Tensor& x, std::array<int, 2> kernel, std::array<int, 2> stride = {0, 0},
                  std::array<int, 2> padding = {0, 0}, Loc loc = Loc::current());

// ------------------------------------------------------------------ movement
/// One entry may be -1 (inferred).
Tensor reshape(const Tensor& x, const std::vector<Dim>& shape, Loc loc = Loc::current());
Tensor permute(const Tensor& x, const std::vector<int>& axes, Loc loc = Loc::current());
Tensor transpose(const Tensor& x, int a, int b, Loc loc = Loc::current());
/// -1 keeps a dim; new leading dims allowed; only size-1 dims grow.
Tensor expand(const Tensor& x, const std::vector<Dim>& shape, Loc loc = Loc::current());
/// Removes `axis` when it is 1; otherwise returns x unchanged (= torch).
Tensor squeeze(const Tensor& x, int axis, Loc loc = Loc::current());
Tensor unsqueeze(const Tensor& x, int axis, Loc loc = Loc::current());
Tensor flatten(const Tensor& x, int start = 0, int end = -1, Loc loc = Loc::current());
/// start/end clamp like Python (negative constants count from the end); step >= 1.
Tensor slice(const Tensor& x, int axis, Dim start, Dim end, int64_t step = 1, Loc loc = Loc::current());
/// Pairs (before, after) from axis 0; negative constants crop.
Tensor pad(const Tensor& x, const std::vector<std::pair<Dim, Dim>>& lo_hi_per_axis, float value = 0,
           Loc loc = Loc::current());
Tensor concat(const std::vector<Tensor>& xs, int axis, Loc loc = Loc::current());
/// = torch Tensor.repeat.
Tensor repeat(const Tensor& x, const std::vector<int64_t>& times, Loc loc = Loc::current());

// ------------------------------------------------------------------ creation and types
// constant/full/arange/tril_mask take no tensor: they are created in the graph most
// recently created or used on this thread.
Tensor constant(float value, const std::vector<Dim>& shape = {}, DType dtype = f32, Loc loc = Loc::current());
Tensor full(const std::vector<Dim>& shape, float value, DType dtype = f32, Loc loc = Loc::current());
Tensor zeros_like(const Tensor& x, Loc loc = Loc::current());
Tensor ones_like(const Tensor& x, Loc loc = Loc::current());
/// i32 [n]: 0 .. n-1.
Tensor arange(Dim n, Loc loc = Loc::current());
/// boolean [n, m], true where j <= i.
Tensor tril_mask(Dim n, Dim m, Loc loc = Loc::current());
Tensor cast(const Tensor& x, DType dtype, Loc loc = Loc::current());

}  // namespace luminal
