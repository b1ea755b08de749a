// The primitive op table: one row per primitive. Everything that must know each op is
// derived from it: PrimOp and the tensor language's Op (same numbering), the printed
// names, arity, the class (leaf, unary, transcendental, binary, where, cast, reduction,
// gather, view), the operand dtypes a primitive accepts and the dtype it produces (graph
// building and the rule checker's instance generator both ask here), the tensor
// language's classification (ir::is_unary, is_view, ...), the cost model's count of
// transcendental calls, and the constant-folding and view-moving rule rows (rules/
// algebra.cpp, rules/movement.cpp).
//
// Adding a unary math primitive (the common case: a new elementwise function) touches:
//   1. this table: one row in LUMINAL_PRIM_UNARY_OPS;
//   2. its meaning, the reference kernel: a case of unary_f32 in
//      lib/backends/reference/kernels.hpp (the interpreter, the analysis' constant folding
//      and the kernel-IR evaluator all compute through it);
//   3. a golden case against PyTorch (tests/golden/golden_ops.cpp).
// It is then also a kernel-IR unary op of the same name (kernel/kernel_ir.hpp), so each
// renderer must spell it: the build stops at a static_assert in every backend's spelling
// table (lib/backends/cpu/c_renderer.cpp kCUnary, lib/backends/gpu/gpu_renderer.cpp
// kGpuUnary) until it has a row,
// which for a transcendental calls a new prelude function (lib/backends/cpu/c_prelude.cpp).
// Folding, view-moving rules, dtype checks, the rule checker's instances, the cost model's
// transcendental count and the lowering to kernel IR follow from the row. A user-facing op
// built on it is one more function in lib/graph/ops_*.cpp (docs/adding-an-op.md).
// Other classes (binary, reduction, view) also need their lowering to kernel IR
// (lib/kernel/lower/emit_expr.cpp: a switch over PrimOp, so -Wswitch points at it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "luminal/dtype.hpp"

namespace luminal::detail {

/// What kind of op a primitive is.
enum class OpClass : uint8_t {
  Leaf,            ///< no operands: input, param, constant, iota
  Unary,           ///< elementwise, one operand (cheap: sqrt, recip, neg)
  Transcendental,  ///< elementwise, one operand, a polynomial call in generated code
  Binary,          ///< elementwise, two operands of the same shape and dtype
  Where,           ///< elementwise select: cond (bool), then, else
  Cast,            ///< elementwise dtype conversion (the target dtype is an attribute)
  Reduction,       ///< over one axis
  Gather,          ///< table rows by i32 ids
  Collective,      ///< across the ranks of an SPMD program (docs/distributed.md)
  View,            ///< an index map: no arithmetic, no copy
};

/// Operand dtypes a primitive accepts (bit set).
enum DTypeSet : uint8_t {
  kF32 = 1,
  kI32 = 2,
  kBool = 4,
  kHalf = 8,  ///< f16 and bf16
  kAny = 15,
};

/// The dtype a primitive produces.
enum class ResultDType : uint8_t {
  Same,  ///< its (first data) operand's
  Bool,  ///< comparisons
  I32,   ///< iota
  Attr,  ///< given by the node (leaves, cast)
};

// One row per primitive, in order:
//   X(Enumerator, "printed name", arity, OpClass, accepted operand dtypes, result dtype)
// Where: the accepted set is the branches' (the condition is bool); Gather: the table's
// (ids are i32). Collectives carry the number of ranks in the node's `step` and, for
// all_gather/reduce_scatter, the axis (graph/primitives.hpp). Reordering rows renumbers
// PrimOp and ir::Op.
#define LUMINAL_PRIM_OPS(X)                                   \
  X(Input, "input", 0, Leaf, kAny, Attr)                      \
  X(Param, "param", 0, Leaf, kAny, Attr)                      \
  X(Constant, "constant", 0, Leaf, kAny, Attr)                \
  X(Iota, "iota", 0, Leaf, kAny, I32)                         \
  LUMINAL_PRIM_UNARY_OPS(X)                                   \
  LUMINAL_PRIM_BINARY_OPS(X)                                  \
  X(Where, "where", 3, Where, kAny, Same)                     \
  X(Cast, "cast", 1, Cast, kAny, Attr)                        \
  X(SumReduce, "sum_reduce", 1, Reduction, kF32 | kI32, Same) \
  X(MaxReduce, "max_reduce", 1, Reduction, kF32 | kI32, Same) \
  X(Gather, "gather", 2, Gather, kAny, Same)                  \
  X(AllReduce, "all_reduce", 1, Collective, kF32 | kI32, Same) \
  X(AllGather, "all_gather", 1, Collective, kAny, Same)        \
  X(ReduceScatter, "reduce_scatter", 1, Collective, kF32 | kI32, Same) \
  X(Reshape, "reshape", 1, View, kAny, Same)                  \
  X(Permute, "permute", 1, View, kAny, Same)                  \
  X(Expand, "expand", 1, View, kAny, Same)                    \
  X(Slice, "slice", 1, View, kAny, Same)                      \
  X(Pad, "pad", 1, View, kAny, Same)

// The unary math rows, kept together: each is also a kernel-IR unary op of the same name
// (lib/kernel/kernel_ir.hpp generates its UnaryOp from this list).
#define LUMINAL_PRIM_UNARY_OPS(X)                \
  X(Exp2, "exp2", 1, Transcendental, kF32, Same) \
  X(Log2, "log2", 1, Transcendental, kF32, Same) \
  X(Sin, "sin", 1, Transcendental, kF32, Same)   \
  X(Tanh, "tanh", 1, Transcendental, kF32, Same) \
  X(Sqrt, "sqrt", 1, Unary, kF32, Same)          \
  X(Recip, "recip", 1, Unary, kF32, Same)        \
  X(Neg, "neg", 1, Unary, kF32 | kI32, Same)

/// `case` labels for a group of rows:
///   switch (op) { LUMINAL_PRIM_UNARY_OPS(LUMINAL_CASE_PRIMOP) return ...; }
#define LUMINAL_CASE_PRIMOP(e, ...) case ::luminal::detail::PrimOp::e:

// The binary rows, kept together (switches take their case labels from this list).
#define LUMINAL_PRIM_BINARY_OPS(X)                       \
  X(Add, "add", 2, Binary, kF32 | kI32, Same)            \
  X(Mul, "mul", 2, Binary, kF32 | kI32 | kBool, Same)    \
  X(Mod, "mod", 2, Binary, kF32 | kI32, Same)            \
  X(Max, "max", 2, Binary, kF32 | kI32 | kBool, Same)    \
  X(LessThan, "less_than", 2, Binary, kF32 | kI32, Bool) \
  X(Equal, "equal", 2, Binary, kF32 | kI32 | kBool, Bool)

enum class PrimOp : uint8_t {
#define LUMINAL_PRIM_ENUMERATOR(name, ...) name,
  LUMINAL_PRIM_OPS(LUMINAL_PRIM_ENUMERATOR)
#undef LUMINAL_PRIM_ENUMERATOR
};

struct OpInfo {
  PrimOp op;
  std::string_view name;
  int arity;
  OpClass cls;
  uint8_t dtypes;  ///< DTypeSet
  ResultDType result;
};

inline constexpr std::array kOpTable = {
#define LUMINAL_PRIM_ROW(e, name, arity, cls, dtypes, result) \
  OpInfo{PrimOp::e, name, arity, OpClass::cls, static_cast<uint8_t>(dtypes), ResultDType::result},
    LUMINAL_PRIM_OPS(LUMINAL_PRIM_ROW)
#undef LUMINAL_PRIM_ROW
};
inline constexpr std::size_t kNumPrimOps = kOpTable.size();

constexpr bool rows_in_enum_order() {
  for (std::size_t i = 0; i < kNumPrimOps; ++i)
    if (static_cast<std::size_t>(kOpTable[i].op) != i) return false;
  return true;
}
static_assert(rows_in_enum_order(), "kOpTable row i must describe PrimOp i");

constexpr const OpInfo& op_info(PrimOp op) { return kOpTable[static_cast<std::size_t>(op)]; }

/// Name of a primitive as printed in dumps and reports ("exp2", "sum_reduce", ...).
constexpr std::string_view prim_name(PrimOp op) { return op_info(op).name; }

constexpr bool is_elementwise(OpClass c) {
  return c == OpClass::Unary || c == OpClass::Transcendental || c == OpClass::Binary || c == OpClass::Where ||
         c == OpClass::Cast;
}
/// Unary math (not cast): sqrt, recip, neg and the transcendentals.
constexpr bool is_unary_math(PrimOp op) {
  return op_info(op).cls == OpClass::Unary || op_info(op).cls == OpClass::Transcendental;
}
constexpr bool is_transcendental(PrimOp op) { return op_info(op).cls == OpClass::Transcendental; }

constexpr uint8_t dtype_bit(DType t) {
  switch (t) {
    case DType::f32:
      return kF32;
    case DType::i32:
      return kI32;
    case DType::boolean:
      return kBool;
    case DType::f16:
    case DType::bf16:
      return kHalf;
  }
  return 0;
}

/// Whether `op` accepts (data) operands of dtype `t`.
constexpr bool accepts_dtype(PrimOp op, DType t) { return (op_info(op).dtypes & dtype_bit(t)) != 0; }

/// The dtype `op` produces from (data) operands of dtype `t`; `attr` for Attr rows.
constexpr DType result_dtype(PrimOp op, DType t, DType attr = DType::f32) {
  switch (op_info(op).result) {
    case ResultDType::Same:
      return t;
    case ResultDType::Bool:
      return DType::boolean;
    case ResultDType::I32:
      return DType::i32;
    case ResultDType::Attr:
      return attr;
  }
  return t;
}

/// The dtypes `op` accepts, for messages: "f32", "f32 or i32", "f32, i32 or bool".
std::string accepted_dtypes_text(PrimOp op);

}  // namespace luminal::detail
