// Must NOT compile: the right side uses variable c, which the left side does not bind.
// Registered as a test that passes when the compiler prints the static_assert message.
#include "egraph/math_lang.hpp"

int main() {
  using namespace mathlang;
  using namespace mathlang::vars;
  auto r = luminal::egraph::rule("bad", a + b, a + c);
  (void)r;
}
