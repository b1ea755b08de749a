// A Tensor is a cheap handle to one node of a Graph: copying it copies a pointer and an
// index. Its shape and dtype are inferred when the node is created.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "luminal/dim.hpp"
#include "luminal/dtype.hpp"
#include "luminal/source_location.hpp"

namespace luminal {

class Axes;  // ops.hpp

namespace detail {
struct GraphImpl;  // lib/graph: the node store
}

class Tensor {
 public:
  /// A null handle; using it in an op throws ShapeError.
  Tensor() = default;
  Tensor(std::shared_ptr<detail::GraphImpl> graph, uint32_t node) : graph_(std::move(graph)), node_(node) {}

  const std::vector<Dim>& shape() const;
  DType dtype() const;
  int64_t rank() const { return static_cast<int64_t>(shape().size()); }
  bool valid() const { return graph_ != nullptr; }

  // Chaining forms of the common ops; each is exactly the free function of ops.hpp with
  // this tensor as its first operand (x.sum(1).exp() == exp(sum(x, 1))).
  using Loc = luminal::Loc;
  Tensor reshape(const std::vector<Dim>& shape, Loc loc = Loc::current()) const;
  Tensor permute(const std::vector<int>& axes, Loc loc = Loc::current()) const;
  Tensor transpose(int a, int b, Loc loc = Loc::current()) const;
  Tensor expand(const std::vector<Dim>& shape, Loc loc = Loc::current()) const;
  Tensor squeeze(int axis, Loc loc = Loc::current()) const;
  Tensor unsqueeze(int axis, Loc loc = Loc::current()) const;
  Tensor flatten(int start = 0, int end = -1, Loc loc = Loc::current()) const;
  Tensor slice(int axis, Dim start, Dim end, int64_t step = 1, Loc loc = Loc::current()) const;
  Tensor sum(const Axes& axes, bool keepdim = false, Loc loc = Loc::current()) const;
  Tensor sum(Loc loc = Loc::current()) const;  // over every axis
  Tensor mean(const Axes& axes, bool keepdim = false, Loc loc = Loc::current()) const;
  Tensor mean(Loc loc = Loc::current()) const;
  Tensor max(const Axes& axes, bool keepdim = false, Loc loc = Loc::current()) const;
  Tensor max(Loc loc = Loc::current()) const;
  Tensor min(const Axes& axes, bool keepdim = false, Loc loc = Loc::current()) const;
  Tensor min(Loc loc = Loc::current()) const;
  Tensor matmul(const Tensor& other, Loc loc = Loc::current()) const;
  Tensor cast(DType dtype, Loc loc = Loc::current()) const;
  Tensor exp(Loc loc = Loc::current()) const;
  Tensor log(Loc loc = Loc::current()) const;
  Tensor sqrt(Loc loc = Loc::current()) const;
  Tensor abs(Loc loc = Loc::current()) const;
  Tensor relu(Loc loc = Loc::current()) const;
  Tensor sigmoid(Loc loc = Loc::current()) const;
  Tensor tanh(Loc loc = Loc::current()) const;
  Tensor softmax(int axis = -1, Loc loc = Loc::current()) const;

  /// Internal: the graph and node this handle points at.
  const std::shared_ptr<detail::GraphImpl>& graph_impl() const { return graph_; }
  uint32_t node() const { return node_; }

 private:
  std::shared_ptr<detail::GraphImpl> graph_;
  uint32_t node_ = 0;
};

}  // namespace luminal
