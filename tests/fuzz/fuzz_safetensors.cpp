// libFuzzer target: the safetensors reader (io::parse_safetensors, what
// luminal::load_safetensors runs on a mapped file). The first byte picks the mode:
// even -- the rest as a file, as is; odd -- the rest with its 8-byte header length
// reduced modulo what the file can hold, so that mutations which grow or shrink the JSON
// header still reach the JSON and entry checks instead of stopping at "runs past the end".
// Either an lm::Error, or tensors that each lie inside the input, hold exactly
// numel x dtype size bytes, and are read in full (AddressSanitizer sees any byte outside).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "io/safetensors.hpp"
#include "luminal/luminal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // A buffer of exactly the file's size: a read one past its end is a report.
  std::vector<std::byte> file(size - 1);
  if (!file.empty()) std::memcpy(file.data(), data + 1, file.size());
  if ((data[0] & 1) && file.size() >= 8) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file[static_cast<size_t>(i)]);
    n %= file.size() - 8 + 1;
    for (int i = 0; i < 8; ++i) file[static_cast<size_t>(i)] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  }
  try {
    const auto tensors = luminal::io::parse_safetensors(file, "fuzz input", nullptr);
    const std::byte* first = file.data();
    const std::byte* last = file.data() + file.size();
    unsigned sum = 0;
    for (const auto& [name, t] : tensors) {
      uint64_t numel = 1;
      for (const int64_t d : t.shape()) {
        if (d < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel)) std::abort();
      }
      if (numel != static_cast<uint64_t>(t.numel())) std::abort();
      // No tensor can hold more bytes than the file has.
      uint64_t nbytes = 0;
      if (__builtin_mul_overflow(numel, luminal::dtype_size(t.dtype()), &nbytes) || nbytes > file.size() ||
          nbytes != t.nbytes())
        std::abort();
      if (t.is_view() && t.nbytes() > 0 && (t.data() < first || t.data() + t.nbytes() > last)) std::abort();
      for (size_t i = 0; i < t.nbytes(); ++i) sum += static_cast<unsigned>(t.data()[i]);
    }
    volatile unsigned keep = sum;
    (void)keep;
  } catch (const luminal::Error&) {
  }
  return 0;
}
