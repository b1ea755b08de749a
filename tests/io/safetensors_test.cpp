// load_safetensors: values and zero-copy views of hand-made files in every supported
// dtype, the mapping's lifetime, sharded checkpoints, and one malformed file per way a
// file can be wrong -- each must throw RuntimeError naming the file, never crash.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/safetensors.hpp"
#include "luminal/luminal.hpp"
#include "runtime/half.hpp"

using namespace luminal;
namespace fs = std::filesystem;

namespace {

/// A scratch folder removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("lm-safetensors-" + std::to_string(rd()) + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

/// The bytes of a safetensors file: header length, `header` verbatim, `data`.
std::string file_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string raw_length(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

/// A valid file with one tensor of every supported dtype, metadata, an empty tensor, and
/// a header padded to 8 bytes with spaces (as the reference writer does).
std::string valid_file() {
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e30f, -7.0f};  // [2, 3] F32, 24 bytes
  const std::vector<uint16_t> h = {detail::f32_to_f16(0.5f), detail::f32_to_f16(-3.0f)};       // F16 [2]
  const std::vector<uint16_t> b = {detail::f32_to_bf16(2.0f), detail::f32_to_bf16(-0.25f)};    // BF16 [2]
  const std::vector<int32_t> i = {7, -9, 2147483647};                                           // I32 [3]
  const std::string bools = std::string("\x01\x00\x01\x01", 4);                                 // BOOL [2, 2]
  const std::vector<int32_t> scalar = {-5};                                                     // I32 []
  const std::string data = bytes_of(a) + bytes_of(h) + bytes_of(b) + bytes_of(i) + bools + bytes_of(scalar);
  std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("h":{"dtype":"F16","shape":[2],"data_offsets":[24,28]},)"
      R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[28,32]},)"
      R"("i":{"dtype":"I32","shape":[3],"data_offsets":[32,44]},)"
      R"("m":{"dtype":"BOOL","shape":[2,2],"data_offsets":[44,48]},)"
      R"("empty":{"dtype":"F32","shape":[0,4],"data_offsets":[48,48]},)"
      R"("s":{"dtype":"I32","shape":[],"data_offsets":[48,52]}})";
  while ((header.size() + 8) % 8) header += ' ';
  return file_bytes(header, data);
}

/// Writes `bytes`, loads, and returns the error message (fails the test if none).
std::string load_error(const TempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir.file(name);
  write(path, bytes);
  try {
    (void)load_safetensors(path);
  } catch (const RuntimeError& e) {
    const std::string msg = e.what();
    CHECK(msg.find(path) != std::string::npos);  // names the file
    return msg;
  }
  FAIL("no error for " << name);
  return {};
}

std::string simple_header(const std::string& entry) { return "{\"t\":" + entry + "}"; }

}  // namespace

TEST_CASE("every supported dtype loads with its values, as views of the mapping", "[io]") {
  TempDir dir;
  const std::string path = dir.file("ok.safetensors");
  write(path, valid_file());
  auto t = load_safetensors(path);
  REQUIRE(t.size() == 7);
  const HostTensor& a = t.at("a");
  CHECK(a.dtype() == f32);
  CHECK(a.shape() == std::vector<int64_t>{2, 3});
  CHECK(std::vector<float>(a.values<float>().begin(), a.values<float>().end()) ==
        std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 1e30f, -7.0f});
  CHECK(a.is_view());
  CHECK(a.has_owner());
  CHECK(t.at("h").dtype() == f16);
  CHECK(t.at("h").to_f32() == std::vector<float>{0.5f, -3.0f});
  CHECK(t.at("b").dtype() == bf16);
  CHECK(t.at("b").to_f32() == std::vector<float>{2.0f, -0.25f});
  CHECK(t.at("i").dtype() == i32);
  CHECK(t.at("i").values<int32_t>()[2] == 2147483647);
  CHECK(t.at("m").dtype() == boolean);
  CHECK(t.at("m").shape() == std::vector<int64_t>{2, 2});
  CHECK(t.at("m").to_f32() == std::vector<float>{1, 0, 1, 1});
  CHECK(t.at("empty").shape() == std::vector<int64_t>{0, 4});
  CHECK(t.at("empty").numel() == 0);
  CHECK(t.at("s").shape().empty());
  CHECK(t.at("s").values<int32_t>()[0] == -5);
  CHECK(t.count("__metadata__") == 0);
}

TEST_CASE("a view keeps the mapping alive after the map and the file are gone", "[io]") {
  TempDir dir;
  const std::string path = dir.file("alive.safetensors");
  write(path, valid_file());
  HostTensor a;
  {
    auto t = load_safetensors(path);
    a = t.at("a");  // a copy of a view shares the mapping
  }
  fs::remove(path);
  CHECK(a.values<float>()[2] == 3.25f);
  // Bound to a Callable, the view is kept, not copied (the mapping lives on in it).
  Graph g;
  Tensor x = g.input("x", {2, 3});
  g.output("y", x + g.param("a", {2, 3}));
  Callable fn = compile(g, Target::reference());
  fn.bind("a", a);
  a = HostTensor();
  auto out = fn({{"x", HostTensor::from(std::vector<float>(6, 1.0f), {2, 3})}});
  CHECK(out.at("y").values<float>()[0] == 2.5f);
  CHECK(out.at("y").values<float>()[5] == -6.0f);
}

TEST_CASE("data not aligned for its dtype is copied, not viewed", "[io]") {
  TempDir dir;
  // Header of odd length: the f32 data starts at an address that is not 4-aligned.
  std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  if ((header.size() + 8) % 4 == 0) header += ' ';
  const std::vector<float> v = {3.0f, -4.0f};
  const std::string path = dir.file("unaligned.safetensors");
  write(path, file_bytes(header, bytes_of(v)));
  auto t = load_safetensors(path);
  CHECK_FALSE(t.at("x").is_view());
  CHECK(t.at("x").to_f32() == std::vector<float>{3.0f, -4.0f});
}

TEST_CASE("huge_pages copies every tensor out of the mapping, values intact", "[io]") {
  TempDir dir;
  const std::string path = dir.file("huge.safetensors");
  write(path, valid_file());
  // A tensor larger than a huge page, next to the small ones of valid_file().
  std::vector<float> big(600000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 1000) - 500.0f;
  const std::string big_path = dir.file("big.safetensors");
  std::string header = R"({"w":{"dtype":"F32","shape":[600000],"data_offsets":[0,2400000]}})";
  while ((header.size() + 8) % 8) header += ' ';
  write(big_path, file_bytes(header, bytes_of(big)));
  const auto mapped = load_safetensors(path);
  LoadOptions opt;
  opt.huge_pages = true;
  std::map<std::string, HostTensor> t = load_safetensors(path, opt);
  auto w = load_safetensors(big_path, opt).at("w");
  fs::remove(path);
  fs::remove(big_path);
  REQUIRE(t.size() == mapped.size());
  for (const auto& [name, m] : mapped) {
    INFO(name);
    const HostTensor& c = t.at(name);
    CHECK(c.dtype() == m.dtype());
    CHECK(c.shape() == m.shape());
    CHECK(c.has_owner());
    CHECK(c.data() != m.data());  // a copy, not the mapping
    CHECK(reinterpret_cast<uintptr_t>(c.data()) % 64 == 0);
    CHECK(std::memcmp(c.data(), m.data(), m.nbytes()) == 0);
  }
  // The source views of another load of the same file are untouched by the copy's release
  // of its own mapping's pages.
  CHECK(mapped.at("a").values<float>()[4] == 1e30f);
  REQUIRE(w.numel() == 600000);
  CHECK(std::equal(big.begin(), big.end(), w.values<float>().begin()));
  // The allocation starts on a 2 MiB boundary (where transparent huge pages can back it).
  const auto [lo, hi] = std::minmax_element(t.begin(), t.end(), [](const auto& x, const auto& y) {
    return x.second.data() < y.second.data();
  });
  (void)hi;
  CHECK(reinterpret_cast<uintptr_t>(lo->second.data()) % (uintptr_t{2} << 20) == 0);
  // Malformed files are refused the same way.
  write(path, raw_length(1) + "{");
  try {
    (void)load_safetensors(path, opt);
    FAIL("a malformed file loaded");
  } catch (const RuntimeError& e) {
    CHECK_THAT(e.what(), Catch::Contains(path));
  }
}

TEST_CASE("copy_to_huge_pages copies caller tensors and leaves them as they were", "[io]") {
  const HostTensor a = HostTensor::from(std::vector<float>{1.0f, -0.0f, 3.5f}, {3});
  const std::vector<int32_t> raw = {4, 5};
  const HostTensor b = HostTensor::view(i32, {2}, static_cast<const void*>(raw.data()));
  const auto c = copy_to_huge_pages({{"a", a}, {"b", b}, {"e", HostTensor::from(std::vector<float>{}, {0})}});
  CHECK(c.at("a").to_f32() == std::vector<float>{1.0f, -0.0f, 3.5f});
  CHECK(std::signbit(c.at("a").values<float>()[1]));
  CHECK(c.at("b").values<int32_t>()[1] == 5);
  CHECK(c.at("e").numel() == 0);
  CHECK(a.values<float>()[2] == 3.5f);  // the sources are never released
  CHECK(raw[0] == 4);
  CHECK(copy_to_huge_pages({}).empty());
}

TEST_CASE("malformed files throw RuntimeError naming the file and the fault", "[io]") {
  TempDir dir;
  const std::string d8(8, '\0');
  auto has = [](const std::string& msg, const std::string& part) {
    INFO(msg);
    CHECK(msg.find(part) != std::string::npos);
  };
  has(load_error(dir, "empty", ""), "shorter than the 8-byte header length");
  has(load_error(dir, "short", "abc"), "shorter than the 8-byte header length");
  has(load_error(dir, "absurd", raw_length(uint64_t{1} << 60) + "{}"), "absurd");
  has(load_error(dir, "hdr-past-end", raw_length(1000) + "{}"), "runs past the end of the file");
  // A valid file cut short: the last tensor's data runs past the end.
  const std::string ok = valid_file();
  has(load_error(dir, "truncated", ok.substr(0, ok.size() - 3)), "run past the end of the data");
  has(load_error(dir, "not-json", file_bytes("{\"t\": [1,", d8)), "not valid JSON");
  has(load_error(dir, "array", file_bytes("[1, 2]", d8)), "not a JSON object");
  has(load_error(dir, "non-utf8", file_bytes("{\"w\xff\xfe\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d8)),
      "UTF-8");
  has(load_error(dir, "dup",
                 file_bytes(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                            d8)),
      "names 't' twice");
  has(load_error(dir, "unknown-dtype",
                 file_bytes(simple_header(R"({"dtype":"F33","shape":[2],"data_offsets":[0,8]})"), d8)),
      "unknown dtype 'F33'");
  has(load_error(dir, "f64", file_bytes(simple_header(R"({"dtype":"F64","shape":[1],"data_offsets":[0,8]})"), d8)),
      "dtype F64 is not supported");
  has(load_error(dir, "dtype-num", file_bytes(simple_header(R"({"dtype":3,"shape":[2],"data_offsets":[0,8]})"), d8)),
      "\"dtype\" is not a string");
  has(load_error(dir, "no-shape", file_bytes(simple_header(R"({"dtype":"F32","data_offsets":[0,8]})"), d8)),
      "missing \"shape\"");
  has(load_error(dir, "neg-shape", file_bytes(simple_header(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), d8)),
      "not a non-negative integer");
  has(load_error(dir, "float-shape", file_bytes(simple_header(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})"), d8)),
      "not a non-negative integer");
  has(load_error(dir, "huge-shape",
                 file_bytes(simple_header(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"), d8)),
      "too large");
  has(load_error(dir, "offsets-past-end",
                 file_bytes(simple_header(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"), d8)),
      "run past the end of the data");
  has(load_error(dir, "offsets-huge",
                 file_bytes(simple_header(R"({"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,18446744073709551615]})"), d8)),
      "past the end");
  has(load_error(dir, "offsets-reversed",
                 file_bytes(simple_header(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})"), d8)),
      "end before they begin");
  has(load_error(dir, "offsets-size",
                 file_bytes(simple_header(R"({"dtype":"F32","shape":[1],"data_offsets":[0,8]})"), d8)),
      "hold 8 bytes, but F32 (1) needs 4");
  has(load_error(dir, "offsets-shape",
                 file_bytes(simple_header(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})"), d8)),
      "not a pair");
  has(load_error(dir, "overlap",
                 file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})",
                            d8)),
      "overlap");
  has(load_error(dir, "metadata", file_bytes(R"({"__metadata__":{"k":1}})", d8)), "is not a string");
  has(load_error(dir, "entry-not-object", file_bytes(R"({"t":[1,2]})", d8)), "entry is not an object");
  // Not a regular file, and a file that does not exist.
  fs::create_directories(dir.path / "sub");
  CHECK_THROWS_AS(load_safetensors(dir.file("missing.safetensors")), RuntimeError);
  CHECK_THROWS_WITH(load_safetensors(dir.file("sub")), Catch::Contains("neither model.safetensors"));
}

TEST_CASE("sharded checkpoints load through their index or their folder", "[io]") {
  TempDir dir;
  const std::vector<float> a = {1, 2}, b = {3, 4, 5};
  write(dir.file("model-00001-of-00002.safetensors"),
        file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", bytes_of(a)));
  write(dir.file("model-00002-of-00002.safetensors"),
        file_bytes(R"({"b":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", bytes_of(b)));
  const std::string index = dir.file("model.safetensors.index.json");
  write(index, R"({"metadata":{"total_size":20},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
               R"("b":"model-00002-of-00002.safetensors"}})");
  for (const std::string& p : {index, dir.path.string()}) {
    auto t = load_safetensors(p);
    REQUIRE(t.size() == 2);
    CHECK(t.at("a").to_f32() == std::vector<float>{1, 2});
    CHECK(t.at("b").to_f32() == std::vector<float>{3, 4, 5});
  }
  auto index_error = [&](const std::string& text) {
    write(index, text);
    try {
      (void)load_safetensors(index);
    } catch (const RuntimeError& e) {
      CHECK(std::string(e.what()).find(index) != std::string::npos);
      return std::string(e.what());
    }
    FAIL("no error for index " << text);
    return std::string();
  };
  CHECK_THAT(index_error(R"({"weight_map":{"a":"model-00002-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})"),
             Catch::Contains("'a' is not in its shard 'model-00002-of-00002.safetensors'"));
  // A shard holding a tensor the index does not list.
  write(dir.file("both.safetensors"),
        file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"F32","shape":[3],"data_offsets":[8,20]}})",
                   bytes_of(a) + bytes_of(b)));
  CHECK_THAT(index_error(R"({"weight_map":{"a":"both.safetensors"}})"),
             Catch::Contains("holds tensor 'b', which the index does not list"));
  // Only the shards the index names are read.
  write(index, R"({"weight_map":{"a":"model-00001-of-00002.safetensors"}})");
  CHECK(load_safetensors(index).size() == 1);
  CHECK_THAT(index_error(R"({"weight_map":{"a":"model-00001-of-00002.safetensors","a":"x.safetensors"}})"),
             Catch::Contains("twice"));
  CHECK_THAT(index_error(R"({"weight_map":{"a":"../model-00001-of-00002.safetensors"}})"),
             Catch::Contains("not a file beside the index"));
  CHECK_THAT(index_error(R"({"metadata":{}})"), Catch::Contains("no \"weight_map\""));
  CHECK_THAT(index_error(R"({"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors",)"
                         R"("c":"model-00002-of-00002.safetensors"}})"),
             Catch::Contains("'c' is not in its shard"));
  // A shard that is itself malformed is reported with the shard's name.
  write(index, R"({"weight_map":{"a":"model-00001-of-00002.safetensors","b":"broken.safetensors"}})");
  write(dir.file("broken.safetensors"), "xyz");
  CHECK_THROWS_WITH(load_safetensors(index), Catch::Contains("broken.safetensors"));
}

TEST_CASE("random corruptions of a valid file either load or throw RuntimeError", "[io]") {
  // The parser runs on memory here, so AddressSanitizer sees any read outside the bytes:
  // each mutant is copied into a buffer of exactly its size.
  const std::string base = valid_file();
  std::mt19937_64 rng(16);
  int loaded = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string m = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % m.size();
      switch (rng() % 4) {
        case 0:  // flip a byte, header or data
          m[pos] = static_cast<char>(rng());
          break;
        case 1:  // a digit in the header (offsets, shapes, length)
          m[pos] = static_cast<char>('0' + rng() % 10);
          break;
        case 2:  // truncate
          m.resize(pos);
          break;
        default:  // the length prefix
          m[rng() % 8] = static_cast<char>(rng());
          break;
      }
      if (m.empty()) break;
    }
    std::vector<std::byte> buf(m.size());
    if (!m.empty()) std::memcpy(buf.data(), m.data(), m.size());
    try {
      auto t = io::parse_safetensors(buf, "mutant", nullptr);
      for (const auto& [name, v] : t) (void)v.to_f32();  // touch every byte of every view
      ++loaded;
    } catch (const RuntimeError& e) {
      CHECK(std::string(e.what()).find("'mutant'") != std::string::npos);
      ++rejected;
    }
  }
  CHECK(loaded > 0);
  CHECK(rejected > 0);
}

TEST_CASE("a header nested a million levels deep is refused, not a stack overflow", "[io]") {
  // Found while writing fuzz_safetensors (a crafted input, not a mutation): quoting the
  // malformed shape in the error message printed it recursively, one frame per bracket,
  // and 10^6 brackets (a 2 MB header) overflowed the stack (SIGSEGV). Headers may nest 64
  // levels; a real one nests 3.
  TempDir dir;
  auto nested_shape = [](size_t depth) {
    return simple_header(R"({"dtype":"F32","shape":[)" + std::string(depth, '[') + std::string(depth, ']') +
                         R"(],"data_offsets":[0,4]})");
  };
  const std::string data(4, '\0');
  CHECK_THAT(load_error(dir, "deep.safetensors", file_bytes(nested_shape(1'000'000), data)),
             Catch::Contains("header nests deeper than 64 levels"));
  // The bound is exact: the shape array sits at depth 2, so 62 more levels are allowed
  // (and then refused for what they are) and 63 are not.
  CHECK_THAT(load_error(dir, "62.safetensors", file_bytes(nested_shape(62), data)),
             Catch::Contains("has an entry that is not a non-negative integer"));
  CHECK_THAT(load_error(dir, "63.safetensors", file_bytes(nested_shape(63), data)),
             Catch::Contains("header nests deeper than 64 levels"));
  // A sharded checkpoint's index goes through the same parser.
  write(dir.file("model.safetensors.index.json"),
        R"({"weight_map":{"a":)" + std::string(100'000, '[') + std::string(100'000, ']') + "}}");
  CHECK_THROWS_WITH(load_safetensors(dir.file("model.safetensors.index.json")),
                    Catch::Contains("index nests deeper than 64 levels"));
}
