// A Graph owns tensor nodes: inputs (given per call), params (weights, bound once on the
// Callable), named dims and named outputs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "luminal/dim.hpp"
#include "luminal/dtype.hpp"
#include "luminal/source_location.hpp"
#include "luminal/tensor.hpp"

namespace luminal {

class Graph {
 public:
  Graph();
  /// Internal: a Graph handle sharing an existing node store (e.g. a tensor's graph).
  explicit Graph(std::shared_ptr<detail::GraphImpl> impl);

  /// A named symbolic dim with inclusive range [lo, hi]; bound from input shapes at call.
  Dim dim(const std::string& name, int64_t lo, int64_t hi,
          Loc loc = Loc::current());
  /// A named dim that is also a multiple of `multiple_of` (checked at call time; lets
  /// shapes such as B%16 simplify to 0).
  Dim dim(const std::string& name, int64_t lo, int64_t hi, int64_t multiple_of,
          Loc loc = Loc::current());
  /// A per-call input.
  Tensor input(const std::string& name, const std::vector<Dim>& shape, DType dtype = f32,
               Loc loc = Loc::current());
  /// A weight: bound once with Callable::bind, not passed per call.
  Tensor param(const std::string& name, const std::vector<Dim>& shape, DType dtype = f32,
               Loc loc = Loc::current());
  /// Marks `t` as the output `name`.
  void output(const std::string& name, const Tensor& t,
              Loc loc = Loc::current());

  /// Internal: the node store shared by this graph's tensors.
  const std::shared_ptr<detail::GraphImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<detail::GraphImpl> impl_;
};

}  // namespace luminal
