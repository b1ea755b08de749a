// The rule checker's evaluator (rules/check_support.hpp is the driver, rules/check_cases.hpp
// the case generator): one e-node evaluated on its children's values with the reference
// interpreter's kernels, and the comparison of a node's value with its class's value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backends/reference/view.hpp"
#include "ir/tensor_lang.hpp"
#include "rules/check_cases.hpp"

namespace luminal::rules::check {

/// A node that does not compute its class's value, or that the interpreter cannot run.
struct Wrong {
  std::string why;
};

/// Evaluates one node on its children's values: the interpreter's kernels for math nodes,
/// the MatMul definition spelled out in primitives, the body graph for kernel nodes. Every
/// precondition is checked first, so an ill-typed node throws Wrong, never runs.
/// `fast_math`: the rule being checked is tagged fast-math, so a node whose value differs
/// from its body by that rule's declared inaccuracy (an Attention node over weights the
/// body rounds to a half) may take the body's value within that bound.
detail::reference::View eval(const ir::EGraph& g, egraph::NodeView<ir::TensorLang> n,
                             const std::vector<const detail::reference::View*>& kids,
                             const std::map<std::string, detail::reference::View>& leaves,
                             const DimBindings& dims, bool fast_math = false);

/// A class's or node's value on every rank of the instance (one entry without ranks).
using Vals = std::vector<detail::reference::View>;

/// eval on every rank of `inst` (graph/primitives.hpp, SPMD semantics): a collective
/// combines the ranks' operands with the interpreter's collective kernel, a kernel body
/// with collectives runs with run_spmd, anything else runs once per rank with "%rank"
/// bound. One rank: exactly eval.
Vals eval_all(const ir::EGraph& g, egraph::NodeView<ir::TensorLang> n, const std::vector<const Vals*>& kids,
              const std::map<std::string, detail::reference::View>& leaves, const Instance& inst);

/// How two values must agree.
///  * Exact (rules not tagged fast-math): the same NaN-ness, the same infinities, the same
///    sign of zero (recip tells -0 from +0), otherwise within a relative rounding
///    tolerance (f32 1e-4, f16 2e-3, bf16 1.6e-2), taken relative to the smallest normal
///    for subnormal values (whose last bit is a large relative step: one rounding there,
///    (a * b) * c against a * (b * c), is not a wrong answer) and with no other absolute
///    slack, so a subnormal that became 0, or a finite value that became inf, is a
///    difference; integers and booleans bit for bit. NaN payloads are not compared (no op
///    can observe them).
///  * FastMath: compared only where both values are finite, within the tolerance relative
///    to 1 + |value| (moderate magnitudes), signed zeros equal (as under -ffast-math).
///  * ReorderedSum (rules tagged ReordersSum, in a class holding a sum): `magnitude` is
///    the sum of the terms' magnitudes (the class's sum evaluated on its operands' absolute
///    values). Where it is finite no partial sum overflows in any order, and the values
///    agree as Exact ones do but within the tolerance relative to it: a reordered sum of
///    cancelling terms (2^25 - 2^25 + 0.53) differs by a rounding of its largest partial
///    sum, not of its result. Where it is inf or NaN (a term is, or the terms overflow
///    together), which partial sum overflows first depends on the order: not compared.
enum class Agreement { Exact, FastMath, ReorderedSum };

/// Compares `got` with the class value `ref`; returns an empty string when they agree.
/// `compared` counts the elements actually compared. `magnitude`: ReorderedSum's (the
/// shape of `ref`); otherwise unused.
/// `declared_error`: FastMath's tolerance is at least this (RuleInfo::declared_error).
std::string compare(const detail::reference::View& ref, const detail::reference::View& got, Agreement how,
                    int64_t& compared, const detail::reference::View* magnitude = nullptr,
                    double declared_error = 0);
/// compare on every rank.
std::string compare_all(const Vals& ref, const Vals& got, Agreement how, int64_t& compared,
                        const Vals* magnitude = nullptr, double declared_error = 0);

/// `v` with every element replaced by its absolute value (a contiguous copy).
detail::reference::View absolute(const detail::reference::View& v);

/// A node as text (op, attributes, child classes), and every class of a rebuilt e-graph.
std::string describe_node(const ir::EGraph& g, egraph::Id nid);
std::string dump(ir::EGraph& g);

}  // namespace luminal::rules::check
