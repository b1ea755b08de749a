// The primitive op set (docs/design.md "Semantics"; one row each in graph/op_table.hpp)
// and the only functions that create graph nodes. Every high-level op in lib/graph/ops*.cpp is a composition
// of these.
//
// Contract between the graph core and the high-level ops:
//  * Primitives do NOT broadcast and do NOT promote dtypes: binary and where operands
//    must already have provably equal shapes and equal dtypes (the high-level ops insert
//    reshape/expand/cast nodes). A violation throws ShapeError/DTypeError naming `op`.
//  * All operands must belong to the same graph (else ShapeError "... another graph").
//  * `op` is the user-facing op name used in error messages ("matmul", "softmax"...);
//    `loc` is the user's call site, recorded on the node and printed in errors.
//  * Float primitives accept f32 only (f16/bf16 are cast to f32 by the high-level op);
//    add/mul/mod/max/less_than/equal/sum/max-reduce also accept i32; equal and where
//    accept boolean operands; cast accepts any pair. Also accepted (graph core): neg on
//    i32, and mul/max on boolean (= logical and/or).
//  * Tensors without a graph (constant(), arange(), tril_mask()): build them in a fresh
//    `Graph g;` (or any graph without inputs/params). When such a "constant-only" graph's
//    tensor meets a tensor of a graph with inputs/params, its nodes are copied into that
//    graph automatically (also by Graph::output). Two graphs that both have inputs or
//    params cannot be mixed. `Graph(t.graph_impl())` gives a tensor's own graph.
//
// Numeric semantics (the reference interpreter; every backend must match):
//  * f32 math is IEEE float (exp2f, log2f, sinf, sqrtf, 1/x); max and max_reduce
//    propagate NaN (like torch.maximum / torch.amax).
//  * mod is truncated like C: fmodf for f32, a % b for i32 (sign of the dividend);
//    i32 a % 0 == 0 and INT32_MIN % -1 == 0 (defined, never a trap).
//  * i32 add/mul/sum wrap around (two's complement).
//  * sum_reduce accumulates in the element type, in index order along the axis
//    (acc = 0; acc += x[0]; acc += x[1]; ...).
//  * less_than and equal follow IEEE (NaN compares unequal).
//  * cast: f32 -> i32 truncates toward zero, NaN -> 0, out of range saturates;
//    x -> bool is x != 0; bool -> number is 0/1; f32 -> f16/bf16 rounds to nearest even.
//
// SPMD semantics of the collectives (docs/distributed.md). A program containing a
// collective of `world` ranks (its node's `step`) means: `world` copies of the program run
// at once, copy r with the dim variable "%rank" (kRankDim, range [0, world-1]) bound to r;
// inputs and params are the same on every rank, and "%rank" (e.g. in a slice's start) is
// the only source of values that differ between ranks. A collective combines the values
// of its operand on all ranks:
//  * all_reduce(x): on every rank, x(0) + x(1) + ... + x(world-1), added in rank order;
//  * all_gather(x, axis): x(0), ..., x(world-1) concatenated along axis (dim * world);
//  * reduce_scatter(x, axis): block r (dim / world elements along axis) of all_reduce(x)
//    on rank r; the dim must be a multiple of world.
// A value is *replicated* when it is equal on every rank; graph outputs are. With world 1
// every collective is the identity.
#pragma once

#include <cstdint>
#include "luminal/source_location.hpp"
#include <string_view>
#include <vector>

#include "graph/op_table.hpp"
#include "luminal/dim.hpp"
#include "luminal/dtype.hpp"
#include "luminal/graph.hpp"
#include "luminal/tensor.hpp"

namespace luminal::detail {

using luminal::Loc;

// ---- leaves
/// A scalar constant (shape {}) of dtype `dt`; broadcast it with prim_reshape/prim_expand.
Tensor prim_constant(Graph& g, double value, DType dt, std::string_view op, Loc loc);
/// i32 [n]: 0, 1, ..., n-1.
Tensor prim_iota(Graph& g, const Dim& n, std::string_view op, Loc loc);

// ---- elementwise
Tensor prim_unary(PrimOp op, const Tensor& x, std::string_view name, Loc loc);
Tensor prim_binary(PrimOp op, const Tensor& a, const Tensor& b, std::string_view name, Loc loc);
/// cond: boolean; a and b: same dtype; all three the same shape.
Tensor prim_where(const Tensor& cond, const Tensor& a, const Tensor& b, std::string_view name, Loc loc);
/// Float -> int truncates toward zero; to boolean is (x != 0); bool -> number is 0/1;
/// f32 -> f16/bf16 rounds to nearest even.
Tensor prim_cast(const Tensor& x, DType to, std::string_view name, Loc loc);

// ---- reductions over one axis (0 <= axis < rank); the axis is removed from the shape.
/// PrimOp::SumReduce or PrimOp::MaxReduce. Sum of an empty axis is 0, max is -inf.
Tensor prim_reduce(PrimOp op, const Tensor& x, int axis, std::string_view name, Loc loc);

/// The dim variable bound to the rank in an SPMD program, with range [0, world - 1].
inline constexpr std::string_view kRankDim = "%rank";
Dim rank_dim(int64_t world);

/// AllReduce, AllGather or ReduceScatter over `world` >= 1 ranks (`axis` is ignored by
/// all_reduce). See the SPMD semantics above.
Tensor prim_collective(PrimOp op, const Tensor& x, int axis, int64_t world, std::string_view name, Loc loc);

/// table [V, D...], ids i32 of any shape -> ids.shape + [D...]; an id outside [0, V) is
/// a RuntimeError at execution.
Tensor prim_gather(const Tensor& table, const Tensor& ids, std::string_view name, Loc loc);

// ---- views
/// Same element count (proven, or a guard checked at call time), row-major order.
Tensor prim_reshape(const Tensor& x, const std::vector<Dim>& shape, std::string_view name, Loc loc);
/// perm is a permutation of 0..rank-1.
Tensor prim_permute(const Tensor& x, const std::vector<int>& perm, std::string_view name, Loc loc);
/// Same rank; every dim either equal to the target or 1 (broadcast to the target).
Tensor prim_expand(const Tensor& x, const std::vector<Dim>& shape, std::string_view name, Loc loc);
/// Elements start, start+step, ... < end along `axis`; 0 <= start <= end <= dim, step >= 1
/// (the high-level op normalizes and clamps Python-style first).
Tensor prim_slice(const Tensor& x, int axis, const Dim& start, const Dim& end, int64_t step,
                  std::string_view name, Loc loc);
/// Adds `lo` elements before and `hi` after along `axis`, filled with `value`; lo, hi >= 0.
Tensor prim_pad(const Tensor& x, int axis, const Dim& lo, const Dim& hi, double value, std::string_view name,
                Loc loc);

/// True when a and b are the same symbolic value in canonical form (e.g. B*4/4 and B).
bool dims_provably_equal(const Dim& a, const Dim& b);
/// True when a and b can be proven different for every binding in their ranges.
bool dims_provably_different(const Dim& a, const Dim& b);

}  // namespace luminal::detail
