// libFuzzer target: the AOT loader's reader (luminal::aot::parse). The first byte picks
// the mode: even -- the bytes as a file (the checksum must refuse almost everything);
// odd -- the rest with its checksum recomputed, so that mutations reach every field of
// the graph, plan, report and params decoders. Either an lm::Error or a parsed program.
// (The embedded shared object is not loaded: loading code is trusting it.)
#include <cstdint>
#include <string>

#include "luminal/luminal.hpp"
#include "runtime/aot.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] & 1) {
      if (bytes.size() < 16) return 0;
      bytes = luminal::aot::reseal(std::move(bytes));
    }
    luminal::aot::Parsed p = luminal::aot::parse(bytes, "fuzz input");
    (void)p;
  } catch (const luminal::Error&) {
  }
  return 0;
}
