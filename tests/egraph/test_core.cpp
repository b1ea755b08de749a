// Core e-graph operations: hashconsing, union-find, deferred rebuilding, analyses with
// modify, and languages with struct payloads.
#include <catch2/catch.hpp>

#include <optional>

#include "check.hpp"
#include "egraph/math_lang.hpp"
#include "luminal/egraph/sexpr.hpp"

using namespace luminal::egraph;
using namespace mathlang;

TEST_CASE("hashcons shares equal nodes and find is canonical", "[egraph][core]") {
  EGraph<Math> g;
  Id x = g.add(Op::Sym, symbol("x"), {});
  Id y = g.add(Op::Sym, symbol("y"), {});
  Id a = g.add(Op::Add, 0, {x, y});
  CHECK(g.add(Op::Add, 0, {x, y}) == a);
  CHECK(g.add(Op::Add, 0, {y, x}) != a);
  CHECK(g.lookup(Op::Add, 0, std::vector<Id>{x, y}) == a);
  CHECK(g.lookup(Op::Mul, 0, std::vector<Id>{x, y}) == kNoId);
  CHECK(g.num_nodes() == 4);
  CHECK(g.num_classes() == 4);
  CHECK(g.merge(x, y));
  CHECK_FALSE(g.merge(x, y));
  CHECK(g.find(x) == g.find(y));
  CHECK_THROWS_WITH(g.index(), Catch::Contains("rebuild"));
  g.rebuild();
  // x+y and y+x are now congruent.
  CHECK(g.find(a) == g.find(g.add(Op::Add, 0, {y, x})));
  CHECK(g.num_classes() == 2);
  CHECK(g.num_nodes() == 3);
  CHECK(egtest::check_invariants(g) == "");
}

TEST_CASE("rebuild cascades congruence upward", "[egraph][core]") {
  EGraph<Math> g;
  Id a = add_term(g, "(f (g (f a)))", Syntax{});
  Id b = add_term(g, "(f (g (f b)))", Syntax{});
  CHECK(g.find(a) != g.find(b));
  g.merge(g.lookup(Op::Sym, symbol("a"), {}), g.lookup(Op::Sym, symbol("b"), {}));
  CHECK(g.rebuild() == 3);
  CHECK(g.find(a) == g.find(b));
  CHECK(egtest::check_invariants(g) == "");
}

namespace {
// Constant folding: data = the class's value if known; modify adds the constant.
struct ConstFold {
  using Data = std::optional<std::int64_t>;
  template <class G>
  Data make(const G& g, const NodeView<Math>& n) const {
    if (n.op == Op::Num) return n.payload;
    if (n.kids.size() == 2) {
      auto x = g.data(n.kids[0]), y = g.data(n.kids[1]);
      if (x && y) {
        if (n.op == Op::Add) return *x + *y;
        if (n.op == Op::Mul) return *x * *y;
      }
    }
    return std::nullopt;
  }
  DidMerge merge(Data& a, Data b) const {
    if (!a && b) {
      a = b;
      return {true, false};
    }
    return {false, a.has_value() != b.has_value()};
  }
  template <class G>
  void modify(G& g, Id c) const {
    if (auto v = g.data(c)) g.merge(c, g.add(Op::Num, *v, {}));
  }
};
}  // namespace

TEST_CASE("analysis with modify folds constants", "[egraph][analysis]") {
  EGraph<Math, ConstFold> g;
  Id t = add_term(g, "(+ (* 2 3) x)", Syntax{});
  Id six = g.lookup(Op::Num, 6, {});
  REQUIRE(six != kNoId);
  CHECK(g.find(six) ==
        g.find(g.lookup(Op::Mul, 0, std::vector<Id>{g.lookup(Op::Num, 2, {}), g.lookup(Op::Num, 3, {})})));
  CHECK_FALSE(g.data(t).has_value());
  // Learning x = 4 makes the whole term 10, through rebuild's analysis propagation.
  g.merge(g.lookup(Op::Sym, symbol("x"), {}), g.add(Op::Num, 4, {}));
  g.rebuild();
  REQUIRE(g.data(t).has_value());
  CHECK(*g.data(t) == 10);
  CHECK(g.find(t) == g.find(g.add(Op::Num, 10, {})));
}

namespace {
// A tensor-like language: struct payload with attributes.
struct Attr {
  std::uint8_t dtype = 0;
  std::int32_t axis = -1;
  friend bool operator==(const Attr&, const Attr&) = default;
};
struct Tensor {
  enum class Op : std::uint8_t { Input, Sum, Exp, Matmul };
  using Payload = Attr;
  static constexpr std::size_t kNumOps = 4;
  static std::uint64_t hash_payload(const Attr& a) noexcept {
    return (std::uint64_t{a.dtype} << 32) ^ static_cast<std::uint32_t>(a.axis);
  }
};
struct NoPayLang {
  enum class Op : std::uint8_t { A, B };
  using Payload = NoPayload;
  static constexpr std::size_t kNumOps = 2;
  static std::uint64_t hash_payload(NoPayload) noexcept { return 0; }
};
}  // namespace

TEST_CASE("languages with struct payloads and without payloads", "[egraph][core]") {
  static_assert(Language<Tensor>);
  static_assert(Language<NoPayLang>);
  EGraph<Tensor> g;
  Id in = g.add(Tensor::Op::Input, Attr{1, 0}, {});
  Id s0 = g.add(Tensor::Op::Sum, Attr{1, 0}, {in});
  Id s1 = g.add(Tensor::Op::Sum, Attr{1, 1}, {in});
  CHECK(s0 != s1);
  CHECK(g.add(Tensor::Op::Sum, Attr{1, 1}, {in}) == s1);
  CHECK(g.payload(g.index().nodes(s1)[0]).axis == 1);

  EGraph<NoPayLang> h;
  Id a = h.add(NoPayLang::Op::A);
  Id b = h.add(NoPayLang::Op::B, {a, a});
  CHECK(h.add(NoPayLang::Op::B, {a, a}) == b);
  CHECK(h.num_nodes() == 2);
}

TEST_CASE("s-expression errors name the offending text", "[egraph][sexpr]") {
  EGraph<Math> g;
  CHECK_THROWS_AS(add_term(g, "(+ x", Syntax{}), luminal::Error);
  CHECK_THROWS_WITH(add_term(g, "(foo x)", Syntax{}), Catch::Contains("foo"));
  CHECK_THROWS_AS(add_term(g, "(+ x y) z", Syntax{}), luminal::Error);
}
