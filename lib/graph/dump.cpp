#include "graph/dump.hpp"

#include <sstream>

#include "graph/diagnostics.hpp"

namespace luminal::detail {

std::string dump(const GraphImpl& g) {
  std::ostringstream os;
  for (const DimDecl& d : g.dims) os << "dim " << d.name << " in [" << d.lo << ", " << d.hi << "]\n";
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    os << "%" << i << " = " << prim_name(n.op) << "(";
    for (size_t k = 0; k < n.inputs.size(); ++k) os << (k ? ", " : "") << "%" << n.inputs[k];
    switch (n.op) {
      case PrimOp::Input:
      case PrimOp::Param:
        os << "\"" << n.name << "\"";
        break;
      case PrimOp::Constant:
        os << n.value;
        break;
      case PrimOp::SumReduce:
      case PrimOp::MaxReduce:
        os << ", axis=" << n.axis;
        break;
      case PrimOp::Permute: {
        os << ", perm=[";
        for (size_t k = 0; k < n.perm.size(); ++k) os << (k ? ", " : "") << n.perm[k];
        os << "]";
        break;
      }
      case PrimOp::Slice:
        os << ", axis=" << n.axis << ", [" << n.start.to_string() << ", " << n.end.to_string() << ")";
        if (n.step != 1) os << ", step=" << n.step;
        break;
      case PrimOp::Pad:
        os << ", axis=" << n.axis << ", lo=" << n.start.to_string() << ", hi=" << n.end.to_string()
           << ", value=" << n.value;
        break;
      case PrimOp::AllGather:
      case PrimOp::ReduceScatter:
        os << ", axis=" << n.axis << ", ranks=" << n.step;
        break;
      case PrimOp::AllReduce:
        os << ", ranks=" << n.step;
        break;
      default:
        break;
    }
    os << ") : " << dtype_name(n.dtype) << " " << shape_string(n.shape);
    if (!n.op_name.empty()) os << "   [" << n.op_name << " at " << where_string(n.loc) << "]";
    os << "\n";
  }
  for (const auto& [name, id] : g.outputs) os << "output " << name << " = %" << id << "\n";
  for (const Guard& gd : g.guards)
    os << "guard " << gd.a.to_string() << (gd.less_equal ? " <= " : " == ") << gd.b.to_string() << "\n";
  return os.str();
}

}  // namespace luminal::detail
