// Tensor's chaining members: each forwards to the free function of ops.hpp, so an op's
// semantics and errors are written once.
#include "luminal/ops.hpp"
#include "luminal/tensor.hpp"

namespace luminal {

Tensor Tensor::reshape(const std::vector<Dim>& shape, Loc loc) const {
  return luminal::reshape(*this, shape, loc);
}
Tensor Tensor::permute(const std::vector<int>& axes, Loc loc) const {
  return luminal::permute(*this, axes, loc);
}
Tensor Tensor::transpose(int a, int b, Loc loc) const { return luminal::transpose(*this, a, b, loc); }
Tensor Tensor::expand(const std::vector<Dim>& shape, Loc loc) const {
  return luminal::expand(*this, shape, loc);
}
Tensor Tensor::squeeze(int axis, Loc loc) const { return luminal::squeeze(*this, axis, loc); }
Tensor Tensor::unsqueeze(int axis, Loc loc) const { return luminal::unsqueeze(*this, axis, loc); }
Tensor Tensor::flatten(int start, int end, Loc loc) const { return luminal::flatten(*this, start, end, loc); }
Tensor Tensor::slice(int axis, Dim start, Dim end, int64_t step, Loc loc) const {
  return luminal::slice(*this, axis, std::move(start), std::move(end), step, loc);
}
Tensor Tensor::sum(const Axes& axes, bool keepdim, Loc loc) const {
  return luminal::sum(*this, axes, keepdim, loc);
}
Tensor Tensor::sum(Loc loc) const { return luminal::sum(*this, Axes(), false, loc); }
Tensor Tensor::mean(const Axes& axes, bool keepdim, Loc loc) const {
  return luminal::mean(*this, axes, keepdim, loc);
}
Tensor Tensor::mean(Loc loc) const { return luminal::mean(*this, Axes(), false, loc); }
Tensor Tensor::max(const Axes& axes, bool keepdim, Loc loc) const {
  return luminal::max(*this, axes, keepdim, loc);
}
Tensor Tensor::max(Loc loc) const { return luminal::max(*this, Axes(), false, loc); }
Tensor Tensor::min(const Axes& axes, bool keepdim, Loc loc) const {
  return luminal::min(*this, axes, keepdim, loc);
}
Tensor Tensor::min(Loc loc) const { return luminal::min(*this, Axes(), false, loc); }
Tensor Tensor::matmul(const Tensor& other, Loc loc) const { return luminal::matmul(*this, other, loc); }
Tensor Tensor::cast(DType dtype, Loc loc) const { return luminal::cast(*this, dtype, loc); }
Tensor Tensor::exp(Loc loc) const { return luminal::exp(*this, loc); }
Tensor Tensor::log(Loc loc) const { return luminal::log(*this, loc); }
Tensor Tensor::sqrt(Loc loc) const { return luminal::sqrt(*this, loc); }
Tensor Tensor::abs(Loc loc) const { return luminal::abs(*this, loc); }
Tensor Tensor::relu(Loc loc) const { return luminal::relu(*this, loc); }
Tensor Tensor::sigmoid(Loc loc) const { return luminal::sigmoid(*this, loc); }
Tensor Tensor::tanh(Loc loc) const { return luminal::tanh(*this, loc); }
Tensor Tensor::softmax(int axis, Loc loc) const { return luminal::softmax(*this, axis, loc); }

}  // namespace luminal
