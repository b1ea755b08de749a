// Random well-typed programs for differential testing (random_programs_test.cpp) and the
// graph-building fuzzer (tests/fuzz/fuzz_graph_build.cpp). One generator, driven by a Chooser:
// an RNG for the differential test, the fuzzer's bytes for the fuzzer.
//
// A program has 1-3 f32 inputs over constant dims and one symbolic dim B in [1, 6], then
// a sequence of ops on a pool of tensors: elementwise unary and binary (with NumPy
// broadcasting against a row or a scalar), reductions (sum/mean/max/min, softmax,
// log_softmax, layer/rms norm, cumsum), matmul against a new input, views (transpose,
// permute, reshape, unsqueeze + expand, slice, pad, concat, flatten) and f16/bf16 casts.
// Ops are chosen so that results stay continuous in their inputs (no argmax, no
// comparisons that flip), and domains are guarded (log(|x| + 1), sqrt|x|, x / (|y| + .5)):
// a compiled program and the interpreter must then agree within rounding. The fuzzer can
// also make one op invalid (invalid_op: bad axes, shapes, sizes, dtypes, operands), which
// must throw the lm::Error subclass the API defines, or build with a shape guard.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "luminal/luminal.hpp"

namespace luminal::test {

/// The source of every choice: pick(n) in [0, n).
struct Chooser {
  virtual ~Chooser() = default;
  virtual uint32_t pick(uint32_t n) = 0;
};

struct RngChooser final : Chooser {
  explicit RngChooser(uint64_t seed) : rng(seed) {}
  uint32_t pick(uint32_t n) override { return n ? static_cast<uint32_t>(rng() % n) : 0; }
  std::mt19937_64 rng;
};

/// Bytes of a fuzzer input; 0 once they run out (so every input is a finite program).
struct ByteChooser final : Chooser {
  ByteChooser(const uint8_t* d, size_t n) : data(d), size(n) {}
  uint32_t pick(uint32_t n) override {
    if (n <= 1 || pos >= size) return 0;
    uint32_t v = data[pos++];
    if (n > 256 && pos < size) v = v << 8 | data[pos++];
    return v % n;
  }
  const uint8_t* data;
  size_t size, pos = 0;
};

struct RandomProgram {
  std::vector<std::string> ops;  ///< what was built, in order (for the report)
  bool has_half = false;         ///< some value went through f16/bf16
  /// The invalid op attempted (`invalid_at`; empty: none), and the lm::Error subclass the
  /// API defines for it; nullptr: a shape guard decides at call time (the op builds, and a
  /// call whose dims break it is refused with a RuntimeError).
  std::string invalid;
  const char* expected_error = nullptr;
  bool invalid_accepted = false;  ///< an op that must throw built: a validation bug
};

// "x3": appended (GCC 12 reports a false -Wrestrict for "x" + std::to_string(i)).
inline std::string numbered(const char* stem, int i) {
  std::string s = stem;
  s.append(std::to_string(i));
  return s;
}

/// An op on `x` that the API defines as an error (the graph fuzzer's "throws an lm::Error"
/// branch): bad axes, permutations, reshape sizes, broadcasts, inner dims, dtypes, null
/// tensors and tensors of another graph. Sets rp.invalid and rp.expected_error first, so a
/// caller that catches the throw knows what was tried. Returns the result when the op
/// builds: with a guard (expected_error nullptr), or wrongly (the caller checks).
inline Tensor invalid_op(Graph& g, Chooser& ch, const Tensor& x, RandomProgram& rp,
                         const std::string& prefix) {
  const int r = static_cast<int>(x.rank());
  const int64_t last = r == 0 ? -1 : x.shape().back().as_constant().value_or(-1);
  auto shape_error = [&](const char* what) { rp.invalid = what, rp.expected_error = "ShapeError"; };
  auto dtype_error = [&](const char* what) { rp.invalid = what, rp.expected_error = "DTypeError"; };
  auto bad_axis = [&] {
    return ch.pick(2) ? r + 1 + static_cast<int>(ch.pick(2)) : -(r + 1) - static_cast<int>(ch.pick(2));
  };
  switch (ch.pick(22)) {
    case 0:
      shape_error("sum over an axis out of range");
      return sum(x, bad_axis());
    case 1: {
      std::vector<int> axes;
      for (int i = 0; i < std::max(r, 1) + (r >= 2 ? 0 : 1); ++i) axes.push_back(i);
      if (r >= 2) axes[1 + ch.pick(static_cast<uint32_t>(r - 1))] = 0;  // axis 0 twice
      shape_error("permute by a non-permutation");
      return permute(x, axes);
    }
    case 2:
      shape_error("transpose of an axis out of range");
      return transpose(x, 0, bad_axis());
    case 3:
      shape_error("reshape with two -1");
      return reshape(x, {Dim(-1), Dim(-1)});
    case 4:
      shape_error("reshape to a negative dim");
      return reshape(x, {Dim(-2 - static_cast<int64_t>(ch.pick(3)))});
    case 5: {  // another element count: certain for constant shapes, a guard with B
      Dim n(1);
      for (const Dim& d : x.shape()) n = n * d;
      if (auto c = n.as_constant()) {
        shape_error("reshape to another element count");
        return reshape(x, {Dim(*c + 1 + static_cast<int64_t>(ch.pick(3)))});
      }
      const DimBindings at{{prefix + "B", 1 + static_cast<int64_t>(ch.pick(4))}};
      rp.invalid = "reshape to the element count of one B (a guard)";
      return reshape(x, {Dim(n.evaluate(at))});
    }
    case 6:
      if (last >= 2) {  // [..., c] and [c + 1]: neither is 1
        shape_error("add of shapes that do not broadcast");
        return x + full({Dim(last + 1)}, 1.0f);
      }
      shape_error("sum over an axis out of range");
      return sum(x, bad_axis());
    case 7:
      if (r == 0) {
        shape_error("matmul of a tensor without dims");
        return matmul(x, g.input(prefix + "wbad", {2, 2}));
      }
      if (last >= 1) {
        shape_error("matmul with different inner dims");
        return matmul(x, g.input(prefix + "wbad", {Dim(last + 1), Dim(2)}));
      }
      shape_error("cumsum over an axis out of range");
      return cumsum(x, bad_axis());
    case 8:
      dtype_error("where with a float condition");
      return where(x, x, 0.0f);
    case 9: {
      Tensor b = less(x, 0.0f);
      dtype_error("add of bool tensors");
      return b + b;
    }
    case 10:
      dtype_error("logical_not of a float tensor");
      return logical_not(x);
    case 11:
      dtype_error("softmax of an i32 tensor");
      return softmax(cast(x, i32), -1);
    case 12:
      dtype_error("embedding with float ids");
      return embedding(full({4, 2}, 1.0f), x);
    case 13: {
      Graph other;
      Tensor o = other.input("o", {1});
      shape_error("add of a tensor of another graph");
      return ch.pick(2) ? x + o : o * x;
    }
    case 14:
      shape_error("an op on a null tensor");
      return ch.pick(2) ? x + Tensor() : relu(Tensor());
    case 15:
      shape_error("slice with step < 1");
      return slice(x, 0, 0, 1, -static_cast<int64_t>(ch.pick(2)));
    case 16: {
      std::vector<Dim> s = x.shape();
      size_t i = 0;
      while (i < s.size() && (!s[i].as_constant() || *s[i].as_constant() == 1)) ++i;
      if (i < s.size()) {
        s[i] = Dim(*s[i].as_constant() + 1);
        shape_error("expand of a dim that is not 1");
      } else if (r >= 1) {
        s.pop_back();
        shape_error("expand to fewer dims");
      } else {
        s = {Dim(-1)};
        shape_error("expand with a new leading -1");
      }
      return expand(x, s);
    }
    case 17:
      if (ch.pick(4) == 0) {
        shape_error("concat of no tensors");
        return concat({}, 0);
      }
      shape_error("concat of different ranks");
      return concat({x, unsqueeze(x, 0)}, 0);
    case 18: {
      shape_error("pad of more axes than the rank");
      return pad(x, std::vector<std::pair<Dim, Dim>>(static_cast<size_t>(r + 1), {Dim(1), Dim(0)}));
    }
    case 19:
      shape_error("flatten with start after end");
      return r >= 2 ? flatten(x, 1, 0) : r == 1 ? flatten(x, 0, 2) : unsqueeze(x, 2);
    case 20:
      shape_error("unsqueeze at an axis out of range");
      return unsqueeze(x, r + 2 + static_cast<int>(ch.pick(2)));
    default:
      if (r >= 1 && last >= 1) {
        shape_error("layer_norm with a weight of another size");
        return layer_norm(x, full({Dim(last + 1)}, 1.0f), Tensor());
      }
      dtype_error("layer_norm of an i32 tensor");
      return layer_norm(cast(x, i32), Tensor(), Tensor());
  }
}

/// Builds a random program of `min_ops`..`max_ops` ops into `g` (inputs, outputs).
/// `prefix` goes before every name the program declares (its dim, inputs and outputs), so
/// that several programs can share one graph (the differential test compiles them in
/// batches); it consumes no choices, so a seed builds the same program with any prefix.
/// `invalid_at` >= 0 makes op number `invalid_at` an invalid_op (the graph fuzzer); -1
/// consumes no choice for it, so a seed builds the same program as before it existed.
/// Fills `rp` as it goes, so a caller that catches a throw knows how far it got.
inline void build_random_program_into(RandomProgram& rp, Graph& g, Chooser& ch, int min_ops = 20,
                                      int max_ops = 60, const std::string& prefix = "", int invalid_at = -1) {
  const Dim B = g.dim(prefix + "B", 1, 6);
  const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 16};
  auto cdim = [&] { return Dim(sizes[ch.pick(8)]); };
  std::vector<Tensor> pool;
  const int n_inputs = 1 + static_cast<int>(ch.pick(3));
  for (int i = 0; i < n_inputs; ++i) {
    const int rank = 1 + static_cast<int>(ch.pick(3));
    std::vector<Dim> shape;
    for (int a = 0; a < rank; ++a) shape.push_back(a == 0 && ch.pick(2) ? B : cdim());
    pool.push_back(g.input(prefix + numbered("x", i), shape));
  }
  int extra_inputs = 0;
  auto any = [&]() -> Tensor { return pool[ch.pick(static_cast<uint32_t>(pool.size()))]; };
  auto last_const = [](const Tensor& t) -> int64_t {
    if (t.rank() == 0) return -1;
    auto c = t.shape().back().as_constant();
    return c ? *c : -1;
  };
  auto same_shape = [](const Tensor& a, const Tensor& b) {
    if (a.rank() != b.rank()) return false;
    for (size_t i = 0; i < a.shape().size(); ++i)
      if (!a.shape()[i].same_as(b.shape()[i])) return false;
    return true;
  };
  // A second operand for `a`: a pool tensor of the same shape, a row matching a's last
  // dim (broadcast), or a scalar.
  auto partner = [&](const Tensor& a) -> Tensor {
    std::vector<Tensor> same;
    for (const auto& t : pool)
      if (same_shape(t, a)) same.push_back(t);
    const uint32_t k = ch.pick(4);
    if (k < 2 && !same.empty()) return same[ch.pick(static_cast<uint32_t>(same.size()))];
    if (k == 2 && a.rank() >= 1) {
      std::vector<Tensor> rows;
      for (const auto& t : pool)
        if (t.rank() == 1 && t.shape()[0].same_as(a.shape().back())) rows.push_back(t);
      if (!rows.empty()) return rows[ch.pick(static_cast<uint32_t>(rows.size()))];
    }
    return constant(0.25f * static_cast<float>(ch.pick(9)) - 1.0f);
  };
  const int n_ops = min_ops + static_cast<int>(ch.pick(static_cast<uint32_t>(max_ops - min_ops + 1)));
  for (int step = 0; step < n_ops; ++step) {
    Tensor x = any();
    Tensor y;
    std::string what;
    if (step == invalid_at) {
      y = invalid_op(g, ch, x, rp, prefix);
      if (rp.expected_error) {
        rp.invalid_accepted = true;
        return;
      }
      what = rp.invalid;
    }
    switch (y.valid() ? 8 : ch.pick(8)) {
      case 8:  // the invalid op built (with a guard)
        break;
      case 0:
      case 1: {  // unary
        static const char* names[] = {"neg",  "abs",  "exp",   "sin",      "cos",  "tanh",  "sigmoid", "relu",
                                      "silu", "gelu", "square", "log",     "sqrt", "rsqrt", "recip",   "erf",
                                      "gelu_erf", "exp2", "clamp"};
        const uint32_t k = ch.pick(19);
        what = names[k];
        switch (k) {
          case 0: y = neg(x); break;
          case 1: y = abs(x); break;
          case 2: y = exp(clamp(x, -10.0f, 10.0f)); break;
          case 3: y = sin(x); break;
          case 4: y = cos(x); break;
          case 5: y = tanh(x); break;
          case 6: y = sigmoid(x); break;
          case 7: y = relu(x); break;
          case 8: y = silu(x); break;
          case 9: y = gelu(x); break;
          case 10: y = square(clamp(x, -100.0f, 100.0f)); break;
          case 11: y = log(abs(x) + 1.0f); break;
          case 12: y = sqrt(abs(x)); break;
          case 13: y = rsqrt(abs(x) + 1.0f); break;
          case 14: y = recip(abs(x) + 0.5f); break;
          case 15: y = erf(x); break;
          case 16: y = gelu_erf(x); break;
          case 17: y = exp2(clamp(x, -10.0f, 10.0f)); break;
          default: y = clamp(x, -1.5f, 1.5f); break;
        }
        break;
      }
      case 2: {  // binary
        Tensor b = partner(x);
        static const char* names[] = {"add", "sub", "mul", "maximum", "minimum", "div", "where-less"};
        const uint32_t k = ch.pick(7);
        what = names[k];
        switch (k) {
          case 0: y = x + b; break;
          case 1: y = x - b; break;
          case 2: y = clamp(x, -100.0f, 100.0f) * clamp(b, -100.0f, 100.0f); break;
          case 3: y = maximum(x, b); break;
          case 4: y = minimum(x, b); break;
          case 5: y = x / (abs(b) + 0.5f); break;
          default: y = where(less(x, b), x, b); break;
        }
        break;
      }
      case 3: {  // reductions
        if (x.rank() == 0) {
          y = x * 0.5f;
          what = "scale";
          break;
        }
        const int axis = static_cast<int>(ch.pick(static_cast<uint32_t>(x.rank())));
        const bool keep = ch.pick(2);
        static const char* names[] = {"sum", "mean", "max", "min", "softmax", "log_softmax", "layer_norm", "rms_norm", "cumsum"};
        const uint32_t k = ch.pick(9);
        what = names[k];
        switch (k) {
          case 0: y = sum(clamp(x, -100.0f, 100.0f), axis, keep); break;
          case 1: y = mean(x, axis, keep); break;
          case 2: y = max(x, axis, keep); break;
          case 3: y = min(x, axis, keep); break;
          case 4: y = softmax(x, axis); break;
          case 5: y = log_softmax(x, axis); break;
          case 6: y = layer_norm(x, Tensor(), Tensor()); break;
          case 7: y = rms_norm(x, Tensor()); break;
          default:
            if (auto c = x.shape()[static_cast<size_t>(axis)].as_constant(); c && *c <= 16) {
              y = cumsum(clamp(x, -100.0f, 100.0f), axis);
            } else {
              y = sum(x, axis, keep);
              what = "sum";
            }
            break;
        }
        break;
      }
      case 4: {  // matmul against a new input [K, N]
        const int64_t K = last_const(x);
        if (K < 1 || x.rank() == 0) {
          y = x + 1.0f;
          what = "add";
          break;
        }
        const int64_t N = sizes[ch.pick(8)];
        Tensor w = g.input(prefix + numbered("w", extra_inputs++), {K, N});
        y = matmul(clamp(x, -100.0f, 100.0f), w);
        what = "matmul";
        break;
      }
      case 5:
      case 6: {  // views
        const uint32_t k = ch.pick(8);
        const int r = static_cast<int>(x.rank());
        if (r == 0) {
          y = reshape(x, {1});
          what = "reshape";
          break;
        }
        switch (k) {
          case 0:
            y = r >= 2 ? transpose(x, -1, -2) : unsqueeze(x, 0);
            what = r >= 2 ? "transpose" : "unsqueeze";
            break;
          case 1: {
            std::vector<int> perm(static_cast<size_t>(r));
            for (int i = 0; i < r; ++i) perm[static_cast<size_t>(i)] = i;
            for (int i = r - 1; i > 0; --i) std::swap(perm[static_cast<size_t>(i)], perm[ch.pick(static_cast<uint32_t>(i + 1))]);
            y = permute(x, perm);
            what = "permute";
            break;
          }
          case 2: {  // merge the last two constant dims, or split the last one
            auto s = x.shape();
            const int64_t last = last_const(x);
            if (r >= 2 && last > 0 && s[s.size() - 2].as_constant()) {
              const int64_t prev = *s[s.size() - 2].as_constant();
              s.pop_back();
              s.back() = Dim(prev * last);
              what = "reshape-merge";
            } else if (last > 0 && last % 2 == 0) {
              s.back() = Dim(last / 2);
              s.push_back(Dim(2));
              what = "reshape-split";
            } else {
              s.push_back(Dim(1));
              what = "reshape-unit";
            }
            y = reshape(x, s);
            break;
          }
          case 3: {  // unsqueeze + expand
            const int64_t n = sizes[ch.pick(8)];
            auto s = x.shape();
            s.insert(s.begin(), Dim(n));
            y = expand(unsqueeze(x, 0), s);
            what = "expand";
            break;
          }
          case 4: {  // slice a constant axis
            const int axis = static_cast<int>(ch.pick(static_cast<uint32_t>(r)));
            auto c = x.shape()[static_cast<size_t>(axis)].as_constant();
            if (!c || *c < 2) {
              y = x * 2.0f;
              what = "scale";
              break;
            }
            const int64_t start = ch.pick(static_cast<uint32_t>(*c - 1));
            const int64_t step_ = 1 + ch.pick(2);
            y = slice(x, axis, start, *c, step_);
            what = "slice";
            break;
          }
          case 5: {  // pad axis 0..r-1 with constants
            std::vector<std::pair<Dim, Dim>> p;
            const int axis = static_cast<int>(ch.pick(static_cast<uint32_t>(r)));
            for (int a = 0; a <= axis; ++a)
              p.emplace_back(a == axis ? Dim(ch.pick(3)) : Dim(0), a == axis ? Dim(ch.pick(3)) : Dim(0));
            y = pad(x, p, 0.5f * static_cast<float>(ch.pick(3)));
            what = "pad";
            break;
          }
          case 6: {  // concat with a same-shaped tensor
            Tensor b = partner(x);
            if (!same_shape(b, x)) b = x * 3.0f;
            y = concat({x, b}, static_cast<int>(ch.pick(static_cast<uint32_t>(r))));
            what = "concat";
            break;
          }
          default:
            y = flatten(x, 0, -1);
            what = "flatten";
            break;
        }
        break;
      }
      default: {  // casts through half precision and back
        const DType h = ch.pick(2) ? f16 : bf16;
        y = cast(clamp(x, -60000.0f, 60000.0f), h);
        if (ch.pick(2)) y = cast(y, f32);
        what = h == f16 ? "cast-f16" : "cast-bf16";
        rp.has_half = true;
        break;
      }
    }
    // Keep tensors small: anything over 4096 elements at B = 6 is summed down.
    int64_t elems = 1;
    for (const Dim& d : y.shape()) elems *= d.as_constant() ? *d.as_constant() : 6;
    if (elems > 4096) {
      y = sum(y, 0);
      what += "+sum";
    }
    if (y.dtype() == f16 || y.dtype() == bf16) rp.has_half = true;
    rp.ops.push_back(what);
    pool.push_back(y);
  }
  g.output(prefix + "out", pool.back());
  const int extra = static_cast<int>(ch.pick(3));
  for (int i = 0; i < extra; ++i) {
    const size_t j = n_inputs + ch.pick(static_cast<uint32_t>(pool.size() - static_cast<size_t>(n_inputs)));
    g.output(prefix + numbered("out", i), pool[j]);
  }
}

inline RandomProgram build_random_program(Graph& g, Chooser& ch, int min_ops = 20, int max_ops = 60,
                                          const std::string& prefix = "") {
  RandomProgram rp;
  build_random_program_into(rp, g, ch, min_ops, max_ops, prefix);
  return rp;
}

}  // namespace luminal::test
