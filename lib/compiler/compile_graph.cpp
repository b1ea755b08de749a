// compile_graph: splits the graph into blocks when it repeats (transformer layers), runs
// one search per distinct block (search.cpp), and stitches the block plans into one.
//
// Finding repetition: every non-leaf live node gets a local structural hash (op,
// attributes and the hashes of its inputs to depth 3, parameter names ignored). In
// creation order the hashes of N identical layers form a periodic sequence; the period
// with the largest coverage is the block length. Block boundaries are placed where the
// fewest values cross (the residual stream). Each block becomes a standalone graph whose
// external values are Inputs "%in<k>" (parameters included, so which weights a layer
// reads does not matter) and whose escaping values are outputs "%out<k>"; blocks with
// structurally equal standalone graphs share one search, replayed with their own buffers.
#include "compiler/compile_graph.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <unordered_map>

#include "compiler/search.hpp"
#include "cost/target_desc.hpp"
#include "luminal/egraph/language.hpp"
#include "luminal/error.hpp"

namespace luminal::compiler {

namespace {

using detail::GraphImpl;
using detail::Node;
using detail::PrimOp;
using Clock = std::chrono::steady_clock;

bool is_leaf(PrimOp op) {
  return op == PrimOp::Input || op == PrimOp::Param || op == PrimOp::Constant || op == PrimOp::Iota;
}
bool is_free_leaf(PrimOp op) { return op == PrimOp::Constant || op == PrimOp::Iota; }

// Local structural hashes (depth-limited), names of params and inputs ignored: a decode
// step's layers each read an input of their own (their KV cache) and still repeat.
std::vector<uint64_t> local_hashes(const GraphImpl& g, const std::vector<uint32_t>& live, int depth) {
  std::vector<uint64_t> h(g.nodes.size(), 0), own(g.nodes.size(), 0);
  for (uint32_t id : live) {
    Node n = g.nodes[id];
    n.inputs.clear();
    if (n.op == PrimOp::Param || n.op == PrimOp::Input) n.name.clear();
    own[id] = ir::hash_body_node(n);
  }
  for (uint32_t id : live) h[id] = own[id];
  for (int d = 0; d < depth; ++d) {
    std::vector<uint64_t> nh(h);
    for (uint32_t id : live) {
      uint64_t x = own[id];
      for (uint32_t in : g.nodes[id].inputs) x = egraph::hash_step(x, h[in]);
      nh[id] = x;
    }
    h.swap(nh);
  }
  return h;
}

struct Partition {
  std::vector<std::pair<size_t, size_t>> ranges;  // [begin, end) in the non-leaf order
};

// Blocks of the non-leaf nodes `seq` (creation order); one block when nothing repeats.
Partition partition(const GraphImpl& g, const std::vector<uint32_t>& live, const std::vector<uint32_t>& seq) {
  Partition part;
  const size_t n = seq.size();
  part.ranges.push_back({0, n});
  if (n < 48) return part;
  auto h = local_hashes(g, live, 3);
  std::vector<uint64_t> s(n);
  for (size_t i = 0; i < n; ++i) s[i] = h[seq[i]];
  std::unordered_map<uint64_t, std::vector<size_t>> pos;
  for (size_t i = 0; i < n; ++i) pos[s[i]].push_back(i);
  std::vector<size_t> periods;
  for (const auto& [hash, ps] : pos) {
    if (ps.size() < 2) continue;
    size_t gap = ps[1] - ps[0];
    bool regular = gap >= 8;
    for (size_t i = 2; i < ps.size() && regular; ++i) regular = ps[i] - ps[i - 1] == gap;
    if (regular && std::find(periods.begin(), periods.end(), gap) == periods.end()) periods.push_back(gap);
    if (periods.size() > 16) break;
  }
  size_t best_p = 0, best_a = 0, best_k = 0;
  for (size_t p : periods) {
    size_t run = 0;
    for (size_t i = 0; i + p < n; ++i) {
      run = s[i] == s[i + p] ? run + 1 : 0;
      const size_t k = run / p + 1;  // copies covered by a run of this length
      if (run >= p && (k * p > best_k * best_p || (k * p == best_k * best_p && p < best_p))) {
        best_p = p;
        best_k = k;
        best_a = i + 1 - run;
      }
    }
  }
  // Only whole-model repetition is worth a block split: a split forbids fusion across
  // block boundaries, so a small repeated motif (the K and V projections of one layer)
  // must not cut a layer apart.
  if (best_k < 2 || best_p < 32 || best_k * best_p * 2 < n) return part;
  // Values crossing each position; boundaries go where the fewest cross.
  std::vector<int64_t> index_of(g.nodes.size(), -1);
  for (size_t i = 0; i < n; ++i) index_of[seq[i]] = static_cast<int64_t>(i);
  std::vector<size_t> last(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t in : g.nodes[seq[i]].inputs)
      if (index_of[in] >= 0)
        last[static_cast<size_t>(index_of[in])] = std::max(last[static_cast<size_t>(index_of[in])], i);
  for (const auto& [name, id] : g.outputs)
    if (index_of[id] >= 0) last[static_cast<size_t>(index_of[id])] = n;
  std::vector<int64_t> diff(n + 2, 0);
  for (size_t i = 0; i < n; ++i)
    if (last[i] > i) {
      ++diff[i + 1];
      --diff[last[i] + 1];
    }
  std::vector<int64_t> crossing(n + 1, 0);
  int64_t run = 0;
  for (size_t i = 0; i <= n; ++i) crossing[i] = (run += diff[i]);
  size_t start = best_a;
  for (size_t q = best_a; q < best_a + best_p; ++q)
    if (crossing[q] < crossing[start]) start = q;
  const size_t end = best_a + best_k * best_p;
  part.ranges.clear();
  if (start > 0) part.ranges.push_back({0, start});
  size_t b = start;
  for (; b + best_p <= end; b += best_p) part.ranges.push_back({b, b + best_p});
  if (b < n) part.ranges.push_back({b, n});
  return part;
}

// A block as a standalone graph, plus which outer node each of its inputs/outputs is.
struct Block {
  GraphImpl graph;
  std::vector<uint32_t> ext_inputs;  // outer node of "%in<k>"
  std::vector<uint32_t> outputs;     // outer node of "%out<k>"
  uint64_t key = 0;
};

Block make_block(const GraphImpl& g, const std::vector<uint32_t>& seq, size_t b, size_t e,
                 const std::vector<std::vector<uint32_t>>& users, const std::vector<bool>& is_output) {
  Block blk;
  blk.graph.dims = g.dims;
  std::unordered_map<uint32_t, uint32_t> map;
  std::vector<bool> inside(g.nodes.size(), false);
  for (size_t i = b; i < e; ++i) inside[seq[i]] = true;
  std::function<uint32_t(uint32_t)> operand = [&](uint32_t x) -> uint32_t {
    auto it = map.find(x);
    if (it != map.end()) return it->second;
    const Node& src = g.nodes[x];
    uint32_t id;
    if (is_free_leaf(src.op)) {
      id = blk.graph.add(src);
    } else {
      Node in;
      in.op = PrimOp::Input;
      in.name = "%in" + std::to_string(blk.ext_inputs.size());
      in.shape = src.shape;
      in.dtype = src.dtype;
      id = blk.graph.add(std::move(in));
      blk.graph.inputs.push_back(id);
      blk.ext_inputs.push_back(x);
    }
    map.emplace(x, id);
    return id;
  };
  for (size_t i = b; i < e; ++i) {
    Node n = g.nodes[seq[i]];
    for (uint32_t& x : n.inputs) x = inside[x] ? map.at(x) : operand(x);
    map[seq[i]] = blk.graph.add(std::move(n));
  }
  for (size_t i = b; i < e; ++i) {
    const uint32_t id = seq[i];
    bool escapes = is_output[id];
    for (uint32_t u : users[id]) escapes = escapes || !inside[u];
    if (!escapes) continue;
    blk.graph.outputs.emplace_back("%out" + std::to_string(blk.outputs.size()), map.at(id));
    blk.outputs.push_back(id);
  }
  uint64_t k = 0x626c6f636bull;
  for (const Node& n : blk.graph.nodes) k = egraph::hash_step(k, ir::hash_body_node(n));
  for (const auto& [name, id] : blk.graph.outputs) k = egraph::hash_step(k, id);
  blk.key = k;
  return blk;
}

bool same_block(const Block& a, const Block& b) {
  if (a.key != b.key || a.graph.nodes.size() != b.graph.nodes.size() || a.graph.outputs != b.graph.outputs)
    return false;
  for (size_t i = 0; i < a.graph.nodes.size(); ++i)
    if (!ir::same_body_node(a.graph.nodes[i], b.graph.nodes[i])) return false;
  return true;
}

}  // namespace

detail::TargetDesc target_desc(const Target& target) {
  switch (target.kind()) {
    case Target::Kind::cuda:
      // LUMINAL_GPU_MODEL=H200: a board whose figures differ from its architecture's row.
      if (const char* m = std::getenv("LUMINAL_GPU_MODEL"); m && *m) return detail::describe_gpu_model(m);
      return detail::describe_gpu(target.arch().empty() ? "sm_90" : target.arch());
    case Target::Kind::hip:
      return detail::describe_gpu(target.arch().empty() ? "gfx90a" : target.arch());
    default:
      return detail::describe_host_cpu();
  }
}

// (declared in search.hpp: the ILP tests search with the same settings)
SearchSettings make_search_settings(const Target& target, const CompileOptions& options, Clock::time_point start) {
  SearchSettings s;
  s.options = options;
  s.deadline = start + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(std::max(options.time_budget_seconds, 0.0)));
  const char* tr = std::getenv("LUMINAL_TRACE_RULES");
  s.trace = tr && *tr && std::string(tr) != "0";
  s.ctx.fast_math = options.fast_math;
  s.ctx.node_limit = static_cast<std::size_t>(std::max<int64_t>(options.node_limit, 1));
  s.ctx.target = target_desc(target);
  if (options.fast_math) s.ctx.target = detail::with_fast_math(s.ctx.target);
  // A vendor BLAS GEMM: OpenBLAS on the CPU, cuBLASLt on CUDA (emulated and compile-only
  // targets too, so they plan what the device runs; a device without cuBLASLt generates
  // those GEMMs instead). HIP has no BLAS candidate.
  s.ctx.library_gemm = target.kind() == Target::Kind::cpu || target.kind() == Target::Kind::cuda;
  s.world = options.communicator ? options.communicator->size() : 1;
  s.ctx.target = detail::per_rank_share(std::move(s.ctx.target), s.world);
  s.pass_sets = {"lower_reference", "fusion"};
  if (target.kind() == Target::Kind::cpu) s.pass_sets.push_back("lower_cpu");
  if (target.kind() == Target::Kind::cuda || target.kind() == Target::Kind::hip) s.pass_sets.push_back("schedule_gpu");
  // Over several ranks, right after the lowering (before fusion can use up the node
  // budget): each all_reduce kernel's second form (all-reduce-scatter-gather).
  if (s.world > 1) s.pass_sets.insert(s.pass_sets.begin() + 1, "sharding");
  return s;
}

CompiledProgram compile_graph(const GraphImpl& g, const Target& target, const CompileOptions& options) {
  const auto t0 = Clock::now();
  CompiledProgram out;
  SearchSettings settings = make_search_settings(target, options, t0);
  const std::vector<uint32_t> live = detail::live_nodes(g);
  std::vector<uint32_t> seq;
  for (uint32_t id : live)
    if (!is_leaf(g.nodes[id].op)) seq.push_back(id);
  std::vector<bool> is_output(g.nodes.size(), false);
  bool leaf_output = false;
  for (const auto& [name, id] : g.outputs) {
    is_output[id] = true;
    leaf_output = leaf_output || is_leaf(g.nodes[id].op);
  }
  Partition part;
  if (leaf_output)
    part.ranges.push_back({0, seq.size()});
  else
    part = partition(g, live, seq);

  auto plan = std::make_shared<KernelPlan>();
  std::vector<std::string> stops;
  if (part.ranges.size() <= 1) {
    SearchResult r = search_graph(g, settings);
    *plan = std::move(r.plan);
    out.report.egraph_nodes = r.egraph_nodes;
    out.report.egraph_classes = r.egraph_classes;
    out.report.iterations = r.iterations;
    out.report.estimated_seconds = r.est_seconds;
    out.report.stop_reason = r.stop_reason;
    out.phases = std::move(r.phases);
    out.searches = 1;
    out.blocks = 1;
  } else {
    std::vector<std::vector<uint32_t>> users(g.nodes.size());
    for (uint32_t id : live)
      for (uint32_t in : g.nodes[id].inputs) users[in].push_back(id);
    // Values of the stitched plan: leaves by name, block results by outer node.
    std::unordered_map<uint32_t, uint32_t> value_of;
    for (uint32_t id : live) {
      const Node& n = g.nodes[id];
      if (n.op == PrimOp::Input || n.op == PrimOp::Param)
        value_of[id] = plan->add_value(n.name, n.op == PrimOp::Param);
    }
    std::vector<std::pair<Block, SearchResult>> cache;
    for (const auto& [b, e] : part.ranges) {
      Block blk = make_block(g, seq, b, e, users, is_output);
      const SearchResult* found = nullptr;
      for (const auto& [cb, cr] : cache)
        if (same_block(cb, blk)) found = &cr;
      if (!found) {
        cache.emplace_back(blk, search_graph(blk.graph, settings));
        const SearchResult& r = cache.back().second;
        found = &r;
        out.report.egraph_nodes += r.egraph_nodes;
        out.report.egraph_classes += r.egraph_classes;
        out.report.iterations += r.iterations;
        if (r.stop_reason != "saturated" &&
            std::find(stops.begin(), stops.end(), r.stop_reason) == stops.end())
          stops.push_back(r.stop_reason);
        for (const auto& line : r.phases)
          out.phases.push_back("block " + std::to_string(cache.size() - 1) + " " + line);
        ++out.searches;
      }
      out.report.estimated_seconds += found->est_seconds;
      // Replay the block's plan with this copy's buffers.
      const KernelPlan& bp = found->plan;
      std::vector<uint32_t> vmap(bp.leaf_name.size(), 0);
      for (size_t v = 0; v < bp.leaf_name.size(); ++v) {
        const std::string& name = bp.leaf_name[v];
        if (name.empty()) continue;
        if (!name.starts_with("%in"))
          throw InternalError("[compile] block leaf '" + name + "' is not a block input");
        vmap[v] = value_of.at(blk.ext_inputs.at(std::stoul(name.substr(3))));
      }
      for (const auto& st : bp.steps) {
        KernelPlan::Step ns = st;
        for (uint32_t& a : ns.args) a = vmap[a];
        ns.result = vmap[st.result] = plan->add_value();
        plan->steps.push_back(std::move(ns));
      }
      for (const auto& [name, v] : bp.outputs) value_of[blk.outputs.at(std::stoul(name.substr(4)))] = vmap[v];
    }
    for (const auto& [name, id] : g.outputs) plan->outputs.emplace_back(name, value_of.at(id));
    out.report.stop_reason = "saturated";
    if (!stops.empty()) {
      out.report.stop_reason.clear();
      for (const auto& x : stops) out.report.stop_reason += (out.report.stop_reason.empty() ? "" : "; ") + x;
    }
    out.blocks = static_cast<int64_t>(part.ranges.size());
    out.phases.insert(out.phases.begin(), "blocks: " + std::to_string(part.ranges.size()) + " blocks, " +
                                              std::to_string(out.searches) + " distinct searched");
  }
  out.report.target = target.to_string();
  out.report.primitive_ops = static_cast<int64_t>(live.size());
  out.report.kernels = static_cast<int64_t>(plan->steps.size());
  plan->fast_math = options.fast_math;
  out.dot = plan->to_dot();
  if (const char* path = std::getenv("LUMINAL_DUMP_DOT"); path && *path) {
    std::ofstream f(path);
    f << out.dot;
  }
  out.plan = plan;
  out.exe = make_plan_executable(plan);
  out.report.compile_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (settings.trace) {
    for (const auto& line : out.phases) std::fprintf(stderr, "[luminal compile] %s\n", line.c_str());
    std::fprintf(stderr, "[luminal compile] total: %lld kernels in %.3f s of a %.3g s budget (%s)\n",
                 static_cast<long long>(out.report.kernels), out.report.compile_seconds,
                 options.time_budget_seconds, out.report.stop_reason.c_str());
  }
  return out;
}

}  // namespace luminal::compiler
