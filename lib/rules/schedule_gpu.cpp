// GPU launch schedules as alternatives in the e-graph (the "schedule_gpu" set, run for
// CUDA and HIP targets after fusion). A kernel node's launch parameters do not change
// what it computes, so each rule states an identity: "this kernel = the same kernel
// launched another way". Which launch runs is the cost model's choice
// (cost/gpu_cost.hpp: occupancy from registers and shared memory against the SM's
// limits, waves over the SMs, coalescing, tensor cores, launch overhead) -- so one rule
// set serves an H100 and an MI210, and the search picks per target.
//
//  * gpu-gemm-tiles: every generated GEMM with each thread-block tile {bm, bn, bk} of
//    kGemmTiles (256 threads, a (bm/16) x (bn/16) micro tile each; the renderer keeps
//    bk within the architecture's static shared memory), and the larger ones with 128-bit
//    loads of f32 operands (kFmaVec);
//  * gpu-gemm-tensor-cores: a GEMM whose operands are cast from f16/bf16 with each
//    tensor-core tile of kMmaTiles (mma.sync on NVIDIA, MFMA on CDNA; priced +inf on
//    targets without either),
//    staged with scalar or 128-bit loads (cost/gpu_launch.hpp), and on CUDA with each
//    ldmatrix + cp.async ring of kMmaAsyncTiles;
//  * gpu-gemm-skinny: every generated GEMM as a skinny GEMM (8 rows x bn columns a block,
//    K split ks ways inside it), scalar or 128-bit loads -- the decode shape, M = 1..8;
//  * gpu-row-mapping: every reduction (row) kernel with a row per thread {1}, per block
//    {2} or per warp {3} (gpu/gpu_renderer.hpp);
//  * gpu-library-gemm: every bare product -- a contraction of two operands of one float
//    type (f16/bf16 cast to f32 right before it, or f32; either may be a concat of such,
//    sibling weights merged), its f32 sum stored or rounded
//    to a float type -- as a call of the vendor BLAS (cuBLASLt), where the target has one
//    (PassContext::library_gemm). A call runs no prologue or epilogue, so fused GEMMs stay
//    generated; the lowering makes it generated again where the BLAS convention cannot
//    express its views (gpu/blas_gemm.hpp).
#include <array>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "cost/gpu_launch.hpp"
#include "ir/build.hpp"
#include "luminal/luminal.hpp"
#include "ir/kernel_body.hpp"
#include "rules/kernel_twins.hpp"
#include "rules/registry.hpp"

namespace luminal::rules {
using egraph::Id;
namespace {

constexpr std::array<std::array<int64_t, 3>, 7> kGemmTiles{{
    {128, 128, 32},
    {128, 64, 32},
    {64, 128, 32},
    {64, 64, 32},
    {32, 64, 32},
    {32, 32, 32},
    {16, 16, 16},
}};

// The larger FMA tiles again with 128-bit loads of their f32 operands: {bm, bn, bk, 0, 4}.
constexpr std::array<std::array<int64_t, 5>, 4> kFmaVec{{
    {128, 128, 32, 0, 4},
    {128, 64, 32, 0, 4},
    {64, 128, 32, 0, 4},
    {64, 64, 32, 0, 4},
}};

// {bm, bn, bk = 32, engine 1 (Mma), vec}: tile sides multiples of 32 (8 warps in 2 x 4).
constexpr std::array<std::array<int64_t, 5>, 10> kMmaTiles{{
    {128, 128, 32, 1, 1},
    {128, 64, 32, 1, 1},
    {64, 128, 32, 1, 1},
    {64, 64, 32, 1, 1},
    {32, 32, 32, 1, 1},
    {128, 128, 32, 1, 8},
    {128, 64, 32, 1, 8},
    {64, 128, 32, 1, 8},
    {64, 64, 32, 1, 8},
    {32, 32, 32, 1, 8},
}};

// {bm, bn, bk = 32, engine 3 (MmaAsync), vec 8, stages, wm, wn}: ldmatrix and a cp.async
// ring (CUDA sm_80+; +inf elsewhere), each within 48 KB of static shared memory.
constexpr std::array<std::array<int64_t, 8>, 6> kMmaAsyncTiles{{
    {128, 256, 32, 3, 8, 2, 64, 64},
    {128, 128, 32, 3, 8, 3, 64, 64},
    {128, 128, 32, 3, 8, 3, 64, 32},
    {128, 64, 32, 3, 8, 4, 64, 32},
    {64, 128, 32, 3, 8, 4, 32, 64},
    {64, 64, 32, 3, 8, 4, 32, 32},
}};

// {bm = 8, bn, bk (unused), engine 2 (Skinny), ks, vec}: bn x ks = 256 threads (bm also
// fewer for fewer rows: gpu_gemm_skinny).
constexpr std::array<std::array<int64_t, 6>, 8> kSkinny{{
    {8, 8, 0, 2, 32, 1},
    {8, 16, 0, 2, 16, 1},
    {8, 32, 0, 2, 8, 1},
    {8, 64, 0, 2, 4, 1},
    {8, 8, 0, 2, 32, 8},
    {8, 16, 0, 2, 16, 8},
    {8, 32, 0, 2, 8, 8},
    {8, 64, 0, 2, 4, 8},
}};

// Both operands of the spec's product cast from the same f16/bf16 type (what the GPU
// lowering keeps as halves: kernel::lower::Options::half_operands).
bool half_operands(const EGraph& g, const ir::KernelSpec& spec) {
  return ir::kernel_work(g, spec, {}, {}).half_operands;
}

// Adds, for every kernel node of `kind` without a launch (and accepted by `want`), the
// same kernel with each of `launches`.
template <class Launches, class Want>
std::size_t add_launches(EGraph& g, const PassContext& ctx, ir::KernelKind kind, const Launches& launches,
                         Want want) {
  return add_kernel_twins(
      g, kind,
      [&](const ir::KernelSpec& spec) {
        std::vector<std::shared_ptr<ir::KernelSpec>> out;
        if (!want(g, spec)) return out;
        for (const auto& l : launches) {
          out.push_back(std::make_shared<ir::KernelSpec>(spec));
          out.back()->launch.assign(l.begin(), l.end());
        }
        return out;
      },
      ctx.node_limit, ctx.first_node);
}

constexpr auto kAny = [](const EGraph&, const ir::KernelSpec&) { return true; };

std::size_t gpu_gemm_tiles(EGraph& g, const PassContext& ctx) {
  // (each call extends the kernels still without a launch: the originals stay)
  const std::size_t n = add_launches(g, ctx, ir::KernelKind::Gemm, kGemmTiles, kAny);
  return n + add_launches(g, ctx, ir::KernelKind::Gemm, kFmaVec, kAny);
}

// Offered for every half-operand GEMM whatever the target: where the target has no
// matrix instruction (TargetDesc::matrix_engine) the cost model prices them +inf.
std::size_t gpu_gemm_tensor_cores(EGraph& g, const PassContext& ctx) {
  const std::size_t n = add_launches(g, ctx, ir::KernelKind::Gemm, kMmaTiles, half_operands);
  return n + add_launches(g, ctx, ir::KernelKind::Gemm, kMmaAsyncTiles, half_operands);
}

// The checker's example for the tensor-core rule (its random programs have no
// half-operand products): f16/bf16 matmuls and linears at small random sizes.
std::shared_ptr<detail::GraphImpl> half_gemm_example(std::mt19937_64& rng) {
  auto dim = [&] { return static_cast<int64_t>(1 + rng() % 5); };
  const DType dt = rng() % 2 ? DType::f16 : DType::bf16;
  Graph g;
  const int64_t m = dim(), k = dim(), n = dim();
  if (rng() % 2)
    g.output("y", matmul(g.input("a", {m, k}, dt), g.input("b", {k, n}, dt)));
  else
    g.output("y", linear(g.input("x", {2, m, k}, dt), g.param("w", {n, k}, dt), g.param("bias", {n}, dt)));
  return g.impl();
}

// The skinny launches with bm = 8, and for a product of fewer rows also with bm = the
// smallest power of two that holds them: at M = 1 a block of 8 rows issues 8 FMAs per B
// element for one useful one (the renderer predicates the rows beyond M off, but they
// still issue). Where an operand could be computed by the blocks (ir::row_prologue),
// each launch also with it staged (detail::kSkinnyStaged).
std::size_t gpu_gemm_skinny(EGraph& g, const PassContext& ctx) {
  return add_kernel_twins(
      g, ir::KernelKind::Gemm,
      [&](const ir::KernelSpec& spec) {
        std::vector<std::shared_ptr<ir::KernelSpec>> out;
        const double m = ir::kernel_work(g, spec, {}, {}).gemm_m;
        int64_t rows = 1;
        while (rows < 8 && static_cast<double>(rows) < m) rows *= 2;
        std::vector<int64_t> bms{8};
        if (rows < 8) bms.push_back(rows);
        for (int64_t bm : bms)
          for (const auto& l : kSkinny) {
            out.push_back(std::make_shared<ir::KernelSpec>(spec));
            out.back()->launch.assign(l.begin(), l.end());
            out.back()->launch[0] = bm;
            // An operand the blocks could compute (a row prologue) also staged: which is
            // cheaper depends on how many blocks repeat it.
            if (spec.body && ir::row_prologue(*spec.body, out.back()->launch)) {
              out.push_back(std::make_shared<ir::KernelSpec>(*out.back()));
              out.back()->launch[2] = detail::kSkinnyStaged;
            }
          }
        return out;
      },
      ctx.node_limit, ctx.first_node);
}

// gemm-as-rows' equality read the other way: a row kernel (no launch chosen yet) of a
// matrix-vector product whose matrix the body reads as a bare view is also the GEMM of
// the same body with an identity expand over that view (ir::rows_as_gemm_body; classify
// reads a contraction as a product of two expands):
//   kernel[reduction](slots) = kernel[gemm](slots).
// The fusion policies build a decode step's down projection as such a row kernel;
// absorbing SwiGLU there computes silu once per weight element. The GEMM twin takes the
// few-rows launches, and with them SwiGLU as a row prologue computed once per block
// (ir::row_prologue); the extractor weighs both.
std::size_t gpu_rows_as_gemm(EGraph& g, const PassContext& ctx) {
  return add_kernel_twins(
      g, ir::KernelKind::Reduction,
      [](const ir::KernelSpec& spec) {
        std::vector<std::shared_ptr<ir::KernelSpec>> out;
        if (!spec.body) return out;
        std::shared_ptr<const detail::GraphImpl> body = ir::rows_as_gemm_body(*spec.body);
        if (!body) return out;
        out.push_back(std::make_shared<ir::KernelSpec>(spec));
        out.back()->kind = ir::KernelKind::Gemm;
        out.back()->body = std::move(body);
        return out;
      },
      ctx.node_limit, ctx.first_node);
}

// The checker's example for gpu-rows-as-gemm: one token's projection (its random programs
// seldom form a matrix-vector row kernel), plain or after SwiGLU, f32 or f16.
std::shared_ptr<detail::GraphImpl> token_projection_example(std::mt19937_64& rng) {
  auto dim = [&] { return static_cast<int64_t>(1 + rng() % 6); };
  const DType dt = rng() % 2 ? DType::f16 : DType::f32;
  const int64_t k = dim(), n = dim();
  Graph g;
  Tensor x = g.input("x", {1, k}, dt);
  if (rng() % 2) x = silu(x) * g.input("up", {1, k}, dt);
  g.output("y", linear(x, g.param("w", {n, k}, dt)));
  return g.impl();
}

std::size_t gpu_row_mapping(EGraph& g, const PassContext& ctx) {
  constexpr std::array<std::array<int64_t, 1>, 3> kMappings{{{1}, {2}, {3}}};
  return add_launches(g, ctx, ir::KernelKind::Reduction, kMappings, kAny);
}

// A body the BLAS computes as it stands: views, one product summed once, casts of the
// operands' inputs from one half type to f32 (or f32 inputs), and a cast of the sum.
bool bare_product(const ir::KernelSpec& spec) {
  const auto& nodes = spec.body->nodes;
  auto through_views = [&](uint32_t x) {
    while (ir::is_view(ir::to_op(nodes[x].op))) x = nodes[x].inputs[0];
    return x;
  };
  // An operand may be a concat of stored tensors (sibling products merged): the call reads
  // it as one buffer where its pieces are params stored packed (ir::stacked_params), or
  // from the copy the lowering makes of it -- priced either way (ir::body_work).
  std::vector<uint8_t> in_concat(nodes.size(), 0);
  std::vector<std::optional<DType>> concat_of(nodes.size());
  for (const detail::Node& n : nodes)
    if (n.op == detail::PrimOp::Mul)
      for (uint32_t in : n.inputs) {
        const uint32_t x = through_views(in);
        if (nodes[x].op != detail::PrimOp::Add) continue;
        const auto cat = ir::stored_concat(*spec.body, x);
        if (!cat) continue;
        concat_of[x] = cat->stored;
        for (uint32_t a : cat->adds) in_concat[a] = 1;
        for (uint32_t p : cat->pads) in_concat[p] = 1;
      }
  int mul = 0, sum = 0;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    const detail::Node& n = nodes[i];
    if (n.op == detail::PrimOp::Input || ir::is_view(ir::to_op(n.op)) || in_concat[i]) continue;
    if (n.op == detail::PrimOp::Mul) {
      ++mul;
      // Both operands: inputs of one float type, or one half type cast to f32.
      DType source[2];
      for (int s = 0; s < 2; ++s) {
        const uint32_t at = through_views(n.inputs[static_cast<size_t>(s)]);
        const detail::Node& x = nodes[at];
        if (concat_of[at]) {
          source[s] = *concat_of[at];
        } else if (x.op == detail::PrimOp::Input && x.dtype == DType::f32) {
          source[s] = DType::f32;
        } else if (x.op == detail::PrimOp::Cast && x.dtype == DType::f32 &&
                   nodes[x.inputs[0]].op == detail::PrimOp::Input &&
                   (nodes[x.inputs[0]].dtype == DType::f16 || nodes[x.inputs[0]].dtype == DType::bf16)) {
          source[s] = nodes[x.inputs[0]].dtype;
        } else {
          return false;
        }
      }
      if (source[0] != source[1] || n.dtype != DType::f32) return false;
    } else if (n.op == detail::PrimOp::SumReduce) {
      ++sum;
      if (nodes[through_views(n.inputs[0])].op != detail::PrimOp::Mul) return false;
    } else if (n.op == detail::PrimOp::Cast) {
      // an operand's widening (checked with the product) or the sum's rounding
      const detail::Node& in = nodes[n.inputs[0]];
      const bool widening = in.op == detail::PrimOp::Input;
      const bool rounding = nodes[through_views(n.inputs[0])].op == detail::PrimOp::SumReduce &&
                            (n.dtype == DType::f16 || n.dtype == DType::bf16 || n.dtype == DType::f32);
      if (!widening && !rounding) return false;
    } else {
      return false;
    }
  }
  return mul == 1 && sum == 1;
}

// The widening kernel of class `c`, if it has one: f32 = a slot of f16 or bf16 cast, and
// viewed (a weight transposed), nothing else -- an operand the library reads as the
// halves it widens.
std::optional<ir::Variant> widening_of(EGraph& g, Id c) {
  for (Id nd : g.index().nodes(c, ir::Op::Kernel)) {
    const auto& spec = *g.analysis().attrs().get(g.node(nd).payload).kernel;
    if (spec.kind != ir::KernelKind::Elementwise || spec.slots != 1) continue;
    int widenings = 0, other = 0;
    for (const detail::Node& n : spec.body->nodes) {
      if (n.op == detail::PrimOp::Input || ir::is_view(ir::to_op(n.op))) continue;
      const DType from = n.op == detail::PrimOp::Cast ? spec.body->nodes[n.inputs[0]].dtype : DType::f32;
      if (n.op == detail::PrimOp::Cast && n.dtype == DType::f32 &&
          (from == DType::f16 || from == DType::bf16))
        ++widenings;
      else
        ++other;
    }
    if (widenings != 1 || other != 0) continue;
    auto kids = g.node(nd).kids;
    return ir::Variant{g.analysis().attrs().get(g.node(nd).payload).kernel,
                       std::vector<Id>(kids.begin(), kids.end())};
  }
  return std::nullopt;
}

std::size_t gpu_library_gemm(EGraph& g, const PassContext& ctx) {
  if (!ctx.library_gemm) return 0;
  std::size_t added = add_kernel_twins(
      g, ir::KernelKind::Gemm,
      [&](const ir::KernelSpec& spec) {
        std::vector<std::shared_ptr<ir::KernelSpec>> out;
        if (!spec.launch.empty() || !bare_product(spec)) return out;
        out.push_back(std::make_shared<ir::KernelSpec>(spec));
        out.back()->kind = ir::KernelKind::LibraryGemm;
        return out;
      },
      ctx.node_limit, ctx.first_node);
  // A product over f32 operands that are halves widened by kernels of their own (an f16
  // model's SwiGLU output, rounded to f16 and widened for the down projection): the call
  // reads the halves, each widening absorbed into the product -- the same value, since
  // widening is exact. (A GEMM kernel that absorbed them is bare already, above; the
  // program need not have made one.)
  if (!g.is_clean()) g.rebuild();
  KernelsToAdd todo;
  for (Id cls : g.index().classes_with(ir::Op::Kernel))
    for (Id nd : g.index().nodes(cls, ir::Op::Kernel)) {
      if (nd < ctx.first_node) continue;
      const auto& spec = *g.analysis().attrs().get(g.node(nd).payload).kernel;
      if (spec.kind != ir::KernelKind::Gemm || !spec.launch.empty() || bare_product(spec)) continue;
      auto k = g.node(nd).kids;
      ir::Variant v{g.analysis().attrs().get(g.node(nd).payload).kernel, std::vector<Id>(k.begin(), k.end())};
      bool widened = false;
      for (std::size_t slot = 0; slot < v.kids.size();) {
        std::optional<ir::Variant> w;
        const Id kc = g.find(v.kids[slot]);
        if (g.data(kc).dtype == DType::f32) w = widening_of(g, kc);
        std::optional<ir::Variant> nv;
        if (w) nv = ir::substitute(g, v, slot, *w, ctx.max_body_nodes);
        if (!nv) {
          ++slot;
          continue;
        }
        // (the substitution moves the slots: start over; each widening removes an f32 slot)
        v = std::move(*nv);
        widened = true;
        slot = 0;
      }
      if (!widened || v.spec->kind != ir::KernelKind::Gemm || !bare_product(*v.spec)) continue;
      auto lib = std::make_shared<ir::KernelSpec>(*v.spec);
      lib->kind = ir::KernelKind::LibraryGemm;
      lib->finalize();
      todo.emplace_back(cls, ir::Variant{std::move(lib), v.kids});
    }
  return added + merge_kernels(g, todo, ctx.node_limit);
}

}  // namespace

RuleSet schedule_gpu_rules() {
  return {"schedule_gpu",
          {
              [] {
                RuleInfo r =
                    pass_rule("gpu-rows-as-gemm", gpu_rows_as_gemm, Exact,
                              "row kernel of a matrix-vector product = the same body as a gemm kernel");
                r.example = token_projection_example;
                return r;
              }(),
              pass_rule("gpu-gemm-tiles", gpu_gemm_tiles, Exact,
                        "gemm kernel = the same gemm launched with each thread-block tile"),
              [] {
                RuleInfo r = pass_rule("gpu-gemm-tensor-cores", gpu_gemm_tensor_cores, Exact,
                                       "half-operand gemm kernel = the same gemm on tensor cores (mma.sync "
                                       "m16n8k16, f32 accumulate) with each tile");
                r.example = half_gemm_example;
                return r;
              }(),
              pass_rule(
                  "gpu-gemm-skinny", gpu_gemm_skinny, Exact,
                  "gemm kernel = the same gemm as 8-row blocks with K split across the block's threads"),
              pass_rule("gpu-row-mapping", gpu_row_mapping, Exact,
                        "row kernel = the same kernel with a row per thread, per warp or per block"),
              [] {
                RuleInfo r =
                    pass_rule("gpu-library-gemm", gpu_library_gemm, Exact,
                              "bare gemm kernel = a call of the vendor BLAS (cuBLASLt) with the same "
                              "operands, f32 accumulate");
                r.example = half_gemm_example;
                return r;
              }(),
          }};
}

}  // namespace luminal::rules
