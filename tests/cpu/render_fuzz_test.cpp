// Randomized renderer check: many random kernels (random expression trees over views of
// a few buffers -- row-major, transposed, broadcast, padded -- random loop shapes and
// parallel/vectorize flags, elementwise and reductions with epilogues), all in one
// program so the C compiler runs once, compared with the IR evaluator.
#include "harness.hpp"
#include "kernel/kernel_math.hpp"

using namespace luminal::kernel;
using cpu_test::check_program;
using luminal::DType;

namespace {

struct Gen {
  std::mt19937 rng;
  int pick(int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); }

  // A leaf: one of the views of the [R, C] grid over input buffers.
  // b0: [R, C] row-major; b1: [C, R] (read transposed); b2: [C] (broadcast along rows);
  // b3: [R] (broadcast along columns); padded: b0 shifted by (1, 2), fill 0.5.
  Expr leaf(Index i, Index j, int64_t R, int64_t C) {
    switch (pick(6)) {
      case 0:
        return load(0, DType::f32, i * C + j);
      case 1:
        return load(1, DType::f32, j * R + i);
      case 2:
        return load(2, DType::f32, j);
      case 3:
        return load(3, DType::f32, i);
      case 4: {
        Index ii = i - 1, jj = j - 2;
        Index valid = land(land(le(Index(0), ii), lt(ii, R)), land(le(Index(0), jj), lt(jj, C)));
        return load_padded(0, DType::f32, ii * C + jj, valid, 0.5);
      }
      default:
        return constant(static_cast<double>(pick(7)) * 0.25 - 0.75);
    }
  }

  Expr tree(int depth, Index i, Index j, int64_t R, int64_t C) {
    if (depth == 0) return leaf(i, j, R, C);
    switch (pick(4)) {
      case 0: {
        // bounded or sign-only functions: random trees stay finite
        Expr x = tree(depth - 1, i, j, R, C);
        switch (pick(7)) {
          case 0:
            return unary(UnaryOp::Sin, x);
          case 1:
            return math::cos(x);
          case 2:
            return math::tanh(x);
          case 3:
            return math::sigmoid(x);
          case 4:
            return math::relu(x);
          case 5:
            return math::abs(x);
          default:
            return unary(UnaryOp::Neg, x);
        }
      }
      case 1:
      case 2: {
        static const BinaryOp ops[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Max,
                                       BinaryOp::Min};
        return binary(ops[pick(5)], tree(depth - 1, i, j, R, C), tree(depth - 1, i, j, R, C));
      }
      default:
        return where(binary(BinaryOp::LessThan, tree(depth - 1, i, j, R, C), leaf(i, j, R, C)),
                     tree(depth - 1, i, j, R, C), tree(depth - 1, i, j, R, C));
    }
  }
};

}  // namespace

TEST_CASE("render fuzz: random kernels match the evaluator", "[cpu][render]") {
  for (uint32_t seed : {1u, 2u, 3u}) {
    Gen g{std::mt19937(seed)};
    const int64_t R = 1 + g.pick(40), C = 1 + g.pick(300);
    Program p;
    p.buffers = {{"x", DType::f32, R * C, BufferRole::Input},
                 {"xt", DType::f32, C * R, BufferRole::Input},
                 {"row", DType::f32, C, BufferRole::Param},
                 {"col", DType::f32, R, BufferRole::Param}};
    Index i = Index::var(0), j = Index::var(1);
    for (int k = 0; k < 24; ++k) {
      const int out = static_cast<int>(p.buffers.size());
      std::string name = "k";  // appended, not operator+: GCC 12's false -Wrestrict
      name += std::to_string(k);
      const bool reduce = g.pick(3) == 0;
      Loop li{0, R, g.pick(2) == 0, false}, lj{1, C, g.pick(3) == 0, g.pick(3) != 0};
      Expr body = g.tree(1 + g.pick(4), i, j, R, C);
      if (!reduce) {
        p.buffers.push_back({name, DType::f32, R * C, BufferRole::Output});
        p.kernels.push_back(Kernel{name, KernelKind::Elementwise, {li, lj}, {out, i * C + j, body}, {}, {}});
      } else {
        p.buffers.push_back({name, DType::f32, R, BufferRole::Output});
        ReduceOp op = g.pick(2) ? ReduceOp::Sum : ReduceOp::Max;
        Expr epi = binary(BinaryOp::Add, math::tanh(acc()), load(3, DType::f32, i));
        li.vectorize = false;
        p.kernels.push_back(Kernel{
            name, KernelKind::Reduction, {li}, {out, i, epi}, Reduction{op, {lj}, body, DType::f32}, {}});
      }
    }
    INFO("seed " << seed << ", R=" << R << " C=" << C);
    std::string src = check_program(p, {}, 1e-4, 1e-5, seed);
    CHECK(src.find("void k23(") != std::string::npos);
  }
}
