// The golden test's dispatch table: API op name -> code that builds the op with the
// public API from a case's operands and attributes.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "golden/golden_data.hpp"
#include "luminal/luminal.hpp"

namespace golden {

/// Every op of API.md (plus the Tensor operators). The test fails for any op in this
/// list without a golden case, and for any case whose op has no builder.
const std::vector<std::string>& api_ops();

bool has_builder(const std::string& op);

/// Builds `c.op` from its operands (tensors already viewed, scalars as float operands).
luminal::Tensor build_op(const Case& c, const std::vector<luminal::Operand>& args);

/// The same ops built through the Tensor member forms (x.sum(...), x.reshape(...)),
/// for the ops that have one.
bool has_member_builder(const std::string& op);
luminal::Tensor build_op_member(const Case& c, const std::vector<luminal::Operand>& args);

/// Applies a case operand's view ([{"op": "permute"|"transpose"|"slice"|"expand", ...}]).
luminal::Tensor apply_view(luminal::Tensor t, const nlohmann::json& view);

}  // namespace golden
