// libFuzzer target: Target::parse on arbitrary text. Either an lm::Error, or a target
// whose printed form parses back to the same target.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "luminal/luminal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const luminal::Target t = luminal::Target::parse(text);
    const std::string printed = t.to_string();
    const luminal::Target again = luminal::Target::parse(printed);
    if (again.to_string() != printed || again.kind() != t.kind()) std::abort();
    (void)t.is_available();
  } catch (const luminal::Error&) {
  }
  return 0;
}
