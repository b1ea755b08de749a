// A Tensor is a cheap handle to one node of a Graph: copying it copies a pointer and an
// index. Its shape and dtype are inferred when the node is created.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "luminal/dim.hpp"
#include "luminal/dtype.hpp"

namespace luminal {

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

  /// Internal: the graph and node this handle points at.
  const std::shared_ptr<detail::GraphImpl>& graph_impl() const { return graph_; }
  uint32_t node() const { return node_; }

 private:
  std::shared_ptr<detail::GraphImpl> graph_;
  uint32_t node_ = 0;
};

}  // namespace luminal
