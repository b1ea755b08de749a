// How a backend spells each kernel-IR scalar op: one table per backend, one row per op, in
// the op's enum order, with a compile-time check that the table covers every op.
//
//   constexpr std::array<UnarySpelling<Fmt>, kernel::kNumUnaryOps> kUnary = {{
//       {UnaryOp::Exp2, ...}, ...}};
//   static_assert(kernel::covers_every_op(kUnary), "... spells every kernel-IR unary op");
//
// A table with a row missing still compiles as an array (the tail is value-initialised),
// so the check compares each row's op with its position: a new op in kernel_ir.hpp (or a
// new unary primitive in graph/op_table.hpp) fails every backend's static_assert until
// that backend gives it a row.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kernel/kernel_ir.hpp"

namespace luminal::kernel {

template <class Op, class Spelling>
struct OpRow {
  Op op;
  Spelling spelling;
};

/// True when row i of `table` is op i for every i (so every op has exactly one row).
template <class Row, std::size_t N>
constexpr bool covers_every_op(const std::array<Row, N>& table) {
  for (std::size_t i = 0; i < N; ++i)
    if (static_cast<std::size_t>(table[i].op) != i) return false;
  return true;
}

/// The row of `op` in a table that covers_every_op.
template <class Row, std::size_t N, class Op>
constexpr const Row& row_of(const std::array<Row, N>& table, Op op) {
  return table[static_cast<std::size_t>(op)];
}

/// Fills a source template: "{0}" and "{1}" become args[0] and args[1].
inline std::string fill_template(std::string_view tmpl, const std::vector<std::string>& args) {
  std::string out;
  for (std::size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '{' && i + 2 < tmpl.size() && tmpl[i + 2] == '}' && tmpl[i + 1] >= '0' &&
        tmpl[i + 1] <= '9') {
      out += args.at(static_cast<std::size_t>(tmpl[i + 1] - '0'));
      i += 2;
    } else {
      out += tmpl[i];
    }
  }
  return out;
}

}  // namespace luminal::kernel
