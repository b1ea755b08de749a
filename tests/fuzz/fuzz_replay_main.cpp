// A libFuzzer target without libFuzzer: the same LLVMFuzzerTestOneInput, driven by this
// main in the ordinary GCC builds. It runs every file of the committed corpus, then a
// fixed number of deterministic mutations of them (bit flips, byte writes, inserts,
// erasures, duplicated and spliced chunks). No coverage guidance: this is what CI runs
// briefly in its AddressSanitizer + UBSan configuration, where a wild write or a leak
// fails the test; the long coverage-guided runs use the clang build (docs/reliability.md).
//
//   <target>_replay [-runs=N] [-seed=S] [-from=I] [-progress=P] [-only=I] corpus_dir...
//   -from=I starts at mutation I (a long run in parts; the corpus is run only when I = 0);
//   -progress=P prints a line every P mutations;
//   -only=I reruns mutation I alone (its number is printed before it runs with -v);
//   -only=I -write=FILE writes it to FILE instead (to commit a finding to the corpus).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

Bytes read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Mutation i of the corpus: a function of (seed, i) alone, so -only=I reproduces it.
Bytes mutate(const std::vector<Bytes>& corpus, uint64_t seed, uint64_t i) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + i);
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  Bytes b = corpus.empty() ? Bytes{} : corpus[pick(corpus.size())];
  const int edits = 1 + static_cast<int>(pick(4));
  for (int e = 0; e < edits; ++e) {
    switch (pick(6)) {
      case 0:  // flip a bit
        if (!b.empty()) b[pick(b.size())] ^= static_cast<uint8_t>(1u << pick(8));
        break;
      case 1:  // write an interesting byte
        if (!b.empty()) {
          const uint8_t special[] = {0, 1, 0x7f, 0x80, 0xff, static_cast<uint8_t>(rng())};
          b[pick(b.size())] = special[pick(sizeof special)];
        }
        break;
      case 2:  // insert a byte
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size() + 1)), static_cast<uint8_t>(rng()));
        break;
      case 3:  // erase a run
        if (!b.empty()) {
          const size_t at = pick(b.size()), n = 1 + pick(std::min<size_t>(16, b.size() - at));
          b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
                  b.begin() + static_cast<std::ptrdiff_t>(at + n));
        }
        break;
      case 4:  // duplicate a chunk in place
        if (!b.empty()) {
          const size_t at = pick(b.size()), n = 1 + pick(std::min<size_t>(32, b.size() - at));
          Bytes chunk(b.begin() + static_cast<std::ptrdiff_t>(at),
                      b.begin() + static_cast<std::ptrdiff_t>(at + n));
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size() + 1)), chunk.begin(), chunk.end());
        }
        break;
      default:  // splice: the tail of another entry
        if (!corpus.empty()) {
          const Bytes& o = corpus[pick(corpus.size())];
          const size_t cut = pick(b.size() + 1), from = pick(o.size() + 1);
          b.resize(cut);
          b.insert(b.end(), o.begin() + static_cast<std::ptrdiff_t>(from), o.end());
        }
        break;
    }
  }
  return b;
}

bool flag(const char* arg, const char* name, uint64_t& value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0) return false;
  value = std::strtoull(arg + n, nullptr, 10);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t runs = 1000, seed = 1, only = UINT64_MAX, verbose = 0, from = 0, progress = 0;
  std::vector<Bytes> corpus;
  const char* write_to = nullptr;
  for (int a = 1; a < argc; ++a) {
    if (std::strncmp(argv[a], "-write=", 7) == 0) {
      write_to = argv[a] + 7;
      continue;
    }
    if (flag(argv[a], "-runs=", runs) || flag(argv[a], "-seed=", seed) || flag(argv[a], "-only=", only) ||
        flag(argv[a], "-from=", from) || flag(argv[a], "-progress=", progress))
      continue;
    if (std::strcmp(argv[a], "-v") == 0) {
      verbose = 1;
      continue;
    }
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(argv[a], ec))
      if (e.is_regular_file()) corpus.push_back(read_file(e.path()));
    if (ec) {
      std::fprintf(stderr, "cannot read corpus folder %s: %s\n", argv[a], ec.message().c_str());
      return 2;
    }
  }
  if (only != UINT64_MAX) {
    const Bytes b = mutate(corpus, seed, only);
    if (write_to) {
      std::ofstream(write_to, std::ios::binary)
          .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
      return 0;
    }
    LLVMFuzzerTestOneInput(b.data(), b.size());
    return 0;
  }
  if (from == 0)
    for (const Bytes& b : corpus) LLVMFuzzerTestOneInput(b.data(), b.size());
  for (uint64_t i = from; i < from + runs; ++i) {
    if (verbose) std::fprintf(stderr, "mutation %llu\n", static_cast<unsigned long long>(i));
    const Bytes b = mutate(corpus, seed, i);
    LLVMFuzzerTestOneInput(b.data(), b.size());
    if (progress && (i + 1 - from) % progress == 0) {
      char when[32];
      const std::time_t t = std::time(nullptr);
      std::strftime(when, sizeof when, "%H:%M:%S", std::gmtime(&t));
      std::printf("%s UTC: mutations %llu..%llu done\n", when, static_cast<unsigned long long>(from),
                  static_cast<unsigned long long>(i));
      std::fflush(stdout);
    }
  }
  std::printf("%zu corpus inputs and mutations %llu..%llu (seed %llu): no crash\n", corpus.size(),
              static_cast<unsigned long long>(from), static_cast<unsigned long long>(from + runs - 1),
              static_cast<unsigned long long>(seed));
  return 0;
}
